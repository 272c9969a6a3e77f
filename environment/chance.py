"""What random ranking scores on a task: the chance threshold, and the best score ties allow.

The chance threshold (paper §2.5) is the 95th percentile of the task scores of ``draws`` (4,000) random
valid submissions, each permuting every group independently, drawn from ``numpy.random.default_rng(seed)``
so the same task, answers, draws and seed always give the same threshold. The percentile is numpy's
default (linear interpolation between order statistics). A score above the threshold beats random
ranking at P < 0.05.

The attainable maximum is the score of the measured order: below 1 when measured values tie, because a
submission is a strict order. A group whose values all tie, or that holds one experiment, scores 0 under
every order, in the random draws as in the attainable maximum. For small tasks the exact distribution
over all permutations is available from :func:`exact_score_distribution`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np

from environment.rank_agreement import centered_measured_ranks, group_rho, pairs_in_order, top1_hit
from environment.task import Answers, Task, check_answers, measured_values

__all__ = [
    "attainable_max",
    "chance_threshold",
    "exact_quantile",
    "exact_score_distribution",
    "pairs_in_order",
    "random_scores",
    "top1_hit",
]

DEFAULT_DRAWS = 4000
DEFAULT_QUANTILE = 0.95
#: Largest group size whose permutations are enumerated for the exact distribution (8! = 40,320).
EXACT_MAX_GROUP_SIZE = 8
#: Largest number of distinct task scores kept while convolving the groups' exact distributions.
EXACT_MAX_SUPPORT = 200_000
#: Largest number of (score, group score) pairs combined in all while convolving: the work grows with the
#: square of the number of groups (a 10,000-group task took hours); the repository's tasks need under 100,000.
EXACT_MAX_WORK = 500_000


def _group_arrays(task: Task, answers: Answers) -> list[tuple[float, np.ndarray, float]]:
    out = []
    for group in task.groups:
        centered, denominator = centered_measured_ranks(measured_values(task, answers, group.group_id))
        out.append((group.weight, centered, denominator))
    return out


def random_scores(task: Task, answers: Answers, draws: int = DEFAULT_DRAWS, seed: int = 0) -> np.ndarray:
    """Task scores of ``draws`` uniformly random valid submissions (reproducible from ``seed``)."""
    if draws < 1:
        raise ValueError("draws must be at least 1")
    rng = np.random.default_rng(seed)
    scores = np.zeros(draws)
    for weight, centered, denominator in _group_arrays(task, answers):
        if denominator == 0.0:  # all values tied or one experiment: every order scores 0
            continue
        n = centered.size
        # each row: the submitted ranks (1..n) that a random order gives to the experiments
        ranks = rng.permuted(np.tile(np.arange(1.0, n + 1.0), (draws, 1)), axis=1)
        scores += weight * (ranks @ centered) / denominator
    return scores


def attainable_max(task: Task, answers: Answers) -> float:
    """The best task score any strict order can reach (1 unless measured values tie)."""
    total = 0.0
    for group in task.groups:
        values = answers.group(group.group_id).values
        best_order = sorted(group.experiment_ids, key=lambda e: values[e])
        total += group.weight * group_rho(best_order, values)
    return total


def exact_score_distribution(
    task: Task, answers: Answers, max_group_size: int = EXACT_MAX_GROUP_SIZE
) -> dict[float, float] | None:
    """The exact distribution of the task score over all random valid submissions, as {score: probability}.

    Enumerates every permutation of each group (scores rounded to 12 decimals to merge equal values) and
    convolves the groups. Returns None when a group has more than ``max_group_size`` experiments, the
    convolution would hold more than ``EXACT_MAX_SUPPORT`` distinct scores or take more than
    ``EXACT_MAX_WORK`` steps.
    """
    groups = _group_arrays(task, answers)
    if any(c.size > max_group_size for _, c, _ in groups):
        return None
    work = 0
    distribution: Counter[float] = Counter({0.0: 1.0})
    for weight, centered, denominator in groups:
        if denominator == 0.0:  # contributes 0 to every score
            continue
        n = centered.size
        perms = np.array(list(itertools.permutations(range(1, n + 1))), dtype=float)
        rhos = np.round(perms @ centered / denominator, 12)
        group_dist = Counter(rhos.tolist())
        work += len(distribution) * len(group_dist)
        if work > EXACT_MAX_WORK:
            return None
        total = sum(group_dist.values())
        combined: Counter[float] = Counter()
        for s, p in distribution.items():
            for rho, count in group_dist.items():
                combined[round(s + weight * rho, 12)] += p * count / total
        if len(combined) > EXACT_MAX_SUPPORT:
            return None
        distribution = combined
    return dict(sorted(distribution.items()))


def exact_quantile(distribution: dict[float, float], q: float) -> float:
    """The smallest score whose cumulative probability reaches ``q``."""
    cumulative = 0.0
    for score, probability in sorted(distribution.items()):
        cumulative += probability
        if cumulative >= q - 1e-12:
            return score
    return max(distribution)


def chance_threshold(
    task: Task,
    answers: Answers,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    quantile: float = DEFAULT_QUANTILE,
) -> dict[str, Any]:
    """The chance threshold and companions for one task.

    Returns ``chance_threshold`` (95th percentile of random scores), ``attainable_max``, ``draws``,
    ``seed``, ``random_mean`` and ``random_sd``, ``presented_order_score`` (the score of submitting the
    experiments in their presented order), ``exact_threshold`` (from the exact distribution when the task
    is small enough to enumerate, else None) and per-group ``groups`` entries (n, weight, attainable max,
    group-level threshold).
    """
    check_answers(task, answers)
    scores = random_scores(task, answers, draws=draws, seed=seed)
    threshold = float(np.quantile(scores, quantile))
    rng = np.random.default_rng(seed)
    groups = []
    presented = 0.0
    for group in task.groups:
        values = answers.group(group.group_id).values
        n = len(group.experiment_ids)
        best = group_rho(sorted(group.experiment_ids, key=lambda e: values[e]), values)
        centered, denominator = centered_measured_ranks(measured_values(task, answers, group.group_id))
        ranks = rng.permuted(np.tile(np.arange(1.0, n + 1.0), (draws, 1)), axis=1)
        group_threshold = float(np.quantile(ranks @ centered / denominator, quantile)) if denominator else 0.0
        presented_rho = group_rho(group.experiment_ids, values)
        presented += group.weight * presented_rho
        groups.append(
            {
                "group_id": group.group_id,
                "n": n,
                "weight": group.weight,
                "attainable_max": best,
                "chance_threshold": group_threshold,
                "presented_order_rho": presented_rho,
            }
        )
    exact = exact_score_distribution(task, answers)
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "chance_threshold": threshold,
        "attainable_max": attainable_max(task, answers),
        "quantile": quantile,
        "draws": draws,
        "seed": seed,
        "random_mean": float(scores.mean()),
        "random_sd": float(scores.std(ddof=1)) if draws > 1 else 0.0,
        "presented_order_score": presented,
        "exact_threshold": exact_quantile(exact, quantile) if exact is not None else None,
        "groups": groups,
    }
