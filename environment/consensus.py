"""Consensus of several submissions by mean rank (SPU found that averaging rankings beats the average run).

For each group, every submission whose order of that group is valid (after recovery) contributes each
experiment's position (1 = lowest); experiments are ordered by their mean position, ties broken by
experiment id (plain string order) so the result never depends on the order the files were given in.
"""

from __future__ import annotations

from typing import Any

from spu_common.submission import submission_from_orders, validate_submission
from spu_common.task import Task


class ConsensusError(ValueError):
    """No submission gives a valid order for some group."""


def consensus_details(submissions: list[Any], task: Task) -> dict[str, Any]:
    """The consensus submission plus, per group, how many submissions counted and each mean rank."""
    per_group: dict[str, list[list[str]]] = {g.group_id: [] for g in task.groups}
    skipped: list[dict[str, Any]] = []
    for index, submission in enumerate(submissions):
        report = validate_submission(submission, task)
        if report.file_errors:
            skipped.append({"index": index, "errors": report.file_errors})
            continue
        for group_id, order in report.orders.items():
            per_group[group_id].append(order)
        for group_id, errors in report.group_errors.items():
            skipped.append({"index": index, "group_id": group_id, "errors": errors})
    orders: dict[str, list[str]] = {}
    groups: list[dict[str, Any]] = []
    for group in task.groups:
        found = per_group[group.group_id]
        if not found:
            raise ConsensusError(f"no submission has a valid order for group {group.group_id!r}")
        positions = [{e: i + 1 for i, e in enumerate(order)} for order in found]
        mean_rank = {e: sum(p[e] for p in positions) / len(found) for e in group.experiment_ids}
        orders[group.group_id] = sorted(group.experiment_ids, key=lambda e: (mean_rank[e], e))
        groups.append({"group_id": group.group_id, "n_submissions": len(found), "mean_rank": mean_rank})
    return {"submission": submission_from_orders(task, orders), "groups": groups, "skipped": skipped}


def consensus(submissions: list[Any], task: Task) -> dict[str, Any]:
    """A canonical submission ordering each group by mean rank over the valid submissions.

    ``submissions``: parsed dicts (or anything :func:`validate_submission` accepts). Raises
    :class:`ConsensusError` when some group has no valid order in any submission.
    """
    return consensus_details(submissions, task)["submission"]
