"""Spearman with average ranks for ties, pairs in order and top-1 hit, against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from spu_common.rank_agreement import (
    average_ranks,
    average_ranks_rows,
    pairs_in_order,
    spearman_of_order,
    spearman_of_values,
    top1_hit,
)


def test_average_ranks_share_the_mean_of_tied_positions():
    # values 5, 1, 3, 3, 3: 1 -> rank 1; the three 3s span ranks 2..4 -> 3 each; 5 -> rank 5
    assert average_ranks([5, 1, 3, 3, 3]).tolist() == [5.0, 1.0, 3.0, 3.0, 3.0]
    assert average_ranks([2, 2]).tolist() == [1.5, 1.5]


def test_spearman_with_ties_by_hand():
    # measured x: e1=1, e2=2, e3=2, e4=4 -> ranks 1, 2.5, 2.5, 4 (mean 2.5): centered -1.5, 0, 0, 1.5
    # submitted order e2, e1, e4, e3 -> submitted ranks e1=2, e2=1, e3=4, e4=3: centered -0.5, -1.5, 1.5, 0.5
    # covariance sum: (-1.5)(-0.5) + 0 + 0 + (1.5)(0.5) = 1.5
    # norms: sqrt(1.5^2 + 1.5^2) = sqrt(4.5); sqrt(0.25 + 2.25 + 2.25 + 0.25) = sqrt(5)
    values = {"e1": 1.0, "e2": 2.0, "e3": 2.0, "e4": 4.0}
    rho = spearman_of_order(["e2", "e1", "e4", "e3"], values)
    assert rho == pytest.approx(1.5 / math.sqrt(4.5 * 5.0), abs=1e-12)  # 0.316227766...
    assert rho == pytest.approx(0.31622776601683794, abs=1e-12)


def test_spearman_without_ties_matches_the_textbook_formula():
    # 1 - 6 sum d^2 / (n (n^2 - 1)); order c, a, b, e, d over values a<b<c<d<e:
    # submitted ranks a=2, b=3, c=1, d=5, e=4; measured 1..5; d = 1, 1, -2, 1, -1 -> sum d^2 = 8
    values = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    assert spearman_of_order(["c", "a", "b", "e", "d"], values) == pytest.approx(1 - 6 * 8 / (5 * 24))


def test_measured_order_and_its_reverse():
    values = {"a": 0.1, "b": 0.5, "c": 0.9}
    assert spearman_of_order(["a", "b", "c"], values) == pytest.approx(1.0)
    assert spearman_of_order(["c", "b", "a"], values) == pytest.approx(-1.0)


def test_all_tied_gives_nan():
    assert math.isnan(spearman_of_order(["a", "b"], {"a": 1.0, "b": 1.0}))


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=4), min_size=2, max_size=30),
    st.randoms(use_true_random=False),
)
def test_spearman_matches_scipy(values, rnd):
    ids = [f"e{i}" for i in range(len(values))]
    order = ids[:]
    rnd.shuffle(order)
    measured = dict(zip(ids, values, strict=True))
    ours = spearman_of_order(order, measured)
    submitted_rank = {e: i for i, e in enumerate(order)}
    expected = spearmanr([measured[e] for e in ids], [submitted_rank[e] for e in ids]).statistic
    if np.isnan(expected):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(expected, abs=1e-12)
    assert spearman_of_values([measured[e] for e in ids], [submitted_rank[e] for e in ids]) == pytest.approx(
        ours, abs=1e-12, nan_ok=True
    )


def test_pairs_in_order_ignores_tied_pairs():
    # order a, b, c, d with values 1, 3, 2, 2: pairs (a,b) in order, (a,c) in, (a,d) in, (b,c) out, (b,d) out,
    # (c,d) tied -> excluded: 3 of 5
    assert pairs_in_order(["a", "b", "c", "d"], {"a": 1, "b": 3, "c": 2, "d": 2}) == pytest.approx(0.6)


def test_top1_hit_counts_ties_at_the_top():
    values = {"a": 1, "b": 5, "c": 5}
    assert top1_hit(["a", "c", "b"], values)
    assert top1_hit(["a", "b", "c"], values)
    assert not top1_hit(["b", "c", "a"], values)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([-2.5, -1.0, 0.0, 1.0, 1.0, 3.0, 7.25, 1e300]) | st.floats(-1e6, 1e6), max_size=20
    )
)
def test_small_rankings_in_python_equal_scipys_average_ranks(values):
    # up to SMALL_RANKING values are ranked in plain Python (a 10,000-group build ranks 160,000 times): the
    # same ranks, ties averaged, as scipy's rankdata
    from scipy.stats import rankdata

    ranks = average_ranks(values)
    assert ranks.dtype == np.float64 and ranks.shape == (len(values),)
    assert np.array_equal(ranks, rankdata(values, method="average"))


_cells = st.sampled_from([-1.0, 0.0, 1.0, 2.5, float("nan"), float("inf")]) | st.floats(-1e6, 1e6)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 30).flatmap(
        lambda n: st.lists(st.lists(_cells, min_size=n, max_size=n), min_size=1, max_size=8)
    )
)
def test_a_panel_ranked_at_once_equals_each_row_ranked_alone(rows):
    # the screen ranks a group's whole panel in one call: row for row what average_ranks gives, ties
    # averaged, NaN each its own run at the end
    ranks = average_ranks_rows(np.array(rows, dtype=float))
    assert ranks.shape == (len(rows), len(rows[0]))
    for row, ranked in zip(rows, ranks, strict=True):
        assert np.array_equal(ranked, average_ranks(row))
