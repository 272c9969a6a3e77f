"""How well a submitted order agrees with measured values: Spearman with average ranks, pairs, top-1.

A submitted order lists experiment ids from the lowest to the highest predicted value, so the submitted
rank of the item at position ``p`` (0-based) is ``p + 1`` and submitted ranks never tie. Measured values
may tie; tied values share the average of the ranks they span (paper §2.5, equation 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

#: Up to this many values :func:`average_ranks` ranks them in plain Python: numpy's fixed cost per call is
#: several times the whole work there, and a task of 10,000 small groups ranks 160,000 times when built.
SMALL_RANKING = 16


def average_ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values`` (lowest = 1); tied values get the mean of the ranks they span."""
    if len(values) <= SMALL_RANKING:
        small = [float(v) for v in values]
        if all(v == v for v in small):  # no NaN: Python's sort orders them as numpy's does
            return np.array(_small_average_ranks(small))
    x = np.asarray(values, dtype=float)
    n = x.size
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    starts = np.concatenate(([0], np.flatnonzero(sorted_x[1:] != sorted_x[:-1]) + 1))
    stops = np.concatenate((starts[1:], [n]))
    # a run of ties at sorted positions start..stop-1 holds ranks start+1..stop; their mean is
    # (start+1+stop)/2
    ranks = np.empty(n, dtype=float)
    ranks[order] = np.repeat((starts + 1 + stops) / 2.0, stops - starts)
    return ranks


def average_ranks_rows(values: np.ndarray) -> np.ndarray:
    """:func:`average_ranks` of each row of a 2-D array, all rows at once (the screen ranks a panel of
    about 230 descriptors per group: one call here instead of one per descriptor)."""
    x = np.asarray(values, dtype=float)
    rows, n = x.shape
    order = np.argsort(x, axis=1, kind="mergesort")
    sorted_x = np.take_along_axis(x, order, axis=1)
    position = np.broadcast_to(np.arange(n), (rows, n))
    first = np.ones((rows, n), dtype=bool)  # where a run of equal sorted values starts
    first[:, 1:] = sorted_x[:, 1:] != sorted_x[:, :-1]
    last = np.ones((rows, n), dtype=bool)  # where one ends
    last[:, :-1] = first[:, 1:]
    starts = np.maximum.accumulate(np.where(first, position, 0), axis=1)
    stops = np.minimum.accumulate(np.where(last, position + 1, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((rows, n), dtype=float)
    np.put_along_axis(ranks, order, (starts + 1 + stops) / 2.0, axis=1)
    return ranks


def _small_average_ranks(x: list[float]) -> list[float]:
    order = sorted(range(len(x)), key=x.__getitem__)  # stable, like the mergesort below
    ranks = [0.0] * len(x)
    start = 0
    while start < len(x):
        stop = start + 1
        while stop < len(x) and x[order[stop]] == x[order[start]]:
            stop += 1
        for position in range(start, stop):  # ranks start+1..stop, their mean for each
            ranks[order[position]] = (start + 1 + stop) / 2.0
        start = stop
    return ranks


def centered_measured_ranks(values: Sequence[float] | np.ndarray) -> tuple[np.ndarray, float]:
    """Measured ranks minus their mean, and the norm of the submitted-rank vector times theirs.

    ``rho = (centered @ submitted_ranks) / denominator`` for any strict submitted order, which is how the
    grader and the chance threshold evaluate many orders quickly.
    """
    ranks = average_ranks(values)
    n = ranks.size
    centered = ranks - ranks.mean()
    # submitted ranks are a permutation of 1..n: sum of squared deviations = n (n^2 - 1) / 12
    denominator = float(np.sqrt(centered @ centered) * np.sqrt(n * (n * n - 1) / 12.0))
    return centered, denominator


def spearman_of_order(order: Sequence[str], values: Mapping[str, float]) -> float:
    """Spearman's rho between a strict order (lowest first) and measured values (ties averaged).

    ``order`` must list each key of ``values`` once. Returns NaN when all measured values are equal.
    """
    measured = np.array([values[e] for e in order], dtype=float)
    centered, denominator = centered_measured_ranks(measured)
    if denominator == 0.0:
        return float("nan")
    submitted = np.arange(1, len(order) + 1, dtype=float)
    return float(np.clip((centered @ submitted) / denominator, -1.0, 1.0))


def expected_spearman(proxy: Sequence[float], measured: Sequence[float]) -> float:
    """Expected Spearman rho of ranking items by ascending ``proxy``, ties in the proxy broken at random.

    Exact, no sampling: for a strict submitted order rho is linear in the submitted ranks
    (:func:`centered_measured_ranks`), and under uniform tie-breaking the expected submitted rank of an item
    in a tied block is the block's average rank, so
    ``E[rho] = centered . average_ranks(proxy) / denominator``.
    This is *not* Spearman's rho between the tied proxy and the values (:func:`spearman_of_values`): that
    divides by the tied ranks' own spread, which is smaller than a permutation's, so it overstates the
    expectation whenever the proxy ties. Returns 0 when the measured values carry no order (all tied).
    """
    centered, denominator = centered_measured_ranks(measured)
    if denominator == 0.0:
        return 0.0
    return float(np.clip(centered @ average_ranks(proxy) / denominator, -1.0, 1.0))


def group_rho(order: Sequence[str], values: Mapping[str, float]) -> float:
    """A valid group's score: Spearman of the order, or 0 when the measured values carry no order.

    All values tied, or a single experiment: every order is equally right and Spearman is 0/0. The group
    scores 0, what a random order is expected to score, and keeps its weight (the paper's text is silent
    on such groups; docs/environment.md gives the reasons).
    """
    rho = spearman_of_order(order, values)
    return 0.0 if np.isnan(rho) else rho


def spearman_of_values(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho between two value lists (both may tie; average ranks); NaN if either is constant."""
    ra = average_ranks(a)
    rb = average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denominator = float(np.sqrt((ra @ ra) * (rb @ rb)))
    if denominator == 0.0:
        return float("nan")
    return float(np.clip((ra @ rb) / denominator, -1.0, 1.0))


@lru_cache(maxsize=16)
def _upper_mask(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n)), k=1)


def pairs_in_order(order: Sequence[str], values: Mapping[str, float]) -> float:
    """Share of pairs placed in measured order, among the pairs whose measured values differ.

    A pair (i before j in ``order``) counts as in order when ``values[i] < values[j]``. Returns NaN when all
    values tie.
    """
    measured = np.array([values[e] for e in order], dtype=float)
    n = measured.size
    _, tie_counts = np.unique(measured, return_counts=True)
    untied = (n * (n - 1) - int((tie_counts * (tie_counts - 1)).sum())) // 2
    if untied == 0:
        return float("nan")
    # concordant minus discordant pairs: sum over i < j of sign(v_j - v_i)
    balance = float((np.sign(measured[None, :] - measured[:, None]) * _upper_mask(n)).sum())
    return (untied + balance) / 2.0 / untied


def top1_hit(order: Sequence[str], values: Mapping[str, float]) -> bool:
    """Whether the item submitted as highest (last in ``order``) has the highest measured value.

    With a tie at the top, placing any of the tied items last is a hit.
    """
    best = max(values[e] for e in order)
    return values[order[-1]] == best
