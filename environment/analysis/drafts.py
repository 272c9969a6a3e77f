"""Complete rankings written during a run (drafts), found in the tool calls of its trajectory.

A call holds a draft when its arguments carry a submission that the task contract accepts (after the
grader's recovery of the five schema departures):

* ``submit_rankings`` (the reference agent): its ``rankings`` argument, unless the call failed;
* a file tool writing ``rankings.json`` (``write_file``, Claude Code's ``Write``): the file's content;
* any other call whose arguments contain the JSON text of a whole submission (a heredoc in a shell
  command, a literal in Python code, the added lines of a patch such as Codex's ``apply_patch``).

A draft written by a program that computes the order (the order never appears in the trajectory) is not
visible; the run's final ``rankings.json`` is still graded. The *first complete draft* is the first draft
whose order differs from the presented order in some group (paper §4.1).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from environment.analysis.trajectories import ToolCall, Trajectory
from spu_common.submission import validate_submission
from spu_common.task import Task

_FILE_TOOLS = {"write_file", "write", "create", "str_replace_based_edit_tool"}
_MARKER = re.compile(r'"rankings"\s*:')
_MAX_TEXT = 200_000


@dataclass
class Draft:
    index: int
    call: ToolCall
    orders: dict[str, list[str]]
    differs_from_presented: bool


def _candidates(call: ToolCall, task: Task) -> list[Any]:
    args = call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {"text": args}
    out: list[Any] = []
    if call.name == "submit_rankings" and isinstance(args, dict):
        rankings = args.get("rankings")
        if isinstance(rankings, str):
            try:
                rankings = json.loads(rankings)
            except ValueError:
                rankings = None
        if rankings is not None:
            out.append({"task_id": task.task_id, "task_version": task.task_version, "rankings": rankings})
        return out
    texts: list[str] = []
    if isinstance(args, dict):
        path = str(args.get("path") or args.get("file_path") or "")
        content = args.get("content") if call.name.lower() in _FILE_TOOLS else None
        if isinstance(content, str) and path.endswith("rankings.json"):
            texts.append(content)
        for value in args.values():
            if isinstance(value, str) and value is not content:
                texts.append(value)
    for text in texts:
        text = text[:_MAX_TEXT]
        if "\n+" in text:  # a patch (Codex apply_patch, a diff): the added lines
            added = "\n".join(line[1:] for line in text.splitlines() if line.startswith("+"))
            out.extend(_embedded_submissions(added))
        out.extend(_embedded_submissions(text))
    return out


def _embedded_submissions(text: str) -> list[Any]:
    """JSON objects in ``text`` that contain a ``"rankings"`` key (tried from each ``{`` before it)."""
    found = []
    decoder = json.JSONDecoder()
    for match in _MARKER.finditer(text):
        start = text.rfind("{", 0, match.start())
        tries = 0
        while start >= 0 and tries < 4:
            try:
                obj, _ = decoder.raw_decode(text, start)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and "rankings" in obj:
                found.append(obj)
                break
            start = text.rfind("{", 0, start)
            tries += 1
    return found


def find_drafts(trajectory: Trajectory, task: Task) -> list[Draft]:
    """Every valid complete ranking in the trajectory, in call order."""
    drafts: list[Draft] = []
    presented = {g.group_id: g.experiment_ids for g in task.groups}
    for call in trajectory.calls:
        if call.is_error and call.name == "submit_rankings":
            continue
        for candidate in _candidates(call, task):
            report = validate_submission(candidate, task, recover=True)
            if not report.valid:
                continue
            orders = {gid: list(order) for gid, order in report.orders.items()}
            if drafts and drafts[-1].call is call and drafts[-1].orders == orders:
                continue
            drafts.append(
                Draft(
                    index=len(drafts) + 1,
                    call=call,
                    orders=orders,
                    differs_from_presented=any(orders[g] != presented[g] for g in orders),
                )
            )
            break
    return drafts


def flipped_pairs(before: dict[str, list[str]], after: dict[str, list[str]]) -> int:
    """Pairs of experiments whose relative order differs between two complete rankings."""
    total = 0
    for gid, order in after.items():
        pos = {e: i for i, e in enumerate(before.get(gid, []))}
        if len(pos) != len(order):
            continue
        for i in range(len(order)):
            for j in range(i + 1, len(order)):
                if pos[order[i]] > pos[order[j]]:
                    total += 1
    return total
