"""What random ranking scores on a task: the chance threshold, the best score ties allow, and power.

**The null.** A random valid submission permutes every group uniformly and independently. A group's
Spearman rho is then ``D / (2 d)``, where ``D = Σ_i i · c2[π(i)]`` is an integer (``c2`` are twice the
centred measured ranks, whole numbers because average ranks are multiples of 1/2) and ``d`` the group's
denominator (:func:`spu_common.rank_agreement.centered_measured_ranks`); the task score is the weighted
sum of the groups' rhos.

**Exact where the null can be enumerated.** A group's distribution of ``D`` is counted over every
permutation by a dynamic programme over its tie blocks (which block takes position 1, 2, ...): exact for
every group whose tie blocks give at most ``EXACT_MAX_STATES`` (2**14) states, the product of each block's
size plus one (every group of 14 experiments or fewer). The groups are then split in two halves, each
convolved exactly (sums merged at 12 decimals), and the task's distribution is the sum of the two halves,
read by sorted search rather than written out. When a group is too large, or a half would hold more than
``EXACT_MAX_PRODUCT`` sums before merging, or its steps together would form more than ``EXACT_MAX_WORK``
(the support of a half grows with its number of groups, so the work grows with its square: hundreds of
groups), the null is **sampled** instead: ``draws`` (4,000) seeded random
submissions, as in the paper. ``chance_method`` says which.

**The threshold** is the 95th percentile of the null: for the exact null the smallest score whose
cumulative probability reaches 0.95, so that a random submission scores *above* it (strictly) with
probability at most 5%; for the sampled null numpy's default percentile (linear interpolation). A verdict
"above chance" is always ``score > threshold`` (:func:`is_above`, with a 1e-9 tolerance for rounding), as in
the paper: with "reaches" (>=) on a discrete null a random submission would pass more often than 5%.

**Power.** The probability that the mean of ``k`` runs of a method whose expected score is ``s`` is above
the chance threshold of the mean of ``k`` random submissions (the 95th percentile of that mean's null).
The model of a method's run-to-run spread is a *location shift* of the null: each run scores ``s + X``,
with ``X`` distributed as a random submission's score and independent across runs. So the mean of ``k``
runs is ``s + M_k``, ``M_k`` the mean of ``k`` random scores, and power is ``P(M_k > t_k - s)``. A method
whose runs agree with each other more than random orders do has more power than this when the power is
above one half. ``effect_for_80pct_power`` is the smallest ``s`` above which power is at least 0.8;
``power_single_run`` is the power of one run, and ``runs_for_80pct_power`` the fewest runs whose mean has
power 0.8 at ``s`` (:func:`power_per_run`).

The attainable maximum is the score of the measured order: below 1 when measured values tie, because a
submission is a strict order. A group whose values all tie, or that holds one experiment, scores 0 under
every order, in the null as in the attainable maximum.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from spu_common.rank_agreement import centered_measured_ranks, group_rho, pairs_in_order, top1_hit
from spu_common.task import Answers, Task, check_answers, measured_values

__all__ = [
    "ExactNull",
    "SampledNull",
    "attainable_max",
    "chance_threshold",
    "exact_null",
    "exact_quantile",
    "exact_score_distribution",
    "is_above",
    "pairs_in_order",
    "power",
    "power_per_run",
    "quantile_interval",
    "random_scores",
    "top1_hit",
]

DEFAULT_DRAWS = 4000
DEFAULT_QUANTILE = 0.95
DEFAULT_POWER_RUNS = 5
DEFAULT_POWER_EFFECT = 0.3
POWER_TARGET = 0.8
#: Most runs searched for ``runs_for_80pct_power``.
MAX_POWER_RUNS = 50
#: Largest number of tie-block states of one group's dynamic programme (2**14: any group of <= 14).
EXACT_MAX_STATES = 2**14
#: Largest number of sums formed in one convolution step of a half of the groups (before merging).
EXACT_MAX_PRODUCT = 4_000_000
EXACT_MAX_WORK = 20_000_000  # sums formed over all the steps of one half (14x the suite's largest)
#: Scores closer than this are equal: "above" means more than this above the threshold.
TOLERANCE = 1e-9


def is_above(score: float, threshold: float) -> bool:
    """Whether ``score`` is above ``threshold`` (strictly, beyond rounding): the paper's rule."""
    return score > threshold + TOLERANCE


# ------------------------------------------------------------------------------------------- one group


def _doubled_centred_ranks(centered: np.ndarray) -> tuple[int, ...]:
    return tuple(sorted(round(2.0 * float(c)) for c in centered))


@functools.lru_cache(maxsize=256)
def _dot_distribution(c2: tuple[int, ...]) -> tuple[int, np.ndarray] | None:
    """The exact distribution of ``D = Σ_i i · c2[π(i)]`` over uniform permutations ``π`` of ``c2``.

    Returns ``(lowest, probabilities)`` with ``probabilities[j] = P(D = lowest + j)``, or None when the
    tie blocks give more than ``EXACT_MAX_STATES`` states. The programme assigns positions 1, 2, ... in
    turn; its state is how many members of each tie block are placed, and a step that places one of the
    ``m - used`` remaining members of a block counts each of them.
    """
    counts = Counter(c2)
    values = sorted(counts)
    sizes = [counts[v] for v in values]
    if int(np.prod([m + 1 for m in sizes])) > EXACT_MAX_STATES:
        return None
    n = len(c2)
    bound = sum(range(1, n + 1)) * max((abs(v) for v in values), default=0)
    width = 2 * bound + 1
    layer: dict[tuple[int, ...], np.ndarray] = {tuple(0 for _ in values): np.zeros(width)}
    layer[tuple(0 for _ in values)][bound] = 1.0
    for position in range(1, n + 1):
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for state, dist in layer.items():
            for b, (value, size) in enumerate(zip(values, sizes, strict=True)):
                left = size - state[b]
                if left == 0:
                    continue
                new_state = (*state[:b], state[b] + 1, *state[b + 1 :])
                shift = position * value
                target = nxt.get(new_state)
                if target is None:
                    target = nxt[new_state] = np.zeros(width)
                if shift >= 0:
                    target[shift:] += left * dist[: width - shift]
                else:
                    target[:shift] += left * dist[-shift:]
        layer = nxt
    (final,) = layer.values()
    nonzero = np.flatnonzero(final)
    lo, hi = int(nonzero[0]), int(nonzero[-1])
    probs = final[lo : hi + 1]
    return lo - bound, probs / probs.sum()


def _group_null(centered: np.ndarray, denominator: float, weight: float, runs: int):
    """Values and probabilities of ``weight`` times the mean rho of ``runs`` random orders of one group,
    or None when the group cannot be enumerated. A group without order contributes 0 always."""
    if denominator == 0.0:
        return np.zeros(1), np.ones(1)
    found = _dot_distribution(_doubled_centred_ranks(centered))
    if found is None:
        return None
    lo, probs = found
    total = probs
    for _ in range(runs - 1):
        total = np.convolve(total, probs)
    keep = total > 0
    dots = (lo * runs + np.arange(total.size))[keep]
    return weight * dots / (2.0 * denominator * runs), total[keep]


# ------------------------------------------------------------------------------------------- the task


def _merge(values: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    support, inverse = np.unique(np.round(values, 12), return_inverse=True)
    return support, np.bincount(inverse, weights=probs)


def _convolve_all(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray] | None:
    values, probs = np.zeros(1), np.ones(1)
    work = 0
    for v, p in parts:
        work += values.size * v.size
        if values.size * v.size > EXACT_MAX_PRODUCT or work > EXACT_MAX_WORK:
            return None
        values, probs = _merge((values[:, None] + v[None, :]).ravel(), (probs[:, None] * p[None, :]).ravel())
    return values, probs


@dataclass
class ExactNull:
    """The exact null of a task score as the sum of two independent halves (module docstring)."""

    a_values: np.ndarray
    a_probs: np.ndarray
    b_values: np.ndarray
    b_cdf: np.ndarray  # b_cdf[j] = P(B <= b_values[j - 1]); b_cdf[0] = 0
    method = "exact"

    @classmethod
    def of(cls, parts: list[tuple[np.ndarray, np.ndarray]]) -> ExactNull | None:
        """The null of the sum of independent parts (values, probabilities), or None when too large."""
        order = sorted(range(len(parts)), key=lambda i: -parts[i][0].size)
        halves: list[list[int]] = [[], []]
        sizes = [1, 1]
        for i in order:  # the larger part joins the half with the smaller product
            side = 0 if sizes[0] <= sizes[1] else 1
            halves[side].append(i)
            sizes[side] *= parts[i][0].size
        a = _convolve_all([parts[i] for i in halves[0]])
        b = _convolve_all([parts[i] for i in halves[1]])
        if a is None or b is None:
            return None
        return cls(a[0], a[1], b[0], np.concatenate(([0.0], np.cumsum(b[1]))))

    def cdf(self, x: float) -> float:
        """``P(S <= x)``, scores within ``TOLERANCE`` of ``x`` counted as equal to it."""
        index = np.searchsorted(self.b_values, x + TOLERANCE - self.a_values, side="right")
        return float(np.clip(self.a_probs @ self.b_cdf[index], 0.0, 1.0))

    def sf(self, x: float) -> float:
        """``P(S > x)``: the chance that a random submission is above ``x``."""
        return 1.0 - self.cdf(x)

    def quantile(self, q: float) -> float:
        """The smallest score ``s`` of the null with ``P(S <= s) >= q``."""
        lo = float(self.a_values[0] + self.b_values[0]) - 1.0
        hi = float(self.a_values[-1] + self.b_values[-1])
        while hi - lo > 1e-12:
            mid = (lo + hi) / 2.0
            if self.cdf(mid) >= q - 1e-12:
                hi = mid
            else:
                lo = mid
        # the jump lies in (lo, hi]: the smallest sum of the two halves above lo
        index = np.searchsorted(self.b_values, lo + TOLERANCE - self.a_values, side="right")
        valid = index < self.b_values.size
        return float((self.a_values[valid] + self.b_values[index[valid]]).min())

    def support(self) -> dict[float, float] | None:
        """The whole distribution ``{score: probability}``, or None when it is too large to write out."""
        found = _convolve_all([(self.a_values, self.a_probs), (self.b_values, np.diff(self.b_cdf))])
        if found is None:
            return None
        return dict(zip(found[0].tolist(), found[1].tolist(), strict=True))


@dataclass
class SampledNull:
    """A null known from seeded samples: percentiles by numpy's default (linear interpolation)."""

    samples: np.ndarray
    method = "sampled"

    def cdf(self, x: float) -> float:
        return float(np.mean(self.samples <= x + TOLERANCE))

    def sf(self, x: float) -> float:
        return 1.0 - self.cdf(x)

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.samples, q))


def _group_arrays(task: Task, answers: Answers) -> list[tuple[float, np.ndarray, float]]:
    out = []
    for group in task.groups:
        centered, denominator = centered_measured_ranks(measured_values(task, answers, group.group_id))
        out.append((group.weight, centered, denominator))
    return out


def exact_null(task: Task, answers: Answers, runs: int = 1) -> ExactNull | None:
    """The exact null of the mean score of ``runs`` random submissions, or None past the cut-over."""
    parts = []
    for weight, centered, denominator in _group_arrays(task, answers):
        part = _group_null(centered, denominator, weight, runs)
        if part is None:
            return None
        parts.append(part)
    return ExactNull.of(parts)


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


def quantile_interval(samples: np.ndarray, q: float, confidence: float = 0.95) -> list[float]:
    """A distribution-free ``confidence`` interval of the ``q`` quantile from ``samples``: the order
    statistics whose ranks bound the binomial count of samples below the quantile (scipy's binomial)."""
    from scipy.stats import binom

    ordered = np.sort(samples)
    n = ordered.size
    tail = (1.0 - confidence) / 2.0
    low = int(binom.ppf(tail, n, q))  # the low-th smallest (1-based) lies below the quantile w.p. >= 1-tail
    high = int(binom.ppf(1.0 - tail, n, q)) + 1
    return [float(ordered[max(low, 1) - 1]), float(ordered[min(high, n) - 1])]


def attainable_max(task: Task, answers: Answers) -> float:
    """The best task score any strict order can reach (1 unless measured values tie)."""
    total = 0.0
    for group in task.groups:
        values = answers.group(group.group_id).values
        best_order = sorted(group.experiment_ids, key=lambda e: values[e])
        total += group.weight * group_rho(best_order, values)
    return total


def exact_score_distribution(task: Task, answers: Answers) -> dict[float, float] | None:
    """The exact distribution ``{score: probability}`` of a random valid submission's task score, or None
    past the cut-over (module docstring)."""
    null = exact_null(task, answers)
    support = None if null is None else null.support()
    return None if support is None else dict(sorted(support.items()))


def exact_quantile(distribution: dict[float, float], q: float) -> float:
    """The smallest score whose cumulative probability reaches ``q``."""
    cumulative = 0.0
    for score, probability in sorted(distribution.items()):
        cumulative += probability
        if cumulative >= q - 1e-12:
            return score
    return max(distribution)


def power(
    task: Task,
    answers: Answers,
    runs: int = DEFAULT_POWER_RUNS,
    effect: float = DEFAULT_POWER_EFFECT,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    quantile: float = DEFAULT_QUANTILE,
) -> dict[str, Any]:
    """Power to tell a method of expected score ``effect`` from random with the mean of ``runs`` runs.

    Returns ``power``, ``effect_for_80pct_power``, ``power_runs``, ``power_effect``, ``power_threshold`` (the
    chance threshold of the mean of ``runs`` random submissions) and ``power_method`` (``exact``, or
    ``sampled`` from ``draws`` means of ``runs`` seeded random submissions); the model is in the module
    docstring.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    null: ExactNull | SampledNull | None = exact_null(task, answers, runs)
    if null is None:
        samples = random_scores(task, answers, draws=draws * runs, seed=seed).reshape(draws, runs)
        null = SampledNull(samples.mean(axis=1))
    threshold = null.quantile(quantile)
    # the smallest mean m of the null with P(M <= m) > 1 - target: every effect above threshold - m has
    # P(M > threshold - effect) >= target
    lowest = null.quantile(1.0 - POWER_TARGET + 1e-9)
    return {
        "power": null.sf(threshold - effect),
        "effect_for_80pct_power": threshold - lowest,
        "power_runs": runs,
        "power_effect": effect,
        "power_threshold": threshold,
        "power_method": null.method,
    }


def power_per_run(
    task: Task,
    answers: Answers,
    effect: float = DEFAULT_POWER_EFFECT,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    quantile: float = DEFAULT_QUANTILE,
    known: dict[int, float] | None = None,
) -> dict[str, Any]:
    """Single-run power and the runs needed for 80% power at expected score ``effect`` (module docstring).

    Returns ``power_single_run`` (:func:`power` with one run) and ``runs_for_80pct_power``: the smallest
    number of runs ``k`` whose mean has power of at least ``POWER_TARGET``, searched from 1 up to
    ``MAX_POWER_RUNS`` (None beyond). ``known`` holds powers already computed, by number of runs.
    """
    found = dict(known or {})

    def at(runs: int) -> float:
        if runs not in found:
            found[runs] = power(task, answers, runs, effect, draws=draws, seed=seed, quantile=quantile)[
                "power"
            ]
        return found[runs]

    needed = next((k for k in range(1, MAX_POWER_RUNS + 1) if at(k) >= POWER_TARGET), None)
    return {"power_single_run": at(1), "runs_for_80pct_power": needed}


def _group_entries(
    task: Task, answers: Answers, draws: int, seed: int, quantile: float
) -> tuple[list[dict[str, Any]], float]:
    """Each group's entry of :func:`chance_threshold` (n, weight, attainable max, group-level threshold,
    presented-order rho), and the score of the presented order."""
    rng = np.random.default_rng(seed)
    groups = []
    presented = 0.0
    for group in task.groups:
        values = answers.group(group.group_id).values
        n = len(group.experiment_ids)
        best = group_rho(sorted(group.experiment_ids, key=lambda e: values[e]), values)
        centered, denominator = centered_measured_ranks(measured_values(task, answers, group.group_id))
        group_part = _group_null(centered, denominator, 1.0, 1)
        group_null = ExactNull.of([group_part]) if group_part is not None else None
        if group_null is not None:
            group_threshold = group_null.quantile(quantile)
        else:
            ranks = rng.permuted(np.tile(np.arange(1.0, n + 1.0), (draws, 1)), axis=1)
            group_threshold = (
                float(np.quantile(ranks @ centered / denominator, quantile)) if denominator else 0.0
            )
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
    return groups, presented


def chance_threshold(
    task: Task,
    answers: Answers,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    quantile: float = DEFAULT_QUANTILE,
    power_runs: int = DEFAULT_POWER_RUNS,
    power_effect: float = DEFAULT_POWER_EFFECT,
) -> dict[str, Any]:
    """The chance threshold and companions for one task (module docstring).

    Returns ``chance_threshold`` (exact where the null can be enumerated, else sampled), ``chance_method``
    (``exact`` or ``sampled``), ``exact_threshold`` (None past the cut-over), ``sampled_threshold`` (95th
    percentile of ``draws`` seeded random submissions, the paper's procedure) with
    ``sampled_threshold_interval`` (its 95% sampling interval, :func:`quantile_interval`), ``attainable_max``,
    ``draws``, ``seed``, ``random_mean`` and ``random_sd`` (of the draws), ``presented_order_score`` (the
    score of submitting the experiments in their presented order) with ``presented_order_above_chance`` and
    ``reversed_presented_order_above_chance``, the power figures of :func:`power`, and per-group ``groups``
    entries (n, weight, attainable max, group-level threshold, presented-order rho).
    """
    check_answers(task, answers)
    scores = random_scores(task, answers, draws=draws, seed=seed)
    sampled = float(np.quantile(scores, quantile))
    sampled_interval = quantile_interval(scores, quantile)
    null = exact_null(task, answers)
    exact = null.quantile(quantile) if null is not None else None
    threshold = exact if exact is not None else sampled
    groups, presented = _group_entries(task, answers, draws, seed, quantile)
    powered = power(task, answers, power_runs, power_effect, draws=draws, seed=seed, quantile=quantile)
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "chance_threshold": threshold,
        "chance_method": "exact" if exact is not None else "sampled",
        "exact_threshold": exact,
        "sampled_threshold": sampled,
        "sampled_threshold_interval": sampled_interval,
        "attainable_max": attainable_max(task, answers),
        "quantile": quantile,
        "draws": draws,
        "seed": seed,
        "random_mean": float(scores.mean()),
        "random_sd": float(scores.std(ddof=1)) if draws > 1 else 0.0,
        "presented_order_score": presented,
        "presented_order_above_chance": is_above(presented, threshold),
        "reversed_presented_order_above_chance": is_above(-presented, threshold),
        **powered,
        **power_per_run(
            task,
            answers,
            power_effect,
            draws=draws,
            seed=seed,
            quantile=quantile,
            known={power_runs: powered["power"]},
        ),
        "groups": groups,
    }
