"""What tests and benches that speak MCP on the wire share: the initialize request, a free loopback port,
`spu serve` over HTTP on loopback for the length of a test, and `spu serve` over stdio driven with raw frames
(:class:`RawServer`; bench/durability.py imports it from here)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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


class RawServer:
    """`spu serve` over stdio driven with raw JSON-RPC frames, not the SDK's client: to send what a client
    would not (broken frames), to keep many calls in flight, or to SIGKILL the server the moment a reply
    arrives. ``initialize=False`` leaves the handshake to the caller. A reply that does not come within its
    time fails the caller (an ``AssertionError``), but for :meth:`next_reply`, which returns None."""

    def __init__(self, env: dict[str, str], *, initialize: bool = True) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spu", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.buf = b""
        #: replies read while waiting for another one, by id
        self.replies: dict[Any, dict[str, Any]] = {}
        self.next_id = 1
        if initialize:
            self.request("initialize", INIT["params"])
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any] | bytes) -> None:
        """One frame: a message, or bytes sent as they are (a newline added)."""
        assert self.proc.stdin is not None
        frame = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(frame + b"\n")
        self.proc.stdin.flush()

    def _message(self, deadline: float) -> dict[str, Any] | None:
        """The next message the server writes, or None at the deadline or when its output ends."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def next_reply(self, timeout: float = 120) -> dict[str, Any] | None:
        """The next message that is a reply, whatever its id (notifications skipped), or None after
        ``timeout`` or when the server's output ends."""
        deadline = time.monotonic() + timeout
        while (message := self._message(deadline)) is not None:
            if "method" not in message:
                return message
        return None

    def ask(self, method: str, params: dict[str, Any]) -> int:
        """Send a request without waiting for its reply; returns its id (for :meth:`reply`)."""
        rid, self.next_id = self.next_id, self.next_id + 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def reply(self, rid: int, timeout: float = 120) -> dict[str, Any]:
        """The reply to request ``rid`` (replies to others that come first are kept)."""
        deadline = time.monotonic() + timeout
        while rid not in self.replies:
            message = self._message(deadline)
            assert message is not None, f"no reply to request {rid} (the server's output ended or it hung)"
            if "id" in message:
                self.replies[message["id"]] = message
        return self.replies.pop(rid)

    def request(self, method: str, params: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        return self.reply(self.ask(method, params), timeout)

    def call(self, tool: str, arguments: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        """A tool's result (``structuredContent``, ``isError`` ...)."""
        return self.request("tools/call", {"name": tool, "arguments": arguments}, timeout)["result"]

    def call_all(self, calls: list[tuple[str, dict[str, Any]]], timeout: float = 600) -> list[dict[str, Any]]:
        """The results of ``calls`` (tool, arguments), all sent at once: the frames go from a thread while the
        replies are read, else both pipes fill and both sides wait."""
        rids = list(range(self.next_id, self.next_id + len(calls)))
        self.next_id += len(calls)
        frames = [
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}
            for rid, (tool, args) in zip(rids, calls, strict=True)
        ]
        sender = threading.Thread(target=lambda: [self.send(f) for f in frames], daemon=True)
        sender.start()
        deadline = time.monotonic() + timeout
        results = [self.reply(rid, max(0.0, deadline - time.monotonic()))["result"] for rid in rids]
        sender.join()
        return results

    def kill(self) -> None:
        """SIGKILL, at once: nothing the server has not written yet survives."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
