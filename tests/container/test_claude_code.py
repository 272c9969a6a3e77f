"""Claude Code as the Harbor agent (`-a claude-code`), in the agent's container without network: Harbor
registers the `spu` MCP server that task.toml declares, Claude Code talks to a scripted Anthropic Messages
server on the container's loopback (claude-code/model_server.py), calls the spu tool `system_info`, writes
`/app/output/rankings.json` with its Write tool, and the separate verifier scores that file
(docs/harbor.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from container_helpers import check_sandbox, docker, spu

from environment.demo_tasks import demo_answers_path, demo_task_dir
from tools_server.commands.clients import CLAUDE_HEADLESS_ENV

HERE = Path(__file__).resolve().parent / "claude-code"
CLAUDE_IMAGE = "spu-scaffold:test-claude"
PORT = 8799


@pytest.fixture(scope="session")
def claude_image(test_image) -> str:
    """The test image plus Claude Code from npm (cached after the first build)."""
    docker(
        "build",
        "--network",
        "host",
        "--build-arg",
        f"BASE_IMAGE={test_image}",
        "-t",
        CLAUDE_IMAGE,
        str(HERE),
        timeout=1800,
    )
    return CLAUDE_IMAGE


def test_claude_code_calls_an_spu_tool_and_is_graded(claude_image, run_trial, tmp_path, monkeypatch):
    task = tmp_path / "claude"
    spu("harbor", "export", str(demo_task_dir("aromatic-acidity")), str(task), "--image", claude_image)
    # the scripted model server, started with the container on its loopback; no network otherwise
    (task / "environment" / "model_server.py").write_text((HERE / "model_server.py").read_text())
    with (task / "environment" / "Dockerfile").open("a", encoding="utf-8") as fh:
        fh.write("COPY model_server.py /opt/spu-test/model_server.py\n")
    (task / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    network_mode: none\n"
        f'    command: ["sh", "-c", "python3 /opt/spu-test/model_server.py {PORT} & exec sleep infinity"]\n'
    )
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
    log = docker("exec", trial.agent_container, "cat", "/tmp/model-server.jsonl").splitlines()
    requests = [json.loads(line) for line in log]
    # Claude Code offered the spu server's tools (from task.toml) and sent the tool's result back
    offered = {t["name"] for r in requests for t in r["body"].get("tools") or []}
    assert "mcp__spu__system_info" in offered and "Write" in offered, sorted(offered)[:20]
    results = [
        block
        for r in requests
        for m in r["body"].get("messages") or []
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        and block["tool_use_id"] == "toolu_spu_1"
    ]
    assert results and not results[-1].get("is_error"), results[-1:]
    assert "cpu" in json.dumps(results[-1]["content"]).lower()  # system_info's report
    # the verifier graded the file Claude Code wrote: the reward is spu grade's score of it
    assert trial.result.get("exception_info") is None, trial.result["exception_info"]
    reward = trial.result["verifier_result"]["rewards"]["reward"]
    written = docker("exec", trial.agent_container, "cat", "/app/output/rankings.json")
    (tmp_path / "rankings.json").write_text(written)
    graded = json.loads(
        spu(
            "grade",
            str(tmp_path / "rankings.json"),
            "--task",
            str(demo_task_dir("aromatic-acidity")),
            "--answers",
            str(demo_answers_path("aromatic-acidity")),
            "--json",
        ).stdout
    )
    assert graded["valid"] is True and reward == pytest.approx(graded["score"], abs=1e-9)
    check_sandbox(trial)
