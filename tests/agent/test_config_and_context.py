"""Config loading and overrides; context-window elision rules."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scaffold.agent.config import ConfigError, load_config
from scaffold.agent.context import ContextWindow
from scaffold.agent.limits import cost_usd, find_price
from scaffold.agent.models.base import Usage

REPO = Path(__file__).resolve().parents[2]


def test_defaults_file_and_overrides_merge_in_order(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("limits:\n  step_limit: 40\nmodel:\n  temperature: 0.5\n")
    config = load_config(
        path,
        [
            "model.temperature=0.2",
            "tools.builtin=[bash, python]",
            "model.prompt_cache_key=false",
            "prices.my-model={input: 0.5, output: 1.5}",
            "model.extra_body.top_k=20",
        ],
    )
    assert config.limits.step_limit == 40  # from the file
    assert config.limits.wall_time_limit_s == 28800  # default kept beside it
    assert config.model.temperature == 0.2  # -c beats the file
    assert config.tools.builtin == ["bash", "python"]
    assert config.model.prompt_cache_key is False
    # open mappings take the user's own keys; a price without cache prices charges the input price
    assert config.prices["my-model"].model_dump() == {
        "input": 0.5,
        "output": 1.5,
        "cache_read": 0.5,
        "cache_write": 0.5,
    }
    assert config.model.extra_body == {"top_k": 20}


def test_the_defaults_live_in_the_shipped_file_alone():
    """Every key's default is in default_config.yaml; the declaration holds types and bounds, no second
    default: without the file nothing validates, with it everything does."""
    from scaffold.agent.config import AgentConfig, default_config, known_keys, validate_config

    config = validate_config(default_config())
    assert isinstance(config, AgentConfig) and set(config.prices) == set(default_config()["prices"])
    with pytest.raises(ConfigError, match="Field required"):
        validate_config({})
    sections = [AgentConfig, *(type(getattr(config, k)) for k in ("limits", "model", "tools", "context"))]
    assert all(f.is_required() for model in sections for f in model.model_fields.values())
    assert len(known_keys()) > 40


@pytest.mark.parametrize(
    ("override", "kept"),
    [
        ("limits.step_limit=0", ("limits", "step_limit", 0)),  # 0 = no step limit, as documented
        ("limits.cost_limit_usd=0", ("limits", "cost_limit_usd", 0)),
        ("model.thinking_budget_tokens=0", ("model", "thinking_budget_tokens", 0)),
        ("limits.max_nudges=0", ("limits", "max_nudges", 0)),
    ],
)
def test_an_explicit_zero_is_honoured(override, kept):
    section, key, value = kept
    assert getattr(getattr(load_config(None, [override]), section), key) == value


@pytest.mark.parametrize(
    "override",
    [
        "tools.command_timeout_s=0",  # was replaced by 600 s in the built-in tools
        "tools.max_output_chars=0",  # was replaced by 20,000
        "tools.mcp.call_timeout_s=0",  # was replaced by 900 s
        "model.max_output_tokens=0",  # was replaced by 16,384 in every adapter
        "model.timeout_s=0",
        "model.retry.max_attempts=0",
        "context.chars_per_token=0",
        "ensemble.size=0",
        "limits.step_limit=-1",
    ],
)
def test_a_zero_that_means_nothing_is_refused_not_replaced(override):
    key = re.escape(override.split("=")[0])
    with pytest.raises(ConfigError, match=rf"invalid config: {key}: Input should be"):
        load_config(None, [override])


def test_the_builtin_tools_use_the_configured_timeout_and_cap(tmp_path, demo_task):
    """The validated section reaches the tools as it is: no default stands in for a configured value."""
    from scaffold.agent.rundir import RunDir
    from scaffold.agent.tools.builtin import BuiltinTools
    from spu_common.task import load_task

    config = load_config(None, ["tools.command_timeout_s=7", "tools.max_output_chars=123"])
    tools = BuiltinTools(RunDir(tmp_path / "o", load_task(demo_task)), config.tools)
    assert (tools.timeout_s, tools.max_chars) == (7, 123)


@pytest.mark.parametrize(
    "override,suggestion",
    [
        ("limits.stpe_limit=40", "limits.step_limit"),
        ("limit.step_limit=40", "limits.step_limit"),
        ("tools.mcp.comand=[spu, serve]", "tools.mcp.command"),
        ("model.retry.max_attempt=3", "model.retry.max_attempts"),
        ("prices.gpt-4.1.inptu=1", "prices"),  # below an open mapping the price's own keys are checked
    ],
)
def test_an_unknown_key_is_refused_with_the_nearest_known_one(override, suggestion):
    with pytest.raises(ConfigError, match=r"unknown config key|invalid config") as info:
        load_config(None, [override])
    if "unknown" in str(info.value):
        assert f"Did you mean {suggestion}?" in str(info.value)
    else:
        assert suggestion in str(info.value)


def test_an_unknown_key_in_a_config_file_is_refused(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("limits:\n  stpe_limit: 40\n")
    with pytest.raises(
        ConfigError, match=r"limits\.stpe_limit \(in .*agent\.yaml\)\. Did you mean limits\.step_limit\?"
    ):
        load_config(path)
    path.write_text("limits:\n  step_limit: many\n")
    with pytest.raises(ConfigError, match=r"invalid config: limits\.step_limit"):
        load_config(path)
    path.write_text("limits: 3\n")
    with pytest.raises(ConfigError, match=r"invalid config: limits"):
        load_config(path)


def spu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_spu_agent_run_refuses_a_misspelt_key_with_exit_2(demo_task, tmp_path):
    run = ["agent", "run", "--task", str(demo_task), "--out", str(tmp_path / "o"), "--model", "replay:x"]
    result = spu(*run, "-c", "limits.stpe_limit=40")
    assert result.returncode == 2, result.stderr
    assert "Did you mean limits.step_limit?" in result.stderr
    assert not (tmp_path / "o").exists()  # refused before anything is written
    config = tmp_path / "agent.yaml"
    config.write_text("tools:\n  mcp:\n    requird: true\n")
    result = spu(*run, "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert "Did you mean tools.mcp.required?" in result.stderr


@pytest.mark.parametrize("bad", ["noequals", "=3", "a..b=1", "limits.step_limit.x=1", "model.temperature=[1"])
def test_bad_overrides_say_why(bad):
    with pytest.raises(ConfigError):
        load_config(None, [bad])


def test_price_lookup_and_cost():
    prices = load_config(
        None, ["prices={gpt-4.1: {input: 2.0, output: 8.0, cache_read: 0.5}, gpt-4.1-mini: {input: 0.4}}"]
    ).prices
    assert find_price(prices, "gpt-4.1-mini-2025-04-14") == prices["gpt-4.1-mini"]  # longest prefix wins
    assert find_price(prices, "openai/gpt-4.1") == prices["gpt-4.1"]
    assert find_price(prices, "llama-3") is None
    usage = Usage(
        input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=2_000_000, cache_write_tokens=0
    )
    assert cost_usd(usage, prices["gpt-4.1"]) == pytest.approx(2.0 + 4.0 + 1.0)


def conversation(n_turns: int, output_chars: int = 1000) -> list[dict]:
    messages = [{"role": "system", "content": "S" * 500}, {"role": "user", "content": "T" * 500}]
    for i in range(n_turns):
        name = "submit_rankings" if i == 1 else "bash"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{i}", "name": name, "arguments_raw": "{}"}],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": str(i) * output_chars}
        )
    return messages


SECTION = load_config(
    None,
    [
        "context.trigger_fraction=0.8",
        "context.target_fraction=0.5",
        "context.keep_recent_turns=2",
        "context.chars_per_token=1.0",
    ],
).context


def test_elision_keeps_system_task_drafts_and_recent_turns():
    window = ContextWindow(SECTION, window_tokens=8000)
    messages = conversation(10)  # about 11,000 characters = tokens here
    elided = window.fit(messages, [])
    tool_outputs = [m for m in messages if m["role"] == "tool"]
    assert elided == 7  # 11k -> under 4k needs 7 of the 7 elidable outputs (turns 0, 2-7)
    assert [m.get("elided", False) for m in tool_outputs] == [True, False] + [True] * 6 + [False, False]
    assert tool_outputs[1]["content"] == "1" * 1000  # submit_rankings result kept
    assert messages[0]["content"] == "S" * 500 and messages[1]["content"] == "T" * 500
    assert tool_outputs[0]["content"].startswith(
        "[elided to fit the context window: the 1000-character output of bash"
    )


def test_no_elision_below_the_trigger_and_forced_after_an_overflow():
    window = ContextWindow(SECTION, window_tokens=100_000)
    messages = conversation(6)
    assert window.fit(messages, []) == 0
    assert window.fit(messages, [], overflowed=True) >= 1  # the provider said no: elide anyway
    assert window.chars_per_token == pytest.approx(0.8)  # and trust the estimate less


def test_calibration_from_reported_usage():
    window = ContextWindow(load_config().context, window_tokens=1000)
    window.calibrate(chars=40_000, prompt_tokens=10_000)
    assert window.chars_per_token == 4.0
    assert window.estimate_tokens([{"role": "user", "content": "x" * 4000}], []) == 1000


def test_spu_agent_run_parses_the_task_once(demo_task, tmp_path, monkeypatch):
    """The CLI loads the task; the runner, the ensemble and the consensus take that object."""
    from typer.testing import CliRunner

    import spu_common.task
    from spu.cli import make_app

    calls = []
    real = spu_common.task.load_task
    monkeypatch.setattr(spu_common.task, "load_task", lambda path: calls.append(path) or real(path))
    args = ["agent", "run", "--task", str(demo_task), "--out", str(tmp_path / "o"), "--json"]
    args += ["--model", "replay:demo-aromatic-acidity", "--ensemble", "2", "-c", "tools.mcp.enabled=false"]
    result = CliRunner().invoke(make_app(["scaffold.agent.cli"]), args)
    assert result.exit_code in (0, 1), result.output
    assert len(json.loads(result.stdout)["members"]) == 2
    assert calls == [demo_task]
