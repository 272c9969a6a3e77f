"""Model adapters against real HTTP servers on loopback speaking each wire format (scripted replies)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from scaffold.agent.config import load_config
from scaffold.agent.models import PROVIDERS as REGISTERED
from scaffold.agent.models import adapter_class, make_model
from scaffold.agent.models.base import (
    AuthError,
    ContextOverflow,
    HttpModel,
    ModelError,
    QuotaError,
    RetryableError,
    ToolDef,
)

TOOLS = [
    ToolDef("bash", "run a command", {"type": "object", "properties": {"command": {"type": "string"}}}),
    ToolDef(
        "chem_parse", "parse molecules", {"type": "object", "properties": {"molecules": {"type": "array"}}}
    ),
]
#: the HTTP wire formats (every registered provider but the replay and the baseline, which speak none)
PROVIDERS = [p for p in REGISTERED if issubclass(adapter_class(p), HttpModel)]


def conversation() -> list[dict]:
    return [{"role": "system", "content": "You are a scientist."}, {"role": "user", "content": "Rank these."}]


def model_for(provider: str, server, config, **kw):
    model = make_model(f"{provider}:scripted-1", config.model, base_url=server.url, **kw)
    model.sleep = lambda s: model.slept.append(s)  # record retry waits instead of sleeping
    model.slept = []
    return model


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_calls_and_text_are_read_in_each_wire_format(provider, model_server, agent_config):
    server = model_server(
        [
            {
                "text": "Parsing first.",
                "tool_calls": [
                    {"name": "chem_parse", "arguments": {"molecules": ["CCO"]}},
                    {"name": "bash", "arguments": {"command": "ls"}},
                ],
            }
        ]
    )
    model = model_for(provider, server, agent_config())
    turn = model.query(conversation(), TOOLS)
    msg = turn.message
    assert msg["content"] == "Parsing first."
    assert [c["name"] for c in msg["tool_calls"]] == ["chem_parse", "bash"]
    assert msg["tool_calls"][0]["arguments"] == {"molecules": ["CCO"]}
    assert all(c["error"] is None for c in msg["tool_calls"])
    assert (
        turn.usage.prompt_tokens == len(server.requests[0]["raw"]) // 4
    )  # the server's count, all of it read
    assert (
        server.requests[0]["path"]
        == {"openai": "/chat/completions", "openai-responses": "/responses", "anthropic": "/v1/messages"}[
            provider
        ]
    )


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
def test_malformed_tool_call_json_is_flagged_not_raised(provider, model_server, agent_config):
    server = model_server([{"tool_calls": [{"name": "bash", "arguments": '{"command": "ls"'}]}])
    turn = model_for(provider, server, agent_config()).query(conversation(), TOOLS)
    call = turn.message["tool_calls"][0]
    assert call["arguments"] is None
    assert "not valid JSON" in call["error"]
    assert call["arguments_raw"] == '{"command": "ls"'


def test_api_keys_and_headers(model_server, agent_config):
    server = model_server([{"text": "a"}, {"text": "b"}])
    config = agent_config()
    model_for("openai", server, config).query(conversation(), TOOLS)
    model_for("anthropic", server, config).query(conversation(), TOOLS)
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-test-openai"
    assert server.requests[1]["headers"]["x-api-key"] == "sk-test-anthropic"
    assert server.requests[1]["headers"]["anthropic-version"] == "2023-06-01"


@pytest.mark.parametrize("provider,status", [("openai", 429), ("anthropic", 529), ("openai-responses", 503)])
def test_retry_honours_retry_after(provider, status, model_server, agent_config):
    busy = {
        "status": status,
        "headers": {"retry-after": "2"},
        "body": {"error": {"message": "busy, slow down"}},
    }
    server = model_server([busy, busy, {"text": "ok"}])
    model = model_for(provider, server, agent_config())
    turn = model.query(conversation(), TOOLS)
    assert turn.message["content"] == "ok"
    assert turn.attempts == 3
    assert model.slept == [2.0, 2.0]
    assert len(server.requests) == 3


def test_retry_after_ms_and_backoff_without_header(model_server, agent_config):
    server = model_server(
        [
            {"status": 500, "body": "oops"},
            {
                "status": 429,
                "headers": {"retry-after-ms": "250"},
                "body": {"error": {"message": "rate limit"}},
            },
            {"text": "ok"},
        ]
    )
    model = model_for(
        "openai", server, agent_config("model.retry.backoff_initial_s=1.0", "model.retry.backoff_max_s=10")
    )
    model.query(conversation(), TOOLS)
    assert 0.5 <= model.slept[0] <= 1.0  # jittered backoff of the first attempt: 1 s * [0.5, 1]
    assert model.slept[1] == 0.25


def test_retries_run_out(model_server, agent_config):
    server = model_server([{"status": 502, "body": "bad gateway"}] * 3)
    model = model_for("openai", server, agent_config("model.retry.max_attempts=3"))
    with pytest.raises(RetryableError, match="502"):
        model.query(conversation(), TOOLS)
    assert len(server.requests) == 3


def test_a_retry_after_beyond_the_cap_is_not_waited_for(model_server, agent_config):
    server = model_server(
        [{"status": 429, "headers": {"retry-after": "3600"}, "body": {"error": {"message": "later"}}}]
    )
    model = model_for("openai", server, agent_config("model.retry.retry_after_max_s=60"))
    with pytest.raises(ModelError, match="asked to wait 3600"):
        model.query(conversation(), TOOLS)
    assert model.slept == []


@pytest.mark.parametrize(
    "reply,error",
    [
        ({"status": 401, "body": {"error": {"message": "Incorrect API key"}}}, AuthError),
        ({"status": 403, "body": {"error": {"message": "not allowed"}}}, AuthError),
        (
            {
                "status": 429,
                "body": {
                    "error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}
                },
            },
            QuotaError,
        ),
        (
            {
                "status": 400,
                "body": {
                    "error": {
                        "message": "maximum context length is 8192 tokens",
                        "code": "context_length_exceeded",
                    }
                },
            },
            ContextOverflow,
        ),
        (
            {
                "status": 400,
                "body": {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "prompt is too long: 250000 tokens > 200000",
                    },
                },
            },
            ContextOverflow,
        ),
        ({"status": 400, "body": {"error": {"message": "unknown parameter foo"}}}, ModelError),
    ],
)
def test_no_retry_on_auth_quota_overflow_or_bad_request(reply, error, model_server, agent_config):
    server = model_server([reply, {"text": "should not be reached"}])
    model = model_for("openai", server, agent_config())
    with pytest.raises(error) as info:
        model.query(conversation(), TOOLS)
    assert type(info.value) is error
    assert len(server.requests) == 1
    assert model.slept == []


def test_responses_reasoning_items_are_passed_back_verbatim(model_server, agent_config):
    server = model_server(
        [
            {
                "reasoning": "think about pKa",
                "text": "Let me check.",
                "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
            },
            {"text": "done"},
        ]
    )
    model = model_for("openai-responses", server, agent_config("model.reasoning_effort=high"))
    messages = conversation()
    turn = model.query(messages, TOOLS)
    assert turn.message["reasoning"] == "think about pKa"
    messages += [
        turn.message,
        {
            "role": "tool",
            "tool_call_id": turn.message["tool_calls"][0]["id"],
            "name": "bash",
            "content": "file.txt",
            "is_error": False,
        },
    ]
    model.query(messages, TOOLS)
    first, second = server.requests[0]["json"], server.requests[1]["json"]
    assert first["reasoning"] == {"effort": "high"}
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert first["instructions"] == "You are a scientist."
    items = second["input"]
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert reasoning[0]["encrypted_content"] == "ENCRYPTED-1" and reasoning[0]["id"] == "rs_1"
    output = next(i for i in items if i.get("type") == "function_call_output")
    assert output == {"type": "function_call_output", "call_id": "call_1_0", "output": "file.txt"}


def test_anthropic_thinking_blocks_are_passed_back_with_signatures(model_server, agent_config):
    server = model_server(
        [
            {
                "reasoning": "consider Hammett",
                "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
            },
            {"text": "done"},
        ]
    )
    model = model_for(
        "anthropic", server, agent_config("model.reasoning_effort=medium", "model.temperature=0.3")
    )
    messages = conversation()
    turn = model.query(messages, TOOLS)
    messages += [
        turn.message,
        {"role": "tool", "tool_call_id": "toolu_1_0", "name": "bash", "content": "boom", "is_error": True},
    ]
    model.query(messages, TOOLS)
    first, second = server.requests[0]["json"], server.requests[1]["json"]
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    assert "temperature" not in first  # the API refuses a temperature together with thinking
    assert first["max_tokens"] > 10000
    assistant = second["messages"][1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "consider Hammett",
        "signature": "SIG-1",
    }
    result = second["messages"][2]["content"][0]
    assert (
        result["type"] == "tool_result"
        and result["is_error"] is True
        and result["tool_use_id"] == "toolu_1_0"
    )


def strip_cache_control(value):
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


@pytest.mark.parametrize("provider", PROVIDERS)
def test_successive_requests_share_a_stable_prefix(provider, model_server, agent_config):
    """Everything sent before is resent unchanged at the start of the next request (what prefix caches
    need)."""
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {i}"}}]} for i in range(4)]
    server = model_server(script)
    model = model_for(provider, server, agent_config(), cache_key="spu-demo-v1")
    messages = conversation()
    for _ in range(4):
        turn = model.query(messages, TOOLS)
        call = turn.message["tool_calls"][0]
        messages += [
            turn.message,
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "name": "bash",
                "content": f"output of {call['arguments']['command']}",
                "is_error": False,
            },
        ]
    bodies = [strip_cache_control(r["json"]) for r in server.requests]
    key = {"openai": "messages", "openai-responses": "input", "anthropic": "messages"}[provider]
    for before, after in itertools.pairwise(bodies):
        assert after[key][: len(before[key])] == before[key]
        assert {k: v for k, v in after.items() if k != key} == {k: v for k, v in before.items() if k != key}
    # byte-level: the raw request up to the conversation is identical every time
    raws = [r["raw"] for r in server.requests]
    head = raws[0][: raws[0].index(f'"{key}"'.encode())]
    assert all(raw.startswith(head) for raw in raws)
    if provider == "anthropic":
        last = server.requests[-1]["json"]
        assert last["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert last["system"][-1]["cache_control"] == {"type": "ephemeral"}
        marked = [
            i for i, m in enumerate(last["messages"]) if any("cache_control" in b for b in m["content"])
        ]
        assert marked == [len(last["messages"]) - 3, len(last["messages"]) - 1]  # previous end, newest end
        assert json.dumps(last).count("cache_control") == 4  # the API allows at most 4
    else:
        assert {r["json"]["prompt_cache_key"] for r in server.requests} == {"spu-demo-v1"}


# -- the provider registry ---------------------------------------------------------------------------------


class EchoModel:
    """An adapter of a user's own, named by import path."""

    provider = "echo"

    def __init__(self, model: str, config: Any) -> None:
        self.model, self.config = model, config

    @classmethod
    def from_spec(cls, model, config, *, base_url=None, cache_key=None, paths=None):
        return cls(model, config)

    @property
    def name(self) -> str:
        return f"echo:{self.model}"

    def query(self, messages, tools):
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_every_registered_provider_names_its_adapter():
    from scaffold.agent.models import PROVIDERS, Model, adapter_class

    assert list(PROVIDERS) == ["openai", "openai-responses", "anthropic", "replay", "baseline"]
    for name in PROVIDERS:
        cls = adapter_class(name)
        assert cls.provider == name  # the trajectory's provider field is the registry's name
        assert callable(cls.from_spec) and callable(cls.query)
    assert isinstance(make_model("replay:demo-aromatic-acidity", load_config().model), Model)


def test_an_import_path_names_an_adapter_of_ones_own():
    from scaffold.agent.models import ModelSpec

    spec = ModelSpec.parse(f"{__name__}:EchoModel:tiny-1")
    assert (spec.provider, spec.model) == (f"{__name__}:EchoModel", "tiny-1")
    model = make_model(spec, load_config(None, ["model.temperature=0.1"]).model)
    assert isinstance(model, EchoModel) and model.name == "echo:tiny-1"
    assert model.config.temperature == 0.1  # the validated section, attributes and all


@pytest.mark.parametrize(
    "spec,message",
    [
        ("gemini:pro", "PROVIDER one of openai, openai-responses, anthropic, replay, baseline"),
        ("openai", "PROVIDER:MODEL"),
        ("no_such_module.x:Cls:m", "cannot import no_such_module.x:Cls"),
        ("json:JSONDecoder:m", "is not a model adapter"),
    ],
)
def test_an_unknown_provider_says_which_exist(spec, message):
    with pytest.raises(ValueError, match=message):
        make_model(spec, load_config().model)


def test_provider_lists_outside_the_registry_agree_with_it():
    """The CLI's help, docs/agent.md's table and Harbor's model names all follow PROVIDERS."""
    import ast
    import re
    import subprocess
    import sys
    from pathlib import Path

    from scaffold.agent.models import PROVIDERS

    repo = Path(__file__).resolve().parents[2]
    table = (
        (repo / "docs" / "agent.md").read_text(encoding="utf-8").split("## Providers", 1)[1].split("\n## ")[0]
    )
    assert re.findall(r"^\| `([a-z-]+):[A-Z]+` \|", table, flags=re.M) == list(PROVIDERS)
    for command in (["agent", "run"], ["batch"]):
        help_text = subprocess.run(
            [sys.executable, "-m", "spu", *command, "--help"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
            env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
        ).stdout
        assert ",".join(PROVIDERS) in "".join(help_text.replace("│", " ").split()), command
    harbor = ast.parse((repo / "scaffold" / "harbor_agent.py").read_text(encoding="utf-8"))
    mapping = next(
        ast.literal_eval(node.value)
        for node in ast.walk(harbor)
        if isinstance(node, ast.AnnAssign | ast.Assign)
        and "PROVIDER_MAP" in ast.dump(node.targets[0] if isinstance(node, ast.Assign) else node.target)
    )
    assert set(mapping.values()) <= set(PROVIDERS)
    # the baseline ranks by the task's card, which a Harbor task never holds (docs/harbor.md says so)
    assert set(PROVIDERS) - {"baseline"} <= set(mapping) and "baseline" not in mapping
    harbor_doc = (repo / "docs" / "harbor.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in harbor_doc for name in mapping)


def test_every_adapter_s_key_is_hidden_from_the_tools():
    from scaffold.agent.models import MODEL_KEY_ENV, PROVIDERS, adapter_class

    keys = {getattr(adapter_class(p), "api_key_env", "") for p in PROVIDERS} - {""}
    assert keys and keys <= set(MODEL_KEY_ENV)
