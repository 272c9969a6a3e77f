"""The audit log at size: an append reads a constant amount of the log, whatever its length; a writer
starting on a long log hashes it without parsing its records; a short or failed write never advances the
seal, and the log continues; ``verify`` streams with progress and bounds what it lists."""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import spu_common.audit_log
import tools_server.web.audit as audit_module
from spu_common.audit_log import GENESIS, record_hash, seal_path, verify
from spu_common.jsonfiles import canonical_json
from tools_server.core.errors import ToolError
from tools_server.web.audit import AuditLog

RECORD = {"kind": "http", "url": "https://example.org/page", "status": 200, "note": "x" * 400}


def _long_log(path: Path, megabytes: float) -> AuditLog:
    """A valid log of about ``megabytes`` MB and its seal, written as the writer writes them (faster than
    appending one record at a time)."""
    lines, prev, size = [], GENESIS, 0
    while size < megabytes * 1e6:
        record = {"seq": len(lines), "ts": "2026-01-02T03:04:05.123456Z", **RECORD, "prev": prev}
        record["hash"] = prev = record_hash(record)
        lines.append((canonical_json(record) + "\n").encode())
        size += len(lines[-1])
    data = b"".join(lines)
    path.write_bytes(data)
    seal = {"count": len(lines), "head": prev, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    seal_path(path).write_text(json.dumps(seal))
    return AuditLog(path, fsync=False)


def _bytes_read() -> int:
    """Bytes this process has read through read syscalls so far (/proc/self/io ``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_an_append_reads_a_constant_amount_of_a_long_log(tmp_path):
    log = _long_log(tmp_path / "audit.jsonl", 8)
    size = log.path.stat().st_size
    log.check()  # the writer's start: it hashes the log once
    before = _bytes_read()
    for _ in range(20):
        log.check()  # as before every web call
        log.append(RECORD)
    per_append = (_bytes_read() - before) / 20
    assert per_append < 64 * 1024, f"{per_append:.0f} bytes read per append of an {size}-byte log"
    assert verify(log.path).ok


def test_a_new_writer_hashes_a_long_log_without_parsing_it(tmp_path, monkeypatch):
    log = _long_log(tmp_path / "audit.jsonl", 2)
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(
        audit_module.json, "loads", lambda text, **kw: parsed.append(1) or real_loads(text, **kw)
    )
    AuditLog(log.path, fsync=False).append(RECORD)
    assert len(parsed) <= 1  # the seal at most: none of the log's thousands of records
    assert verify(log.path).ok


def test_a_short_write_never_advances_the_seal(tmp_path, monkeypatch):
    """The disk fills in the middle of a record: os.write takes part of the line, then fails."""
    log = AuditLog(tmp_path / "audit.jsonl", fsync=False)
    for _ in range(3):
        log.append(RECORD)
    seal_before = seal_path(log.path).read_bytes()
    size_before = log.path.stat().st_size
    real_write = os.write
    calls = []

    def short_write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[:100])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(audit_module.os, "write", short_write)
    with pytest.raises(ToolError) as err:
        log.append(RECORD)
    monkeypatch.setattr(audit_module.os, "write", real_write)
    assert err.value.code == "storage_error" and "No space left on device" in err.value.message
    assert seal_path(log.path).read_bytes() == seal_before and log.path.stat().st_size == size_before
    assert verify(log.path).ok and verify(log.path).count == 3
    log.append(RECORD)  # the disk has room again
    AuditLog(log.path, fsync=False).append(RECORD)
    assert verify(log.path).ok and verify(log.path).count == 5


def test_a_failed_seal_write_takes_the_record_back(tmp_path, monkeypatch):
    log = AuditLog(tmp_path / "audit.jsonl", fsync=False)
    log.append(RECORD)
    before = log.path.read_bytes(), seal_path(log.path).read_bytes()

    def no_room(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(audit_module.os, "pwrite", no_room)
    with pytest.raises(ToolError) as err:
        log.append(RECORD)
    monkeypatch.undo()
    assert err.value.code == "storage_error"
    assert (log.path.read_bytes(), seal_path(log.path).read_bytes()) == before
    log.append(RECORD)
    assert verify(log.path).ok and verify(log.path).count == 2


def test_verify_streams_with_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(spu_common.audit_log, "PROGRESS_BYTES", 2**20)
    log = _long_log(tmp_path / "audit.jsonl", 4)
    total = log.path.stat().st_size
    seen: list[tuple[int, int]] = []
    result = verify(log.path, progress=lambda done, size: seen.append((done, size)))
    assert result.ok
    assert len(seen) >= 2 and seen[-1] == (total, total)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))


def test_verify_lists_the_first_problems_and_counts_the_rest(tmp_path):
    log = _long_log(tmp_path / "audit.jsonl", 0.2)
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(line.replace(b"example.org", b"example.net") for line in lines))
    result = verify(log.path)
    assert not result.ok and len(result.errors) == 101
    assert result.errors[-1].startswith("... and ") and result.errors[-1].endswith(" more problems")


def test_verify_cli_reads_a_seal_that_covers_the_bytes(tmp_path):
    log = _long_log(tmp_path / "audit.jsonl", 0.1)
    seal = json.loads(seal_path(log.path).read_bytes())
    assert seal["size"] == log.path.stat().st_size and len(seal["sha256"]) == 64
    done = subprocess.run(
        [sys.executable, "-m", "spu", "audit", "verify", str(log.path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["ok"]
    with open(log.path, "r+b") as fh:  # a byte changed in place, the seal left as it was
        fh.seek(100)
        fh.write(b"X")
    done = subprocess.run(
        [sys.executable, "-m", "spu", "audit", "verify", str(log.path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and any("SHA-256" in e for e in errors)
    with pytest.raises(ToolError) as err:  # and a writer starting on it refuses to append
        AuditLog(log.path, fsync=False).append(RECORD)
    assert err.value.code == "audit_log_invalid"
