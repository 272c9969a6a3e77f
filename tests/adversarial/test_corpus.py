"""The adversarial corpus against a live server, over stdio (raw frames on the pipes) and streamable HTTP:
every case gets its stable answer within the time limit (0 hangs) and the server answers a ping after the
whole corpus (0 crashes)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from adversarial_corpus import Case, cases
from mcp_wire import INIT, http_spu_server

REPLY_TIMEOUT_S = 120.0
PING = b'{"jsonrpc":"2.0","id":999999,"method":"tools/list"}'
CASES = cases()


def _request_id(case: Case) -> Any:
    if case.reply_id != "same":
        return case.reply_id
    return json.loads(case.frame)["id"]


def _code_of(reply: dict[str, Any], kind: str) -> Any:
    if kind == "rpc":
        return (reply.get("error") or {}).get("code")
    result = reply.get("result") or {}
    structured = result.get("structuredContent") or {}
    if kind == "tool":
        return result.get("isError") and (structured.get("error") or {}).get("code")
    items = structured.get("items") or [{}]
    return (items[0].get("error") or {}).get("code")


def _check(case: Case, reply: dict[str, Any] | None) -> str | None:
    if reply is None:
        return f"{case.name}: no reply (hang)"
    kind, code = case.expect
    if reply.get("id") != _request_id(case):
        return f"{case.name}: reply id {reply.get('id')!r}, expected {_request_id(case)!r}"
    got = _code_of(reply, kind)
    if got != code:
        return f"{case.name}: got {got!r} ({json.dumps(reply)[:300]}), expected {kind} {code!r}"
    return None


class StdioServer:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spu", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.buf = b""

    def send(self, frame: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = REPLY_TIMEOUT_S) -> dict[str, Any] | None:
        """The next message that is a reply (notifications skipped), or None after ``timeout``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                message = json.loads(line)
                if "method" not in message:
                    return message
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def test_corpus_over_stdio(spu_env):
    server = StdioServer(spu_env)
    try:
        server.send(json.dumps(INIT).encode())
        assert server.reply() is not None, "no answer to initialize"
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        failures = []
        for case in CASES:
            server.send(case.frame)
            failure = _check(case, server.reply())
            if failure:
                failures.append(failure)
                if "hang" in failure:
                    break
        server.send(PING)
        ping = server.reply()
        assert server.proc.poll() is None, "the server died"
        assert ping is not None and ping.get("id") == 999999 and ping["result"]["tools"]
        assert not failures, "\n".join(failures)
    finally:
        server.close()


def _http_reply(response: httpx.Response) -> dict[str, Any] | None:
    text = response.text
    if "text/event-stream" in response.headers.get("content-type", ""):
        for line in text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if "method" not in message:
                    return message
        return None
    return json.loads(text) if text.strip() else None


@pytest.fixture
def http_url(spu_env):
    token = "k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se"  # 32 characters, only for the test's loopback server
    with http_spu_server(spu_env, token) as (url, proc):
        yield url, token, proc


def test_corpus_over_http(http_url):
    url, token, proc = http_url
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
    }
    with httpx.Client(timeout=REPLY_TIMEOUT_S) as client:
        init = client.post(url, json=INIT, headers=headers)
        assert init.status_code == 200, init.text
        session = {**headers, "mcp-session-id": init.headers["mcp-session-id"]}
        client.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=session)
        failures = []
        for case in CASES:
            try:
                response = client.post(url, content=case.frame, headers=session)
            except httpx.TimeoutException:
                failures.append(f"{case.name}: no reply (hang)")
                break
            failure = _check(case, _http_reply(response))
            if failure:
                failures.append(f"{failure} [HTTP {response.status_code}]")
        ping = client.post(url, content=PING, headers=session)
        assert proc.poll() is None, "the server died"
        assert ping.status_code == 200 and _http_reply(ping)["result"]["tools"]
    assert not failures, "\n".join(failures)
