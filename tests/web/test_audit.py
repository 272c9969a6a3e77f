"""The hash-chained audit log: chain format, tamper detection, concurrency across threads and processes,
and durability when the writer is killed with SIGKILL."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spu_common.audit_log import GENESIS, seal_path, verify
from spu_common.jsonfiles import canonical_json
from tools_server.web.audit import AuditLog

REPO = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_chain_format(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    r0 = log.append({"kind": "http", "url": "https://example.org/"})
    r1 = log.append({"kind": "call", "tool": "web_fetch"})
    assert r0["seq"] == 0 and r0["prev"] == GENESIS and r1["prev"] == r0["hash"]
    body = {k: v for k, v in r1.items() if k != "hash"}
    # SHA-256 over canonical JSON (sorted keys, compact separators) of the record without its hash
    assert (
        r1["hash"]
        == hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    assert _lines(log.path)[1] == canonical_json(r1)
    seal = json.loads(seal_path(log.path).read_text())
    assert seal["count"] == 2 and seal["head"] == r1["hash"]
    assert verify(log.path).ok


def _log_with(tmp_path, n=5) -> Path:
    log = AuditLog(tmp_path / "a.jsonl")
    for i in range(n):
        log.append({"kind": "http", "i": i})
    return log.path


def test_verify_detects_modified_line(tmp_path):
    path = _log_with(tmp_path)
    lines = _lines(path)
    lines[2] = lines[2].replace('"i":2', '"i":7')
    path.write_text("\n".join(lines) + "\n")
    result = verify(path)
    assert not result.ok and any("line 3" in e and "modified" in e for e in result.errors)


def test_verify_detects_removed_line(tmp_path):
    path = _log_with(tmp_path)
    lines = _lines(path)
    del lines[1]
    path.write_text("\n".join(lines) + "\n")
    result = verify(path)
    assert not result.ok and any("removed" in e or "chain broken" in e for e in result.errors)


def test_verify_detects_truncated_tail(tmp_path):
    path = _log_with(tmp_path)
    lines = _lines(path)
    path.write_text("\n".join(lines[:-2]) + "\n")  # a chain that is valid in itself, but shorter than sealed
    result = verify(path)
    assert not result.ok and any("truncated" in e for e in result.errors)


def test_verify_detects_rehashed_forgery_in_middle(tmp_path):
    """Rewriting a line with a correct own hash still breaks the next line's prev link."""
    path = _log_with(tmp_path)
    lines = [json.loads(x) for x in _lines(path)]
    lines[1]["i"] = 99
    body = {k: v for k, v in lines[1].items() if k != "hash"}
    lines[1]["hash"] = hashlib.sha256(canonical_json(body).encode()).hexdigest()
    path.write_text("".join(canonical_json(x) + "\n" for x in lines))
    result = verify(path)
    assert not result.ok and any("line 3" in e and "chain broken" in e for e in result.errors)


def test_verify_detects_torn_last_line_and_append_recovers(tmp_path):
    path = _log_with(tmp_path, 3)
    with open(path, "ab") as fh:
        fh.write(b'{"kind":"http","seq":3,"partial')
    assert any("incomplete" in e for e in verify(path).errors)
    log = AuditLog(path)
    rec = log.append({"kind": "http", "after": True})
    records = log.records()
    assert records[3]["kind"] == "recovery" and records[3]["dropped_bytes"] == 31
    assert rec["seq"] == 4 and verify(path).ok


def test_threads_share_one_log(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")

    def work(t):
        for i in range(50):
            log.append({"kind": "http", "thread": t, "i": i})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result = verify(log.path)
    assert result.ok and result.count == 400


_WRITER = """
import sys
from tools_server.web.audit import AuditLog
log = AuditLog(sys.argv[1])
for i in range(int(sys.argv[2])):
    log.append({"kind": "http", "writer": sys.argv[3], "i": i})
    print(i, flush=True)
"""


def test_two_processes_share_one_log(tmp_path):
    path = tmp_path / "a.jsonl"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), "150", name], env=env, stdout=subprocess.DEVNULL
        )
        for name in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    result = verify(path)
    assert result.ok and result.count == 300
    writers = [json.loads(x)["writer"] for x in _lines(path)]
    assert writers.count("a") == writers.count("b") == 150


def test_sigkill_loses_no_returned_record(tmp_path):
    path = tmp_path / "a.jsonl"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), "100000", "k"], env=env, stdout=subprocess.PIPE, text=True
    )
    returned = -1
    for line in proc.stdout:
        returned = int(line)
        if returned >= 200:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    result = verify(path)
    assert result.count >= returned + 1  # every append that returned is on disk
    assert result.ok, result.errors  # at most one record after the seal: a warning, not an error
    assert [json.loads(x)["i"] for x in _lines(path)] == list(range(result.count))


def test_cli_verify_summary_sources(tmp_path):
    import typer
    from typer.testing import CliRunner

    from tools_server.web.cli import register

    app = typer.Typer()
    register(app)

    log = AuditLog(tmp_path / "a.jsonl")
    log.append({"kind": "http", "url": "https://example.org/x", "status": 200, "bytes": 10})
    log.append(
        {
            "kind": "call",
            "tool": "web_fetch",
            "args": {"url": "https://example.org/x"},
            "sources": [
                {"url": "https://example.org/x", "final_url": "https://example.org/x", "status": 200}
            ],
        }
    )
    runner = CliRunner()
    ok = runner.invoke(app, ["audit", "verify", str(log.path), "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["count"] == 2
    summary = runner.invoke(app, ["audit", "summary", str(log.path), "--json"])
    assert json.loads(summary.stdout)["calls_by_tool"] == {"web_fetch": 1}
    out = tmp_path / "out" / "sources.json"
    res = runner.invoke(app, ["audit", "sources", str(log.path), "--out", str(out)])
    assert res.exit_code == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "spu.sources/1" and data["sources"][0]["url"] == "https://example.org/x"
    lines = _lines(log.path)
    log.path.write_text("\n".join(lines[:1]) + "\n")
    bad = runner.invoke(app, ["audit", "verify", str(log.path)])
    assert bad.exit_code == 1 and "truncated" in bad.stdout
    assert runner.invoke(app, ["audit", "summary", str(tmp_path / "missing.jsonl")]).exit_code == 2


@pytest.mark.parametrize("fsync", [True, False])
def test_fsync_switch_keeps_format(tmp_path, fsync):
    log = AuditLog(tmp_path / f"{fsync}.jsonl", fsync=fsync)
    log.append({"kind": "http"})
    assert verify(log.path).ok
