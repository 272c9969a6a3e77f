"""JSON-RPC frames the SDK would drop without a reply are answered in front of it (core/framing.py): a
request with a null id, and a frame only the SDK's message model refuses, over stdio and HTTP."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

import httpx
import pytest
from mcp_wire import HEADERS, INIT, http_spu_server

from tools_server.core.framing import INVALID_REQUEST, FrameError, check_frame

NULL_ID = {"jsonrpc": "2.0", "id": None, "method": "tools/list"}
TOKEN = "k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se"  # only for the test's loopback server


def test_a_request_with_a_null_id_is_refused():
    with pytest.raises(FrameError) as info:
        check_frame(json.dumps(NULL_ID).encode())
    assert info.value.code == INVALID_REQUEST and info.value.request_id is None
    assert info.value.reply()["id"] is None and '"id" is null' in info.value.message
    # an error reply from the client may carry a null id (it could not read ours): that passes
    check_frame(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}')


def _stdio(env: dict, frames: list[bytes], replies: int) -> list[dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        proc.stdin.write(b"".join(frame + b"\n" for frame in frames))
        proc.stdin.flush()
        out, buf = [], b""
        while len(out) < replies:  # a missing reply fails the test after 60 s rather than hanging it
            if b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                out.append(json.loads(line))
                continue
            assert select.select([proc.stdout], [], [], 60)[0], f"no reply after {out}"
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            assert chunk, f"the server closed its output after {out}"
            buf += chunk
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    return out


def test_stdio_answers_what_the_sdk_would_drop(spu_env):
    frames = [
        json.dumps(INIT).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        json.dumps(NULL_ID).encode(),
        b'{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":5,"result":1}',  # passes the frame checks, fails the SDK's model
        b'{"jsonrpc":"2.0","id":6,"method":"ping"}',
    ]
    init, null_id, null_notification, bad_result, ping = _stdio(spu_env, frames, replies=5)
    assert init["id"] == 1 and "result" in init
    for reply in (null_id, null_notification):
        assert reply["id"] is None and reply["error"]["code"] == -32600, reply
    assert bad_result["id"] == 5 and bad_result["error"]["code"] == -32600, bad_result
    assert ping == {"jsonrpc": "2.0", "id": 6, "result": {}}


def test_http_answers_a_null_id_with_an_error(spu_env):
    with http_spu_server(spu_env, TOKEN) as (url, _):
        headers = {**HEADERS, "authorization": f"Bearer {TOKEN}"}
        reply = httpx.post(url, json=NULL_ID, headers=headers, timeout=30)
        assert reply.status_code == 400
        assert reply.json()["id"] is None and reply.json()["error"]["code"] == -32600


def test_http_takes_a_frame_up_to_the_documented_limit(spu_env):
    """docs/server.md: an HTTP body may be one frame of up to 16 MiB. The SDK's own body limit (4 MiB by
    default) once answered a 5 MiB frame with a plain-text 413 in front of our guard."""
    from tools_server.core.framing import MAX_FRAME_BYTES

    with http_spu_server(spu_env, TOKEN) as (url, _), httpx.Client(timeout=60) as client:
        headers = {**HEADERS, "authorization": f"Bearer {TOKEN}"}
        init = client.post(url, json=INIT, headers=headers)
        session = {**headers, "mcp-session-id": init.headers["mcp-session-id"]}
        client.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=session)
        call = b'"method":"tools/call","params":{"name":"no_such_tool","arguments":{"t":"'
        head = b'{"jsonrpc":"2.0","id":7,' + call
        frame = head + b"x" * (5 * 2**20) + b'"}}}'
        reply = client.post(url, content=frame, headers=session)
        assert reply.status_code == 200, reply.text[:200]
        data = next(json.loads(line[5:]) for line in reply.text.splitlines() if line.startswith("data:"))
        assert data["id"] == 7 and data["result"]["isError"] and "no_such_tool" in reply.text
        over = head + b"x" * (MAX_FRAME_BYTES - len(head) - 3) + b'"}}}'
        assert len(over) == MAX_FRAME_BYTES + 1
        refused = client.post(url, content=over, headers=session)
        assert refused.status_code == 413 and refused.json() == {
            "error": f"body larger than {MAX_FRAME_BYTES} bytes"
        }
