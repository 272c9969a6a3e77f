"""The honest-noise control: what a predictor as accurate as the model, but without retrieval, retains.

A retention above the molecule-blind null says a model resolves digits the label distribution alone does
not give away. An honest model can do that at the second figure simply by being accurate: when its errors
are small next to the interval its first figure leaves open (1 for a label like ``-3.47``), matching the
first figure often comes with matching the second too, and R12 rises above the null without any retrieval.
The third figure (R23) needs errors below a hundredth of that interval, which measured data does not allow.

The control simulates that honest predictor for one cell. Its errors are the model's own, expressed in
units of each label's first-figure interval (``(prediction - label) / 10^exponent(label)``), taken from
the items the model did *not* reproduce to three figures, so verbatim copies, the retrieval under test, do
not shrink the spread. The centre this empties is refilled as a smooth honest error density would fill
it: with as many zero errors as the mean count of the two neighbouring cells (errors of one third-figure
unit, 0.01, either way), never more than were left out. The errors are drawn by bootstrap, with
replacement, onto every audited label (from the errors on labels of the same order of magnitude when there
are at least 20 of them, else from all), each with uniform jitter of half a third-figure unit either way
(the rounding of a written answer). Each simulated prediction is written to three significant figures, as
the audit asks of a model, and scored exactly as the model is: nested matches, retentions, one-sided
binomial tests against the same null.

Measured by ``bench/scoring_rules.py`` (30 cells of 300 labels per kind): honest models with error SD
0.05 to 0.2 are flagged in all 90 cells, mostly on R12 alone, and only 4 of those flags go beyond the
control; a model that copies 5% of labels and predicts the rest with SD 0.2 is flagged beyond it in 30 of
30 cells.

Per retention it reports the control's mean retention, how often the control's own test is significant
at ``alpha`` (uncorrected, which favours the control and makes the comparison conservative), and a Monte
Carlo p-value: the share of simulations whose own binomial p-value is at most the model's (evidence at
least as strong; counts, not only ratios, enter), ``(1 + count) / (1 + sims)``. A flag whose evidence the
control reaches easily is explained by honest accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from environment.contamination.digits import DigitKey


@dataclass(frozen=True)
class HonestControl:
    """The honest-noise control of one cell (NaN fields when there is no error to resample).

    ``error_scale``: ``min(sd, IQR / 1.34)`` of the model's scaled errors, in units of the first figure's
    interval; ``n_errors``: how many errors were resampled.
    """

    sims: int
    n_errors: int
    error_scale: float
    r12: float
    r23: float
    flag_rate_r12: float
    flag_rate_r23: float
    p_r12: float
    p_r23: float


EMPTY = HonestControl(0, 0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)


def label_arrays(labels: Sequence[DigitKey]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sign (True for negative), exponent and the three digits as one integer 100..999, per label key."""
    negative = np.array([k.negative for k in labels], dtype=bool)
    exponent = np.array([k.exponent for k in labels], dtype=np.int64)
    digits = np.array([100 * k.digits[0] + 10 * k.digits[1] + k.digits[2] for k in labels], dtype=np.int64)
    return negative, exponent, digits


def float_keys(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`environment.contamination.digits.digit_key` for floats: rounded to three
    significant figures half away from zero. Returns sign, exponent, digits (100..999) and a mask of the
    values that have a key (finite and non-zero)."""
    x = np.asarray(values, dtype=float)
    magnitude = np.abs(x)
    valid = np.isfinite(x) & (magnitude > 0)
    safe = np.where(valid, magnitude, 1.0)
    exponent = np.floor(np.log10(safe)).astype(np.int64)
    for _ in range(2):  # log10 can land one off next to a power of ten; rounding can carry to 1000
        digits = np.floor(safe / 10.0 ** (exponent - 2).astype(float) + 0.5).astype(np.int64)
        exponent = np.where(digits >= 1000, exponent + 1, np.where(digits < 100, exponent - 1, exponent))
    digits = np.floor(safe / 10.0 ** (exponent - 2).astype(float) + 0.5).astype(np.int64)
    return x < 0, exponent, digits, valid


def match_counts(
    predicted: np.ndarray, labels: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nested matches at 1, 2, 3 figures of float predictions (sims x items) against label keys."""
    negative, exponent, digits, valid = float_keys(predicted)
    label_negative, label_exponent, label_digits = labels
    same = valid & (negative == label_negative) & (exponent == label_exponent)
    first = same & (digits // 100 == label_digits // 100)
    second = first & ((digits // 10) % 10 == (label_digits // 10) % 10)
    third = second & (digits % 10 == label_digits % 10)
    return first.sum(axis=-1), second.sum(axis=-1), third.sum(axis=-1)


#: One unit of the third significant figure, in units of the first figure's interval.
THIRD_FIGURE_UNIT = 0.01
#: Errors needed on labels of one order of magnitude before those labels draw only from them.
MIN_STRATUM = 20


def error_scale(errors: np.ndarray) -> float:
    """Spread of the errors: ``min(sd, IQR / 1.34)`` (the sd alone when the IQR is 0)."""
    if errors.size < 2:
        return 0.0
    sd = float(np.std(errors, ddof=1))
    q75, q25 = np.percentile(errors, [75, 25])
    iqr = float(q75 - q25) / 1.34
    return min(sd, iqr) if iqr > 0 else sd


def scaled_errors(
    predictions: Sequence[float | None],
    labels: Sequence[float],
    keys: Sequence[DigitKey],
    depths: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """The model's errors in units of each label's first-figure interval, and each error's label exponent.

    Items matched at three figures (where retrieval shows) are left out, and the centre they leave empty is
    refilled as an honest error density would fill it: with as many zero errors as the mean count of the
    two neighbouring cells (errors of about -1 and +1 third-figure units), never more than were left out.
    Without the refill an accurate honest model's own centre would be cut away and the control would
    understate it.
    """
    kept: list[tuple[float, int]] = []
    centre: list[int] = []
    for p, y, key, depth in zip(predictions, labels, keys, depths, strict=True):
        if p is None:
            continue
        if depth >= 3:
            centre.append(key.exponent)
        else:
            kept.append(((p - y) / 10.0**key.exponent, key.exponent))
    errors = np.asarray([e for e, _ in kept], dtype=float)
    exponents = np.asarray([x for _, x in kept], dtype=np.int64)
    if centre and errors.size:
        cells = np.rint(errors / THIRD_FIGURE_UNIT)
        neighbours = float(np.sum(np.abs(cells) == 1)) / 2
        refill = min(len(centre), round(neighbours))
        if refill:
            errors = np.concatenate([errors, np.zeros(refill)])
            exponents = np.concatenate([exponents, np.asarray(centre[:refill], dtype=np.int64)])
    return errors, exponents


def _draws(pool: np.ndarray, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    jitter = rng.uniform(-THIRD_FIGURE_UNIT / 2, THIRD_FIGURE_UNIT / 2, size=shape)
    return pool[rng.integers(0, pool.size, size=shape)] + jitter


def honest_control(
    keys: Sequence[DigitKey],
    labels: Sequence[float],
    errors: tuple[np.ndarray, np.ndarray],
    null_r12: float,
    null_r23: float,
    model_p_r12: float,
    model_p_r23: float,
    sims: int,
    seed: int | Sequence[int],
    alpha: float,
) -> HonestControl:
    """Simulate ``sims`` honest predictors for one cell; see the module docstring."""
    from scipy.stats import binom

    pool, pool_exponents = errors
    if sims < 1 or pool.size == 0 or not keys:
        return EMPTY
    rng = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=float)
    exponents = np.array([k.exponent for k in keys], dtype=np.int64)
    unit = 10.0 ** exponents.astype(float)
    drawn = np.empty((sims, y.size))
    # a label draws from the errors on labels of its own order of magnitude when there are enough of them
    # (an error on 0.35 and one on 3.5 are not interchangeable in every benchmark), else from all errors
    pooled = np.ones(y.size, dtype=bool)
    for exponent in np.unique(exponents):
        stratum = pool[pool_exponents == exponent]
        if stratum.size >= MIN_STRATUM:
            columns = np.flatnonzero(exponents == exponent)
            drawn[:, columns] = _draws(stratum, (sims, columns.size), rng)
            pooled[columns] = False
    if pooled.any():
        columns = np.flatnonzero(pooled)
        drawn[:, columns] = _draws(pool, (sims, columns.size), rng)
    m1, m2, m3 = match_counts(y[None, :] + drawn * unit[None, :], label_arrays(keys))
    with np.errstate(invalid="ignore", divide="ignore"):
        r12 = np.where(m1 > 0, m2 / np.maximum(m1, 1), np.nan)
        r23 = np.where(m2 > 0, m3 / np.maximum(m2, 1), np.nan)

    def p_values(successes: np.ndarray, trials: np.ndarray, null: float) -> np.ndarray:
        # one-sided binomial p per simulation (binomtest "greater" is P(X >= successes)); NaN if untested
        if math.isnan(null):
            return np.full(successes.shape, np.nan)
        with np.errstate(invalid="ignore"):
            p = binom.sf(successes - 1, trials, min(max(null, 0.0), 1.0))
        return np.where(trials > 0, p, np.nan)

    def rate(p: np.ndarray) -> float:
        tested = np.isfinite(p)
        return float(np.mean(p[tested] <= alpha)) if tested.any() else math.nan

    def mc_p(p: np.ndarray, observed: float) -> float:
        # share of simulations whose own evidence is at least as strong as the model's
        if math.isnan(observed):
            return math.nan
        reached = np.nan_to_num(p, nan=2.0) <= observed * (1 + 1e-9)
        return float((1 + reached.sum()) / (1 + sims))

    def mean(values: np.ndarray) -> float:
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    p12, p23 = p_values(m2, m1, null_r12), p_values(m3, m2, null_r23)
    return HonestControl(
        sims=sims,
        n_errors=int(pool.size),
        error_scale=error_scale(pool),
        r12=mean(r12),
        r23=mean(r23),
        flag_rate_r12=rate(p12),
        flag_rate_r23=rate(p23),
        p_r12=mc_p(p12, model_p_r12),
        p_r23=mc_p(p23, model_p_r23),
    )
