"""`spu agent run` with a model that cannot work stops with exit 2 and one line before any run starts: a
missing recording (it ended in a 55-line traceback), a recording made for another task (used silently), the
provider's own API without a key and without --base-url (retried for 164 s)."""

from __future__ import annotations

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


def test_a_key_or_a_base_url_lets_a_remote_model_through(monkeypatch):
    from scaffold.agent.models import ModelSpec, check_model

    spec = ModelSpec.parse("anthropic:claude-x")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY is not set"):
        check_model(spec, MODEL, base_url=None, task_id="t")
    check_model(spec, MODEL, base_url="http://127.0.0.1:8080", task_id="t")  # a server of one's own
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    check_model(spec, MODEL, base_url=None, task_id="t")
    # the key's variable can be renamed in the agent config (model.api_key_env)
    with pytest.raises(ValueError, match="MY_KEY is not set"):
        check_model(spec, MODEL.model_copy(update={"api_key_env": "MY_KEY"}), base_url=None, task_id="t")
    # a recording that names no task (a hand-made one) fits any task
    check_model(
        ModelSpec.parse("replay:demo-aromatic-acidity"), MODEL, base_url=None, task_id="demo-aromatic-acidity"
    )
