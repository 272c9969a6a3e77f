"""Fixtures for the reference agent's tests: scripted model servers on loopback, the demo task, configs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_model_server import ScriptedModelServer


@pytest.fixture
def model_server() -> Iterator[Any]:
    """``model_server(script, default=None, delay_s=0, context_limit_chars=None)`` starts a scripted
    server."""
    started: list[ScriptedModelServer] = []

    def start(script: list[Any] | None = None, **kw: Any) -> ScriptedModelServer:
        server = ScriptedModelServer(script, **kw)
        server.__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def demo_task() -> Path:
    from environment.demo_tasks import demo_task_dir

    return demo_task_dir("aromatic-acidity")


@pytest.fixture
def demo_answers() -> Path:
    from environment.demo_tasks import demo_answers_path

    return demo_answers_path("aromatic-acidity")


@pytest.fixture
def agent_config(monkeypatch) -> Any:
    """``agent_config("limits.step_limit=5", ...)``: the embedded defaults, no MCP server, fast retries."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    from scaffold.agent.config import load_config

    def make(*overrides: str, mcp: bool = False) -> dict[str, Any]:
        base = ["model.retry.backoff_initial_s=0.01", "model.retry.backoff_max_s=0.05"]
        if not mcp:
            base.append("tools.mcp.enabled=false")
        return load_config(None, [*base, *overrides])

    return make


@pytest.fixture
def harbor_python() -> Path:
    """Python of the Harbor venv (Python >= 3.12 with harbor installed): ``SPU_HARBOR_PYTHON`` or the
    repository's ``.harbor-venv`` made by ``bash scripts/setup-harbor.sh``; the ATIF tests skip without it."""
    repo_venv = Path(__file__).resolve().parents[2] / ".harbor-venv" / "bin" / "python"
    value = Path(os.environ.get("SPU_HARBOR_PYTHON") or repo_venv)
    if not value.exists():
        pytest.skip("no Harbor venv: run `bash scripts/setup-harbor.sh` or set SPU_HARBOR_PYTHON")
    return value
