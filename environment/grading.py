"""The grader: Spearman per group with average ranks for ties, weighted into a task score (paper §2.5).

Rules: a missing file or an error affecting the whole file scores -1; an invalid group gets rho = -1 and
keeps its weight while the other groups are scored normally. The task score is ``sum(w_g * rho_g)``.
By default the five schema departures of Appendix E.1 are recovered first (``recover=False`` is the
strict grader); ``strict_score`` always reports what the strict grader gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from environment.rank_agreement import pairs_in_order, spearman_of_order, top1_hit
from environment.submission import ValidationReport, validate_submission
from environment.task import Answers, Task, check_answers

FAILED = -1.0


class GroupScore(BaseModel):
    group_id: str
    rho: float
    weight: float
    error: str | None = None
    n: int
    pairs_in_order: float | None = None
    top1_hit: bool | None = None


class GradeResult(BaseModel):
    """``score``: the task score; ``groups``: per-group rho (-1 with ``error`` for an invalid group)."""

    task_id: str
    task_version: str
    score: float
    strict_score: float
    valid: bool
    file_errors: list[str] = Field(default_factory=list)
    recovered: list[str] = Field(default_factory=list)
    groups: list[GroupScore]


def _as_submission_input(submission: Any) -> Any:
    """Paths given as ``str`` are read from disk unless the text is plainly JSON (starts with ``{``)."""
    if isinstance(submission, str) and not submission.lstrip().startswith(("{", "[")):
        return Path(submission)
    return submission


def score_report(report: ValidationReport, task: Task, answers: Answers) -> tuple[float, list[GroupScore]]:
    """Task score and group scores for an already validated submission."""
    groups: list[GroupScore] = []
    total = 0.0
    for group in task.groups:
        n = len(group.experiment_ids)
        if report.file_errors:
            groups.append(
                GroupScore(
                    group_id=group.group_id,
                    rho=FAILED,
                    weight=group.weight,
                    n=n,
                    error="file invalid: " + "; ".join(report.file_errors),
                )
            )
            total += group.weight * FAILED
            continue
        order = report.orders.get(group.group_id)
        if order is None:
            errors = report.group_errors.get(group.group_id, ["invalid group"])
            groups.append(
                GroupScore(
                    group_id=group.group_id, rho=FAILED, weight=group.weight, n=n, error="; ".join(errors)
                )
            )
            total += group.weight * FAILED
            continue
        values = answers.group(group.group_id).values
        rho = spearman_of_order(order, values)
        groups.append(
            GroupScore(
                group_id=group.group_id,
                rho=rho,
                weight=group.weight,
                n=n,
                pairs_in_order=pairs_in_order(order, values),
                top1_hit=top1_hit(order, values),
            )
        )
        total += group.weight * rho
    if report.file_errors:
        total = FAILED
    return total, groups


def grade(submission: Any, task: Task, answers: Answers, *, recover: bool = True) -> GradeResult:
    """Grade one submission. ``submission``: a path (``str`` or ``Path``), raw ``bytes``, JSON text or a dict.

    Raises :class:`environment.task.TaskError` when the answers do not fit the task (a grader setup
    error, not a submission error).
    """
    check_answers(task, answers)
    data = _as_submission_input(submission)
    report = validate_submission(data, task, recover=recover)
    score, groups = score_report(report, task, answers)
    if report.recovered:
        strict_score, _ = score_report(validate_submission(data, task, recover=False), task, answers)
    else:
        strict_score = score
    return GradeResult(
        task_id=task.task_id,
        task_version=task.task_version,
        score=score,
        strict_score=strict_score,
        valid=report.valid,
        file_errors=report.file_errors,
        recovered=report.recovered,
        groups=groups,
    )
