"""``replay:<recording>``: replays the model turns of a recorded run against the live tools.

A recording is JSON lines; each line is a model turn: either a trajectory record
(``{"type": "model_turn", "message": {...}}``, so any ``trajectory.jsonl`` replays as is) or a bare
``{"message": {...}}`` / assistant message. Other lines are ignored. The tools run for real and their
results may differ from the recorded ones; the replay does not look at them and sends the next recorded
turn regardless, so a recording stays usable when a tool's output changes. When the recording runs out
the model answers with text and no tool call, which ends the run.

``<recording>`` is a path, or the name of a recording shipped in ``scaffold/agent/recordings/``.
Strings in recorded tool arguments may hold ``${TASK_DIR}``, ``${OUT_DIR}`` and ``${WORK_DIR}``, replaced
by this run's paths, so a recording does not depend on where it was made (``spu agent recording`` writes
them).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from scaffold.agent.config import ModelSection
from scaffold.agent.models.base import ModelError, ModelTurn, ToolDef, Usage

END_TEXT = "The recording has no more turns; ending the replay."


def shipped_recordings() -> dict[str, Path]:
    folder = resources.files("scaffold.agent") / "recordings"
    return {
        p.name.removesuffix(".jsonl"): Path(str(p)) for p in folder.iterdir() if p.name.endswith(".jsonl")
    }


def resolve_recording(ref: str) -> Path:
    path = Path(ref).expanduser()
    if path.is_file():
        return path
    shipped = shipped_recordings()
    if ref in shipped:
        return shipped[ref]
    names = ", ".join(sorted(shipped)) or "none"
    raise ModelError(f"no recording {ref!r}: not a file, and not a shipped recording (shipped: {names})")


def load_turns(path: Path) -> list[dict[str, Any]]:
    turns = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ModelError(f"{path}:{number}: not JSON ({exc})") from exc
        if record.get("type") not in (None, "model_turn"):
            continue
        message = record.get("message", record)
        if message.get("role") != "assistant":
            continue
        turns.append(
            {
                "role": "assistant",
                "content": message.get("content") or "",
                "tool_calls": [dict(c) for c in message.get("tool_calls") or []],
            }
        )
    return turns


def recorded_task_ids(turns: list[dict[str, Any]]) -> set[str]:
    """Every ``task_id`` named in the recorded tool calls' arguments (a draft or a submission names it)."""
    found: set[str] = set()
    pending: list[Any] = [call.get("arguments") for turn in turns for call in turn["tool_calls"]]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if isinstance(item.get("task_id"), str):
                found.add(item["task_id"])
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return found


class ReplayModel:
    """Duck-types the HTTP models: ``query(messages, tools) -> ModelTurn``; costs nothing."""

    provider = "replay"

    @classmethod
    def preflight(cls, model: str, config: ModelSection, *, base_url: str | None, task_id: str) -> str | None:
        """A recording that is not there, or that was made for another task (its drafts name that task)."""
        try:
            turns = load_turns(resolve_recording(model))
        except (ModelError, OSError, UnicodeDecodeError) as exc:
            return str(exc)
        named = recorded_task_ids(turns)
        if named and task_id not in named:
            return (
                f"the recording was made for task {', '.join(sorted(named))}, not {task_id!r} (replay it on "
                "that task, or record a run of this one with `spu agent recording`)"
            )
        return None

    def __init__(self, ref: str, substitutions: dict[str, str] | None = None) -> None:
        self.path = resolve_recording(ref)
        self.model = str(ref)
        self.turns = load_turns(self.path)
        self.position = 0
        self.substitutions = dict(substitutions or {})
        self.last_request: dict[str, Any] | None = None

    @classmethod
    def from_spec(
        cls,
        model: str,
        config: ModelSection,
        *,
        base_url: str | None = None,
        cache_key: str | None = None,
        paths: dict[str, str] | None = None,
    ) -> ReplayModel:
        """``model`` is the recording: a file's path or a shipped recording's name."""
        return cls(model, substitutions=paths)

    @property
    def name(self) -> str:
        return f"replay:{self.model}"

    def query(self, messages: list[dict[str, Any]], tools: list[ToolDef]) -> ModelTurn:
        self.last_request = {"messages": len(messages), "tools": [t.name for t in tools]}
        if self.position >= len(self.turns):
            message = {"role": "assistant", "content": END_TEXT, "tool_calls": []}
            return ModelTurn(message=message, usage=Usage(), stop_reason="end_of_recording")
        message = json.loads(json.dumps(self.turns[self.position]))
        self.position += 1
        message["provider"] = self.provider
        for call in message["tool_calls"]:
            args = call.get("arguments")
            if isinstance(args, dict) and self.substitutions:
                call["arguments"] = substitute(args, self.substitutions)
                call["arguments_raw"] = json.dumps(call["arguments"], ensure_ascii=False)
        return ModelTurn(message=message, usage=Usage(), stop_reason="recorded")

    def close(self) -> None:
        pass


def substitute(value: Any, substitutions: dict[str, str]) -> Any:
    """``value`` with every ``${NAME}`` in its strings replaced by ``substitutions[NAME]``."""
    if isinstance(value, str):
        for name, replacement in substitutions.items():
            value = value.replace("${" + name + "}", replacement)
        return value
    if isinstance(value, list):
        return [substitute(v, substitutions) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, substitutions) for k, v in value.items()}
    return value
