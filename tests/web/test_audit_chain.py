"""Every break of the audit log's chain is found before the next append, by the writer that holds a
checkpoint and by a fresh one alike; a keyed log (the audit service's) also catches forged, re-chained
records; a process holding the log's lock gets a web call a `timeout` by its deadline, not a stall."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spu_common.audit_log import record_hash, seal_path, verify
from tools_server.core.errors import ToolError
from tools_server.web.audit import AuditLog
from tools_server.web.gateway import Gateway

KEY = bytes(range(32))


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records))


def _edit_middle(path: Path) -> None:
    records = _lines(path)
    records[5]["url"] = "https://example.org/other"  # hash kept
    _write(path, records)


def _swap(path: Path) -> None:
    records = _lines(path)
    records[4], records[6] = records[6], records[4]
    _write(path, records)


def _delete_middle(path: Path) -> None:
    records = _lines(path)
    del records[7]
    _write(path, records)


def _edit_last_keep_hash(path: Path) -> None:
    records = _lines(path)
    records[-1]["url"] = "https://example.org/changed"
    _write(path, records)


def _insert(path: Path) -> None:
    records = _lines(path)
    extra = dict(records[3])
    records.insert(4, extra)
    _write(path, records)


def _rechain_without_a_record(path: Path, key: bytes | None = None) -> None:
    """What a careful forger does: drop a record, rebuild every hash after it, rewrite the seal."""
    records = _lines(path)
    del records[6]
    prev = "0" * 64
    for seq, record in enumerate(records):
        record.pop("mac", None)
        record["seq"], record["prev"] = seq, prev
        record["hash"] = prev = record_hash(record)
    _write(path, records)
    seal_path(path).write_text(json.dumps({"count": len(records), "head": prev, "ts": "x"}))


BREAKS = {
    "edit_middle": _edit_middle,
    "swap": _swap,
    "delete_middle": _delete_middle,
    "edit_last_keep_hash": _edit_last_keep_hash,
    "insert_copy": _insert,
}


def _log(tmp_path: Path, key: bytes | None = None, n: int = 12) -> AuditLog:
    log = AuditLog(tmp_path / "audit.jsonl", fsync=False, key=key)
    for i in range(n):
        log.append({"kind": "http", "url": f"https://example.org/{i}", "status": 200})
    return log


@pytest.mark.parametrize("fresh", [False, True], ids=["same_writer", "fresh_writer"])
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_break_is_refused_before_the_next_append(tmp_path, name, fresh):
    log = _log(tmp_path)
    size_before = log.path.stat().st_size
    BREAKS[name](log.path)
    tampered = log.path.read_bytes()
    writer = AuditLog(log.path, fsync=False) if fresh else log
    with pytest.raises(ToolError) as err:
        writer.append({"kind": "http", "url": "https://example.org/next"})
    assert err.value.code == "audit_log_invalid"
    assert log.path.read_bytes() == tampered  # nothing appended
    assert not verify(log.path).ok
    assert size_before > 0


def test_a_clean_log_keeps_appending_across_writers(tmp_path):
    log = _log(tmp_path)
    other = AuditLog(log.path, fsync=False)
    for i in range(5):
        (log if i % 2 else other).append({"kind": "http", "url": f"https://example.org/x{i}"})
    assert verify(log.path).ok and verify(log.path).count == 17


def test_a_rechained_log_passes_the_chain_but_not_the_key(tmp_path):
    unkeyed = _log(tmp_path / "plain")
    _rechain_without_a_record(unkeyed.path)
    # without a key the forgery is a valid chain: this is what an unkeyed (embedded) log cannot prove
    assert verify(unkeyed.path).ok
    AuditLog(unkeyed.path, fsync=False).append({"kind": "http"})

    keyed = _log(tmp_path / "keyed", key=KEY)
    assert verify(keyed.path, KEY).ok
    _rechain_without_a_record(keyed.path)
    result = verify(keyed.path, KEY)
    assert not result.ok and any("MAC" in e for e in result.errors)
    for writer in (keyed, AuditLog(keyed.path, fsync=False, key=KEY)):
        with pytest.raises(ToolError) as err:
            writer.append({"kind": "http"})
        assert err.value.code == "audit_log_invalid" and "MAC" in err.value.message


def test_verify_with_a_wrong_key_fails(tmp_path):
    log = _log(tmp_path, key=KEY)
    assert not verify(log.path, bytes(32)).ok
    assert verify(log.path).warnings  # keyed, but no key given: said, not silently passed


HOLDER = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1] + ".lock"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_held_lock_ends_the_call_with_timeout_by_its_deadline(tmp_path):
    gateway = Gateway(tmp_path / "audit.jsonl", workdir=tmp_path, call_deadline_s=1.5)
    gateway.audit.append({"kind": "service", "event": "start"})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(gateway.audit.path), "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(ToolError) as err:
            gateway.call("web_fetch", {"url": "https://example.org/"})
        took = time.monotonic() - started
        assert err.value.code == "timeout" and "locked" in err.value.message
        assert 1.0 < took < 25  # no speed: the deadline came, and not the holder's 30 s release
    finally:
        holder.kill()
        holder.wait(timeout=30)
        gateway.client.close()


def test_the_audit_service_keys_its_log_and_refuses_a_rechained_one(spu_env, tmp_path):
    import httpx

    token = "Zq8vL2mX5nB7cV1kJ4hG6fD9sA3pO0iU"
    log = tmp_path / "svc" / "audit.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "audit", "serve", "--log", str(log), "--token", token, "--port", "0"],
        env=spu_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        headers = {"authorization": f"Bearer {token}"}
        for i in range(8):  # refused URLs are recorded too: records without any outside connection
            body = {"tool": "web_fetch", "args": {"url": f"http://127.0.0.1:9/{i}"}, "call_id": f"c{i}"}
            httpx.post(f"{url}/v1/call", json=body, headers=headers, trust_env=False, timeout=60)
        key_file = log.with_name("audit.jsonl.key")
        assert key_file.stat().st_mode & 0o077 == 0
        assert all("mac" in r for r in _lines(log))
        cli = [sys.executable, "-m", "spu", "audit", "verify", str(log), "--key", str(key_file)]
        assert subprocess.run(cli, env=spu_env, capture_output=True, timeout=60).returncode == 0
        _rechain_without_a_record(log)
        assert subprocess.run(cli, env=spu_env, capture_output=True, timeout=60).returncode == 1
        body = {"tool": "web_fetch", "args": {"url": "http://127.0.0.1:9/after"}, "call_id": "after"}
        reply = httpx.post(f"{url}/v1/call", json=body, headers=headers, trust_env=False, timeout=60).json()
        assert reply["error"]["code"] == "audit_log_invalid"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
