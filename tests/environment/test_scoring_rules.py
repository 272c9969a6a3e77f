"""The benchmark's scoring rules (paper §2.5, Appendix E.1): the strict score is the official one, recovery
is a second figure for rejected files only, a departure anywhere rejects the file, and groups without an
order (all values tied, one experiment) load and score 0. Values are computed by hand in the comments."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from environment.chance import attainable_max, chance_threshold, exact_score_distribution, random_scores
from environment.grading import grade
from spu.cli import app
from spu_common.submission import validate_submission

runner = CliRunner()

ORDER_A = ["a1", "a5", "a3", "a2", "a4"]  # rho_a = sqrt(0.95) on two_group_task (tie a2 = a3)
ORDER_B = ["b1", "b3", "b2", "b4"]  # the measured order of group b: rho_b = 1
RECOVERED = 0.5 * math.sqrt(0.95) + 0.5  # 0.98734...


def every_departure(task):
    """A file with all five departures of Appendix E.1 at once (list form, so the group key can differ)."""
    return {
        "task": task.task_id,
        "version": task.task_version,
        "groups": [{"group": "a", "item_ids": ORDER_A}, {"group": "b", "ordering": ORDER_B}],
    }


def keyed_departure(task):
    """The orders under an object keyed by group id (the most frequent departure in the paper)."""
    return {"task_id": task.task_id, "rankings": {"a": {"ranking": ORDER_A}, "b": ORDER_B}}


@pytest.mark.parametrize("build", [every_departure, keyed_departure])
def test_a_file_with_departures_scores_minus_one_with_the_recovered_figure_beside_it(
    two_group_task, tmp_path, build
):
    task, answers, task_dir, answers_path = two_group_task
    path = tmp_path / "rankings.json"
    path.write_text(json.dumps(build(task)))
    result = grade(path, task, answers)
    assert result.score == -1.0 and result.strict_score == -1.0
    assert result.rejected and not result.valid and result.recovery_accepted
    assert result.recovered_score == pytest.approx(RECOVERED, abs=1e-12)
    assert [g.rho for g in result.groups] == [-1.0, -1.0]
    assert result.recovered_groups[0].rho == pytest.approx(math.sqrt(0.95), abs=1e-12)
    assert result.scored and result.scored_value == pytest.approx(RECOVERED)

    cli = runner.invoke(
        app, ["grade", str(path), "--task", str(task_dir), "--answers", str(answers_path), "--json"]
    )
    assert cli.exit_code == 1, cli.output
    data = json.loads(cli.output)
    assert data["score"] == -1.0 and data["valid"] is False
    assert data["recovered_score"] == pytest.approx(RECOVERED, abs=1e-12)
    assert data["departures"] and all(g["rho"] == -1.0 for g in data["groups"])
    text = runner.invoke(app, ["grade", str(path), "--task", str(task_dir), "--answers", str(answers_path)])
    assert text.exit_code == 1
    assert "score -1.0000 (file rejected by the strict grader)" in text.output
    assert f"recovered score {RECOVERED:.4f}" in text.output


def test_every_kind_of_departure_is_named(two_group_task):
    task, answers, *_ = two_group_task
    result = grade(every_departure(task), task, answers)
    kinds = sorted(line.split(":")[0] for line in result.departures)
    assert kinds == [
        "alternative group identifier key",
        "alternative ordering key",
        "alternative top-level key",
        "renamed identity fields",
    ]


def test_a_strictly_valid_file_is_never_changed_by_recovery(two_group_task):
    task, answers, *_ = two_group_task
    # an extra "version" key beside a canonical task_id is an extra key, which the strict grader ignores;
    # recovery used to read it as task_version and reject the file (-1)
    data = {
        "task_id": task.task_id,
        "version": "9",
        "rankings": [{"group_id": "a", "order": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }
    result = grade(data, task, answers)
    assert result.score == pytest.approx(RECOVERED, abs=1e-12) and result.valid
    assert result.recovered_score == result.score and result.departures == []
    assert result.recovery_accepted is None  # recovery did not run
    report = validate_submission(data, task)  # the default (recover=True) returns the strict verdict
    assert report.valid and report.strict_valid and report.recovered == []


def test_recovery_never_runs_on_a_file_with_only_group_errors(two_group_task):
    task, answers, *_ = two_group_task
    data = {"task_id": task.task_id, "rankings": [{"group_id": "b", "order": ORDER_B}]}
    result = grade(data, task, answers)
    # group a absent: -1 with its weight, group b scored: 0.5 * -1 + 0.5 * 1 = 0
    assert result.score == pytest.approx(0.0) and not result.rejected and not result.valid
    assert result.recovered_score == result.score and result.recovery_accepted is None


def test_an_alternative_order_key_in_one_group_rejects_the_file(two_group_task):
    task, answers, *_ = two_group_task
    data = {
        "task_id": task.task_id,
        "rankings": [{"group_id": "a", "item_ids": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }
    strict = validate_submission(data, task, recover=False)
    assert strict.file_errors and "schema departure (alternative ordering key" in strict.file_errors[0]
    assert strict.departures == ["alternative ordering key: 'item_ids' for 'order'"]
    result = grade(data, task, answers)
    # not 0.5 * -1 + 0.5 * 1 = 0 (group a alone failed): the file is rejected
    assert result.score == -1.0 and result.rejected
    assert result.recovered_score == pytest.approx(RECOVERED, abs=1e-12)


def test_renamed_identity_pair_still_checks_the_version(two_group_task):
    task, answers, *_ = two_group_task
    data = {
        "task": task.task_id,
        "version": "9",
        "rankings": [{"group_id": "a", "order": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }
    result = grade(data, task, answers)
    assert result.score == -1.0 and result.recovered_score == -1.0
    assert result.recovery_accepted is False
    assert any("task_version '9'" in e for e in result.recovered_file_errors)


def test_validate_command_is_strict_and_reports_the_recovery(two_group_task, tmp_path):
    task, _answers, task_dir, _ = two_group_task
    path = tmp_path / "rankings.json"
    path.write_text(json.dumps(keyed_departure(task)))
    out = runner.invoke(app, ["validate", str(path), "--task", str(task_dir)])
    assert out.exit_code == 1 and "INVALID" in out.output
    assert "after recovering the schema departures the file is valid" in out.output
    data = json.loads(runner.invoke(app, ["validate", str(path), "--task", str(task_dir), "--json"]).output)
    assert data["valid"] is False and data["recovery"]["valid"] is True


@pytest.fixture
def orderless_task(make_task):
    """Group t: all values tied; group s: one experiment; group b: 1 < 2 < 3. Equal weights (1/3)."""
    return make_task(
        {
            "t": {"t1": 2.0, "t2": 2.0, "t3": 2.0},
            "s": {"only": 7.5},
            "b": {"b1": 1.0, "b2": 2.0, "b3": 3.0},
        }
    )


def test_tied_and_single_experiment_groups_load_and_score_zero(orderless_task):
    task, answers, task_dir, answers_path = orderless_task
    valid = {
        "task_id": task.task_id,
        "rankings": [
            {"group_id": "t", "order": ["t3", "t1", "t2"]},
            {"group_id": "s", "order": ["only"]},
            {"group_id": "b", "order": ["b1", "b2", "b3"]},
        ],
    }
    result = grade(valid, task, answers)
    # (0 + 0 + 1) / 3
    assert [g.rho for g in result.groups] == [0.0, 0.0, pytest.approx(1.0)]
    assert result.score == pytest.approx(1 / 3) and result.valid
    assert result.groups[0].pairs_in_order is None  # no untied pair: no NaN in the JSON
    # an invalid order of an orderless group still fails: (-1 + 0 + 1) / 3 = 0
    broken = json.loads(json.dumps(valid))
    broken["rankings"][0]["order"] = ["t1", "t2"]
    assert grade(broken, task, answers).score == pytest.approx(0.0)
    # the chance side: orderless groups contribute 0 to every random draw and to the attainable maximum
    assert attainable_max(task, answers) == pytest.approx(1 / 3)
    scores = random_scores(task, answers, draws=600, seed=1)
    # group b alone: rho of a random order of 3 lies in {-1, -0.5, 0.5, 1}, the task score is a third of it
    assert {round(x * 3, 9) for x in scores} <= {-1.0, -0.5, 0.5, 1.0}
    exact = exact_score_distribution(task, answers)
    assert list(exact) == pytest.approx([-1 / 3, -1 / 6, 1 / 6, 1 / 3])
    assert list(exact.values()) == pytest.approx([1 / 6, 1 / 3, 1 / 3, 1 / 6])
    assert chance_threshold(task, answers, draws=400)["exact_threshold"] == pytest.approx(1 / 3)
    cli = runner.invoke(app, ["chance", "--task", str(task_dir), "--answers", str(answers_path), "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output)["attainable_max"] == pytest.approx(1 / 3)
