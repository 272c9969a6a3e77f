"""``spu serve`` answers ``initialize`` before it imports the MCP SDK (tools_server/core/handshake.py).

The early answer must be exactly the SDK's: checked in process against the SDK's own server for every
protocol version, and end to end over the real stdio transport, where the server compares the two itself.
"""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from tools_server.core import handshake

VERSIONS = [*handshake.HANDSHAKE_VERSIONS, "2026-07-28", "1999-01-01"]


def _initialize(version: str, **params) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "test-client", "version": "1.0"},
            **params,
        },
    }


async def _sdk_answer(message: dict) -> dict:
    """What the SDK's server (our SpuServer) answers to ``message``, over in-memory streams."""
    import mcp_types as types
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    from tools_server.core.server import SpuServer

    lowlevel = SpuServer()._lowlevel_server
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](1)
    write_stream, write_reader = create_context_streams[SessionMessage](1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lowlevel.run, read_stream, write_stream, lowlevel.create_initialization_options())
        await read_writer.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
        reply = await write_reader.receive()
        tg.cancel_scope.cancel()
    return reply.message.model_dump(by_alias=True, exclude_unset=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_early_answer_is_the_sdks(version, spu_env):
    message = _initialize(version)
    sdk = anyio.run(_sdk_answer, message)
    early = handshake.initialize_result(message)
    assert early is not None
    assert sdk["result"] == early
    assert handshake.same_answer(early, sdk) is None


def test_the_handshake_versions_are_the_sdks():
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert handshake.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def test_same_answer_names_what_differs():
    early = handshake.initialize_result(_initialize("2025-06-18"))
    other = {**early, "protocolVersion": "2025-03-26"}
    assert "protocolVersion" in handshake.same_answer(early, {"result": other})
    assert "refused" in handshake.same_answer(early, {"error": {"code": -32602, "message": "x"}})


@pytest.mark.parametrize(
    "message",
    [
        _initialize("2025-06-18", clientInfo={"name": "no-version"}),
        _initialize("2025-06-18", _meta={"progressToken": 1}),
        _initialize("2025-06-18", capabilities={"roots": True}),
        {**_initialize("2025-06-18"), "id": None},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    ],
    ids=["client-info-without-version", "meta", "odd-capability", "notification", "not-initialize"],
)
def test_what_the_handshake_is_not_sure_of_is_left_to_the_sdk(message):
    assert handshake.initialize_result(message) is None


def test_the_early_path_imports_neither_the_sdk_nor_pydantic(spu_env):
    code = (
        "import sys\n"
        "import tools_server.core.serve_cli, tools_server.core.framing, tools_server.core.handshake\n"
        "print(sorted(m for m in ('mcp', 'mcp_types', 'pydantic', 'typer', 'tools_server.core.server') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=spu_env, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def _talk(env: dict, frames: list[dict], replies: int) -> tuple[list[dict], str]:
    """Send ``frames`` to ``spu serve`` over stdio, read ``replies`` lines, then close its stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        for frame in frames:
            proc.stdin.write((json.dumps(frame) + "\n").encode())
        proc.stdin.flush()
        out = [json.loads(proc.stdout.readline()) for _ in range(replies)]
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    return out, err.decode(errors="replace")


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "1999-01-01"])
def test_spu_serve_answers_early_and_the_sdk_session_follows(version, spu_env):
    init = _initialize(version)
    answers, stderr = _talk(
        spu_env,
        [
            init,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        ],
        replies=3,
    )
    assert [a["id"] for a in answers] == [1, 2, 3]  # the SDK's answer to the replayed copy never shows
    assert answers[0]["result"] == handshake.initialize_result(init)
    assert "system_info" in {t["name"] for t in answers[1]["result"]["tools"]}
    assert answers[2]["result"] == {}
    assert "not the SDK's" not in stderr, stderr


def test_spu_serve_leaves_an_invalid_initialize_to_the_sdk(spu_env):
    init = _initialize("2025-06-18", clientInfo={"name": "no-version"})
    answers, _ = _talk(spu_env, [init], replies=1)
    assert answers[0]["id"] == 1 and answers[0]["error"]["code"] == -32602, answers
