"""`spu report` over a runs directory of the demo tasks, and the other commands through the real CLI app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from environment.demo_tasks import DEMO_TASKS, demo_answers_path, demo_task_dir
from environment.report import build_report
from spu.cli import app
from spu_common.submission import fallback_submission, submission_from_orders, write_submission_atomic
from spu_common.task import load_answers, load_task

runner = CliRunner()


def measured_submission(slug):
    task, answers = load_task(demo_task_dir(slug)), load_answers(demo_answers_path(slug))
    orders = {
        g.group_id: sorted(g.experiment_ids, key=lambda e: (answers.group(g.group_id).values[e], e))
        for g in task.groups
    }
    return submission_from_orders(task, orders)


@pytest.fixture
def runs_dir(tmp_path):
    """oracle: measured order on all tasks; presented: the fallback, one task as a recovered file, one
    missing;
    reversed: reversed measured order, two repeated runs per task, one of them a refusal."""
    runs = tmp_path / "runs"
    for slug in DEMO_TASKS:
        task = load_task(demo_task_dir(slug))
        oracle = measured_submission(slug)
        write_submission_atomic(runs / "oracle" / task.task_id / "rankings.json", oracle)
        fallback = fallback_submission(task)
        if slug == "aromatic-acidity":
            fallback = {
                "task": task.task_id,
                "groups": {r["group_id"]: r["order"] for r in fallback["rankings"]},
            }
        if slug != "enzyme-kinetics":
            write_submission_atomic(runs / "presented" / task.task_id / "rankings.json", fallback)
        else:
            (runs / "presented" / task.task_id).mkdir(parents=True)
        reverse = {**oracle, "rankings": [{**r, "order": r["order"][::-1]} for r in oracle["rankings"]]}
        write_submission_atomic(runs / "reversed" / task.task_id / "r1" / "rankings.json", reverse)
        write_submission_atomic(runs / "reversed" / task.task_id / "r2" / "rankings.json", oracle)
        (runs / "reversed" / task.task_id / "r2" / "outcome.json").write_text('{"outcome": "refusal"}')
    return runs


def test_report_statistics_and_files(runs_dir, tmp_path):
    summary = build_report(runs_dir, tmp_path / "out", n_boot=500)
    rows = {r["configuration"]: r for r in summary["configurations"]}
    tasks = {t["task_id"]: t for t in summary["tasks"]}
    attainable = [t["attainable_max"] for t in tasks.values()]
    assert rows["oracle"]["raw_mean"] == pytest.approx(sum(attainable) / 3)
    assert rows["oracle"]["above_chance"] == 3 and rows["oracle"]["coverage"] == 1.0
    assert rows["reversed"]["raw_mean"] == pytest.approx(-sum(attainable) / 3)
    assert rows["reversed"]["refusals"] == 3 and rows["reversed"]["runs"] == 6
    presented = rows["presented"]
    assert presented["scored_tasks"] == 2 and presented["runs_without_file"] == 1
    assert presented["recovered_runs"] == 1
    presented_scores = {t: tasks[t]["presented_order_score"] for t in tasks}
    assert presented["raw_mean"] == pytest.approx(
        (presented_scores["demo-aromatic-acidity"] + presented_scores["demo-electrolyte-solvents"]) / 2
    )
    # strict: the recovered file and the missing one both count -1
    assert presented["mean_at_minus_one"] == pytest.approx(
        (-1 + presented_scores["demo-electrolyte-solvents"] - 1) / 3
    )
    assert presented["mean_after_recovery"] == pytest.approx(
        (presented_scores["demo-aromatic-acidity"] + presented_scores["demo-electrolyte-solvents"] - 1) / 3
    )
    assert len(summary["paired"]) == 3
    out = tmp_path / "out"
    for name in ("report.md", "summary.json", "runs.csv", "scores_vs_chance.png", "configuration_means.png"):
        assert (out / name).stat().st_size > 100
    assert (out / "scores_vs_chance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "report.md").read_text()
    assert "| oracle | 3 | 100% |" in markdown and "Holm" in markdown


def test_report_command_default_out_dir_is_skipped_on_rescan(runs_dir):
    first = runner.invoke(app, ["report", str(runs_dir), "--bootstrap", "200"])
    assert first.exit_code == 0, first.output
    assert (runs_dir / "_report" / "report.md").exists()
    second = runner.invoke(app, ["report", str(runs_dir), "--bootstrap", "200", "--json"])
    assert second.exit_code == 0
    assert json.loads(second.output)["warnings"] == []


def test_report_usage_errors(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path / "none")])
    assert result.exit_code == 2
    (tmp_path / "empty").mkdir()
    assert runner.invoke(app, ["report", str(tmp_path / "empty")]).exit_code == 2


def test_validate_grade_chance_consensus_commands(tmp_path):
    slug = "electrolyte-solvents"
    task_dir, answers = str(demo_task_dir(slug)), str(demo_answers_path(slug))
    oracle = write_submission_atomic(tmp_path / "oracle.json", measured_submission(slug))
    task = load_task(task_dir)
    bad = fallback_submission(task)
    bad["rankings"][1]["order"].pop()
    bad_path = write_submission_atomic(tmp_path / "bad.json", bad)

    ok = runner.invoke(app, ["validate", str(oracle), "--task", task_dir])
    assert ok.exit_code == 0 and "valid" in ok.output
    invalid = runner.invoke(app, ["validate", str(bad_path), "--task", task_dir, "--json"])
    assert invalid.exit_code == 1
    assert list(json.loads(invalid.output)["group_errors"]) == ["g2"]
    assert runner.invoke(app, ["validate", str(oracle), "--task", str(tmp_path)]).exit_code == 2

    graded = runner.invoke(app, ["grade", str(oracle), "--task", task_dir, "--answers", answers, "--json"])
    assert graded.exit_code == 0
    data = json.loads(graded.output)
    # viscosity has one tie (0.46 cP twice among 8): rho_max = 1 - 6 * sum d^2 ... computed by the grader
    assert data["score"] == pytest.approx(data["groups"][0]["rho"] / 2 + 0.5)
    assert set(data["groups"][0]) >= {"group_id", "rho", "weight", "error"}
    failed = runner.invoke(app, ["grade", str(bad_path), "--task", task_dir, "--answers", answers, "--json"])
    assert failed.exit_code == 1 and json.loads(failed.output)["groups"][1]["rho"] == -1.0

    chance = runner.invoke(app, ["chance", "--task", task_dir, "--answers", answers, "--seed", "3", "--json"])
    assert chance.exit_code == 0
    result = json.loads(chance.output)
    assert result["attainable_max"] == pytest.approx(data["score"])
    assert 0.3 < result["chance_threshold"] < 0.6  # two groups of 8: exact 95th percentile is about 0.44
    assert (
        runner.invoke(app, ["chance", "--task", task_dir, "--answers", str(tmp_path / "x.json")]).exit_code
        == 2
    )

    out = tmp_path / "consensus.json"
    bad["rankings"][0]["order"].pop()
    write_submission_atomic(bad_path, bad)
    combined = runner.invoke(
        app, ["consensus", str(oracle), str(oracle), str(bad_path), "--task", task_dir, "-o", str(out)]
    )
    assert combined.exit_code == 0, combined.output
    assert json.loads(out.read_text()) == json.loads(oracle.read_text())


def test_task_show_and_anonymize_commands(tmp_path):
    shown = runner.invoke(app, ["task", "show", str(demo_task_dir("enzyme-kinetics")), "--json"])
    assert shown.exit_code == 0
    info = json.loads(shown.output)
    assert info["experiments"] == 16 and [g["n"] for g in info["groups"]] == [8, 8]
    assert runner.invoke(app, ["task", "show", str(tmp_path)]).exit_code == 2


def test_the_report_says_how_its_chance_thresholds_were_found(runs_dir, tmp_path):
    """The demo tasks' thresholds are exact (every order counted): on 39e2847 the header said they came
    from 4,000 random draws while the table printed the exact ones."""
    summary = build_report(runs_dir, tmp_path / "out", n_boot=200)
    assert {t["chance_method"] for t in summary["tasks"]} == {"exact"}
    assert summary["chance"]["methods"] == {"exact": 3}
    text = (tmp_path / "out" / "report.md").read_text()
    assert "Chance thresholds (95th percentile of random valid submissions): exact for 3 tasks" in text
    assert "random valid submissions for" not in text and "4000" not in text
    for task in summary["tasks"]:
        assert f"| {task['chance_threshold']:.3f} (exact) |" in text


def test_batch_and_a_later_report_print_the_same_intervals(tmp_path, spu_env):
    """One bootstrap default: `spu batch` reported with 2,000 resamples and `spu report` with 10,000, so
    re-running `spu report` over a batch's runs changed its intervals."""
    import shutil

    suite = tmp_path / "suite"
    for slug in DEMO_TASKS:
        shutil.copytree(demo_task_dir(slug), suite / slug / "task")
        shutil.copyfile(demo_answers_path(slug), suite / slug / "answers.json")
    recording = tmp_path / "done.jsonl"  # names no task: the presented order is each run's submission
    recording.write_text(json.dumps({"message": {"role": "assistant", "content": "done"}}) + "\n")
    runs = tmp_path / "runs"
    done = runner.invoke(
        app, ["batch", str(suite), "--model", f"replay:{recording}", "-o", str(runs), "-j", "2", "--json"]
    )
    assert done.exit_code == 0, done.output
    batch = json.loads((runs / "_report" / "summary.json").read_text())
    again = runner.invoke(app, ["report", str(runs), "--answers", str(suite), "--json"])
    assert again.exit_code == 0, again.output
    report = json.loads(again.output)
    assert batch["bootstrap"] == report["bootstrap"] == {"resamples": 10_000, "seed": 0}
    low, high = report["configurations"][0]["raw_ci"]
    assert low < high  # three tasks with different scores: an interval the resamples decide
    assert batch["configurations"][0]["raw_ci"] == report["configurations"][0]["raw_ci"]
