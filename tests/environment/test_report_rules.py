"""`spu report` under the paper's rules: above chance per run (not per mean of repeats), Wilson intervals,
pooled within-task SD of repeated runs, strict and recovered means with rejected and recovered counts.
Hand-computed values in the comments; statistics checked against statsmodels and scipy."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from env_task_factory import write_task
from typer.testing import CliRunner

from environment.report import build_report
from environment.statistics import pooled_sd_interval, pooled_within_sd, wilson_interval
from spu.cli import app

runner = CliRunner()
sm = pytest.importorskip("statsmodels.api")
proportion_confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
smf = pytest.importorskip("statsmodels.formula.api")

FIVE = {"g": {"e1": 1.0, "e2": 2.0, "e3": 3.0, "e4": 4.0, "e5": 5.0}}
TWO = {
    "a": {"a1": 1.0, "a2": 3.0, "a3": 3.0, "a4": 5.0, "a5": 2.0},
    "b": {"b1": 10.0, "b2": 30.0, "b3": 20.0, "b4": 40.0},
}
RECOVERED = 0.5 * math.sqrt(0.95) + 0.5  # order a1 a5 a3 a2 a4 (tie a2 = a3) and the measured order of b


def write_run(path, data):
    path.mkdir(parents=True, exist_ok=True)
    (path / "rankings.json").write_text(json.dumps(data))


def five_order(order):
    return {"task_id": "five", "rankings": [{"group_id": "g", "order": order}]}


def test_above_chance_is_decided_per_run_and_repeats_give_the_within_task_sd(tmp_path):
    write_task(tmp_path / "tasks" / "five", FIVE, task_id="five")
    runs = tmp_path / "runs"
    # rho: identity 1.0; first two swapped 1 - 6 * 2 / (5 * 24) = 0.9; reversed -1.0. Mean 0.3.
    write_run(runs / "rep" / "five" / "r1", five_order(["e1", "e2", "e3", "e4", "e5"]))
    write_run(runs / "rep" / "five" / "r2", five_order(["e2", "e1", "e3", "e4", "e5"]))
    write_run(runs / "rep" / "five" / "r3", five_order(["e5", "e4", "e3", "e2", "e1"]))
    write_run(runs / "single" / "five", five_order(["e1", "e2", "e3", "e4", "e5"]))
    summary = build_report(
        runs, tmp_path / "out", tasks_dir=tmp_path / "tasks", answers=tmp_path / "tasks", n_boot=200
    )
    threshold = summary["tasks"][0]["chance_threshold"]
    # five experiments: P(rho >= 0.9) = 5/120 < 5% <= P(rho >= 0.8) = 8/120, so the 95th percentile is 0.8
    assert threshold == pytest.approx(0.8)
    rows = {r["configuration"]: r for r in summary["configurations"]}
    rep = rows["rep"]
    assert rep["raw_mean"] == pytest.approx(0.3)
    # per run: 1.0 and 0.9 beat 0.8, -1.0 does not; the old rule compared the mean 0.3 and found 0 tasks
    assert rep["above_chance_runs"]["count"] == 2 and rep["above_chance_runs"]["of"] == 3
    assert rep["above_chance_runs"]["wilson_ci"] == pytest.approx(
        list(proportion_confint(2, 3, alpha=0.05, method="wilson")), abs=1e-12
    )
    assert rep["above_chance"] == 1 and rep["above_chance_tasks"]["count"] == 1  # 2 of 3 runs: majority
    # deviations from 0.3: 0.7, 0.6, -1.3 -> SS 2.54 on 2 degrees of freedom
    assert rep["within_task_sd"] == pytest.approx(math.sqrt(2.54 / 2), abs=1e-12)
    assert rep["tasks_with_repeats"] == 1 and rep["within_task_sd_df"] == 2
    assert rep["within_task_sd_ci"] == [None, None]  # one repeated task: no interval over tasks
    assert rows["single"]["within_task_sd"] is None and rows["single"]["tasks_with_repeats"] == 0
    with open(tmp_path / "out" / "runs.csv", newline="") as handle:
        above = {
            row["configuration"] + "/" + row["run"]: row["above_chance"] for row in csv.DictReader(handle)
        }
    assert above == {"rep/r1": "True", "rep/r2": "True", "rep/r3": "False", "single/1": "True"}
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "## Above chance and run-to-run variation" in markdown
    assert "| rep | 2/3 (67%) [" in markdown and "| 1.127 | 1 | 1.127 |" in markdown  # SD, tasks, median


def test_strict_and_recovered_means_count_rejected_and_recovered_files(tmp_path):
    write_task(tmp_path / "tasks" / "two", TWO, task_id="two")
    runs = tmp_path / "runs"
    # r1: an alternative ordering key in one group -> the strict grader rejects the whole file
    write_run(
        runs / "fmt" / "two" / "r1",
        {"task_id": "two", "rankings": [
            {"group_id": "a", "item_ids": ["a1", "a5", "a3", "a2", "a4"]},
            {"group_id": "b", "order": ["b1", "b3", "b2", "b4"]},
        ]},
    )  # fmt: skip
    # r2: strictly valid with an extra "version" key -> scored as is, never touched by recovery
    write_run(
        runs / "fmt" / "two" / "r2",
        {"task_id": "two", "version": "9", "rankings": [
            {"group_id": "a", "order": ["a1", "a5", "a3", "a2", "a4"]},
            {"group_id": "b", "order": ["b1", "b3", "b2", "b4"]},
        ]},
    )  # fmt: skip
    summary = build_report(
        runs, tmp_path / "out", tasks_dir=tmp_path / "tasks", answers=tmp_path / "tasks", n_boot=200
    )
    row = summary["configurations"][0]
    assert row["rejected_runs"] == 1 and row["recovered_runs"] == 1 and row["scored_runs"] == 2
    assert row["mean_at_minus_one"] == pytest.approx((-1 + RECOVERED) / 2, abs=1e-12)
    assert row["mean_after_recovery"] == pytest.approx(RECOVERED, abs=1e-12)
    assert row["raw_mean"] == pytest.approx(RECOVERED, abs=1e-12)
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert f"| {(-1 + RECOVERED) / 2:.3f} | {RECOVERED:.3f} | 1 | 1 | 0 | 0 |" in markdown


RANDOM_TASKS = {
    f"rand{k}": {
        f"g{j}": {f"k{k}g{j}e{i}": float((7 * i + 3 * j + k) % (n + 1)) for i in range(n)}
        for j, n in enumerate(sizes)
    }
    for k, sizes in enumerate([(5,), (6,), (7,), (8,), (4, 6), (5, 5), (9,), (6, 7)])
}


def test_random_model_runs_are_above_chance_about_five_percent_of_the_time(tmp_path):
    rng = np.random.default_rng(2026)
    runs = tmp_path / "runs"
    for task_id, groups in RANDOM_TASKS.items():
        write_task(tmp_path / "tasks" / task_id, groups, task_id=task_id)
        for r in range(60):
            rankings = [{"group_id": g, "order": list(rng.permutation(list(v)))} for g, v in groups.items()]
            write_run(runs / "random" / task_id / f"r{r:02d}", {"task_id": task_id, "rankings": rankings})
    summary = build_report(
        runs, tmp_path / "out", tasks_dir=tmp_path / "tasks", answers=tmp_path / "tasks", n_boot=300
    )
    row = summary["configurations"][0]
    share = row["above_chance_runs"]
    assert share["of"] == 480
    # per run the threshold is a 5% test; with discrete small-task scores it sits at or below 5%
    assert 0.02 <= share["share"] <= 0.08, share
    low, high = share["wilson_ci"]
    assert low < 0.05 < high
    # the mean of 60 random runs never beats a single-run threshold, nor does the majority of runs
    assert row["above_chance_tasks"]["count"] == 0

    # statistics on these synthetic runs with repeats, against statsmodels
    with open(tmp_path / "out" / "runs.csv", newline="") as handle:
        records = [r for r in csv.DictReader(handle) if r["scored"] == "True"]
    import pandas as pd

    frame = pd.DataFrame({"task": [r["task_id"] for r in records], "y": [float(r["score"]) for r in records]})
    fit = smf.ols("y ~ C(task)", data=frame).fit()
    assert row["within_task_sd"] == pytest.approx(math.sqrt(fit.mse_resid), rel=1e-10)
    assert row["within_task_sd_df"] == int(fit.df_resid) == 480 - 8
    low, high = row["within_task_sd_ci"]
    assert low < row["within_task_sd"] < high
    assert share["wilson_ci"] == pytest.approx(
        list(proportion_confint(share["count"], 480, alpha=0.05, method="wilson")), abs=1e-12
    )


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 10), (3, 10), (10, 10), (1, 2), (57, 480), (29, 29)])
def test_wilson_interval_matches_statsmodels(k, n):
    for level in (0.95, 0.9):
        expected = proportion_confint(k, n, alpha=1 - level, method="wilson")
        assert wilson_interval(k, n, level) == pytest.approx(expected, abs=1e-12)


def test_wilson_interval_edge_cases():
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(4, 3)


def test_pooled_within_sd_matches_a_one_way_model_on_unbalanced_repeats():
    import pandas as pd

    rng = np.random.default_rng(7)
    groups = [np.clip(rng.normal(rng.uniform(-0.5, 0.8), 0.15, size=n), -1, 1) for n in (2, 5, 3, 4, 5, 2, 1)]
    frame = pd.DataFrame(
        {"task": [f"t{i}" for i, g in enumerate(groups) for _ in g], "y": np.concatenate(groups)}
    )
    kept = frame[frame.groupby("task")["y"].transform("size") >= 2]  # a single run has no within-task spread
    fit = smf.ols("y ~ C(task)", data=kept).fit()
    result = pooled_within_sd(groups)
    assert result["sd"] == pytest.approx(math.sqrt(fit.mse_resid), rel=1e-12)
    assert result["df"] == int(fit.df_resid) == 21 - 6  # 21 runs in the 6 tasks with repeats
    assert result["tasks"] == 6
    assert result["median_task_sd"] == pytest.approx(
        np.median([np.std(g, ddof=1) for g in groups if len(g) > 1])
    )
    first = pooled_sd_interval(groups, n_boot=2000, seed=3)
    assert first == pooled_sd_interval(groups, n_boot=2000, seed=3)  # seeded
    assert first[0] < result["sd"] < first[1]
    assert math.isnan(pooled_within_sd([[0.5], [0.1]])["sd"])


def test_report_command_prints_runs_above_chance(tmp_path):
    write_task(tmp_path / "tasks" / "five", FIVE, task_id="five")
    write_run(tmp_path / "runs" / "one" / "five", five_order(["e1", "e2", "e3", "e4", "e5"]))
    out = runner.invoke(
        app,
        ["report", str(tmp_path / "runs"), "--tasks", str(tmp_path / "tasks"), "--answers",
         str(tmp_path / "tasks"), "--bootstrap", "100"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "mean at -1 1.000, runs above chance 1/1" in out.output
