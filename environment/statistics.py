"""Statistics across configurations and tasks (paper §3.1, "Statistics").

Scores come as a tasks x configurations matrix with NaN where a configuration has no scored run.

- raw mean: a configuration's mean over its scored tasks;
- task-adjusted mean: least-squares fit of ``y_tc = mu_t + alpha_c`` to all scored cells, reporting
  ``alpha_c + mean_t(mu_t)`` (a configuration's expected mean over all tasks when effects add);
- 95% percentile intervals from bootstrap resamples of tasks (10,000 by default);
- paired comparisons on the tasks scored for both configurations: mean difference and two-sided
  Wilcoxon signed-rank test, with Holm's correction over all pairs;
- Wilson 95% intervals on shares (runs above chance, tasks above chance);
- the pooled within-task standard deviation of repeated runs (§3.6), with a bootstrap interval over tasks.
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import Any

import numpy as np

#: bootstrap resamples of tasks for every interval of a report: one default, so `spu batch`'s report and a
#: later `spu report` over the same runs print the same intervals
BOOTSTRAP_RESAMPLES = 10_000


def _connected(mask: np.ndarray) -> bool:
    """Whether the bipartite task-configuration graph of scored cells is connected over used columns."""
    used = np.flatnonzero(mask.any(axis=0))
    if used.size <= 1:
        return True
    seen = {int(used[0])}
    frontier = [int(used[0])]
    while frontier:
        c = frontier.pop()
        for t in np.flatnonzero(mask[:, c]):
            for other in np.flatnonzero(mask[t]):
                if int(other) not in seen:
                    seen.add(int(other))
                    frontier.append(int(other))
    return seen >= {int(c) for c in used}


def adjusted_means(scores: np.ndarray, task_weights: np.ndarray | None = None) -> np.ndarray:
    """Task-adjusted means of the additive model for one or many task weightings.

    ``scores``: (tasks, configs) with NaN for missing cells. ``task_weights``: (tasks,) or (B, tasks)
    multiplicities (bootstrap counts); default all ones. Returns (configs,) or (B, configs); NaN for a
    configuration without any scored task in a weighting.
    """
    y = np.asarray(scores, dtype=float)
    mask = ~np.isnan(y)
    keep = mask.any(axis=1)
    y, mask = y[keep], mask[keep]
    m = mask.sum(axis=1).astype(float)
    y0 = np.where(mask, y, 0.0)
    row_sum = y0.sum(axis=1)
    single = task_weights is None or np.ndim(task_weights) == 1
    k = (
        np.ones((1, y.shape[0]))
        if task_weights is None
        else np.atleast_2d(np.asarray(task_weights, float))[:, keep]
    )
    mf = mask.astype(float)
    configs = y.shape[1]
    # normal equations for alpha after profiling out mu_t = (row_sum - M alpha) / m
    a = np.einsum("bt,tc->bc", k, mf)[:, :, None] * np.eye(configs) - np.einsum(
        "bt,tc,td->bcd", k / m, mf, mf
    )
    rhs = k @ y0 - (k * (row_sum / m)) @ mf
    a = a + 1.0  # adds the all-ones matrix: fixes sum(alpha) = 0 where the design is connected
    alpha = np.einsum("bcd,bd->bc", np.linalg.pinv(a), rhs)
    mu = (row_sum[None, :] - alpha @ mf.T) / m[None, :]
    weight_total = k.sum(axis=1, keepdims=True)
    mu_bar = (k * mu).sum(axis=1, keepdims=True) / weight_total
    out = alpha + mu_bar
    present = (k @ mf) > 0
    out = np.where(present, out, np.nan)
    return out[0] if single else out


def raw_means(scores: np.ndarray, task_weights: np.ndarray | None = None) -> np.ndarray:
    """Mean over scored tasks per configuration (weighted by task multiplicities when given)."""
    y = np.asarray(scores, dtype=float)
    mask = ~np.isnan(y)
    y0 = np.where(mask, y, 0.0)
    single = task_weights is None or np.ndim(task_weights) == 1
    k = np.ones((1, y.shape[0])) if task_weights is None else np.atleast_2d(np.asarray(task_weights, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (k @ y0) / (k @ mask.astype(float))
    return out[0] if single else out


def bootstrap_intervals(
    scores: np.ndarray, n_boot: int = BOOTSTRAP_RESAMPLES, seed: int = 0, level: float = 0.95
) -> dict[str, np.ndarray]:
    """Percentile intervals of raw and task-adjusted means from bootstrap resamples of tasks.

    Returns ``raw`` and ``adjusted``, each (configs, 2) with the lower and upper bound.
    """
    y = np.asarray(scores, dtype=float)
    tasks = y.shape[0]
    rng = np.random.default_rng(seed)
    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    raw_draws = []
    adjusted_draws = []
    for start in range(0, n_boot, 2000):
        size = min(2000, n_boot - start)
        picks = rng.integers(0, tasks, size=(size, tasks))
        counts = np.zeros((size, tasks))
        np.add.at(counts, (np.arange(size)[:, None], picks), 1.0)
        raw_draws.append(raw_means(y, counts))
        adjusted_draws.append(adjusted_means(y, counts))
    raw = np.concatenate(raw_draws)
    adjusted = np.concatenate(adjusted_draws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column (never scored) stays NaN
        return {
            "raw": np.nanpercentile(raw, [lo, hi], axis=0).T,
            "adjusted": np.nanpercentile(adjusted, [lo, hi], axis=0).T,
        }


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def paired_comparisons(scores: np.ndarray, names: list[str]) -> list[dict[str, Any]]:
    """Every pair of configurations on their shared scored tasks, with Holm-corrected Wilcoxon p-values.

    ``mean_difference`` is first minus second. Pairs with fewer than two shared tasks get ``p = None``
    and are left out of the correction.
    """
    from scipy.stats import wilcoxon

    y = np.asarray(scores, dtype=float)
    rows: list[dict[str, Any]] = []
    for i, j in combinations(range(len(names)), 2):
        shared = ~np.isnan(y[:, i]) & ~np.isnan(y[:, j])
        diff = y[shared, i] - y[shared, j]
        p: float | None
        if diff.size < 2:
            p = None
        elif np.all(diff == 0):
            p = 1.0
        else:
            p = float(wilcoxon(y[shared, i], y[shared, j], alternative="two-sided").pvalue)
        rows.append(
            {
                "a": names[i],
                "b": names[j],
                "shared_tasks": int(diff.size),
                "mean_difference": float(diff.mean()) if diff.size else None,
                "p": p,
            }
        )
    tested = [r for r in rows if r["p"] is not None]
    for row, adjusted in zip(tested, holm([r["p"] for r in tested]), strict=True):
        row["p_holm"] = adjusted
    for row in rows:
        row.setdefault("p_holm", None)
    return rows


def design_connected(scores: np.ndarray) -> bool:
    """Whether the task-adjusted means are identifiable (the scored cells link every configuration)."""
    return _connected(~np.isnan(np.asarray(scores, dtype=float)))


def wilson_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial share ``successes / trials`` (NaN bounds when ``trials`` is 0).

    ``center = (p + z^2 / 2n) / (1 + z^2 / n)`` and
    ``half = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)``, with ``z`` the two-sided normal
    quantile of ``level``; the same as statsmodels' ``proportion_confint(method="wilson")``.
    """
    from scipy.stats import norm

    if trials <= 0:
        return (float("nan"), float("nan"))
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie between 0 and trials ({trials}), got {successes}")
    z = float(norm.ppf(0.5 + level / 2))
    p = successes / trials
    denominator = 1 + z * z / trials
    center = (p + z * z / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return (max(0.0, center - half), min(1.0, center + half))


def pooled_within_sd(groups: list[np.ndarray] | list[list[float]]) -> dict[str, float | int]:
    """Pooled within-task standard deviation of repeated runs (paper §3.6).

    ``groups``: the scores of each task's repeated runs. Tasks with fewer than two runs carry no
    within-task information and are left out. ``sd = sqrt(sum_t sum_i (y_ti - mean_t)^2 / sum_t (n_t - 1))``,
    the root mean square error of a one-way model with a mean per task. Returns ``sd`` (NaN without any
    repeated task), ``df`` (its degrees of freedom), ``tasks`` (tasks with repeats) and
    ``median_task_sd`` (median of the per-task SDs, ddof 1).
    """
    kept = [np.asarray(g, dtype=float) for g in groups if len(g) >= 2]
    if not kept:
        return {"sd": float("nan"), "df": 0, "tasks": 0, "median_task_sd": float("nan")}
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in kept)
    df = sum(g.size - 1 for g in kept)
    return {
        "sd": math.sqrt(ss / df),
        "df": int(df),
        "tasks": len(kept),
        "median_task_sd": float(np.median([g.std(ddof=1) for g in kept])),
    }


def pooled_sd_interval(
    groups: list[np.ndarray] | list[list[float]],
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of the pooled within-task SD from bootstrap resamples of the repeated tasks.

    NaN bounds with fewer than two repeated tasks (resampling one task says nothing about the spread).
    """
    kept = [np.asarray(g, dtype=float) for g in groups if len(g) >= 2]
    if len(kept) < 2:
        return (float("nan"), float("nan"))
    ss = np.array([float(((g - g.mean()) ** 2).sum()) for g in kept])
    df = np.array([g.size - 1 for g in kept], dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(kept), size=(n_boot, len(kept)))
    draws = np.sqrt(ss[picks].sum(axis=1) / df[picks].sum(axis=1))
    lo, hi = np.percentile(draws, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return (float(lo), float(hi))
