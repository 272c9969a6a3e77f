"""Writes run directories by hand (reference-agent JSONL and ATIF) for the analysis tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Call = tuple[str, Any] | tuple[str, Any, str] | tuple[str, Any, str, bool]


def submission(task_id: str, orders: dict[str, list[str]], version: str = "1") -> dict[str, Any]:
    return {
        "task_id": task_id,
        "task_version": version,
        "rankings": [{"group_id": g, "order": o} for g, o in orders.items()],
    }


def write_jsonl_run(
    run_dir: Path,
    task_id: str,
    calls: list[Call],
    *,
    final: dict[str, list[str]] | None = None,
    model: str = "replay:test",
    step_s: float = 10.0,
) -> Path:
    """One model turn per call, ``step_s`` seconds apart; each call takes 1 s; ``final`` -> rankings.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    t = 0.0
    records: list[dict[str, Any]] = [
        {"type": "run_start", "elapsed_s": 0.0, "task_id": task_id, "task_version": "1", "model": model}
    ]
    for i, call in enumerate(calls, start=1):
        name, args = call[0], call[1]
        content = call[2] if len(call) > 2 else "ok"
        is_error = call[3] if len(call) > 3 else False
        t += step_s
        records.append(
            {
                "type": "model_turn",
                "elapsed_s": t,
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": f"c{i}", "name": name, "arguments": args}],
                },
            }
        )
        records.append(
            {
                "type": "tool_result",
                "elapsed_s": t + 1.0,
                "tool_call_id": f"c{i}",
                "name": name,
                "arguments": args,
                "content": content,
                "is_error": is_error,
                "wall_s": 1.0,
            }
        )
    records.append({"type": "run_end", "elapsed_s": t + step_s, "exit_status": "submitted"})
    path = run_dir / "trajectory.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if final is not None:
        (run_dir / "rankings.json").write_text(json.dumps(submission(task_id, final)), encoding="utf-8")
    return path


def atif_trajectory(task_id: str | None, calls: list[Call], *, agent: str = "claude-code") -> dict[str, Any]:
    """An ATIF-v1.6 trajectory: a user step, then one agent step per call, a minute apart."""
    steps: list[dict[str, Any]] = [
        {
            "step_id": 1,
            "timestamp": "2026-01-01T00:00:00Z",
            "source": "user",
            "message": "Rank the experiments.",
        }
    ]
    for i, call in enumerate(calls, start=1):
        name, args = call[0], call[1]
        content = call[2] if len(call) > 2 else "ok"
        steps.append(
            {
                "step_id": i + 1,
                "timestamp": f"2026-01-01T00:{i:02d}:00Z",
                "source": "agent",
                "model_name": "claude-test",
                "message": "",
                "tool_calls": [{"tool_call_id": f"t{i}", "function_name": name, "arguments": args}],
                "observation": {"results": [{"source_call_id": f"t{i}", "content": content}]},
            }
        )
    steps.append(
        {
            "step_id": len(steps) + 1,
            "timestamp": f"2026-01-01T00:{len(calls) + 1:02d}:00Z",
            "source": "agent",
            "model_name": "claude-test",
            "message": "Done.",
        }
    )
    agent_block: dict[str, Any] = {"name": agent, "version": "1.0", "model_name": "claude-test"}
    if task_id:
        agent_block["extra"] = {"task_id": task_id}
    return {"schema_version": "ATIF-v1.6", "session_id": "s1", "agent": agent_block, "steps": steps}
