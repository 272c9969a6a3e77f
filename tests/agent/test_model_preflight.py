"""`spu agent run` with a model that cannot work stops with exit 2 and one line before any run starts: a
missing recording (it ended in a 55-line traceback), a recording made for another task (used silently), the
provider's own API without a key and without --base-url (retried for 164 s)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from environment.demo_tasks import demo_task_dir
from scaffold.agent.config import load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("slug", "model", "env", "message"),
    [
        ("aromatic-acidity", "replay:no-such-recording", {}, "no recording 'no-such-recording': not a file"),
        (
            "enzyme-kinetics",
            "replay:demo-aromatic-acidity",
            {},
            "the recording was made for task demo-aromatic-acidity, not 'demo-enzyme-kinetics'",
        ),
        ("aromatic-acidity", "openai-responses:gpt-5", {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY is not set"),
    ],
)
def test_agent_run_refuses_a_model_that_cannot_work_before_running(
    spu_env, tmp_path, slug, model, env, message
):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "agent",
            "run",
            "--task",
            str(demo_task_dir(slug)),
            "--out",
            str(out),
            "--model",
            model,
        ],
        cwd=REPO,
        env={**spu_env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()  # no run started: not even the fallback submission was written


MODEL = load_config().model  # the model section check_model gets from `spu agent run`


def test_a_key_or_a_base_url_lets_a_remote_model_through(monkeypatch, model_server):
    from scaffold.agent.models import ModelSpec, check_model

    spec = ModelSpec.parse("anthropic:claude-x")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY is not set"):
        check_model(spec, MODEL, base_url=None, task_id="t")
    check_model(spec, MODEL, base_url=model_server([]).url, task_id="t")  # a server of one's own
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    check_model(spec, MODEL, base_url=None, task_id="t")
    # the key's variable can be renamed in the agent config (model.api_key_env)
    with pytest.raises(ValueError, match="MY_KEY is not set"):
        check_model(spec, MODEL.model_copy(update={"api_key_env": "MY_KEY"}), base_url=None, task_id="t")
    # a recording that names no task (a hand-made one) fits any task
    check_model(
        ModelSpec.parse("replay:demo-aromatic-acidity"), MODEL, base_url=None, task_id="demo-aromatic-acidity"
    )


# -- a dead endpoint ------------------------------------------------------------------------------------
# On 39e2847 `--base-url http://127.0.0.1:1/v1` (connection refused) ran 185 s of retries, and
# `--base-url notaurl` passed the pre-run check and was still retrying at 112 s.


def _refused_url() -> str:
    """A loopback URL nothing listens on: a port bound and released (the kernel refuses connections)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _agent_run(spu_env, tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", "agent", "run", str(demo_task_dir("aromatic-acidity")), *args],
        cwd=REPO,
        env={**spu_env, "OPENAI_API_KEY": "sk-test"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("model", "url", "message"),
    [
        ("openai:m", "notaurl", "--base-url 'notaurl': has no scheme"),
        ("openai:m", "ftp://127.0.0.1/v1", "has the scheme 'ftp'"),
        ("openai:m", "http:///v1", "names no host"),
        ("replay:demo-aromatic-acidity", "notaurl", "--base-url 'notaurl': has no scheme"),  # any model
        ("openai:m", "REFUSED", "connection refused (start the server, or correct the URL)"),
        ("anthropic:m", "http://model.example.invalid/v1", "reserved name that never resolves"),
    ],
)
def test_a_base_url_that_cannot_answer_stops_the_run_before_it_starts(spu_env, tmp_path, model, url, message):
    out = tmp_path / "out"
    url = _refused_url() if url == "REFUSED" else url
    proc = _agent_run(spu_env, tmp_path, "-o", str(out), "--model", model, "--base-url", url)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_an_invalid_name_is_refused_without_a_lookup_and_an_unknown_host_said(monkeypatch):
    """`.invalid` never resolves (RFC 6761): no resolver is asked. Another name that does not resolve
    (a resolver stub answers as a resolver does) is said in one line."""
    from spu_common.endpoints import unreachable

    looked_up: list[str] = []

    def resolver(host, *args, **kwargs):
        looked_up.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    assert "never resolves" in unreachable("http://llm.example.invalid:8000/v1")
    assert looked_up == []
    assert unreachable("https://llm.internal.example/v1") == (
        "the host llm.internal.example does not resolve (Name or service not known)"
    )
    assert looked_up == ["llm.internal.example"]


def test_a_refused_connection_or_unknown_host_is_not_retried_until_the_server_has_answered(
    model_server, agent_config, monkeypatch
):
    """Before the endpoint's first answer a refused connection and an unknown host end the call at once
    (no retry, no wait); once the server has answered, a refused connection is retried like a timeout (a
    server restarting), and 429/5xx stay retried."""
    from scaffold.agent.models import make_model
    from scaffold.agent.models.base import ModelError, RetryableError

    config = agent_config("model.retry.max_attempts=4").model
    messages = [{"role": "user", "content": "rank"}]
    waits: list[float] = []  # the retry waits, recorded instead of slept
    model = make_model("openai:m", config, base_url=_refused_url())
    model.sleep = waits.append
    with pytest.raises(ModelError, match=r"cannot reach .*the connection was refused") as refused:
        model.query(messages, [])
    assert not isinstance(refused.value, RetryableError) and waits == []

    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):  # answers as a resolver does for a name it does not know
        if host == "llm.internal.example":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    model = make_model("openai:m", config, base_url="http://llm.internal.example/v1")
    model.sleep = waits.append
    with pytest.raises(ModelError, match="the host name does not resolve"):
        model.query(messages, [])
    assert waits == []

    close = {"connection": "close"}  # no connection kept open: the next call connects anew
    reply = {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    server = model_server(
        [
            {"status": 503, "headers": close, "body": "warming up"},
            {"status": 200, "headers": close, "body": reply},
        ]
    )
    model = make_model("openai:m", config, base_url=server.url)
    model.sleep = waits.append
    assert model.query(messages, []).message["content"] == "ok" and len(waits) == 1  # 5xx: retried
    server.close()  # the server goes away: now refused, and retried until the attempts run out
    with pytest.raises(RetryableError, match="ConnectError"):
        model.query(messages, [])
    assert len(waits) == 1 + 3
