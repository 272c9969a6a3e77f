"""The call pipeline shared by every tool: validate, look up the cache, run (in the server or as a job),
add provenance, fit the size budget, store in the cache. ``tools_server.server`` wraps it in MCP."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import ValidationError

from tools_server import __version__, settings
from tools_server.cache import ResultCache, cache_key, canonical_json, input_hash
from tools_server.errors import ToolError
from tools_server.execute import run_tool, validation_error
from tools_server.jobs import Job, JobManager
from tools_server.registry import ToolSpec, engine_versions, get_tool

#: Largest structured result returned inline, in characters of JSON; bigger ones become artifacts.
RESULT_BUDGET_CHARS = 20_000
DEFAULT_WAIT_S = 40.0

ProgressCallback = Callable[[float, str | None], Awaitable[None]]


class Dispatcher:
    def __init__(self, jobs: JobManager | None = None, cache: ResultCache | None = None) -> None:
        self.jobs = jobs or JobManager()
        self.cache = cache or ResultCache()

    async def call(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Run tool ``name``; returns the structured result or raises :class:`ToolError`."""
        spec = get_tool(name)
        arguments = dict(arguments or {})
        wait_s = DEFAULT_WAIT_S
        if spec.is_job and "wait_s" in arguments:
            try:
                wait_s = min(600.0, max(0.0, float(arguments.pop("wait_s"))))
            except (TypeError, ValueError):
                raise ToolError(
                    "invalid_input", "wait_s must be a number of seconds between 0 and 600."
                ) from None
        try:
            args = spec.input_model.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc) from None
        if inspect.iscoroutinefunction(spec.fn):
            # The server's own job tools: they see the dispatcher and pass results through unchanged.
            return await spec.fn(args, self)
        params = args.model_dump(mode="json")
        canonical = spec.canonicalize(args) if spec.canonicalize else params
        engines = engine_versions(spec.engines)
        key = cache_key(spec.name, spec.version, canonical, engines) if spec.cacheable else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            hit.setdefault("provenance", {})["cache"] = "hit"
            return hit

        def finish(job_id: str | None, payload: dict[str, Any], device: str) -> dict[str, Any]:
            result = self._finish(spec, params, canonical, engines, payload, job_id, device)
            if key is not None:
                self.cache.put(key, result)
            return result

        if not spec.is_job:
            payload = await self._run_here(spec, params)
            return finish(None, payload, "server")

        job = self.jobs.submit(
            spec, params, lambda job, payload: finish(job.job_id, payload, job.device or "cpu")
        )
        return await self.await_job(job, wait_s, progress)

    async def _run_here(self, spec: ToolSpec, params: dict[str, Any]) -> dict[str, Any]:
        job_id = f"{spec.name}-{input_hash(params)[:10]}"
        if spec.resource == "net":
            return await anyio.to_thread.run_sync(lambda: run_tool(spec, params, job_id))
        return run_tool(spec, params, job_id)

    async def await_job(
        self, job: Job, wait_s: float, progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        async def report(j: Job) -> None:
            if progress is not None:
                await progress(j.progress, j.message)

        await self.jobs.wait(job, wait_s, report if progress else None)
        return self.job_outcome(job)

    @staticmethod
    def job_outcome(job: Job | dict[str, Any]) -> dict[str, Any]:
        record = job.record() if isinstance(job, Job) else job
        if record["status"] == "done":
            return record["result"]
        if record["status"] in ("error", "cancelled"):
            err = dict(record["error"])
            err.setdefault("details", {})["job_id"] = record["job_id"]
            raise ToolError.from_dict(err)
        return (
            job.status_payload()
            if isinstance(job, Job)
            else {"status": record["status"], "job_id": record["job_id"]}
        )

    def _finish(
        self,
        spec: ToolSpec,
        params: dict[str, Any],
        canonical: Any,
        engines: dict[str, str | None],
        payload: dict[str, Any],
        job_id: str | None,
        device: str,
    ) -> dict[str, Any]:
        result = dict(payload["result"])
        if payload.get("warnings"):
            # a tool may both return warnings and report them through ctx.warn: list each once
            result["warnings"] = list(dict.fromkeys([*result.get("warnings", []), *payload["warnings"]]))
        engine = payload.get("engine") or {}
        result["provenance"] = {
            "tool": spec.name,
            "tool_version": spec.version,
            "server_version": __version__,
            "engine": engine.get("engine"),
            "engine_version": engine.get("engine_version"),
            "engines": engines,
            "device": engine.get("device", device),
            **{k: v for k, v in engine.items() if k not in ("engine", "engine_version", "device")},
            "params": params,
            "input_hash": input_hash(canonical),
            "wall_s": round(payload.get("wall_s", 0.0), 4),
            "cache": "miss",
            "job_id": job_id,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return fit_budget(spec.name, result, job_id or result["provenance"]["input_hash"][:12])


def fit_budget(tool: str, result: dict[str, Any], stem: str) -> dict[str, Any]:
    """Keep the structured result under the size budget: write the whole result as a JSON artifact and
    return its small fields, the artifact's path and a note saying what was moved."""
    text = canonical_json(result)
    if len(text) <= RESULT_BUDGET_CHARS:
        return result
    path = settings.artifacts_dir() / tool / f"{stem}-result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    small: dict[str, Any] = {}
    moved = []
    for k, v in result.items():
        if k == "provenance" or len(canonical_json(v)) <= 2000:
            small[k] = v
        else:
            moved.append(k)
    small["result_artifact"] = str(path)
    small["note"] = (
        f"The full result ({len(text)} characters) is in result_artifact; fields moved there: "
        f"{', '.join(moved)}."
    )
    return small
