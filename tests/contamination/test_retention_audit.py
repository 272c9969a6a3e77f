"""Per-cell audit statistics, binomial tests, Benjamini-Hochberg, and simulated audits with planted
retrieval (environment/contamination/audit.py, simulate.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, false_discovery_control

from environment.contamination.audit import Prediction, audit_cell, load_table, run_audit
from environment.contamination.simulate import simulated_cell, simulated_labels


def _rows(pairs, model="m", benchmark="b", reasoning=""):
    return [
        Prediction(
            model=model, benchmark=benchmark, item_id=f"{i:03d}", prediction=p, label=y, reasoning=reasoning
        )
        for i, (p, y) in enumerate(pairs)
    ]


def test_cell_counts_and_binomial_p_values():
    pairs = [("-1.52", "-1.52"), ("-1.53", "-1.52"), ("-1.61", "-1.52"), ("-2.52", "-1.52"),
             ("3.07", "3.07"), ("3.00", "3.07"), ("251", "250"), ("x", "0.0481"),
             ("1.0", "1.5"), ("2.22", "2.2")]  # fmt: skip
    cell = audit_cell(_rows(pairs), seed=0)
    # the last two labels have two written figures and are left out; "x" is unparsed but audited
    assert (cell.n_items, cell.n_audited, cell.n_label_excluded, cell.n_prediction_unparsed) == (10, 8, 2, 1)
    assert (cell.m1, cell.m2, cell.m3) == (6, 5, 2)
    assert cell.r12 == pytest.approx(5 / 6) and cell.r23 == pytest.approx(2 / 5)
    assert cell.hit3 == pytest.approx(2 / 8)
    assert cell.p_r12 == pytest.approx(binomtest(5, 6, cell.null_r12, alternative="greater").pvalue)
    assert cell.p_r23 == pytest.approx(binomtest(2, 5, cell.null_r23, alternative="greater").pvalue)


def test_min_label_figures_changes_the_audited_set():
    pairs = [("1.5", "1.5"), ("2.50", "2.5"), ("3.33", "3.33")]
    assert audit_cell(_rows(pairs), min_label_figures=3).n_audited == 1
    assert audit_cell(_rows(pairs), min_label_figures=2).n_audited == 3


def test_untestable_retentions_are_left_out_of_the_family():
    cells = run_audit(
        _rows([("9.99", "1.11"), ("8.88", "2.22"), ("7.77", "3.33")])
        + _rows([("1.11", "1.11"), ("2.22", "2.22"), ("3.33", "3.33")], model="copy")
    )
    by_model = {c.model: c for c in cells.cells}
    assert by_model["m"].m1 == 0 and math.isnan(by_model["m"].p_r12) and math.isnan(by_model["m"].q_r12)
    assert cells.n_tests == 2


def test_bh_across_all_cells_of_the_run():
    rng = np.random.default_rng(0)
    labels = simulated_labels(150, rng)
    rows = []
    for model, kind, share in [("a", "planted", 0.1), ("b", "random", 0.0), ("c", "coarse", 0.0)]:
        for bench in ("x", "y"):
            rows += simulated_cell(labels, kind, rng, share=share, model=model, benchmark=bench)
    result = run_audit(rows, alpha=0.05, seed=3)
    p = [getattr(c, f"p_{n}") for c in result.cells for n in ("r12", "r23")]
    q = [getattr(c, f"q_{n}") for c in result.cells for n in ("r12", "r23")]
    keep = [i for i, v in enumerate(p) if not math.isnan(v)]
    expected = false_discovery_control([p[i] for i in keep], method="bh")
    assert np.allclose([q[i] for i in keep], expected)
    assert result.n_tests == len(keep)
    for c in result.cells:
        assert c.flagged == ((c.q_r12 <= 0.05) or (c.q_r23 <= 0.05))
    assert {c.model for c in result.flagged} == {"a"}


def test_same_benchmark_same_null_regardless_of_row_order():
    rng = np.random.default_rng(1)
    labels = simulated_labels(120, rng)
    rows = simulated_cell(labels, "random", rng, model="a") + simulated_cell(labels, "coarse", rng, model="b")
    forward, backward = run_audit(rows, seed=5), run_audit(rows[::-1], seed=5)
    assert [c.as_dict() for c in forward.cells] == [c.as_dict() for c in backward.cells]
    assert forward.cells[0].null_r12 == forward.cells[1].null_r12


def test_duplicate_items_and_bad_settings_rejected():
    with pytest.raises(ValueError, match="twice"):
        audit_cell(_rows([("1.11", "1.11")]) + _rows([("1.11", "1.11")]))
    with pytest.raises(ValueError):
        run_audit(_rows([("1.11", "1.11")]), alpha=1.5)


def test_first_figure_reference_correlation():
    rng = np.random.default_rng(2)
    labels = simulated_labels(300, rng)
    cell = run_audit(simulated_cell(labels, "coarse", rng)).cells[0]
    # The coarse predictor gets the first figure right and writes random digits below it; the reference
    # puts the middle of the interval there, so its correlation is higher and both are close to 1.
    assert 0.9 < cell.pearson_r < cell.reference_r < 1.0
    assert cell.below_reference is True


def test_load_table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("model,benchmark,reasoning,item_id,prediction,label,extra\nm,b,high,1,-1.50,-1.50,z\n")
    (row,) = load_table(path)
    assert (row.model, row.reasoning, row.prediction, row.label) == ("m", "high", "-1.50", "-1.50")
    (tmp_path / "bad.csv").write_text("model,item_id,prediction,label\n")
    with pytest.raises(ValueError, match="benchmark"):
        load_table(tmp_path / "bad.csv")


# --- simulated audits ------------------------------------------------------------------------------------


def _flag_rate(kind, share, sims, n=200, seed0=0):
    flagged, hit3 = 0, []
    for s in range(sims):
        rng = np.random.default_rng(seed0 + s)
        cell = run_audit(simulated_cell(simulated_labels(n, rng), kind, rng, share=share), seed=s).cells[0]
        flagged += cell.flagged
        hit3.append(cell.hit3)
    return flagged / sims, float(np.mean(hit3))


def test_planted_retrieval_detected_and_rate_recovered():
    # 10% of 200 labels copied verbatim: R23 of 20+ copies among ~30 two-figure matches against a null
    # near 0.1 has p < 1e-10, so every simulation must flag it.
    rate, hit3 = _flag_rate("planted", 0.10, sims=25)
    assert rate == 1.0
    # hit3 estimates the planted share plus the chance of a blind three-figure match (about 0.1%)
    assert hit3 == pytest.approx(0.10, abs=0.015)  # SE of the mean over 25 x 200 items is 0.004


def test_random_and_coarse_predictors_not_flagged():
    for kind in ("random", "coarse"):
        rate, _ = _flag_rate(kind, 0.0, sims=40, seed0=1000)
        assert rate <= 0.125, kind  # nominal 0.05; 0.125 is 2.2 binomial SE above it over 40 simulations


def test_false_discovery_rate_held_in_mixed_runs():
    # Runs of 12 cells: 4 planted (share 0.08), 4 random, 4 coarse. BH at 0.1 bounds the expected share
    # of false flags among flags by 0.1 * 8/12.
    alpha, fdp, power = 0.1, [], []
    for run in range(12):
        rng = np.random.default_rng(500 + run)
        rows = []
        for bench in range(4):
            labels = simulated_labels(150, rng)
            for model, kind, share in [("p", "planted", 0.08), ("r", "random", 0.0), ("c", "coarse", 0.0)]:
                rows += simulated_cell(labels, kind, rng, share=share, model=model, benchmark=f"b{bench}")
        result = run_audit(rows, alpha=alpha, seed=run)
        flags = result.flagged
        false = sum(c.model != "p" for c in flags)
        fdp.append(false / max(len(flags), 1))
        power.append(sum(c.model == "p" for c in flags) / 4)
    assert np.mean(fdp) <= alpha
    assert np.mean(power) >= 0.95


@pytest.mark.slow
def test_false_flag_rate_at_nominal_level_many_simulations():
    # 300 single-cell runs per predictor; the rate must stay within 2.5 SE of the nominal 0.05.
    for kind in ("random", "coarse"):
        rate, _ = _flag_rate(kind, 0.0, sims=300, n=300, seed0=20_000)
        assert rate <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / 300), kind


@pytest.mark.slow
def test_power_grows_with_planted_share():
    rates = [
        _flag_rate("planted", share, sims=60, n=300, seed0=40_000)[0] for share in (0.0, 0.01, 0.03, 0.06)
    ]
    assert rates[0] <= 0.12
    assert rates == sorted(rates)
    assert rates[-1] >= 0.95
