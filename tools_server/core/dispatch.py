"""The call pipeline shared by every tool: validate, look up the cache, run (in the server or as a job),
add provenance, fit the size budget, store in the cache. ``tools_server.core.server`` wraps it in MCP."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import ValidationError

from spu_common.jsonfiles import atomic_write_text
from tools_server import __version__
from tools_server.core import settings
from tools_server.core.cache import ResultCache, cache_key, input_hash
from tools_server.core.errors import ToolError, storage_warning
from tools_server.core.execute import run_tool, validation_error
from tools_server.core.finite import check_finite_arguments
from tools_server.core.jobs import Job, JobManager
from tools_server.core.limits import check_arguments
from tools_server.core.paths import InputReads, keyed_by_content, path_fields, recording_reads
from tools_server.core.registry import Registry, ToolSpec, load_registry
from tools_server.core.waits import parse_wait_s

#: Largest structured result returned inline, in characters of JSON; bigger ones become artifacts.
RESULT_BUDGET_CHARS = 20_000

ProgressCallback = Callable[[float, str | None], Awaitable[None]]


class Dispatcher:
    """Runs the tools of one registry (the server adds its own tools to it: system_info, the job tools)."""

    def __init__(
        self,
        jobs: JobManager | None = None,
        cache: ResultCache | None = None,
        registry: Registry | None = None,
    ) -> None:
        self._registry = registry
        self._extra: list[ToolSpec] = []
        self._registry_lock = threading.Lock()
        self.jobs = jobs or JobManager()
        self.cache = cache or ResultCache()

    @property
    def registry(self) -> Registry:
        """The tools, loaded on first use (the server answers ``initialize`` without importing a domain;
        :meth:`~tools_server.core.server.SpuServer.preload` loads them in the background meanwhile)."""
        if self._registry is None:
            with self._registry_lock:
                if self._registry is None:
                    registry = load_registry()
                    for spec in self._extra:
                        registry.add(spec, "core")
                    self._registry = registry
        return self._registry

    def add_server_tools(self, specs: list[ToolSpec]) -> None:
        """Add the server's own tools (now if the registry is loaded, else when it loads)."""
        with self._registry_lock:
            if self._registry is None:
                self._extra.extend(specs)
                return
        for spec in specs:
            self._registry.add(spec, "core")

    async def call(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Run tool ``name``; returns the structured result or raises :class:`ToolError`."""
        spec = self.registry.get(name)
        arguments = dict(arguments or {})
        check_arguments(arguments)
        wait_s = parse_wait_s(arguments.pop("wait_s", None)) if spec.is_job else 0.0
        try:
            args = spec.input_model.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc) from None
        check_finite_arguments(args)
        params = args.model_dump(mode="json")
        if spec.server_tool:
            started = time.perf_counter()
            result = await spec.fn(args, self)
            if not spec.extra.get("job_answer"):
                result = spec.conform(result)
            if spec.extra.get("passthrough"):
                return result
            payload = {"result": result, "wall_s": time.perf_counter() - started}
            return self._finish(spec, params, params, {}, payload, None, "server")
        # the key reads the files the arguments name (a molecule file up to 50 MiB, a trajectory up to 2 GiB):
        # off the event loop when an argument names one (the hand-off to a thread costs about 0.2 ms, a
        # tenth of a small xTB call's overhead)
        if spec.canonicalize is None and not (spec.cacheable and _has_path_fields(spec)):
            canonical, key_reads = params, InputReads()
        elif _names_files(params):
            canonical, key_reads = await anyio.to_thread.run_sync(_canonical_input, spec, args, params)
        else:
            canonical, key_reads = _canonical_input(spec, args, params)
        engines = self.registry.engine_versions(spec.engines)
        # a key is made of the bytes read: a file the key could not read leaves the call uncached
        cacheable = spec.cacheable and not key_reads.refused
        key = cache_key(spec.name, spec.version, canonical, engines) if cacheable else None
        if key is not None and (hit := self.cache.get(key, spec.name, spec.version)) is not None:
            provenance = hit.setdefault("provenance", {})
            provenance["cache"] = "hit"
            # the job that computed it may be long gone: say when it was computed instead of naming it
            provenance["computed_at"] = provenance.pop("finished_at", None)
            provenance["job_id"] = None
            return hit

        discarded = self.cache.discarded.pop(key, None) if key is not None else None

        def finish(job_id: str | None, payload: dict[str, Any], device: str) -> dict[str, Any]:
            result = self._finish(spec, params, canonical, engines, payload, job_id, device)
            problem = None
            # cached only under the digests of the bytes the tool read: a file edited between the key and
            # the tool's read (or one the key does not cover) leaves the result uncached
            unkeyed = set(payload.get("inputs_sha256") or ()) - set(key_reads.digests)
            if key is not None and unkeyed:
                result["warnings"] = [*result.get("warnings", []), UNKEYED_WARNING]
            elif key is not None and spec.is_job:
                try:  # the executor's thread: on disk before the caller is woken
                    self.cache.put(key, result)
                except OSError as exc:
                    problem = exc
            elif key is not None:
                problem = self.cache.stage(key, result)
            if problem is not None:
                consequence = "the same call will be computed again" + (
                    f" (job_wait with job_id {job_id!r} returns this result meanwhile)" if job_id else ""
                )
                warning = storage_warning(
                    "the result's cache entry", self.cache.path_of(key), problem, consequence
                )
                result["warnings"] = [*result.get("warnings", []), warning]
            if discarded:
                warning = f"a stored result for this call was discarded and recomputed: {discarded}"
                result["warnings"] = [*result.get("warnings", []), warning]
            return result

        if not spec.is_job:
            payload = await self._run_here(spec, params)
            return finish(None, payload, "server")

        job = self.jobs.submit(
            spec,
            params,
            lambda job, payload: finish(job.job_id, payload, job.device or "cpu"),
            threads=spec.threads_for(args),
        )
        return await self.await_job(job, wait_s, progress)

    def warm_plan(self, gpu_present: bool) -> dict[str, list[str]]:
        """The modules each worker kind imports ahead of its first job: the GPU worker those of the ``gpu``
        tools, CPU workers those of the ``cpu`` tools (and of the ``gpu`` tools without a GPU)."""
        return {
            "cpu": self.registry.warm_modules(("cpu",) if gpu_present else ("cpu", "gpu")),
            "gpu": self.registry.warm_modules(("gpu",)),
        }

    def warm_up_later(self, delay_s: float = 0.3) -> None:
        """Start warm workers from a background thread once the server is up (it never delays start-up)."""

        def go() -> None:
            time.sleep(delay_s)
            try:
                self.jobs.warm_up(self.warm_plan)
            except Exception:  # warming is an optimisation: a failure leaves workers to start on demand
                import logging

                logging.getLogger(__name__).warning("warm-up of the workers failed", exc_info=True)

        threading.Thread(target=go, daemon=True, name="spu-warm-up").start()

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
        if job.done:
            return self.job_outcome(job)
        pending = job.status_payload()  # the state the caller is told: as it is now
        await anyio.to_thread.run_sync(self.jobs.acknowledge, job)  # the id goes out: its record first
        if job.warnings:  # of its acknowledgment, or of its final record when it ended meanwhile
            pending["warnings"] = list(job.warnings)
        return pending

    @staticmethod
    def job_outcome(job: Job) -> dict[str, Any]:
        if job.status == "done" and job.result is not None:
            return job.result
        if job.status in ("error", "cancelled", "lost") and job.error is not None:
            err = dict(job.error)
            err["details"] = {**(err.get("details") or {}), "job_id": job.job_id}
            raise ToolError.from_dict(err)
        return job.status_payload()

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
            "params": params_preview(params),
            "params_sha256": input_hash(params),
            "input_hash": input_hash(canonical),
            "wall_s": round(payload.get("wall_s", 0.0), 4),
            "cache": "miss",
            "job_id": job_id,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return fit_budget(spec.name, result, job_id or result["provenance"]["input_hash"][:12])


#: Provenance keeps a preview of the arguments, not the arguments: strings over PREVIEW_CHARS characters
#: and lists over PREVIEW_ITEMS items are cut, with a note of what was left out; ``params_sha256`` is the
#: digest of the whole arguments.
PREVIEW_CHARS = 200
PREVIEW_ITEMS = 20


def params_preview(value: Any, depth: int = 0) -> Any:
    """A bounded copy of ``value`` for provenance (at most about 20 KB, whatever the input)."""
    if isinstance(value, str):
        if len(value) <= PREVIEW_CHARS:
            return value
        return f"{value[:PREVIEW_CHARS]}... [{len(value)} characters]"
    if depth >= 4 and isinstance(value, dict | list):
        return f"[{type(value).__name__} of {len(value)} items]"
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k)[:PREVIEW_CHARS]: params_preview(v, depth + 1) for k, v in items[:PREVIEW_ITEMS]}
        if len(items) > PREVIEW_ITEMS:
            out["..."] = f"{len(items) - PREVIEW_ITEMS} more keys"
        return out
    if isinstance(value, list | tuple):
        out_list = [params_preview(v, depth + 1) for v in value[:PREVIEW_ITEMS]]
        if len(value) > PREVIEW_ITEMS:
            out_list.append(f"... {len(value) - PREVIEW_ITEMS} more items")
        return out_list
    return value


#: The warning of a result not cached because the tool read bytes its cache key was not made from.
UNKEYED_WARNING = (
    "an input file changed while the call ran (or the tool read a file its cache key does not cover): the "
    "result is for the bytes the tool read, and it was not cached"
)


def _has_path_fields(spec: ToolSpec) -> bool:
    return any(kind in ("file", "dir") for kind in path_fields(spec.input_model).values())


#: Above this many strings in the arguments the check for file names is itself left to a thread.
NAME_CHECK_STRINGS = 32


def _names_files(params: dict[str, Any]) -> bool:
    """Whether an argument may name a file (a one-line string that names something on disk), or there are
    too many strings to check on the event loop (:data:`NAME_CHECK_STRINGS`)."""
    strings: list[str] = []
    stack: list[Any] = [params]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            strings.append(value)
            if len(strings) > NAME_CHECK_STRINGS:
                return True
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    for text in strings:
        if "\n" in text or len(text) > 4096:
            continue  # content (an XYZ block, a molblock), not a name
        try:
            if os.path.lexists(os.path.expanduser(text.strip().partition("#")[0])):  # path[#record]
                return True
        except (OSError, ValueError):  # a name the system refuses (NUL byte) is read nowhere
            continue
    return False


def _canonical_input(spec: ToolSpec, args: Any, params: dict[str, Any]) -> tuple[Any, InputReads]:
    """The cache-key input, and the files read to make it: the tool's key function, else the arguments with
    every path-typed one keyed by the bytes of its file (:func:`~tools_server.core.paths.keyed_by_content`).
    A domain's error raised meanwhile (a molecule over the size limits) is a :class:`ToolError` and answers
    the call."""
    with recording_reads() as reads:
        if spec.canonicalize is None:
            return keyed_by_content(spec.input_model, params), reads
        return spec.canonicalize(args), reads


def fit_budget(tool: str, result: dict[str, Any], stem: str) -> dict[str, Any]:
    """Keep the structured result under the size budget: write the whole result as a JSON artifact and
    return its small fields, the artifact's path and a note saying what was moved."""
    text = _json_text(result)
    if len(text) <= RESULT_BUDGET_CHARS:
        return result
    path = settings.artifacts_dir() / tool / f"{stem}-result.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(result, indent=1, default=str), fsync=False)
    except OSError as exc:  # the result is not lost for want of an artifact: it comes back whole
        warning = storage_warning("the result artifact", path, exc, "the whole result is returned inline")
        return {**result, "warnings": [*result.get("warnings", []), warning]}
    small: dict[str, Any] = {}
    moved = []
    for k, v in result.items():
        if k == "provenance" or len(_json_text(v)) <= 2000:
            small[k] = v
        else:
            moved.append(k)
    small["result_artifact"] = str(path)
    small["note"] = (
        f"The full result ({len(text)} characters) is in result_artifact; fields moved there: "
        f"{', '.join(moved)}."
    )
    return small


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
