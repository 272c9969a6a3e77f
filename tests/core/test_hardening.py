"""Issue 14 regressions in the core and the chemistry domain, against a real server over stdio (the
official MCP client) where the defect showed there: limits before native code, invalid Unicode, file
paths and disclosure, bounded provenance, checked cache entries, workers dying with the server, and the
HTTP token and host checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from mcp_wire import HEADERS, INIT, http_spu_server

SECRET = "TOPSECRET-LINE-7f3a"


# -- limits before native code ------------------------------------------------------------------------


def test_huge_smiles_is_too_large_and_the_server_survives(mcp_server):
    # 25,000 atoms crashed the server (RDKit canonicalised the cache key in the server process)
    for tool in ("chem_descriptors", "chem_similarity", "chem_conformers"):
        err = mcp_server.call_error(tool, {"molecules": ["C" * 25_000]})
        assert err["code"] == "too_large" and "atoms" in err["message"], (tool, err)
    t0 = time.monotonic()
    err = mcp_server.call_error("chem_descriptors", {"molecules": ["CCO", "c1ccccc1" * 2500]})
    assert err["code"] == "too_large" and time.monotonic() - t0 < 10
    assert mcp_server.call_ok("system_info")["cpu_cores"] >= 1


def test_molecule_cache_keys_need_no_rdkit():
    code = (
        "import sys\n"
        "from tools_server.chem.tools import _keys\n"
        "keys = _keys(['CCO', 'C' * 1500, '3\\n\\nO 0 0 0\\nH 0 0 0.96\\nH 0.93 0 -0.24'])\n"
        "print(keys[0], keys[2][:3]); print('rdkit' in sys.modules, 'numpy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    keys, imported = out.stdout.strip().splitlines()
    assert keys == "smiles:CCO xyz" and imported == "False False"


def test_argument_limits_refuse_before_validation():
    from tools_server.core.errors import ToolError
    from tools_server.core.limits import check_arguments

    deep: object = "x"
    for _ in range(40):
        deep = [deep]
    for args, code in [
        ({"a": deep}, "too_large"),
        ({"a": ["x"] * 100_001}, "too_large"),
        ({"a": "x" * 20_000_001}, "too_large"),
        ({"a": ["ok", "bad\u202e"]}, "invalid_input"),
        ({"a": "\u2066x"}, "invalid_input"),
        ({"\u200bkey": 1}, "invalid_input"),
        ({"a": "lone \udc00"}, "invalid_input"),
    ]:
        with pytest.raises(ToolError) as info:
            check_arguments(args)
        assert info.value.code == code
    check_arguments({"a": ["ethanol", "éthanol", "エタノール", "C💥"], "b": {"c": 1.5}})


# -- invalid Unicode ----------------------------------------------------------------------------------


def test_invisible_and_bidi_characters_are_refused_not_dropped(mcp_server):
    for text in ("\u202eCCO", "CCO\u200b", "C\u200dC", "\ufeffCCO"):
        err = mcp_server.call_error("chem_parse", {"molecules": [text]})
        assert err["code"] == "invalid_input" and "U+" in err["message"], text


def test_non_ascii_smiles_is_an_item_error_not_methane(mcp_server):
    out = mcp_server.call_ok("chem_parse", {"molecules": ["C💥", "CCé", "CCO"]})
    codes = [item.get("error", {}).get("code") for item in out["items"]]
    assert codes == ["invalid_smiles", "invalid_smiles", None]
    assert "U+1F4A5" in out["items"][0]["error"]["message"]
    assert out["items"][2]["ok"] is True


# -- paths and disclosure -----------------------------------------------------------------------------


def test_symlink_leaving_the_roots_is_refused_without_quoting(mcp_server, spu_env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(f"{SECRET} first line\nsecond\n")
    link = Path(spu_env["SPU_WORKDIR"]) / "innocent.xyz"
    link.symlink_to(secret)
    for tool in ("chem_parse", "chem_descriptors"):
        out = mcp_server.call_ok(tool, {"molecules": [str(link)]})
        item = out["items"][0]
        assert item["ok"] is False and item["error"]["code"] == "invalid_input"
        assert "symbolic link" in item["error"]["message"] and SECRET not in json.dumps(out)


def test_bad_file_content_is_not_quoted_in_errors(mcp_server, spu_env):
    bad = Path(spu_env["SPU_WORKDIR"]) / "bad.xyz"
    bad.write_text(f"{SECRET} 1 2 3\nmore\n")
    out = mcp_server.call_ok("chem_parse", {"molecules": [str(bad)]})
    assert out["items"][0]["ok"] is False and SECRET not in json.dumps(out)
    fifo = Path(spu_env["SPU_WORKDIR"]) / "pipe.xyz"
    os.mkfifo(fifo)
    out = mcp_server.call_ok("chem_parse", {"molecules": [str(fifo)]})  # would block a reader for ever
    assert "not a regular file" in out["items"][0]["error"]["message"]


def test_xtb_refuses_a_symlink_leaving_the_roots(mcp_server, spu_env, tmp_path):
    pytest.importorskip("tblite")
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET}\n")
    link = Path(spu_env["SPU_WORKDIR"]) / "mol.xyz"
    link.symlink_to(secret)
    result = mcp_server.call("xtb_run", {"molecules": [str(link)]})
    text = json.dumps(result.structured_content) + " ".join(getattr(c, "text", "") for c in result.content)
    assert SECRET not in text and "symbolic link" in text


def test_provenance_keeps_a_digest_and_a_bounded_preview(mcp_server):
    molecules = ["C" * 150 + "O"] * 400 + ["CCO"]
    out = mcp_server.call_ok("chem_parse", {"molecules": molecules})
    prov = out["provenance"]
    assert len(prov["params"]["molecules"]) == 21 and "381 more items" in prov["params"]["molecules"][-1]
    assert len(prov["params_sha256"]) == 64 and len(json.dumps(prov)) < 10_000


def test_params_preview_cuts_long_strings():
    from tools_server.core.dispatch import params_preview

    preview = params_preview({"text": "x" * 10_000_000, "n": 3})
    assert preview["n"] == 3 and preview["text"].endswith("[10000000 characters]")
    assert len(preview["text"]) < 300


# -- the result cache ---------------------------------------------------------------------------------


def _only_entry(env) -> Path:
    """The one cache entry on disk (written a moment after the call answered: core/deferred.py)."""
    deadline = time.monotonic() + 10
    while not (entries := list(Path(env["SPU_CACHE_DIR"]).glob("v2/*/*.json"))):
        assert time.monotonic() < deadline, "no cache entry was written"
        time.sleep(0.02)
    (entry,) = entries
    return entry


@pytest.mark.parametrize("damage", ["empty_object", "altered_value", "wrong_tool", "not_json"])
def test_damaged_cache_entry_is_discarded_and_recomputed(job_server, job_env, damage):
    first = job_server.call_ok("test_square", {"x": 7})
    assert first["square"] == 49 and first["provenance"]["cache"] == "miss"
    entry = _only_entry(job_env)
    stored = json.loads(entry.read_text())
    if damage == "empty_object":
        entry.write_text("{}")
    elif damage == "altered_value":
        stored["result"]["square"] = 50  # checksum left as it was
        entry.write_text(json.dumps(stored))
    elif damage == "wrong_tool":
        stored["result"]["provenance"]["tool"] = "other_tool"
        from tools_server.core.cache import input_hash

        stored["sha256"] = input_hash(stored["result"])  # a consistent entry of the wrong shape
        entry.write_text(json.dumps(stored))
    else:
        entry.write_text('{"sha256": "x", "result": {')
    again = job_server.call_ok("test_square", {"x": 7})
    assert again["square"] == 49 and again["provenance"]["cache"] == "miss"
    assert any("discarded and recomputed" in w for w in again.get("warnings", []))
    third = job_server.call_ok("test_square", {"x": 7})
    assert third["provenance"]["cache"] == "hit" and third["square"] == 49


# -- workers die with the server ----------------------------------------------------------------------


def _frame(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def test_workers_die_when_the_server_is_killed(job_env):
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=job_env,
    )
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_frame(init))
        proc.stdin.flush()
        assert b'"id":1' in proc.stdout.readline()
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        # one step of 60 s: the job sends no progress while the server dies
        call = {"name": "test_sleep", "arguments": {"seconds": 60, "steps": 1, "wait_s": 0}}
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        proc.stdin.flush()
        proc.stdout.readline()
        workers: list[psutil.Process] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not workers:
            workers = [
                p
                for p in psutil.Process(proc.pid).children(recursive=True)
                if "tools_server.core.worker" in " ".join(p.cmdline())
            ]
            time.sleep(0.2)
        assert workers, "no worker started"
        # kill the server only once the worker is inside the job (an idle worker exits on stdin EOF)
        logs = Path(job_env["SPU_WORKDIR"]) / "workers"
        while time.monotonic() < deadline and not any(
            "--- job test_sleep" in p.read_text(errors="replace") for p in logs.glob("*.log")
        ):
            time.sleep(0.2)
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, f"workers outlived the server: {[p.pid for p in alive]}"
    finally:
        if proc.poll() is None:
            proc.kill()


# -- HTTP: token strength and allowed hosts -----------------------------------------------------------


def _serve(env, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", "serve", "--transport", "http", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("token", "why"),
    [(" ", "white space"), ("s3cret", "characters"), ("a" * 40, "entropy"), ("abababab" * 5, "entropy")],
)
def test_weak_tokens_are_refused_for_public_binds(spu_env, token, why):
    res = _serve(spu_env, "--host", "0.0.0.0", "--token", token, "--allowed-host", "spu.example.org")
    assert res.returncode == 2 and why in res.stderr


def test_wildcard_bind_needs_allowed_hosts(spu_env):
    res = _serve(spu_env, "--host", "0.0.0.0", "--token", "k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se")
    assert res.returncode == 2 and "--allowed-host" in res.stderr


def test_token_strength_rules():
    from tools_server.core.http_guard import token_problem

    assert token_problem("k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se") is None
    assert token_problem("9f3a07c2e41b86d5f0a2c79e13b4d658") is None  # 32 random hex characters: 128 bits
    assert token_problem("0123456789abcdef0123456789abcdef") is not None  # a sequence, repeated
    assert token_problem("0123456789abcdef0123456789abcde") is not None  # 31 characters


def test_wildcard_bind_accepts_the_allowed_host_names(spu_env):
    token = "k7Qw2mZp9Lx4Vb8Nc1Rt6Yh3Jd5Gf0Se"
    # bound on every interface, but the test only ever connects to loopback
    with http_spu_server(spu_env, token, "--host", "0.0.0.0", "--allowed-host", "spu.example.org") as (
        url,
        _,
    ):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        headers = {**HEADERS, "authorization": f"Bearer {token}"}
        for host, status in [
            (f"spu.example.org:{port}", 200),
            ("spu.example.org", 200),
            (f"evil.example:{port}", 421),
            (f"0.0.0.0:{port}", 421),
        ]:
            r = httpx.post(url, json=INIT, headers={**headers, "host": host}, timeout=30)
            assert r.status_code == status, (host, r.status_code, r.text[:200])
