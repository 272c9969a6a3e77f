"""The grader: Spearman per group with average ranks for ties, weighted into a task score (paper §2.5).

Rules: a missing file or an error affecting the whole file scores -1; an invalid group gets rho = -1 and
keeps its weight while the other groups are scored normally. The task score is ``sum(w_g * rho_g)``.

``score`` is always the strict grader's, the benchmark's official score: a schema departure anywhere in
the file rejects it (-1). ``recovered_score`` is a second figure, computed only for files the strict
grader rejected: the score after mapping the five schema departures of Appendix E.1 back to the canonical
schema (``departures`` lists them). For a file the strict grader accepts it equals ``score``.

A group whose measured values all tie, or that holds a single experiment, carries no order: any valid
order of it scores rho = 0 (the expected score of a random order) and keeps its weight; an invalid order
of it still scores -1 (see docs/environment.md).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from spu_common.rank_agreement import group_rho, pairs_in_order, top1_hit
from spu_common.scoring import FAILED
from spu_common.submission import ValidationReport, validate_submission
from spu_common.task import Answers, Task, check_answers


class GroupScore(BaseModel):
    group_id: str
    rho: float
    weight: float
    error: str | None = None
    n: int
    pairs_in_order: float | None = None
    top1_hit: bool | None = None


class GradeResult(BaseModel):
    """One graded submission.

    ``score``: the strict task score (official); ``groups``: its per-group rho (-1 with ``error`` for an
    invalid group); ``valid``: the strict grader found no error at all; ``rejected``: it rejected the whole
    file (a file error, ``score`` -1). ``recovered_score``: the score after recovering schema departures,
    only for a rejected file (else equal to ``score``); ``departures``: the departures recovered;
    ``recovery_accepted``: whether the recovered file passes the file rules (None when recovery did not
    run); ``recovered_groups`` and ``recovered_file_errors`` go with it. ``strict_score`` repeats
    ``score`` for scripts written when ``score`` was the recovered figure.
    """

    task_id: str
    task_version: str
    score: float
    strict_score: float
    valid: bool
    rejected: bool
    file_errors: list[str] = Field(default_factory=list)
    recovered_score: float
    departures: list[str] = Field(default_factory=list)
    recovery_accepted: bool | None = None
    recovered_file_errors: list[str] = Field(default_factory=list)
    groups: list[GroupScore]
    recovered_groups: list[GroupScore] | None = None

    @property
    def scored(self) -> bool:
        """Whether the run counts in a scored mean: the strict grader or the recovery accepted the file."""
        return not self.rejected or bool(self.recovery_accepted)

    @property
    def scored_value(self) -> float:
        """The score a scored mean uses: the strict score, or the recovered one for a recovered file."""
        return self.recovered_score if self.rejected and self.recovery_accepted else self.score


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
        rho = group_rho(order, values)
        pairs = pairs_in_order(order, values)
        groups.append(
            GroupScore(
                group_id=group.group_id,
                rho=rho,
                weight=group.weight,
                n=n,
                pairs_in_order=None if math.isnan(pairs) else pairs,
                top1_hit=top1_hit(order, values),
            )
        )
        total += group.weight * rho
    if report.file_errors:
        total = FAILED
    return total, groups


def grade(submission: Any, task: Task, answers: Answers, *, recover: bool = True) -> GradeResult:
    """Grade one submission. ``submission``: a path (``str`` or ``Path``), raw ``bytes``, JSON text or a dict.

    ``score`` is the strict score. With ``recover=True`` (default) a file the strict grader rejects is
    also scored after recovering schema departures (``recovered_score``); ``recover=False`` skips that.
    Raises :class:`spu_common.task.TaskError` when the answers do not fit the task (a grader setup
    error, not a submission error).
    """
    check_answers(task, answers)
    data = _as_submission_input(submission)
    strict = validate_submission(data, task, recover=False)
    score, groups = score_report(strict, task, answers)
    rejected = bool(strict.file_errors)
    recovered_score = score
    recovery_accepted: bool | None = None
    departures: list[str] = []
    recovered_errors: list[str] = []
    recovered_groups: list[GroupScore] | None = None
    if rejected and recover:
        report = validate_submission(data, task, recover=True)
        recovered_score, recovered_groups = score_report(report, task, answers)
        recovery_accepted = not report.file_errors
        departures = list(report.recovered)
        recovered_errors = list(report.file_errors)
    return GradeResult(
        task_id=task.task_id,
        task_version=task.task_version,
        score=score,
        strict_score=score,
        valid=strict.valid,
        rejected=rejected,
        file_errors=strict.file_errors,
        recovered_score=recovered_score,
        departures=departures,
        recovery_accepted=recovery_accepted,
        recovered_file_errors=recovered_errors,
        groups=groups,
        recovered_groups=recovered_groups,
    )
