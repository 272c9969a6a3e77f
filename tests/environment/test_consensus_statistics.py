"""Consensus by mean rank, and the statistics across runs (additive model, bootstrap, Wilcoxon + Holm)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wilcoxon

from environment.consensus import ConsensusError, consensus, consensus_details
from environment.statistics import (
    adjusted_means,
    bootstrap_intervals,
    design_connected,
    holm,
    paired_comparisons,
    raw_means,
)


def sub(task, a, b):
    return {
        "task_id": task.task_id,
        "task_version": "1",
        "rankings": [{"group_id": "a", "order": a}, {"group_id": "b", "order": b}],
    }


def test_consensus_by_mean_rank_with_id_tie_break(two_group_task):
    task = two_group_task[0]
    s1 = sub(task, ["a1", "a2", "a3", "a4", "a5"], ["b1", "b2", "b3", "b4"])
    s2 = sub(task, ["a2", "a1", "a3", "a5", "a4"], ["b2", "b1", "b4", "b3"])
    # a: mean ranks a1=1.5, a2=1.5, a3=3, a4=4.5, a5=4.5 -> ties broken by id
    result = consensus([s1, s2], task)
    assert result["rankings"][0]["order"] == ["a1", "a2", "a3", "a4", "a5"]
    assert result["rankings"][1]["order"] == ["b1", "b2", "b3", "b4"]
    assert consensus([s2, s1], task) == result


def test_consensus_skips_invalid_groups_and_files(two_group_task):
    task = two_group_task[0]
    good = sub(task, ["a5", "a4", "a3", "a2", "a1"], ["b4", "b3", "b2", "b1"])
    partial = sub(task, ["a1", "a2"], ["b1", "b2", "b3", "b4"])
    details = consensus_details([good, partial, b"not json"], task)
    assert details["submission"]["rankings"][0]["order"] == ["a5", "a4", "a3", "a2", "a1"]
    # b: mean ranks b4 = (1 + 4) / 2 = 2.5, b3 = 2.5, b2 = 2.5, b1 = 2.5 -> all tie -> id order
    assert details["submission"]["rankings"][1]["order"] == ["b1", "b2", "b3", "b4"]
    assert [g["n_submissions"] for g in details["groups"]] == [1, 2]
    assert {s["index"] for s in details["skipped"]} == {1, 2}
    with pytest.raises(ConsensusError, match="group 'a'"):
        consensus([partial], task)


def _lstsq_adjusted(y):
    tasks, configs = y.shape
    rows, ys = [], []
    for t in range(tasks):
        for c in range(configs):
            if not np.isnan(y[t, c]):
                x = np.zeros(tasks + configs)
                x[t] = x[tasks + c] = 1
                rows.append(x)
                ys.append(y[t, c])
    solution = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
    return solution[tasks:] + solution[:tasks].mean()


def test_adjusted_means_match_least_squares_on_an_unbalanced_table():
    rng = np.random.default_rng(3)
    y = rng.normal(0.3, 0.2, (30, 5))[:, :1] + rng.normal(0, 0.1, 5) + rng.normal(0, 0.05, (30, 5))
    y[rng.random(y.shape) < 0.3] = np.nan
    y[0] = 0.5  # keep the design connected
    assert adjusted_means(y) == pytest.approx(_lstsq_adjusted(y), abs=1e-10)


def test_adjusted_mean_corrects_for_task_difficulty():
    # config B scored only the hard task; additive truth: task effects 0.8 / 0.0, A = +0.1 above B
    y = np.array([[0.9, np.nan], [0.1, 0.0]])
    assert raw_means(y).tolist() == pytest.approx([0.5, 0.0])
    assert adjusted_means(y).tolist() == pytest.approx([0.5, 0.4])
    assert design_connected(y)
    assert not design_connected(np.array([[0.1, np.nan], [np.nan, 0.2]]))


def test_bootstrap_intervals_are_deterministic_and_cover_the_mean():
    rng = np.random.default_rng(0)
    y = rng.normal(0.4, 0.3, (40, 3))
    first = bootstrap_intervals(y, n_boot=2000, seed=1)
    assert first["raw"].tolist() == bootstrap_intervals(y, n_boot=2000, seed=1)["raw"].tolist()
    means = y.mean(axis=0)
    assert np.all(first["raw"][:, 0] < means) and np.all(means < first["raw"][:, 1])
    # width close to 2 * 1.96 * sd / sqrt(n)
    width = first["raw"][:, 1] - first["raw"][:, 0]
    assert width == pytest.approx(2 * 1.96 * y.std(axis=0) / np.sqrt(40), rel=0.2)


def test_holm_matches_statsmodels():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests

    p = [0.01, 0.04, 0.03, 0.2, 0.001]
    assert holm(p) == pytest.approx(multipletests(p, method="holm")[1].tolist())


def test_paired_comparisons_use_shared_tasks():
    y = np.array(
        [
            [0.5, 0.1, np.nan],
            [0.6, 0.2, 0.3],
            [0.7, 0.2, np.nan],
            [0.4, 0.3, 0.1],
            [0.9, 0.1, 0.2],
            [0.8, 0.4, 0.6],
        ]
    )
    rows = paired_comparisons(y, ["A", "B", "C"])
    ab = rows[0]
    assert (ab["a"], ab["b"], ab["shared_tasks"]) == ("A", "B", 6)
    assert ab["mean_difference"] == pytest.approx(np.mean(y[:, 0] - y[:, 1]))
    assert ab["p"] == pytest.approx(wilcoxon(y[:, 0], y[:, 1]).pvalue)
    assert [r["p_holm"] for r in rows] == pytest.approx(holm([r["p"] for r in rows]))
    assert rows[1]["shared_tasks"] == 4
