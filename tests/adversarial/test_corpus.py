"""The adversarial corpus against a live server, over stdio (raw frames on the pipes) and streamable HTTP:
every case gets its stable answer within the time limit (0 hangs), the server answers a ping after the
whole corpus (0 crashes), and nothing outside the roots appears in a reply or an artifact (0 files read).
Beside the corpus, per transport: a broken audit chain refuses the next web call, a policy of the wrong
shape (or too vague, or with a repeated YAML key) stops the server from starting, and (HTTP) the request
checks answer before any body is read; a plugin that fails to load leaves every other tool working.

The other classes of hostile conditions have their own files here: real faults (kills, full disks,
read-only folders) in test_faults.py, documented limits (atom counts, HTTP requests in flight) in
test_limits.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from adversarial_corpus import PREPARED, SECRET, Case, cases, prepare_workdir
from mcp_wire import INIT, RawServer, http_spu_server

REPLY_TIMEOUT_S = 120.0
PING = b'{"jsonrpc":"2.0","id":999999,"method":"tools/list"}'


def _request_id(case: Case) -> Any:
    if case.reply_id != "same":
        return case.reply_id
    return json.loads(case.frame)["id"]


def _code_of(reply: dict[str, Any], kind: str) -> Any:
    if kind == "ok":
        result = reply.get("result") or {}
        return None if "structuredContent" in result and not result.get("isError") else "error"
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
    if SECRET.split()[-1] in json.dumps(reply):
        return f"{case.name}: the reply holds the content of a file outside the roots"
    return None


def _nothing_leaked(workdir: Path) -> None:
    """No artifact, job record or cache entry holds the outside file's content."""
    marker = SECRET.split()[-1].encode()
    for path in workdir.rglob("*"):
        if path.name in PREPARED and path.parent == workdir:
            continue  # the hostile files themselves (a hard link to the outside file, sparse giants)
        if path.is_file() and not path.is_symlink():
            assert marker not in path.read_bytes(), f"{path.name} holds the outside file's content"


def test_corpus_over_stdio(spu_env):
    workdir = Path(spu_env["SPU_WORKDIR"])
    prepare_workdir(workdir)
    server = RawServer(spu_env, initialize=False)
    try:
        server.send(json.dumps(INIT).encode())
        assert server.next_reply(REPLY_TIMEOUT_S) is not None, "no answer to initialize"
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        failures = []
        for case in cases(workdir):
            server.send(case.frame)
            failure = _check(case, server.next_reply(REPLY_TIMEOUT_S))
            if failure:
                failures.append(failure)
                if "hang" in failure:
                    break
        server.send(PING)
        ping = server.next_reply(REPLY_TIMEOUT_S)
        assert server.proc.poll() is None, "the server died"
        assert ping is not None and ping.get("id") == 999999 and ping["result"]["tools"]
        assert not failures, "\n".join(failures)
    finally:
        server.kill()
    _nothing_leaked(workdir)


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


TOKEN = "k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se"  # 32 characters, only for the test's loopback servers


@pytest.fixture
def http_url(spu_env):
    prepare_workdir(Path(spu_env["SPU_WORKDIR"]))
    with http_spu_server(spu_env, TOKEN) as (url, proc):
        yield url, TOKEN, proc


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
        workdir = Path(os.environ["SPU_WORKDIR"])
        for case in cases(workdir):
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
    _nothing_leaked(workdir)


def _web_call(i: int, url: str) -> bytes:
    params = {"name": "web_fetch", "arguments": {"url": url}}
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}).encode()


def _break_chain(workdir: Path) -> None:
    """Edit a record in the middle of the embedded audit log, keeping its hash."""
    log = workdir / "audit" / "audit.jsonl"
    lines = log.read_text().splitlines()
    record = json.loads(lines[1])
    record["url"] = "http://127.0.0.1:9/edited"
    lines[1] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    log.write_text("\n".join(lines) + "\n")


def _tool_code(reply: dict[str, Any] | None) -> Any:
    assert reply is not None, "no reply (hang)"
    return _code_of(reply, "tool")


def test_a_broken_audit_chain_refuses_the_next_web_call_over_stdio(spu_env):
    server = RawServer(spu_env)
    try:
        for i in (1, 2):  # refused addresses are recorded too: no connection leaves the machine
            server.send(_web_call(i, f"http://127.0.0.1:9/{i}"))
            assert _tool_code(server.next_reply()) == "url_refused"
        _break_chain(Path(spu_env["SPU_WORKDIR"]))
        server.send(_web_call(3, "http://127.0.0.1:9/3"))
        assert _tool_code(server.next_reply()) == "audit_log_invalid"
    finally:
        server.kill()


def test_a_broken_audit_chain_refuses_the_next_web_call_over_http(http_url, spu_env):
    url, token, _ = http_url
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
    }
    with httpx.Client(timeout=REPLY_TIMEOUT_S) as client:
        init = client.post(url, json=INIT, headers=headers)
        session = {**headers, "mcp-session-id": init.headers["mcp-session-id"]}
        client.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=session)
        for i in (1, 2):
            reply = _http_reply(
                client.post(url, content=_web_call(i, f"http://127.0.0.1:9/{i}"), headers=session)
            )
            assert _tool_code(reply) == "url_refused"
        _break_chain(Path(spu_env["SPU_WORKDIR"]))
        reply = _http_reply(client.post(url, content=_web_call(3, "http://127.0.0.1:9/3"), headers=session))
        assert _tool_code(reply) == "audit_log_invalid"


BAD_POLICIES = {
    "nested": ("policy.json", json.dumps({"mode": "enforce", "policy": {"dois": ["10.1021/jacs.5b01234"]}})),
    "misspelt": ("policy.json", json.dumps({"mode": "enforce", "doys": ["10.1021/jacs.5b01234"]})),
    "only_mode": ("policy.json", json.dumps({"mode": "enforce"})),
    # a one-character title would block nearly every page in enforce mode
    "one_letter_title": ("policy.json", json.dumps({"mode": "enforce", "titles": ["x"]})),
    # YAML keeps the last of a repeated key silently: refused, as JSON's is
    "yaml_repeated_key": (
        "policy.yaml",
        "mode: enforce\ndois: ['10.1021/jacs.5b01234']\ndois: ['10.1021/b.5b0999']\n",
    ),
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("policy", sorted(BAD_POLICIES))
def test_a_policy_of_the_wrong_shape_stops_the_server(spu_env, tmp_path, transport, policy):
    name, text = BAD_POLICIES[policy]
    path = tmp_path / name
    path.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "spu", "serve", "--transport", transport, "--port", "0"],
        env={**spu_env, "SPU_POLICY": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2 and result.stderr.startswith(f"error: refusing to start: {path}: ")
    assert result.stdout == ""  # not even an answer to initialize


HTTP_PROBES = {
    # name: (extra head lines, Host, expected status): each answered before any body byte is sent
    "two_authorization_headers": (["Authorization: Bearer wrong", "Content-Length: 100"], None, 400),
    "content_length_10e12": (["Content-Length: 1000000000000"], None, 413),
    "content_length_200mb": (["Content-Length: 200000000"], None, 413),
    "foreign_host": (["Content-Length: 100"], "rebind.example", 421),
    "bad_content_length": (["Content-Length: 12abc"], None, 400),
}


@pytest.mark.parametrize("probe", sorted(HTTP_PROBES))
def test_http_probes_are_answered_before_the_body(http_url, probe):
    import socket

    url, token, proc = http_url
    extra, host, status = HTTP_PROBES[probe]
    hostport = url.split("/")[2]
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: {host or hostport}",
        f"Authorization: Bearer {token}",
        *extra,
        "",
        "",
    ]
    name, port = hostport.rsplit(":", 1)
    with socket.create_connection((name, int(port)), timeout=10) as sock:
        sock.sendall("\r\n".join(head).encode())
        assert int(sock.recv(100).split(b" ")[1]) == status
    assert proc.poll() is None


def test_a_plugin_that_fails_to_load_leaves_every_other_tool_working(spu_env):
    server = RawServer({**spu_env, "SPU_TOOL_MODULES": "no_such_plugin_module"})
    try:
        assert server.request("tools/list", {})["result"]["tools"], "tools/list failed"
        (error,) = server.call("system_info", {})["structuredContent"]["plugin_errors"]
        assert error["plugin"] == "no_such_plugin_module" and error["error"].startswith("ModuleNotFoundError")
        parsed = server.call("chem_parse", {"molecules": ["CCO"]})
        assert parsed["structuredContent"]["items"][0]["canonical_smiles"] == "CCO"
    finally:
        server.kill()
