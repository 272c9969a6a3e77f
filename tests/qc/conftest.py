"""Fixtures for the chemistry tool tests: a ToolContext whose artifacts land in a private work directory."""

from __future__ import annotations

import pytest

from tools_server.core.context import ToolContext


@pytest.fixture
def ctx(tmp_path, monkeypatch) -> ToolContext:
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "cache"))
    return ToolContext("test_tool", "job-1", threads=1)
