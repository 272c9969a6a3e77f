"""``spu serve`` answers ``initialize`` before it imports the MCP SDK (tools_server/core/handshake.py).

The early answer must be exactly the SDK's, and only for requests the SDK accepts: the whole grammar the
early path answers is walked against the SDK's own server in process, near misses (which the SDK may
refuse) are shown never to get an early success, and the real stdio transport is checked end to end.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any

import anyio
import pytest

from tools_server.core import handshake


def _initialize(version: str, rid: Any = 1, **params) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "test-client", "version": "1.0"},
            **params,
        },
    }


async def _sdk_answers(messages: list[dict]) -> list[dict]:
    """What the SDK's server (SpuServer's) answers to each message, each on a fresh connection over
    in-memory streams."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from tools_server.core.server import SpuServer

    server = SpuServer().mcp
    answers = []
    for message in messages:
        to_server, server_reads = anyio.create_memory_object_stream(1)
        server_writes, from_server = anyio.create_memory_object_stream(1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())
            await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
            with anyio.fail_after(30):
                reply = await from_server.receive()
            tg.cancel_scope.cancel()
        answers.append(reply.message.model_dump(by_alias=True, exclude_unset=True))
    return answers


def _grammar() -> list[dict]:
    """Every request shape the early path answers: each protocol version, every combination of the client
    capabilities it knows (each absent or in each of its shapes), client info with and without a title
    and with unusual text, and both id types."""
    keys = list(handshake.CLIENT_CAPABILITY_SHAPES)
    choices = [[None, *handshake.CLIENT_CAPABILITY_SHAPES[key]] for key in keys]
    infos = [
        {"name": "claude-code", "version": "2.0.1"},
        {"name": "", "version": "", "title": ""},
        {"name": "é ✓ \u0000 " + "x" * 5000, "version": "1", "title": "T"},
    ]
    out = []
    for n, (version, combo) in enumerate(
        itertools.product(handshake.HANDSHAKE_VERSIONS, itertools.product(*choices))
    ):
        capabilities = {key: value for key, value in zip(keys, combo, strict=True) if value is not None}
        out.append(
            _initialize(
                version, rid=n if n % 2 else f"r{n}", capabilities=capabilities, clientInfo=infos[n % 3]
            )
        )
    return out


def test_every_request_the_early_path_answers_gets_the_sdks_answer(spu_env):
    messages = _grammar()
    assert len(messages) == len(handshake.HANDSHAKE_VERSIONS) * 4 * 2 * 3 * 2
    sdk = anyio.run(_sdk_answers, messages)
    for message, answer in zip(messages, sdk, strict=True):
        early = handshake.initialize_result(message)
        assert early is not None, message
        assert answer.get("result") == early, (message["params"], answer)
        assert handshake.same_answer(early, answer) is None


NEAR_MISSES = [
    _initialize("2025-06-18", capabilities={"roots": True}),
    _initialize("2025-06-18", capabilities={"roots": {"listChanged": "yes"}}),
    _initialize("2025-06-18", capabilities={"roots": {"listChanged": 1}}),
    _initialize("2025-06-18", capabilities={"roots": []}),
    _initialize("2025-06-18", capabilities={"experimental": {"a": 1}}),
    _initialize("2025-06-18", capabilities={"experimental": {"a": {}}}),
    _initialize("2025-06-18", capabilities={"sampling": None}),
    _initialize("2025-06-18", capabilities={"sampling": {"tools": True}}),
    _initialize("2025-06-18", capabilities={"elicitation": {"form": []}}),
    _initialize("2025-06-18", capabilities={"tasks": {"list": {}}}),
    _initialize("2025-06-18", capabilities={"extensions": {"x": 1}}),
    _initialize("2025-06-18", capabilities={"unknown": {}}),
    _initialize("2025-06-18", capabilities=[]),
    _initialize("2025-06-18", capabilities=None),
    _initialize("2025-06-18", clientInfo={"name": "no-version"}),
    _initialize("2025-06-18", clientInfo={"name": 1, "version": "1"}),
    _initialize("2025-06-18", clientInfo={"name": "n", "version": "1", "title": None}),
    _initialize("2025-06-18", clientInfo={"name": "n", "version": "1", "icons": [{"src": 5}]}),
    _initialize("2025-06-18", clientInfo="n"),
    _initialize("2025-06-18", _meta={"progressToken": 1}),
    _initialize(5),
    _initialize(""),
    _initialize("2026-07-28"),
    _initialize("1999-01-01"),
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
    {"jsonrpc": "2.0", "id": 1, "method": "initialize"},
]


def test_near_misses_never_get_an_early_success():
    """Every shape outside the grammar is left to the SDK, whatever the SDK then answers."""
    for message in NEAR_MISSES:
        assert handshake.initialize_result(message) is None, message.get("params", message)


def test_the_sdk_refuses_some_near_misses(spu_env):
    """The near misses include requests the SDK refuses (-32602): an early success there would be wrong."""
    answers = anyio.run(_sdk_answers, NEAR_MISSES)
    codes = [answer.get("error", {}).get("code") for answer in answers]
    assert codes[0] == codes[4] == -32602  # "roots": true, "experimental": {"a": 1}
    assert codes.count(-32602) >= 10, codes


@pytest.mark.parametrize(
    "message",
    [
        {**_initialize("2025-06-18"), "id": None},
        {**_initialize("2025-06-18"), "id": True},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    ],
    ids=["null-id", "bool-id", "not-initialize"],
)
def test_what_is_not_an_initialize_request_is_left_to_the_sdk(message):
    assert handshake.initialize_result(message) is None


def test_the_handshake_versions_are_the_sdks():
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert handshake.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def test_same_answer_names_what_differs():
    early = handshake.initialize_result(_initialize("2025-06-18"))
    other = {**early, "protocolVersion": "2025-03-26"}
    assert "protocolVersion" in handshake.same_answer(early, {"result": other})
    assert "refused" in handshake.same_answer(early, {"error": {"code": -32602, "message": "x"}})


def test_the_early_path_imports_neither_the_sdk_nor_pydantic(spu_env):
    code = (
        "import sys\n"
        "import tools_server.commands.serve_cli, tools_server.core.framing, tools_server.core.handshake\n"
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
def test_spu_serve_answers_initialize_and_the_sdk_session_follows(version, spu_env):
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
    expected = handshake.initialize_result(_initialize("2025-11-25" if version == "1999-01-01" else version))
    assert answers[0]["result"] == expected  # early (a handshake version) or the SDK's (1999-01-01)
    assert "system_info" in {t["name"] for t in answers[1]["result"]["tools"]}
    assert answers[2]["result"] == {}
    assert "not the SDK's" not in stderr, stderr


@pytest.mark.parametrize(
    "params",
    [
        {"clientInfo": {"name": "no-version"}},
        {"capabilities": {"roots": True}},
        {"capabilities": {"experimental": {"a": 1}}},
    ],
    ids=["client-info-without-version", "odd-capability", "experimental-not-an-object"],
)
def test_spu_serve_leaves_an_invalid_initialize_to_the_sdk(params, spu_env):
    answers, _ = _talk(spu_env, [_initialize("2025-06-18", **params)], replies=1)
    assert answers[0]["id"] == 1 and answers[0]["error"]["code"] == -32602, answers
