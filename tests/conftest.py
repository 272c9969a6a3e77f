"""Fixtures shared by every test: a loopback-only network guard, private work and cache directories, and a
real `spu serve` process driven by the official MCP Python client over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent
NETGUARD = Path(__file__).resolve().parent / "_netguard"

# Every Python process the tests start loads the guard through PYTHONPATH; this one loads it now.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(NETGUARD), str(REPO), os.environ.get("PYTHONPATH")])
)
sys.path.insert(0, str(NETGUARD))
import sitecustomize  # noqa: E402 - the network guard loads once its folder is on the path

# Property-based tests: a fixed seed and a modest budget by default (CI); SPU_HYPOTHESIS=deep for a search
# ten times larger and random (docs/testing.md). A test that pins max_examples keeps its own.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.register_profile("deep", deadline=None, max_examples=600)
settings.load_profile(os.environ.get("SPU_HYPOTHESIS", "ci"))


@pytest.fixture(autouse=True)
def _loopback_only():
    """Keep the guard in place for every test, whatever another plugin did to socket.connect."""
    import socket

    socket.socket.connect = sitecustomize._guarded_connect
    socket.socket.connect_ex = sitecustomize._guarded_connect_ex
    yield


def _has_cuda() -> bool:
    from tools_server.core import hardware

    return hardware.has_gpu()


#: Tests measured at 1 s or more (bench/test_durations.py writes the list): marked ``slow`` at collection, so
#: ``-m "not slow"`` is the quick subset (docs/testing.md).
SLOW_LIST = Path(__file__).resolve().parent / "slow_tests.txt"


def _slow_ids() -> set[str]:
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines() if SLOW_LIST.is_file() else []
    return {line for line in lines if line and not line.startswith("#")}


def pytest_collection_modifyitems(config, items):
    slow = _slow_ids()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def spu_env(tmp_path, monkeypatch) -> dict[str, str]:
    """Private SPU_WORKDIR and SPU_CACHE_DIR for one test; returns the environment for subprocesses."""
    work = tmp_path / "spu-work"
    cache = tmp_path / "spu-cache"
    work.mkdir()
    cache.mkdir()
    monkeypatch.setenv("SPU_WORKDIR", str(work))
    monkeypatch.setenv("SPU_CACHE_DIR", str(cache))
    # Warm workers import every engine at start-up: on for users, off for the many short-lived test
    # servers (tests/core/test_performance.py turns it on where it is what is tested).
    monkeypatch.setenv("SPU_WARM_WORKERS", "0")
    return dict(os.environ)


class McpServer:
    """`spu serve` over stdio, held open by the real MCP client on a background event loop."""

    def __init__(self, env: dict[str, str], args: list[str] | None = None) -> None:
        self.env = env
        self.args = args or []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ready: Future = Future()
        self._stop: asyncio.Event | None = None
        self._task = asyncio.run_coroutine_threadsafe(self._main(), self._loop)
        self._ready.result(timeout=60)

    async def _main(self) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "spu", "serve", *self.args],
            env=self.env,
            cwd=str(REPO),
        )
        self._stop = asyncio.Event()
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self.session = session
                self._ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def _run(self, coro, timeout: float = 300) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def list_tools(self) -> list[Any]:
        return self._run(self.session.list_tools()).tools

    def call(self, name: str, arguments: dict[str, Any] | None = None, progress=None, timeout: float = 300):
        """The raw CallToolResult. ``progress`` is an async callback (progress, total, message)."""
        return self._run(self.session.call_tool(name, arguments or {}, progress_callback=progress), timeout)

    def call_ok(self, name: str, arguments: dict[str, Any] | None = None, **kw) -> dict[str, Any]:
        result = self.call(name, arguments, **kw)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert not result.is_error, f"{name} failed: {text}"
        assert result.structured_content is not None, f"{name} returned no structured content: {text}"
        return result.structured_content

    def call_error(self, name: str, arguments: dict[str, Any] | None = None, **kw) -> dict[str, Any]:
        """Call a tool expected to fail; returns the error dict (code, message, hint)."""
        result = self.call(name, arguments, **kw)
        assert result.is_error, f"{name} succeeded unexpectedly: {result.structured_content}"
        return result.structured_content["error"]

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        with contextlib.suppress(Exception):  # shutdown noise is not a test failure
            self._task.result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@pytest.fixture
def mcp_server(spu_env) -> Iterator[McpServer]:
    server = McpServer(spu_env)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def start_mcp_server() -> Iterator[Any]:
    """A factory: ``start_mcp_server(env, args=None)`` starts another server; all are closed at the end."""
    started: list[McpServer] = []

    def start(env: dict[str, str], args: list[str] | None = None) -> McpServer:
        server = McpServer(env, args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
