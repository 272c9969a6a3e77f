"""What tests that speak MCP on the wire share: the initialize request, a free loopback port, and
`spu serve` over HTTP on loopback for the length of a test."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "spu-tests", "version": "0"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_spu_server(env: dict[str, str], token: str, *options: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """``spu serve --transport http`` on a free port (plus ``options``); yields its loopback /mcp URL and the
    process."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spu",
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--token",
            token,
            *options,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
