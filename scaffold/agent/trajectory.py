"""The run's trajectory: JSON lines written as the run goes, and an export to Harbor's ATIF.

``trajectory.jsonl`` holds one record per line, each flushed when written (a killed agent loses
nothing) and fsynced at the end of every step (a machine crash loses at most the step under way).
Record types:

* ``run_start``: task, model, config, tool definitions
* ``message``: a system or user message (the system prompt, the task, reminders), with ``kind``
* ``model_turn``: the assistant message, ``usage`` (tokens), ``cost_usd``, ``latency_s``, ``attempts``
* ``tool_result``: ``tool_call_id``, ``name``, ``arguments``, ``content`` (what the model read),
  ``is_error``, ``wall_s``
* ``event``: context elision, model errors that were recovered from, notes
* ``run_end``: ``exit_status``, ``reason``, totals, where the submission came from

Every record has ``time`` (ISO 8601, UTC) and ``elapsed_s`` since the run started. A trajectory is also
a recording for the ``replay:`` model.

:func:`to_atif` converts the records to ATIF (Agent Trajectory Interchange Format, schema ``ATIF-v1.6``,
as defined by the ``harbor`` package's ``harbor.models.trajectories``): one step per system/user message
and per model turn, with the turn's tool calls and their results as the step's observation.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

from environment.runs import read_records  # the one reader of trajectories (re-exported for the agent)
from spu_common.jsonfiles import atomic_write_json

ATIF_VERSION = "ATIF-v1.6"


def agent_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("spu-scaffold")
    except metadata.PackageNotFoundError:
        return "0"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TrajectoryWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = time.monotonic()
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the writer

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and flush it to the OS: a killed agent process loses nothing written."""
        record = {
            "type": record["type"],
            "time": utc_now(),
            "elapsed_s": round(time.monotonic() - self.started, 3),
            **{k: v for k, v in record.items() if k != "type"},
        }
        self._handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()

    def checkpoint(self) -> None:
        """fsync: what was written survives a machine crash too (once per step: an fsync costs
        milliseconds)."""
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if not self._handle.closed:
            self.checkpoint()
            self._handle.close()


def to_atif(records: list[dict[str, Any]], *, agent_version: str = "0") -> dict[str, Any]:
    start = next((r for r in records if r["type"] == "run_start"), {})
    end = next((r for r in reversed(records) if r["type"] == "run_end"), None)
    model_name = start.get("model")
    steps: list[dict[str, Any]] = []
    calls_by_id: dict[str, dict[str, Any]] = {}
    totals = {"prompt": 0, "completion": 0, "cached": 0, "cost": 0.0}
    for rec in records:
        kind = rec["type"]
        if kind == "message":
            msg = rec["message"]
            steps.append(
                _step(
                    len(steps) + 1,
                    rec["time"],
                    "system" if msg["role"] == "system" else "user",
                    msg.get("content") or "",
                    extra={"kind": rec.get("kind")},
                )
            )
        elif kind == "model_turn":
            msg = rec["message"]
            usage = rec.get("usage") or {}
            prompt = sum(
                int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")
            )
            metrics = {
                "prompt_tokens": prompt,
                "completion_tokens": int(usage.get("output_tokens") or 0),
                "cached_tokens": int(usage.get("cache_read_tokens") or 0),
                "cost_usd": float(rec.get("cost_usd") or 0.0),
                "extra": {
                    "cache_write_tokens": int(usage.get("cache_write_tokens") or 0),
                    "reasoning_tokens": int(usage.get("reasoning_tokens") or 0),
                    "latency_s": rec.get("latency_s"),
                    "attempts": rec.get("attempts"),
                },
            }
            totals["prompt"] += metrics["prompt_tokens"]
            totals["completion"] += metrics["completion_tokens"]
            totals["cached"] += metrics["cached_tokens"]
            totals["cost"] += metrics["cost_usd"]
            step = _step(len(steps) + 1, rec["time"], "agent", msg.get("content") or "")
            step["model_name"] = rec.get("model") or model_name
            if msg.get("reasoning"):
                step["reasoning_content"] = msg["reasoning"]
            calls = []
            for call in msg.get("tool_calls") or []:
                entry: dict[str, Any] = {
                    "tool_call_id": call["id"],
                    "function_name": call.get("name") or "",
                    "arguments": call["arguments"] if isinstance(call.get("arguments"), dict) else {},
                }
                if call.get("error"):
                    entry["extra"] = {"arguments_raw": call.get("arguments_raw"), "error": call["error"]}
                calls.append(entry)
                calls_by_id[call["id"]] = step
            if calls:
                step["tool_calls"] = calls
            step["metrics"] = metrics
            steps.append(step)
        elif kind == "tool_result":
            step = calls_by_id.get(rec.get("tool_call_id"))
            if step is None:
                continue
            results = step.setdefault("observation", {"results": []})["results"]
            results.append(
                {
                    "source_call_id": rec["tool_call_id"],
                    "content": rec.get("content") or "",
                    "extra": {"is_error": bool(rec.get("is_error")), "wall_s": rec.get("wall_s")},
                }
            )
    if not steps:
        steps.append(_step(1, utc_now(), "system", "(the run ended before its first message)"))
    trajectory: dict[str, Any] = {
        "schema_version": ATIF_VERSION,
        "session_id": start.get("run_id") or "unknown",
        "agent": {
            "name": "spu-agent",
            "version": agent_version,
            "model_name": model_name,
            "tool_definitions": [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": t.get("parameters", {}),
                    },
                }
                for t in start.get("tools") or []
            ],
            "extra": {"task_id": start.get("task_id"), "task_version": start.get("task_version")},
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": totals["prompt"],
            "total_completion_tokens": totals["completion"],
            "total_cached_tokens": totals["cached"],
            "total_cost_usd": round(totals["cost"], 6),
            "total_steps": len(steps),
        },
    }
    if end is not None:
        trajectory["final_metrics"]["extra"] = {
            k: end.get(k) for k in ("exit_status", "reason", "submission")
        }
    return trajectory


def _step(
    step_id: int, timestamp: str, source: str, message: str, extra: dict[str, Any] | None = None
) -> dict:
    step: dict[str, Any] = {"step_id": step_id, "timestamp": timestamp, "source": source, "message": message}
    if extra and any(v is not None for v in extra.values()):
        step["extra"] = extra
    return step


def write_atif(jsonl_path: str | Path, out_path: str | Path, *, agent_version: str = "0") -> dict[str, Any]:
    data = to_atif(read_records(jsonl_path), agent_version=agent_version)
    atomic_write_json(out_path, data, default=str)
    return data
