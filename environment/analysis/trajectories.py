"""Trajectories as lists of tool calls: the reference agent's ``trajectory.jsonl``, ATIF ``trajectory.json``.

Both readers return a :class:`Trajectory`: the tool calls in the order they were made, each with the model
step it belongs to (1 = the first model turn), its start time in seconds since the run began (when the
file records time), its name (an MCP prefix such as ``mcp__spu__`` removed), arguments, the result the
agent read and whether that result was an error.

Both formats are read by :mod:`environment.runs` (ATIF as plain JSON, so the analysis needs no Harbor
installation) into the same records; this module turns records into calls. A file that cannot be read
whole raises :class:`AnalysisError` naming the file and the line
(JSONL, or the JSON parser's line) or the JSON path (a step of the wrong shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environment import runs
from environment.analysis.errors import AnalysisError
from environment.runs import TrajectoryRead


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


def _strict(read: TrajectoryRead) -> TrajectoryRead:
    """The file as read, or :class:`AnalysisError` for its first problem (the analysis reads whole files)."""
    if read.problems:
        first = read.problems[0]
        raise AnalysisError(first.code, first.located(read.path), first.hint)
    return read


def read_jsonl(path: str | Path) -> Trajectory:
    """The reference agent's ``trajectory.jsonl``; any problem raises an error naming the file and line:
    ``trajectory_truncated`` for an unfinished last line, ``trajectory_malformed`` else."""
    return from_records(_strict(runs.read_jsonl(path)))


def read_atif(path: str | Path) -> Trajectory:
    """An ATIF ``trajectory.json`` (any agent: the reference agent, Claude Code, Codex ... through Harbor)."""
    return from_records(_strict(runs.read_atif(path)))


def read_trajectory(path: str | Path) -> Trajectory:
    """Either format, by file name: ``*.jsonl`` is the reference agent's, anything else ATIF."""
    return from_records(_strict(runs.read_trajectory(path)))


def from_records(read: TrajectoryRead) -> Trajectory:
    """The tool calls of a trajectory's records, each with its model step and start time."""
    path, records = read.path, read.records
    start = records[0]
    # the clock starts before the tool server is up; the run starts with its first record
    origin = _number(start.get("elapsed_s")) or 0.0
    step = 0
    step_of_call: dict[str, int] = {}
    calls: list[ToolCall] = []
    last_elapsed = 0.0
    end: dict[str, Any] | None = None
    for index, rec in enumerate(records):
        elapsed = _number(rec.get("elapsed_s"))
        if elapsed is not None:
            elapsed = max(elapsed - origin, 0.0)
            last_elapsed = max(last_elapsed, elapsed)
        kind = rec["type"]
        if kind == "model_turn":
            step += 1
            message = rec.get("message")
            if not isinstance(message, dict):
                line = read.lines[index] if read.lines else None
                raise AnalysisError(
                    "trajectory_malformed",
                    f"{path}:{line}: model_turn without a message"
                    if line
                    else f"{path}: model_turn without a message",
                )
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id") is not None:
                    step_of_call[str(call["id"])] = step
        elif kind == "tool_result":
            name = str(rec.get("name") or "")
            wall = _number(rec.get("wall_s"))
            calls.append(
                ToolCall(
                    index=len(calls) + 1,
                    step=step_of_call.get(str(rec.get("tool_call_id")), max(step, 1)),
                    name=normalise_tool_name(name),
                    raw_name=name,
                    arguments=rec.get("arguments"),
                    content=runs.text_of(rec.get("content")),
                    is_error=bool(rec.get("is_error")),
                    start_s=None if elapsed is None else max(elapsed - (wall or 0.0), 0.0),
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
        format=read.format,
        n_steps=step,
        duration_s=duration if duration else (last_elapsed or None),
        calls=calls,
        task_id=_str_or_none(start.get("task_id")),
        task_version=_str_or_none(start.get("task_version")),
        model=_str_or_none(start.get("model")),
        agent=_str_or_none(start.get("agent")) or ("spu-agent" if read.format == "jsonl" else None),
        exit_status=_str_or_none(end.get("exit_status")) if end else None,
        complete=end is not None or read.format == "atif",
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
