"""The HTTP checks shared by `spu serve --transport http` and `spu audit serve`, against both real servers on
loopback: body limits before the body is read, Content-Length 10^12 with no body, two Authorization
headers, Host before the body, stalled connections closed, the token-strength rule and port checks; and the
body deadline on a real uvicorn server running the same guard with a short deadline."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp_wire import http_spu_server

from tools_server.core.http_guard import HEADER_TIMEOUT_S, guard_requests, token_problem, uvicorn_options

REPO = Path(__file__).resolve().parents[2]
TOKEN = "Zq8vL2mX5nB7cV1kJ4hG6fD9sA3pO0iU"


@contextmanager
def audit_service(env: dict[str, str], tmp_path: Path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spu",
            "audit",
            "serve",
            "--log",
            str(tmp_path / "audit.jsonl"),
            "--port",
            "0",
        ],
        env={**env, "SPU_AUDIT_TOKEN": TOKEN},
        cwd=str(REPO),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        yield url, "/v1/call", proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


@pytest.fixture(params=["spu_serve", "audit_serve"])
def server(request, spu_env, tmp_path):
    """(host, port, path, process) of each real server we run."""
    if request.param == "spu_serve":
        with http_spu_server(spu_env, TOKEN) as (url, proc):
            hostport = url.split("/")[2]
            host, port = hostport.rsplit(":", 1)
            yield host, int(port), "/mcp", proc
    else:
        with audit_service(spu_env, tmp_path) as (url, path, proc):
            host, port = url.split("/")[2].rsplit(":", 1)
            yield host, int(port), path, proc


def _exchange(host: str, port: int, head: str, body: bytes = b"", timeout: float = 10) -> tuple[int, float]:
    """Send a raw request head (and a partial body); the status line's code and seconds to get it.

    ``timeout`` is below the servers' body deadline (BODY_TIMEOUT_S): a server that waited for a body that
    never comes answers nothing in time, so the refusals' status codes alone show they came first."""
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1]), time.monotonic() - started


def _head(port: int, path: str, *lines: str, host: str | None = None) -> str:
    return "\n".join([f"POST {path} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}", *lines, ""])


AUTH = f"Authorization: Bearer {TOKEN}"
JSON = "Content-Type: application/json\nAccept: application/json, text/event-stream"


def test_a_200_mb_body_is_refused_before_it_is_sent(server):
    host, port, path, proc = server
    status, _ = _exchange(host, port, _head(port, path, AUTH, JSON, "Content-Length: 200000000"), b"{")
    assert status == 413
    assert proc.poll() is None


def test_a_huge_content_length_without_a_body_is_not_held(server):
    host, port, path, _ = server
    status, _ = _exchange(host, port, _head(port, path, AUTH, JSON, f"Content-Length: {10**12}"))
    assert status == 413


def test_a_chunked_body_over_the_limit_is_cut(spu_env, tmp_path):
    with audit_service(spu_env, tmp_path) as (url, path, _):
        host, port = url.split("/")[2].rsplit(":", 1)
        chunk = b"x" * 65536
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20))  # 1.25 MiB > 1 MiB
        head = _head(int(port), path, AUTH, JSON, "Transfer-Encoding: chunked")
        status, _ = _exchange(host, int(port), head, body)
        assert status == 413


def test_two_authorization_headers_are_a_400(server):
    host, port, path, _ = server
    head = _head(port, path, AUTH, "Authorization: Bearer wrong", JSON, "Content-Length: 2")
    assert _exchange(host, port, head, b"{}")[0] == 400
    head = _head(port, path, "Authorization: Bearer wrong", AUTH, JSON, "Content-Length: 2")
    assert _exchange(host, port, head, b"{}")[0] == 400


def test_host_is_checked_before_the_body_is_read(server):
    host, port, path, _ = server
    # the body never comes: a server reading it first would hang until the client gives up
    head = _head(port, path, AUTH, JSON, "Content-Length: 1000", host="attacker.example")
    status, _ = _exchange(host, port, head)
    assert status == 421


def test_a_wrong_token_is_refused_before_the_body_is_read(server):
    host, port, path, _ = server
    status, _ = _exchange(host, port, _head(port, path, "Authorization: Bearer nope", "Content-Length: 500"))
    assert status == 401


def test_stalled_connections_are_closed(server):
    host, port, path, proc = server
    socks = []
    for i in range(4):
        sock = socket.create_connection((host, port), timeout=HEADER_TIMEOUT_S + 20)
        if i % 2:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())  # half a head
        socks.append(sock)
    started = time.monotonic()
    try:
        for sock in socks:
            assert sock.recv(1024) == b""  # closed by the server
            assert time.monotonic() - started < HEADER_TIMEOUT_S + 15
    finally:
        for sock in socks:
            sock.close()
    assert proc.poll() is None
    # and the server still answers
    assert _exchange(host, port, _head(port, path, "Content-Length: 0"))[0] == 401


def test_the_body_deadline_on_a_real_server():
    """The same guard and connection options on a real uvicorn server, with short deadlines."""
    import uvicorn

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        event = await receive()
        body = json.dumps({"got": len(event.get("body", b""))}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})

    options = uvicorn_options()
    options["http"] = type("FastTimeout", (options["http"],), {"header_timeout_s": 1.0})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        guard_requests(app, max_body_bytes=1000, body_timeout_s=1.0), log_level="error", **options
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        # a body that stops halfway: 408 after the deadline, not held
        status, took = _exchange("127.0.0.1", port, _head(port, "/", "Content-Length: 100"), b"x" * 10)
        assert status == 408 and took > 0.9  # the deadline, not earlier
        # a complete body within the limit reaches the application in one piece
        status, _ = _exchange("127.0.0.1", port, _head(port, "/", "Content-Length: 3"), b"abc")
        assert status == 200
        # a head that never completes: the connection is closed after the head deadline
        with socket.create_connection(("127.0.0.1", port), timeout=10) as stalled:
            stalled.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            assert stalled.recv(100) == b""
            assert 0.5 < time.monotonic() - started < 5
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_body_is_read_once_and_not_held_beside_the_applications_copy():
    """One guard reads a body, checks it whole and hands it on: the check sees it once, and once the
    application has gathered the body into its own buffer (as the SDK does) the guard holds no second
    copy. Counted in bytes with tracemalloc: with two stacked guards, two or three copies stayed alive."""
    import tracemalloc

    size, piece = 8 * 2**20, 2**16
    checked: list[int] = []
    held: list[int] = []

    async def app(scope, receive, send):
        own = bytearray()
        more = True
        while more:
            event = await receive()
            own += event["body"]
            more = event.get("more_body", False)
        del event
        held.append(tracemalloc.get_traced_memory()[0] - start)
        assert len(own) == size
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def check(body: bytes) -> None:
        checked.append(len(body))

    sent = 0

    async def receive():
        nonlocal sent
        sent += piece
        return {"type": "http.request", "body": b"x" * piece, "more_body": sent < size}

    async def send(message):
        pass

    guarded = guard_requests(app, max_body_bytes=size, check_body=check)
    scope = {"type": "http", "method": "POST", "headers": [(b"content-length", b"%d" % size)]}
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        asyncio.run(guarded(scope, receive, send))
    finally:
        tracemalloc.stop()
    assert checked == [size]
    assert size <= held[0] < 1.25 * size, held  # the application's copy, and little else


@pytest.mark.parametrize(
    "token",
    [
        "0123456789abcdef0123456789abcdef",
        "0123456789abcdef" * 4,
        "abcdefghijklmnopqrstuvwxyz0123456789",
        "Password1Password1Password1Password1",
        "aZ3$" * 10,
        "zyxwvutsrqponmlkjihgfedcbaZYXWVU",
        "x",
    ],
)
def test_weak_tokens_are_refused(token):
    assert token_problem(token) is not None


def test_random_tokens_pass():
    for _ in range(500):
        assert token_problem(secrets.token_urlsafe(32)) is None
    assert token_problem("k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se") is None


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("token", ["x", "0123456789abcdef0123456789abcdef"])
def test_both_servers_refuse_a_weak_token_on_a_public_bind(spu_env, tmp_path, token):
    served = _cli(["serve", "--transport", "http", "--host", "0.0.0.0", "--token", token], spu_env)
    service = _cli(
        ["audit", "serve", "--log", str(tmp_path / "a.jsonl"), "--host", "0.0.0.0", "--token", token], spu_env
    )
    for result in (served, service):
        assert result.returncode == 2 and "refusing to bind 0.0.0.0" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_bad_ports_are_usage_errors(spu_env, tmp_path, port):
    for args in (
        ["serve", "--transport", "http", "--port", port],
        ["audit", "serve", "--log", str(tmp_path / "a.jsonl"), "--token", TOKEN, "--port", port],
    ):
        result = _cli(args, spu_env)
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr)


def test_a_body_over_the_limit_sent_whole_still_gets_its_refusal(server):
    """The refusal of a body over the limit comes at once, and the connection closes only after the body is
    read: closed with 32 MiB unread, the kernel reset it, and a client that sent the whole body before
    reading (as httpx does) lost the 413 (httpx: "peer closed connection without sending complete message
    body"). 32 MiB is over both servers' limits and under the drain cap, and more than loopback's socket
    buffers take without the server reading."""
    from tools_server.core.http_guard import DRAIN_BYTES

    host, port, path, proc = server
    body = b"x" * (32 * 2**20)
    assert len(body) < DRAIN_BYTES
    head = _head(port, path, AUTH, JSON, f"Content-Length: {len(body)}").replace("\n", "\r\n").encode()
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(head + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status, _, rest = data.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 413"), data[:200]
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"].startswith("body larger than")
    assert proc.poll() is None
