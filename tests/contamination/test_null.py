"""The molecule-blind null (environment/contamination/null.py): modal continuation of the matched prefix,
fitted on one half of the labels and scored on the other."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from environment.contamination.digits import digit_key, format_figures
from environment.contamination.null import _PrefixCodes, null_retention


def _brute_force_hits(keys, fit, score, k):
    """Straight re-implementation of the modal continuation with back-off, for comparison."""
    hits = []
    for i in score:
        predicted = None
        for j in range(k - 1, -1, -1):
            counts = Counter(keys[f].digits[k - 1] for f in fit if keys[f].prefix(j) == keys[i].prefix(j))
            if counts:
                best = max(counts.values())
                predicted = min(d for d, c in counts.items() if c == best)
                break
        if predicted is None:
            counts = Counter(keys[f].digits[k - 1] for f in fit)
            best = max(counts.values())
            predicted = min(d for d, c in counts.items() if c == best)
        hits.append(predicted == keys[i].digits[k - 1])
    return hits


def test_modal_continuation_by_hand():
    fit_labels = ["1.23", "1.25", "1.25", "1.31", "-1.23", "2.47"]
    score_labels = ["1.25", "1.29", "1.35", "-1.20", "2.40", "7.77", "12.5"]
    keys = [digit_key(y) for y in fit_labels + score_labels]
    codes = _PrefixCodes(keys)
    fit, score = np.arange(6), np.arange(6, 13)
    # second digit after "1." (positive, exp 0): 2, 2, 2, 3 -> mode 2; third after "1.2": 3, 5, 5 -> mode 5
    # 1.25: d2 2 == 2 hit, d3 5 == 5 hit;  1.29: d2 hit, d3 9 != 5;  1.35: d2 3 != 2, d3 after "1.3" -> 1, 5
    # != 1
    # -1.20: negative prefix seen once (-1.23): d2 2 hit, d3 0 != 3;  2.40: "2." -> 4 hit, "2.4" -> 7, miss
    # 7.77: (positive, exp 0) seen, no "7" -> back off to (positive, exp 0): d2 counts 2,2,2,3,4 -> 2, miss;
    #        d3 after (positive, exp 0): 3,5,5,1,7 -> 5, miss
    # 12.5: exponent 1 unseen -> all fitted labels: d2 2,2,2,3,2,4 -> 2 hit; d3 3,5,5,1,3,7 -> 3 (tie 3/5 ->
    # 3)
    assert codes.modal_hits(fit, score, 2).tolist() == [True, True, False, True, True, False, True]
    assert codes.modal_hits(fit, score, 3).tolist() == [True, False, False, False, False, False, False]


def test_vectorised_matches_brute_force():
    rng = np.random.default_rng(7)
    labels = [format_figures(float(x)) for x in rng.normal(-2, 3, size=300)]
    keys = [digit_key(y) for y in labels if digit_key(y) is not None]
    codes = _PrefixCodes(keys)
    order = rng.permutation(len(keys))
    fit, score = order[: len(keys) // 2], order[len(keys) // 2 :]
    for k in (2, 3):
        assert codes.modal_hits(fit, score, k).tolist() == _brute_force_hits(keys, fit, score, k)


def test_null_is_one_when_every_continuation_is_fixed():
    labels = [digit_key(y) for y in ["1.23", "4.56", "-7.89", "0.0123"] * 10]
    null = null_retention(labels, seed=0)
    assert (null.r12, null.r23) == (1.0, 1.0)
    assert (null.n_fit, null.n_eval) == (20, 20)


def test_null_of_uniform_digits_is_chance():
    # Labels with uniform independent digits: no blind predictor beats 1 in 10 at the second or third figure.
    rng = np.random.default_rng(3)
    labels = [
        digit_key(f"{rng.integers(1, 10)}.{rng.integers(0, 10)}{rng.integers(0, 10)}") for _ in range(4000)
    ]
    null = null_retention(labels, seed=1, splits=5)
    assert null.r12 == pytest.approx(0.1, abs=0.015)
    assert null.r23 == pytest.approx(0.1, abs=0.015)


def test_null_finds_a_preferred_continuation():
    # The second digit is 5 with probability 0.6, otherwise uniform over the other nine: mode 5, rate 0.6.
    rng = np.random.default_rng(4)
    labels = []
    for _ in range(3000):
        d2 = 5 if rng.random() < 0.6 else int(rng.choice([0, 1, 2, 3, 4, 6, 7, 8, 9]))
        labels.append(digit_key(f"{rng.integers(1, 10)}.{d2}{rng.integers(0, 10)}"))
    null = null_retention(labels, seed=2)
    assert null.r12 == pytest.approx(0.6, abs=0.03)  # binomial SE over 1500 held-out labels is 0.013
    assert null.r23 == pytest.approx(0.1, abs=0.03)


def test_null_fitted_on_held_out_half_is_below_in_sample_fit():
    # With one label per prefix, fitting and scoring on the same labels would give 1.0; held out it is chance.
    rng = np.random.default_rng(5)
    labels = [digit_key(f"{a}.{b}{c}") for a, b, c in rng.integers(1, 10, size=(60, 3))]
    null = null_retention(labels, seed=0, splits=10)
    assert null.r23 < 0.4


def test_null_seeded_and_small_inputs():
    rng = np.random.default_rng(6)
    labels = [digit_key(format_figures(float(x))) for x in rng.normal(size=200)]
    assert null_retention(labels, seed=11) == null_retention(labels, seed=11)
    assert null_retention(labels, seed=11, splits=1) != null_retention(labels, seed=12, splits=1)
    tiny = null_retention(labels[:1], seed=0)
    assert math.isnan(tiny.r12) and math.isnan(tiny.r23)
    with pytest.raises(ValueError):
        null_retention(labels, seed=0, splits=0)
