"""Chance threshold: seeded and reproducible, close to the exact permutation distribution; attainable max."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from environment.chance import (
    attainable_max,
    chance_threshold,
    exact_quantile,
    exact_score_distribution,
    random_scores,
)
from environment.rank_agreement import spearman_of_order


def brute_force_distribution(groups, weights):
    """Exact task-score distribution by enumerating every joint permutation (independent of chance.py)."""
    per_group = []
    for values in groups:
        ids = list(values)
        rhos = Counter(round(spearman_of_order(list(p), values), 10) for p in itertools.permutations(ids))
        total = sum(rhos.values())
        per_group.append({r: c / total for r, c in rhos.items()})
    dist = Counter()
    for combo in itertools.product(*[list(d.items()) for d in per_group]):
        score = round(sum(w * r for w, (r, _) in zip(weights, combo, strict=True)), 10)
        prob = np.prod([p for _, p in combo])
        dist[score] += prob
    return dict(dist)


def cdf_at(dist, x):
    return sum(p for s, p in dist.items() if s <= x + 1e-9)


@pytest.mark.parametrize(
    "groups",
    [
        {"g": {"a": 1, "b": 2, "c": 3, "d": 4}},
        {"g": {"a": 1, "b": 2, "c": 2, "d": 4, "e": 5, "f": 0}},
        {"g": {f"e{i}": float(i) for i in range(7)}},
        {"g": {"a": 1, "b": 2, "c": 3}, "h": {"u": 1, "v": 1, "w": 2, "x": 3, "y": 4}},
        {"g": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}, "h": {"u": 1, "v": 2, "w": 3, "x": 4, "y": 5}},
    ],
)
def test_threshold_is_close_to_the_exact_permutation_distribution(make_task, groups):
    task, answers, *_ = make_task(groups)
    result = chance_threshold(task, answers, draws=4000, seed=0)
    exact = brute_force_distribution([groups[g] for g in groups], [1 / len(groups)] * len(groups))
    # the Monte Carlo 95th percentile lies between the exact 93rd and 97th percentiles
    # (4,000 draws: sd of the empirical CDF at the 95th percentile is sqrt(.95 * .05 / 4000) = 0.0034)
    assert cdf_at(exact, result["chance_threshold"]) >= 0.93
    below = [s for s in exact if s < result["chance_threshold"] - 1e-9]
    assert not below or cdf_at(exact, max(below)) <= 0.97
    ours = exact_score_distribution(task, answers)
    assert ours is not None
    assert set(np.round(list(ours), 8)) == set(np.round(list(exact), 8))
    assert result["exact_threshold"] == pytest.approx(exact_quantile(exact, 0.95), abs=1e-9)


def test_seeded_and_reproducible(two_group_task):
    task, answers, *_ = two_group_task
    first = chance_threshold(task, answers, seed=7)
    again = chance_threshold(task, answers, seed=7)
    other = random_scores(task, answers, seed=8)
    assert first == again
    assert not np.array_equal(random_scores(task, answers, seed=7), other)
    assert first["draws"] == 4000 and first["seed"] == 7
    # a uniformly random ranking has expected score 0
    assert abs(first["random_mean"]) < 4 * first["random_sd"] / np.sqrt(4000)


def test_random_scores_match_the_grader_formula(two_group_task):
    task, answers, *_ = two_group_task
    rng = np.random.default_rng(0)
    scores = random_scores(task, answers, draws=5, seed=0)
    # recompute draw 0 with the same generator sequence: group a permutation then group b
    ranks_a = rng.permuted(np.tile(np.arange(1.0, 6.0), (5, 1)), axis=1)
    ranks_b = rng.permuted(np.tile(np.arange(1.0, 5.0), (5, 1)), axis=1)
    expected = []
    for row_a, row_b in zip(ranks_a, ranks_b, strict=True):
        total = 0.0
        for ids, row, values in (
            (["a1", "a2", "a3", "a4", "a5"], row_a, answers.group("a").values),
            (["b1", "b2", "b3", "b4"], row_b, answers.group("b").values),
        ):
            order = [e for _, e in sorted(zip(row, ids, strict=True))]
            total += 0.5 * spearman_of_order(order, values)
        expected.append(total)
    assert scores == pytest.approx(expected, abs=1e-12)


def test_attainable_max_below_one_with_ties(two_group_task, make_task):
    task, answers, *_ = two_group_task
    # group a: measured ranks 1, 2, 3.5, 3.5, 5 against 1..5 -> rho = sqrt(0.95); group b: 1
    assert attainable_max(task, answers) == pytest.approx(0.5 * np.sqrt(0.95) + 0.5, abs=1e-12)
    untied, untied_answers, *_ = make_task({"g": {"a": 3, "b": 1, "c": 2}})
    assert attainable_max(untied, untied_answers) == pytest.approx(1.0)


def test_large_group_has_no_exact_distribution(make_task):
    task, answers, *_ = make_task({"g": {f"e{i}": float(i) for i in range(12)}})
    result = chance_threshold(task, answers, draws=500)
    assert result["exact_threshold"] is None
    assert 0.3 < result["chance_threshold"] < 0.7  # n = 12: sd of rho is 1/sqrt(11) = 0.30, 1.645 sd = 0.50
