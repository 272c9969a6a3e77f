"""Claude Code (`-a claude-code`) and Codex (`-a codex`) as the Harbor agent, in the agent's container without
network: Harbor registers the `spu` MCP server that task.toml declares, the client talks to a scripted model
on the container's loopback (clients/trial_model.py, on tests/scripted_model_server.py), calls the spu
tool `system_info`, writes `/app/output/rankings.json` with its own tool (Claude Code's Write, Codex's shell),
and the separate verifier scores that file (docs/harbor.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from container_helpers import (
    TEST_IMAGE,
    Trial,
    build_image,
    check_sandbox,
    docker,
    grade_demo,
    remove_image,
    spu,
    task_dir,
)
from scripted_model_server import offered_tools, tool_results

from environment.demo_tasks import demo_task_dir
from tools_server.commands.clients import CLAUDE_HEADLESS_ENV

HERE = Path(__file__).resolve().parent / "clients"
TESTS = HERE.parents[1]
PORT = 8799


@pytest.fixture(scope="session")
def clients_image(test_image) -> Iterator[str]:
    """The test image plus Claude Code and Codex from npm and the scripted model (cached after the first
    build; the build context is tests/, which tests/.dockerignore narrows to the model's two files), under
    this session's own tag of ``spu-scaffold:test-clients``, removed at the end."""

    def build(tag: str) -> None:
        context = ["-f", str(HERE / "Dockerfile"), str(TESTS)]
        docker(
            "build",
            "--network",
            "host",
            "--build-arg",
            f"BASE_IMAGE={test_image}",
            "-t",
            tag,
            *context,
            timeout=1800,
        )

    tag = build_image(f"{TEST_IMAGE}-clients", build)
    yield tag
    remove_image(tag)


def _export_with_model(tmp_path: Path, name: str, image: str) -> Path:
    """The demo task exported on the clients image, its agent's container starting the scripted model on
    loopback."""
    task = task_dir(tmp_path, name)
    spu("harbor", "export", str(demo_task_dir("aromatic-acidity")), str(task), "--image", image)
    compose = task / "environment" / "docker-compose.yaml"
    config = yaml.safe_load(compose.read_text())
    config["services"]["main"] |= {
        "network_mode": "none",
        "command": ["sh", "-c", f"python3 /opt/spu-test/trial_model.py {PORT} & exec sleep infinity"],
    }
    compose.write_text(yaml.safe_dump(config))
    return task


def _requests(trial: Trial) -> list[dict]:
    # the scripted model logs each request (json) and its reply to the container's temporary folder
    read = (
        "import pathlib, tempfile; print((pathlib.Path(tempfile.gettempdir()) / 'model-server.jsonl')"
        ".read_text(), end='')"
    )
    log = docker("exec", trial.agent_container, "python3", "-c", read).splitlines()
    return [json.loads(line) for line in log]


def _check_graded(trial: Trial, tmp_path: Path) -> None:
    """The verifier graded the file the client wrote: the reward is `spu grade`'s score of it; and
    ``check_sandbox``."""
    assert trial.result.get("exception_info") is None, trial.result["exception_info"]
    reward = trial.result["verifier_result"]["rewards"]["reward"]
    written = docker("exec", trial.agent_container, "cat", "/app/output/rankings.json")
    (tmp_path / "rankings.json").write_text(written)
    graded = grade_demo(tmp_path / "rankings.json", "aromatic-acidity")
    assert graded["valid"] is True and reward == pytest.approx(graded["score"], abs=1e-9)
    check_sandbox(trial)


def test_claude_code_calls_an_spu_tool_and_is_graded(clients_image, run_trial, tmp_path, monkeypatch):
    task = _export_with_model(tmp_path, "claude", clients_image)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-scripted-test")
    trial = run_trial(
        task,
        "-a",
        "claude-code",
        "-m",
        "anthropic/claude-sonnet-4-5",
        "--base-url",
        f"http://127.0.0.1:{PORT}",
        "--skip-credential-checks",
        # what `spu config claude` puts in a project's settings (tools_server/commands/clients.py): the spu
        # tools offered at once, not behind a tool search, and the server awaited at start
        *[arg for item in CLAUDE_HEADLESS_ENV.items() for arg in ("--ae", "=".join(item))],
    )
    requests = _requests(trial)
    # Claude Code offered the spu server's tools (from task.toml) and sent the tool's result back
    offered = {t for r in requests for t in offered_tools(r["json"], r["wire"])}
    assert "mcp__spu__system_info" in offered and "Write" in offered, sorted(offered)[:20]
    results = [
        block
        for r in requests
        for block in tool_results(r["json"], r["wire"])
        if block["tool_use_id"] == "toolu_spu_1"
    ]
    assert results and not results[-1].get("is_error"), results[-1:]
    assert "cpu" in json.dumps(results[-1]["content"]).lower()  # system_info's report
    _check_graded(trial, tmp_path)


def test_codex_calls_an_spu_tool_and_is_graded(clients_image, run_trial, tmp_path, monkeypatch):
    task = _export_with_model(tmp_path, "codex", clients_image)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-test")
    trial = run_trial(
        task,
        "-a",
        "codex",
        "-m",
        "openai/gpt-5",
        "--base-url",
        f"http://127.0.0.1:{PORT}/v1",
        "--skip-credential-checks",
    )
    requests = _requests(trial)
    replies = [item for r in requests for item in r["reply"]["output"]]
    # Codex offered the spu server's tools (registered by Harbor from task.toml), ran system_info through it
    # and sent its output back; then its shell wrote the submission
    spu_calls = [r for r in replies if r.get("name") == "system_info"]
    assert spu_calls, [r.get("name") for r in replies]
    outputs = {
        item["call_id"]: item.get("output") for r in requests for item in tool_results(r["json"], r["wire"])
    }
    output = json.dumps(outputs.get(spu_calls[0]["call_id"]))
    assert "cpu" in output.lower() and "error" not in output.lower()[:200], output[:500]
    assert replies[-1]["type"] == "message"
    _check_graded(trial, tmp_path)
