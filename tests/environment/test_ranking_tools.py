"""The ranking MCP tools: unit tests of the functions, and one pass through the real server over stdio."""

from __future__ import annotations

import pytest
from env_task_factory import write_task

from environment.demo_tasks import demo_task_dir
from spu_common.submission import fallback_submission
from spu_common.task import load_task
from tools_server.core.errors import ToolError
from tools_server.ranking.tools import (
    AggregateInput,
    CheckInput,
    CompareInput,
    ranking_aggregate,
    ranking_check,
    ranking_compare,
)


@pytest.fixture(autouse=True)
def _tasks_readable(tmp_path, monkeypatch):
    """The tasks these tests write live under tmp_path: a folder the tools may read (SPU_INPUT_ROOTS)."""
    monkeypatch.setenv("SPU_INPUT_ROOTS", str(tmp_path))


@pytest.fixture
def condition_task(tmp_path):
    values = {f"e{i}": float(v) for i, v in enumerate([5, 1, 4, 2, 3, 6])}
    conditions = {f"e{i}": {"temperature_c": str(20 + 10 * i), "label": f"x{i}"} for i in range(6)}
    task_dir, _ = write_task(tmp_path, {"g": values, "h": {"u": 1.0, "v": 2.0}}, conditions=conditions)
    return task_dir


def test_check_warns_on_presented_order_and_monotone_condition(condition_task):
    task = load_task(condition_task)
    draft = fallback_submission(task)
    result = ranking_check(CheckInput(task_dir=str(condition_task), draft=draft))
    assert result.valid and result.strict_valid
    kinds = {(w.group_id, w.kind) for w in result.warnings}
    # group g is the presented order, which is also monotone in temperature_c (20, 30, ... 70)
    assert ("g", "presented_order") in kinds and ("g", "monotone_in_condition") in kinds
    assert not any(w.group_id == "h" for w in result.warnings)  # two items: too small to judge
    g = result.groups[0]
    assert g.presented_order_rho == 1.0 and g.condition_rhos == {"temperature_c": 1.0}

    shuffled = {
        **draft,
        "rankings": [{"group_id": "g", "order": ["e2", "e0", "e5", "e1", "e4", "e3"]}, draft["rankings"][1]],
    }
    quiet = ranking_check(CheckInput(task_dir=str(condition_task), draft=shuffled))
    assert quiet.warnings == []
    # submitted ranks of e0..e5: 2, 4, 1, 6, 5, 3 against temperature ranks 1..6: d = 1, 2, -2, 2, 0, -3,
    # sum d^2 = 22, rho = 1 - 6 * 22 / 210 = 0.3714
    assert quiet.groups[0].condition_rhos["temperature_c"] == pytest.approx(0.3714, abs=1e-4)


def test_check_accepts_a_one_experiment_group_without_nan(tmp_path):
    task_dir, _ = write_task(tmp_path, {"g": {"a": 1.0, "b": 2.0, "c": 3.0}, "s": {"only": 1.0}})
    result = ranking_check(CheckInput(task_dir=str(task_dir), draft=fallback_submission(load_task(task_dir))))
    assert result.strict_valid and result.groups[1].presented_order_rho is None
    sent = ranking_check.__spu_tool__.conform(result)  # the wire form: null, never NaN
    assert sent["groups"][1]["presented_order_rho"] is None


def test_check_reports_errors_and_recoveries(condition_task, tmp_path):
    task = load_task(condition_task)
    keyed = {"task_id": task.task_id, "rankings": {"g": ["e0", "e1"], "h": ["v", "u"]}}
    result = ranking_check(CheckInput(task_dir=str(condition_task), draft=keyed))
    assert not result.valid and "4 of 6 experiments missing" in result.group_errors["g"][0]
    assert result.recovered[0].startswith("object keyed by group id")
    assert result.normalized["rankings"][1] == {"group_id": "h", "order": ["v", "u"]}
    path = tmp_path / "draft.json"
    path.write_text("{broken")
    from_file = ranking_check(CheckInput(task_dir=str(condition_task), draft_path=str(path)))
    assert "not valid JSON" in from_file.file_errors[0]
    with pytest.raises(ToolError) as err:
        ranking_check(CheckInput(task_dir=str(tmp_path / "nowhere"), draft={}))
    assert err.value.code == "invalid_input"


def test_aggregate_orders_by_expected_rank_and_respects_direction():
    proxies = [
        {"name": "energy", "values": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0}, "uncertainty": 0.01},
        {
            "name": "inverse",
            "values": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0},
            "higher_means_higher": False,
            "uncertainty": 0.01,
        },
    ]
    result = ranking_aggregate(AggregateInput(proxies=proxies, samples=500))
    assert result.order == ["a", "b", "c", "d"]
    assert [i.expected_rank for i in result.items] == [1.0, 2.0, 3.0, 4.0]
    assert result.proxy_agreement[0].spearman == 1.0
    assert result.pairwise_p_below.matrix[0][3] == 1.0


def test_aggregate_uncertainty_gives_pair_probabilities():
    # b and c differ by 0.1 with sd 1 each: P(b below c) = Phi(0.1 / sqrt(2)) = 0.528
    proxy = {
        "name": "p",
        "values": {"a": -10.0, "b": 0.0, "c": 0.1},
        "uncertainty": {"a": 0.0, "b": 1.0, "c": 1.0},
    }
    result = ranking_aggregate(AggregateInput(proxies=[proxy], samples=20000, seed=2))
    pair = result.adjacent_pairs[1]
    assert (pair.lower, pair.higher) == ("b", "c")
    assert pair.p_in_this_order == pytest.approx(0.528, abs=0.015)
    again = ranking_aggregate(AggregateInput(proxies=[proxy], samples=20000, seed=2))
    assert again == result


def test_a_proxy_with_equal_values_has_a_null_agreement_not_an_engine_error():
    """On 39e2847 a proxy whose values were all equal made the Spearman agreement NaN and the whole call an
    engine_error; the agreement is undefined, and the result says so with null."""
    proxies = [
        {"name": "flat", "values": {"a": 1.0, "b": 1.0, "c": 1.0}},
        {"name": "rising", "values": {"a": 1.0, "b": 2.0, "c": 3.0}},
    ]
    result = ranking_aggregate(AggregateInput(proxies=proxies, samples=200))
    sent = ranking_aggregate.__spu_tool__.conform(result)
    assert sent["proxy_agreement"] == [{"a": "flat", "b": "rising", "spearman": None}]
    assert sent["order"] == ["a", "b", "c"]


def test_aggregate_errors():
    with pytest.raises(ToolError, match="no value for"):
        ranking_aggregate(
            AggregateInput(items=["a", "b", "z"], proxies=[{"name": "p", "values": {"a": 1, "b": 2}}])
        )
    with pytest.raises(ToolError) as err:
        ranking_aggregate(
            AggregateInput(
                items=[f"i{k}" for k in range(1000)],
                samples=20000,
                proxies=[{"name": "p", "values": {f"i{k}": k for k in range(1000)}}],
            )
        )
    assert err.value.code == "too_large"


def test_compare_orders_and_values():
    same = ranking_compare(CompareInput(order_a=["a", "b", "c"], order_b=["a", "b", "c", "d"]))
    assert same.spearman == 1.0 and same.pair_agreement == 1.0 and same.only_in_b == ["d"]
    reversed_ = ranking_compare(CompareInput(order_a=["c", "b", "a"], order_b=["a", "b", "c"]))
    assert reversed_.spearman == -1.0 and reversed_.pair_agreement == 0.0
    # values with a tie: see test_rank_agreement (rho = 1.5 / sqrt(22.5))
    tied = ranking_compare(
        CompareInput(order_a=["e2", "e1", "e4", "e3"], values_b={"e1": 1, "e2": 2, "e3": 2, "e4": 4})
    )
    assert tied.spearman == pytest.approx(0.316228, abs=1e-6)
    with pytest.raises(ToolError):
        ranking_compare(CompareInput(order_a=["a", "a"], order_b=["a", "b"]))


def test_ranking_tools_through_the_mcp_server(mcp_server):
    names = {t.name: t for t in mcp_server.list_tools()}
    for name in ("ranking_check", "ranking_aggregate", "ranking_compare"):
        assert names[name].annotations.read_only_hint is True
    task_dir = demo_task_dir("aromatic-acidity")
    draft = fallback_submission(load_task(task_dir))
    checked = mcp_server.call_ok("ranking_check", {"task_dir": str(task_dir), "draft": draft})
    assert checked["valid"] is True
    assert {w["kind"] for w in checked["warnings"]} == {"presented_order"}
    assert checked["provenance"]["tool"] == "ranking_check"
    compared = mcp_server.call_ok("ranking_compare", {"order_a": ["x", "y", "z"], "order_b": ["z", "y", "x"]})
    assert compared["spearman"] == -1.0
    error = mcp_server.call_error("ranking_check", {"task_dir": "/nonexistent/task", "draft": {}})
    assert error["code"] == "invalid_input"
