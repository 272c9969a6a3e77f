"""The monotone prior: rankings that follow a numeric setup field, as a baseline and as a flag on runs.

A field *varies* in a group when its ``targets.csv`` column is numeric and takes at least two distinct
values among the group's experiments (:func:`varying_fields`); a run can only be said to *follow* a field
in a group where it takes at least three (``MIN_VALUES``, as in the paper's analysis: with two values any
partition looks monotone).

An order *follows* a field when no pair of experiments is placed against the field (ties in the field
may go either way) or when its Spearman correlation with the field reaches ``FOLLOW_RHO`` = 0.95 in
absolute value. A run follows a field when it does so in every group where the field takes three or more
values, in one direction throughout.

The baseline that ranks by a field breaks ties in the field at random; its score is the expected score
over those tie-breaks, which is exact and needs no sampling because Spearman's rho is linear in the
submitted ranks (a tied block contributes its average rank). A group where the field does not vary
therefore contributes 0, what a random order scores on average. ``strict_score`` is the score of one
concrete submission: ties broken by the presented order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spu_common.rank_agreement import average_ranks, centered_measured_ranks, spearman_of_order
from spu_common.task import Answers, Task

MIN_VALUES = 3
FOLLOW_RHO = 0.95
DIRECTIONS = ("ascending", "descending")


def field_values(task: Task, group_id: str, field: str) -> dict[str, float | None]:
    return {row["experiment_id"]: row.get(field) for row in task.rows_of(group_id)}


def distinct_values(task: Task, group_id: str, field: str) -> int:
    return len({v for v in field_values(task, group_id, field).values() if v is not None})


def varying_fields(task: Task, min_values: int = 2) -> list[str]:
    """Numeric columns that take at least ``min_values`` distinct values within some group."""
    return [
        f
        for f in task.numeric_columns
        if any(distinct_values(task, g.group_id, f) >= min_values for g in task.groups)
    ]


def follows(order: list[str], values: dict[str, float | None]) -> str | None:
    """``"ascending"``/``"descending"`` when ``order`` (lowest first) follows the field, else None."""
    known = [values[e] for e in order if values.get(e) is not None]
    if len(set(known)) < 2:
        return None
    x = np.asarray(known, dtype=float)
    diffs = np.sign(x[None, :] - x[:, None])[np.triu_indices(x.size, k=1)]
    if not (diffs < 0).any():
        return "ascending"
    if not (diffs > 0).any():
        return "descending"
    positions = np.arange(x.size, dtype=float)
    ra, rb = average_ranks(positions), average_ranks(x)
    ra -= ra.mean()
    rb -= rb.mean()
    rho = float(ra @ rb / np.sqrt((ra @ ra) * (rb @ rb)))
    if rho >= FOLLOW_RHO:
        return "ascending"
    if rho <= -FOLLOW_RHO:
        return "descending"
    return None


def monotone_fields(task: Task, orders: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The fields a submission follows: ``[(field, direction)]`` (module docstring)."""
    found = []
    for field in task.numeric_columns:
        directions = set()
        eligible = 0
        for group in task.groups:
            if group.group_id not in orders or distinct_values(task, group.group_id, field) < MIN_VALUES:
                continue
            eligible += 1
            directions.add(follows(orders[group.group_id], field_values(task, group.group_id, field)))
        if eligible and len(directions) == 1 and None not in directions:
            found.append((field, directions.pop()))
    return found


def field_order(task: Task, group_id: str, field: str, direction: str) -> list[str]:
    """The group's experiments sorted by the field (ties in presented order, missing values last)."""
    values = field_values(task, group_id, field)
    ids = task.group(group_id).experiment_ids
    sign = 1.0 if direction == "ascending" else -1.0
    keyed = [(values[e] is None, sign * (values[e] or 0.0), i, e) for i, e in enumerate(ids)]
    return [e for *_, e in sorted(keyed)]


def expected_rho(task: Task, answers: Answers, group_id: str, field: str, direction: str) -> float:
    """Expected Spearman rho of ranking the group by the field, ties (and missing values) broken at random."""
    ids = task.group(group_id).experiment_ids
    values = answers.group(group_id).values
    centered, denominator = centered_measured_ranks([values[e] for e in ids])
    if denominator == 0.0:
        return float("nan")
    raw = field_values(task, group_id, field)
    known = [i for i, e in enumerate(ids) if raw[e] is not None]
    n = len(ids)
    ranks = np.full(n, (n + 1) / 2.0)
    if len(known) >= 2:
        sub = average_ranks([raw[ids[i]] for i in known])
        if direction == "descending":
            sub = len(known) + 1 - sub
        # known experiments share the first len(known) ranks, missing ones the rest (average rank each)
        ranks[:] = (len(known) + 1 + n) / 2.0
        ranks[known] = sub
    return float(np.clip(centered @ ranks / denominator, -1.0, 1.0))


def field_baseline(task: Task, answers: Answers, field: str, direction: str) -> dict[str, Any]:
    """Score of ranking every group by ``field`` in ``direction`` (module docstring)."""
    groups = []
    expected = 0.0
    strict = 0.0
    for group in task.groups:
        gid = group.group_id
        n_values = distinct_values(task, gid, field)
        rho = expected_rho(task, answers, gid, field, direction) if n_values >= 2 else 0.0
        order = field_order(task, gid, field, direction)
        strict_rho = spearman_of_order(order, answers.group(gid).values)
        expected += group.weight * (0.0 if np.isnan(rho) else rho)
        strict += group.weight * (0.0 if np.isnan(strict_rho) else strict_rho)
        groups.append(
            {
                "group_id": gid,
                "distinct_values": n_values,
                "expected_rho": rho,
                "strict_rho": strict_rho,
            }
        )
    return {
        "field": field,
        "direction": direction,
        "score": expected,
        "strict_score": strict,
        "groups": groups,
    }
