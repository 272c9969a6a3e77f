"""The grader: per-group Spearman with ties, weights, the -1 rules, recovery vs strict."""

from __future__ import annotations

import json
import math

import pytest
from scipy.stats import spearmanr

from environment.grading import grade
from spu_common.task import TaskError


def sub(task, orders, **extra):
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "rankings": [{"group_id": g, "order": o} for g, o in orders.items()],
        **extra,
    }


def test_score_by_hand_with_a_tie(two_group_task):
    task, answers, *_ = two_group_task
    # group a values a1=1, a2=3, a3=3, a4=5, a5=2 -> measured ranks a1=1, a5=2, a2=3.5, a3=3.5, a4=5
    # order a1, a5, a3, a2, a4 -> submitted ranks 1, 2, 3(a3), 4(a2), 5: centered measured -2, -1, .5, .5, 2
    # (a1, a5, a3, a2, a4) and submitted -2, -1, 0, 1, 2 -> cov 4 + 1 + 0 + .5 + 4 = 9.5
    # norms sqrt(4 + 1 + .25 + .25 + 4) = sqrt(9.5), sqrt(10) -> rho_a = 9.5 / sqrt(95) = sqrt(0.95)
    # group b: order b1, b3, b2, b4 is the measured order -> rho_b = 1
    result = grade(
        sub(task, {"a": ["a1", "a5", "a3", "a2", "a4"], "b": ["b1", "b3", "b2", "b4"]}), task, answers
    )
    rho_a = math.sqrt(0.95)
    assert result.groups[0].rho == pytest.approx(rho_a, abs=1e-12)
    assert result.groups[1].rho == pytest.approx(1.0)
    assert result.score == pytest.approx(0.5 * rho_a + 0.5, abs=1e-12)
    assert result.valid and result.strict_score == result.score
    # the same group score from scipy
    expected = spearmanr([1, 3, 3, 5, 2], [1, 4, 3, 5, 2]).statistic
    assert result.groups[0].rho == pytest.approx(expected, abs=1e-12)


def test_invalid_group_gets_minus_one_and_keeps_its_weight(make_task):
    task, answers, *_ = make_task(
        {"a": {"x": 1, "y": 2, "z": 3}, "b": {"u": 1, "v": 2}}, weights={"a": 0.25, "b": 0.75}
    )
    result = grade(sub(task, {"a": ["x", "y", "z"], "b": ["u"]}), task, answers)
    assert result.groups[0].rho == pytest.approx(1.0) and result.groups[0].error is None
    assert result.groups[1].rho == -1.0 and "missing" in result.groups[1].error
    assert result.score == pytest.approx(0.25 * 1.0 + 0.75 * -1.0)
    assert not result.valid


def test_absent_group_scores_minus_one(make_task):
    task, answers, *_ = make_task({"a": {"x": 1, "y": 2, "z": 3}, "b": {"u": 1, "v": 2}})
    result = grade(sub(task, {"a": ["z", "y", "x"]}), task, answers)
    assert [g.rho for g in result.groups] == [pytest.approx(-1.0), -1.0]
    assert result.groups[1].error == "the group is absent from the submission"


@pytest.mark.parametrize("bad", [b"not json", b'{"task_id": "other", "rankings": []}', None])
def test_missing_or_wholly_invalid_file_scores_minus_one(two_group_task, tmp_path, bad):
    task, answers, *_ = two_group_task
    path = tmp_path / "rankings.json"
    if bad is not None:
        path.write_bytes(bad)
    result = grade(str(path), task, answers)
    assert result.score == -1.0 and result.strict_score == -1.0 and not result.valid
    assert all(g.rho == -1.0 for g in result.groups)


def test_unknown_group_fails_the_whole_file(two_group_task):
    task, answers, *_ = two_group_task
    data = sub(task, {"a": ["a1", "a2", "a3", "a4", "a5"], "b": ["b1", "b2", "b3", "b4"], "c": ["q"]})
    assert grade(data, task, answers).score == -1.0


def test_recovered_file_scores_and_strict_score_is_minus_one(two_group_task, tmp_path):
    task, answers, *_ = two_group_task
    data = {
        "task_id": task.task_id,
        "task_version": "1",
        "rankings": {"a": ["a1", "a5", "a3", "a2", "a4"], "b": ["b1", "b3", "b2", "b4"]},
    }
    path = tmp_path / "rankings.json"
    path.write_text(json.dumps(data))
    result = grade(path, task, answers)
    assert result.score == -1.0 and result.strict_score == -1.0 and result.rejected
    assert result.recovered_score == pytest.approx(0.5 * math.sqrt(0.95) + 0.5)
    assert result.departures and result.recovery_accepted
    strict = grade(path, task, answers, recover=False)
    assert strict.score == -1.0 and strict.recovered_score == -1.0 and strict.recovery_accepted is None


def test_group_level_departure_rejects_the_whole_file_under_strict_grading(two_group_task):
    task, answers, *_ = two_group_task
    data = {
        "task_id": task.task_id,
        "task_version": "1",
        "rankings": [
            {"group_id": "a", "item_ids": ["a1", "a5", "a3", "a2", "a4"]},
            {"group_id": "b", "order": ["b1", "b3", "b2", "b4"]},
        ],
    }
    result = grade(data, task, answers)
    # the paper's grader rejects the file (-1), not only group a (which would give 0.5 * -1 + 0.5 * 1 = 0)
    assert result.score == -1.0 and result.rejected
    assert all(g.rho == -1.0 for g in result.groups)
    assert result.recovered_score == pytest.approx(0.5 * math.sqrt(0.95) + 0.5)


def test_per_group_diagnostics(two_group_task):
    task, answers, *_ = two_group_task
    result = grade(
        sub(task, {"a": ["a4", "a3", "a2", "a5", "a1"], "b": ["b1", "b3", "b2", "b4"]}), task, answers
    )
    a = result.groups[0]
    # reversed measured order except the tied a2/a3 pair: 9 untied pairs, none in order
    assert a.pairs_in_order == 0.0 and a.top1_hit is False
    assert result.groups[1].pairs_in_order == 1.0 and result.groups[1].top1_hit is True


def test_answers_for_another_task_are_a_setup_error(two_group_task, make_task):
    task = two_group_task[0]
    _, other_answers, *_ = make_task({"a": {"x": 1, "y": 2}}, task_id="other")
    with pytest.raises(TaskError, match="answers are for task 'other'"):
        grade({}, task, other_answers)
