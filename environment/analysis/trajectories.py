"""Trajectories as lists of tool calls: the reference agent's ``trajectory.jsonl``, ATIF ``trajectory.json``.

Both readers return a :class:`Trajectory`: the tool calls in the order they were made, each with the model
step it belongs to (1 = the first model turn), its start time in seconds since the run began (when the
file records time), its name (an MCP prefix such as ``mcp__spu__`` removed), arguments, the result the
agent read and whether that result was an error.

ATIF is parsed here from plain JSON (the fields of Harbor's ``harbor.models.trajectories.Trajectory``:
``steps[].source``, ``timestamp``, ``tool_calls[].function_name/arguments/tool_call_id``,
``observation.results[].source_call_id/content``) so the analysis needs no Harbor installation.

A file that cannot be read as a trajectory raises :class:`AnalysisError` naming the file and the line
(JSONL, or the JSON parser's line) or the JSON path (a step of the wrong shape).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environment.analysis.errors import AnalysisError


@dataclass
class ToolCall:
    """One tool call and its result."""

    index: int
    step: int
    name: str
    arguments: Any
    content: str = ""
    is_error: bool = False
    start_s: float | None = None
    wall_s: float | None = None
    raw_name: str = ""


@dataclass
class Trajectory:
    """What the analysis needs from one run's trajectory file."""

    path: Path
    format: str  # "jsonl" or "atif"
    n_steps: int
    duration_s: float | None
    calls: list[ToolCall] = field(default_factory=list)
    task_id: str | None = None
    task_version: str | None = None
    model: str | None = None
    agent: str | None = None
    exit_status: str | None = None
    complete: bool = True

    def t_norm(self, call: ToolCall) -> float:
        """Where in the run a call started, 0..1: by time when the file records it, else by model step."""
        if call.start_s is not None and self.duration_s:
            return min(max(call.start_s / self.duration_s, 0.0), 1.0)
        return self.step_norm(call.step)

    def step_norm(self, step: int) -> float:
        return min(max((step - 0.5) / self.n_steps, 0.0), 1.0) if self.n_steps else 0.0

    @property
    def time_basis(self) -> str:
        return "time" if self.duration_s and any(c.start_s is not None for c in self.calls) else "steps"


def normalise_tool_name(name: str) -> str:
    """``mcp__spu__chem_parse`` -> ``chem_parse``: the part after the last ``__``; other names unchanged."""
    name = name or ""
    if "__" in name:  # mcp__spu__chem_parse (Claude Code, Codex), spu__chem_parse
        tail = name.rsplit("__", 1)[1]
        return tail or name
    return name


# -- reference agent JSONL ------------------------------------------------------------------------------


def read_jsonl(path: str | Path) -> Trajectory:
    """The reference agent's ``trajectory.jsonl``. A line that is not a JSON object raises an error naming
    the file and line: ``trajectory_truncated`` for an unfinished last line, ``trajectory_malformed`` else."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AnalysisError("trajectory_unreadable", f"{path}: cannot read: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise AnalysisError(
            "trajectory_malformed", f"{path}:{line}: not UTF-8 text", "Check the file was copied whole."
        ) from None
    lines = text.split("\n")
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            last = number == len(lines) and not text.endswith("\n")
            if last:
                raise AnalysisError(
                    "trajectory_truncated",
                    f"{path}:{number}: the last line is cut off (the run was killed while writing it)",
                    "Delete the partial last line to analyse the rest, or pass --skip-invalid.",
                ) from None
            raise AnalysisError(
                "trajectory_malformed",
                f"{path}:{number}: not a JSON record ({exc.msg} at column {exc.colno})",
                "Each line of trajectory.jsonl must be one JSON object.",
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise AnalysisError(
                "trajectory_malformed",
                f"{path}:{number}: a record must be a JSON object with a string 'type'",
                "Is this a reference-agent trajectory.jsonl?",
            )
        records.append((number, record))
    if not records:
        raise AnalysisError("trajectory_empty", f"{path}: no records", "The run wrote nothing.")
    if records[0][1]["type"] != "run_start":
        raise AnalysisError(
            "trajectory_malformed",
            f"{path}:{records[0][0]}: the first record is {records[0][1]['type']!r}, not 'run_start'",
            "Is this a reference-agent trajectory.jsonl?",
        )
    start = records[0][1]
    # the clock starts before the tool server is up; the run starts with its first record
    origin = _number(start.get("elapsed_s")) or 0.0
    step = 0
    step_of_call: dict[str, int] = {}
    calls: list[ToolCall] = []
    last_elapsed = 0.0
    end: dict[str, Any] | None = None
    for number, rec in records:
        elapsed = _number(rec.get("elapsed_s"))
        if elapsed is not None:
            elapsed = max(elapsed - origin, 0.0)
            last_elapsed = max(last_elapsed, elapsed)
        kind = rec["type"]
        if kind == "model_turn":
            step += 1
            message = rec.get("message")
            if not isinstance(message, dict):
                raise AnalysisError("trajectory_malformed", f"{path}:{number}: model_turn without a message")
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id") is not None:
                    step_of_call[str(call["id"])] = step
        elif kind == "tool_result":
            name = str(rec.get("name") or "")
            wall = _number(rec.get("wall_s"))
            start_s = None
            if elapsed is not None:
                start_s = max(elapsed - (wall or 0.0), 0.0)
            calls.append(
                ToolCall(
                    index=len(calls) + 1,
                    step=step_of_call.get(str(rec.get("tool_call_id")), max(step, 1)),
                    name=normalise_tool_name(name),
                    raw_name=name,
                    arguments=rec.get("arguments"),
                    content=_text(rec.get("content")),
                    is_error=bool(rec.get("is_error")),
                    start_s=start_s,
                    wall_s=wall,
                )
            )
        elif kind == "run_end":
            end = rec
    duration = _number(end.get("elapsed_s")) if end else None
    if duration is not None:
        duration = max(duration - origin, 0.0)
    return Trajectory(
        path=path,
        format="jsonl",
        n_steps=step,
        duration_s=duration if duration else (last_elapsed or None),
        calls=calls,
        task_id=_str_or_none(start.get("task_id")),
        task_version=_str_or_none(start.get("task_version")),
        model=_str_or_none(start.get("model")),
        agent="spu-agent",
        exit_status=_str_or_none(end.get("exit_status")) if end else None,
        complete=end is not None,
    )


# -- ATIF -----------------------------------------------------------------------------------------------


def read_atif(path: str | Path) -> Trajectory:
    """An ATIF ``trajectory.json`` (any agent: the reference agent, Claude Code, Codex ... through Harbor)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnalysisError("trajectory_unreadable", f"{path}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip())
        raise AnalysisError(
            "trajectory_truncated" if truncated else "trajectory_malformed",
            f"{path}:{exc.lineno}: "
            + ("the JSON ends early (a truncated file)" if truncated else f"not valid JSON ({exc.msg})")
            + f" at column {exc.colno}",
            "An ATIF trajectory.json is one JSON object; copy the file again from the run.",
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise AnalysisError(
            "trajectory_malformed",
            f"{path}: not an ATIF trajectory (no 'steps' list)",
            "Expected a trajectory.json with schema_version ATIF-v1.x.",
        )
    agent = data.get("agent") if isinstance(data.get("agent"), dict) else {}
    extra = agent.get("extra") if isinstance(agent.get("extra"), dict) else {}
    times: list[float | None] = []
    t0: float | None = None
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    step = 0
    for i, raw_step in enumerate(data["steps"]):
        where = f"{path}: steps[{i}]"
        if not isinstance(raw_step, dict) or not isinstance(raw_step.get("source"), str):
            raise AnalysisError(
                "trajectory_malformed",
                f"{where} is not a step object with a 'source'",
                "Check the ATIF export.",
            )
        stamp = _timestamp(raw_step.get("timestamp"))
        if stamp is not None and t0 is None:
            t0 = stamp
        rel = stamp - t0 if (stamp is not None and t0 is not None) else None
        times.append(rel)
        if raw_step["source"] != "agent" or raw_step.get("is_copied_context") is True:
            continue  # copied context repeats earlier steps after a compaction
        step += 1
        tool_calls = raw_step.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise AnalysisError("trajectory_malformed", f"{where}.tool_calls is not a list")
        for j, tc in enumerate(tool_calls):
            if not isinstance(tc, dict):
                raise AnalysisError("trajectory_malformed", f"{where}.tool_calls[{j}] is not an object")
            name = str(tc.get("function_name") or "")
            call = ToolCall(
                index=len(calls) + 1,
                step=step,
                name=normalise_tool_name(name),
                raw_name=name,
                arguments=tc.get("arguments"),
                start_s=rel,
            )
            calls.append(call)
            if tc.get("tool_call_id") is not None:
                by_id[str(tc["tool_call_id"])] = call
        observation = raw_step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        for k, result in enumerate(results or []):
            if not isinstance(result, dict):
                raise AnalysisError(
                    "trajectory_malformed", f"{where}.observation.results[{k}] is not an object"
                )
            target = by_id.get(str(result.get("source_call_id")))
            if target is None:
                continue
            target.content = _text(result.get("content"))
            res_extra = result.get("extra") if isinstance(result.get("extra"), dict) else {}
            target.is_error = any(
                res_extra.get(k) is True for k in ("is_error", "tool_result_is_error")
            ) or _looks_like_error(target.content)
            wall = _number(res_extra.get("wall_s"))
            if wall is not None:
                target.wall_s = wall
    known = [t for t in times if t is not None]
    duration = max(known) if known else None
    if duration is not None and calls and calls[-1].start_s is not None and calls[-1].wall_s:
        duration = max(duration, calls[-1].start_s + calls[-1].wall_s)
    final = data.get("final_metrics") if isinstance(data.get("final_metrics"), dict) else {}
    final_extra = final.get("extra") if isinstance(final.get("extra"), dict) else {}
    return Trajectory(
        path=path,
        format="atif",
        n_steps=step,
        duration_s=duration or None,
        calls=calls,
        task_id=_str_or_none(extra.get("task_id")),
        task_version=_str_or_none(extra.get("task_version")),
        model=_str_or_none(agent.get("model_name")),
        agent=_str_or_none(agent.get("name")),
        exit_status=_str_or_none(final_extra.get("exit_status")),
    )


def read_trajectory(path: str | Path) -> Trajectory:
    """Either format, by file name: ``*.jsonl`` is the reference agent's, anything else ATIF."""
    path = Path(path)
    return read_jsonl(path) if path.suffix == ".jsonl" else read_atif(path)


# -- helpers --------------------------------------------------------------------------------------------


def _looks_like_error(content: str) -> bool:
    head = content.lstrip()[:200]
    return head.startswith(("<tool_use_error>", "Error:", "error:")) or bool(re.match(r"^\[[a-z_]+\] ", head))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def _text(content: Any) -> str:
    """Tool output as text: a string, ATIF content parts (``[{type: text, text}]``) or any JSON value."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)
