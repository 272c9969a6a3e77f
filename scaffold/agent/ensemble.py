"""Ensembles: K independent runs (one model or several, taken in turn) and their consensus by mean rank.

SPU found that averaging the rankings of several configurations beats the average single submission.
Each member runs in ``<out>/members/member-N/`` with its own files; the consensus of the members' valid
rankings becomes ``<out>/rankings.json``, with a report and ``ensemble.json`` beside it. Members run one
after another so each has the whole machine for its tools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from environment.consensus import ConsensusError, consensus_details
from scaffold.agent.config import AgentConfig
from scaffold.agent.loop import RunOutcome
from scaffold.agent.models import ModelSpec
from scaffold.agent.runner import run_agent
from spu_common.submission import fallback_submission, validate_submission, write_submission_atomic
from spu_common.task import Task


def run_ensemble(
    task: Task,
    out: str | Path,
    model_specs: list[str | ModelSpec],
    size: int,
    config: AgentConfig,
    *,
    base_url: str | None = None,
    on_member: Any = None,
) -> dict[str, Any]:
    root = Path(out).absolute()
    root.mkdir(parents=True, exist_ok=True)
    write_submission_atomic(root / "rankings.json", fallback_submission(task))  # valid from the start
    members: list[dict[str, Any]] = []
    for index in range(size):
        spec = model_specs[index % len(model_specs)]
        member_dir = root / "members" / f"member-{index + 1}"
        outcome: RunOutcome = run_agent(task, member_dir, spec, config, base_url=base_url)
        members.append(
            {
                "member": index + 1,
                "model": str(spec),
                "dir": member_dir.relative_to(root).as_posix(),
                "exit_status": outcome.exit_status,
                "submission": outcome.submission,
            }
        )
        if on_member is not None:
            on_member(members[-1])
        if outcome.exit_status == "interrupted":
            break
    return write_consensus(task, root, members)


def write_consensus(task: Task, root: Path, members: list[dict[str, Any]]) -> dict[str, Any]:
    """Consensus of the members that submitted a ranking of their own (not the fallback)."""
    used = [
        m
        for m in members
        if m["submission"] != "fallback"
        and validate_submission(root / m["dir"] / "rankings.json", task, recover=False).valid
    ]
    summary: dict[str, Any] = {"members": members, "used": [m["member"] for m in used]}
    if used:
        try:
            details = consensus_details([root / m["dir"] / "rankings.json" for m in used], task)
        except ConsensusError as exc:
            summary["error"] = str(exc)
        else:
            write_submission_atomic(root / "rankings.json", details["submission"])
            summary["groups"] = details["groups"]
    summary["submission"] = "consensus" if "groups" in summary else "fallback"
    (root / "ensemble.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"# Ensemble report: {task.task_id}",
        "",
        f"{len(members)} member runs; {len(used)} contributed a ranking of their own. The submission is the "
        + (
            "mean-rank consensus of those rankings."
            if summary["submission"] == "consensus"
            else "presented order (no member submitted a ranking)."
        ),
        "",
        "| member | model | exit status | submission |",
        "|---|---|---|---|",
    ]
    lines += [f"| {m['member']} | {m['model']} | {m['exit_status']} | {m['submission']} |" for m in members]
    lines += ["", "Each member's report is in its folder under members/."]
    (root / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _merge_sources(root, members)
    return summary


def _merge_sources(root: Path, members: list[dict[str, Any]]) -> None:
    merged: dict[str, Any] = {"schema": "spu.sources/1", "members": []}
    for m in members:
        path = root / m["dir"] / "sources.json"
        if path.is_file():
            merged["members"].append({"member": m["member"], **json.loads(path.read_text(encoding="utf-8"))})
    (root / "sources.json").write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
