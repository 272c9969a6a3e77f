"""Shared helpers for the MD tests: a ToolContext writing into the test's private work directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools_server.core.context import ToolContext

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def md_ctx(spu_env):
    def make(tool: str = "md_run", job_id: str = "job") -> ToolContext:
        return ToolContext(tool, job_id, threads=2)

    return make
