"""Rotating the audit log (issue 45): ``spu audit rotate`` starts a new log whose first record names the old
one's file, record count and last hash; a log renamed alone or copied and emptied (logrotate's two ways) is
found by its content and reported as rotated, not truncated, and web calls continue; ``spu audit verify``
follows the rotations back; tampering with the live log or an archive is still found.

The sequences of appends, writers, renames, copy-truncates, logrotate's renumbering and rotations are
generated (a Hypothesis state machine) on real files in a temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from spu_common.audit_log import seal_path, verify
from tools_server.core.errors import ToolError
from tools_server.web.audit import AuditLog

KEY = bytes(range(32))


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _payloads(log: Path) -> list[int]:
    """The ``n`` of every appended record, oldest first, across the log and the archives verify followed."""
    result = verify(log)
    files = [log.with_name(r["file"]) for r in reversed(result.rotations)]
    if log.exists():
        files.append(log)
    return [r["n"] for f in files for r in _records(f) if "n" in r]


class Rotations(RuleBasedStateMachine):
    """Appends from several writers (one kept open, as a server keeps its gateway; fresh ones, as a new
    process starts) mixed with logrotate's rename (with and without ``create``), its copy-truncate, its
    renumbering of archives, and ``spu audit rotate``. After every step the log verifies, nothing appended
    is lost or counted twice, and the next append succeeds."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="spu-rotation-"))
        self.log = self.folder / "audit.jsonl"
        self.key: bytes | None = None
        self.writer = AuditLog(self.log, fsync=False)
        self.appended: list[int] = []
        self.archives = 0

    @initialize(keyed=st.booleans())
    def choose_the_log(self, keyed: bool) -> None:
        """An unkeyed log (the embedded server's) or a keyed one (the audit service's)."""
        self.key = KEY if keyed else None
        self.writer = AuditLog(self.log, fsync=False, key=self.key)

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _append(self, writer: AuditLog) -> None:
        n = len(self.appended)
        writer.append({"kind": "http", "n": n})
        self.appended.append(n)

    @rule()
    def append_from_the_open_writer(self) -> None:
        self._append(self.writer)

    @rule()
    def append_from_a_new_writer(self) -> None:
        self._append(AuditLog(self.log, fsync=False, key=self.key))

    @rule()
    def web_call_check(self) -> None:
        self.writer.check()

    def _archive_name(self) -> Path:
        self.archives += 1
        return self.log.with_name(f"{self.log.name}.{self.archives}")

    @precondition(lambda self: self.log.exists() and self.log.stat().st_size > 0)
    @rule(create=st.booleans())
    def logrotate_renames_the_log_alone(self, create: bool) -> None:
        os.rename(self.log, self._archive_name())
        if create:  # logrotate's `create`: a new empty log in its place
            self.log.touch()

    @precondition(lambda self: self.log.exists() and self.log.stat().st_size > 0)
    @rule()
    def logrotate_copies_and_truncates(self) -> None:
        shutil.copyfile(self.log, self._archive_name())
        os.truncate(self.log, 0)

    @precondition(lambda self: self.archives > 0)
    @rule(data=st.data())
    def logrotate_renumbers_an_archive(self, data: st.DataObject) -> None:
        names = sorted(
            p for p in self.folder.glob("audit.jsonl.*") if not p.name.endswith((".seal", ".lock"))
        )
        if names:
            os.rename(data.draw(st.sampled_from(names)), self._archive_name())

    @rule()
    def spu_audit_rotate(self) -> None:
        AuditLog(self.log, fsync=False, key=self.key).rotate()

    @invariant()
    def the_log_verifies_and_keeps_every_record(self) -> None:
        if not self.log.exists() and not seal_path(self.log).exists():
            return  # no web call yet
        result = verify(self.log, self.key)
        assert result.ok and result.state in ("ok", "rotated"), (
            result.errors,
            sorted(os.listdir(self.folder)),
        )
        assert "truncated" not in " ".join(result.errors + result.warnings)
        assert _payloads(self.log) == self.appended


TestRotations = Rotations.TestCase
# 20 steps a run (the default 50 add little here: each step already mixes writers and rotations)
TestRotations.settings = settings(stateful_step_count=20)
TestRotations.pytestmark = [pytest.mark.slow]


# -- tampering is still found --------------------------------------------------------------------------------


def _history(folder: Path, ops: list[str]) -> Path:
    """A log with 4 records per step of ``ops`` (``append``, ``rename``, ``copytruncate``, ``rotate``)."""
    log = folder / "audit.jsonl"
    n = 0
    for i, op in enumerate(ops):
        writer = AuditLog(log, fsync=False)
        for _ in range(4):
            writer.append({"kind": "http", "n": n})
            n += 1
        if op == "rename":
            os.rename(log, log.with_name(f"audit.jsonl.{i}"))
        elif op == "copytruncate":
            shutil.copyfile(log, log.with_name(f"audit.jsonl.{i}"))
            os.truncate(log, 0)
        elif op == "rotate":
            writer.rotate()
    AuditLog(log, fsync=False).append({"kind": "http", "n": n})
    return log


def _edit(path: Path, index: int) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[index])
    record["tampered"] = True  # hash kept
    lines[index] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def _drop(path: Path, index: int) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    del lines[index]
    path.write_text("".join(lines), encoding="utf-8")


_OPS = st.lists(st.sampled_from(["append", "rename", "copytruncate", "rotate"]), min_size=1, max_size=6)


@given(ops=_OPS, data=st.data())
def test_tampering_with_any_log_of_the_chain_is_found(tmp_path_factory, ops, data):
    folder = tmp_path_factory.mktemp("tamper")
    log = _history(folder, ops)
    result = verify(log)
    assert result.ok, result.errors
    files = [log, *(log.with_name(r["file"]) for r in result.rotations)]
    target = data.draw(st.sampled_from(files))
    index = data.draw(st.integers(0, len(_records(target)) - 1))
    data.draw(st.sampled_from([_edit, _drop]))(target, index)
    after = verify(log)
    assert not after.ok and after.state == "failed", (target.name, index)
    if target == log:
        with pytest.raises(ToolError) as err:
            AuditLog(log, fsync=False).append({"kind": "http"})
        assert err.value.code == "audit_log_invalid"


@given(ops=_OPS)
def test_an_emptied_log_without_its_records_beside_it_is_truncation(tmp_path_factory, ops):
    """Rotation is proven by the old bytes found beside the log: an emptied log whose records are nowhere
    is still refused as truncated."""
    folder = tmp_path_factory.mktemp("truncate")
    log = _history(folder, ops)
    os.truncate(log, 0)
    result = verify(log)
    assert not result.ok and any("truncated" in e for e in result.errors)
    with pytest.raises(ToolError) as err:
        AuditLog(log, fsync=False).check()
    assert err.value.code == "audit_log_invalid" and "truncated" in err.value.message


def test_the_rotation_record_names_the_old_log(tmp_path):
    log = tmp_path / "audit.jsonl"
    writer = AuditLog(log, fsync=False, key=KEY)
    for n in range(3):
        writer.append({"kind": "http", "n": n})
    head = _records(log)[-1]["hash"]
    done = writer.rotate()
    archive = Path(done["archive"])
    assert done["count"] == 3 and done["head"] == head and archive.parent == tmp_path
    assert seal_path(archive).exists() and _records(archive)[-1]["hash"] == head
    (first,) = _records(log)
    assert first["kind"] == "rotation" and first["seq"] == 0 and first["by"] == "spu audit rotate"
    assert first["previous"]["file"] == archive.name
    assert (first["previous"]["count"], first["previous"]["head"]) == (3, head)
    result = verify(log, KEY)
    assert result.ok and result.state == "rotated" and result.rotations[0]["file"] == archive.name


def test_an_archive_that_is_gone_is_a_warning_not_an_error(tmp_path):
    log = _history(tmp_path, ["rotate"])
    archive = log.with_name(verify(log).rotations[0]["file"])
    archive.unlink()
    result = verify(log)
    assert result.ok and result.state == "rotated" and "not beside it" in " ".join(result.warnings)


def _spu(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", "audit", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_spu_audit_rotate_and_verify(spu_env, tmp_path):
    log = tmp_path / "audit.jsonl"
    writer = AuditLog(log, fsync=False)
    for n in range(3):
        writer.append({"kind": "http", "n": n})
    rotated = _spu("rotate", str(log), "--json", env=spu_env)
    assert rotated.returncode == 0, rotated.stderr
    done = json.loads(rotated.stdout)
    assert done["rotated"] and done["count"] == 3
    writer.append({"kind": "http", "n": 3})  # the writer that was open continues in the new log
    checked = _spu("verify", str(log), "--json", env=spu_env)
    report = json.loads(checked.stdout)
    assert checked.returncode == 0 and report["state"] == "rotated" and report["count"] == 2
    assert [r["records"] for r in report["rotations"]] == [3]
    text = _spu("verify", str(log), env=spu_env)
    assert "OK, rotated" in text.stdout and f"after {Path(done['archive']).name}: 3 records" in text.stdout


def test_spu_audit_rotate_refuses_a_damaged_log(spu_env, tmp_path):
    log = tmp_path / "audit.jsonl"
    writer = AuditLog(log, fsync=False)
    for n in range(3):
        writer.append({"kind": "http", "n": n})
    _edit(log, 1)
    rotated = _spu("rotate", str(log), env=spu_env)
    assert rotated.returncode == 2 and rotated.stderr.count("\n") == 1
    assert rotated.stderr.startswith("error: ") and "not rotated" in rotated.stderr
    assert sorted(p.name for p in tmp_path.glob("audit*")) == [
        "audit.jsonl",
        "audit.jsonl.lock",
        "audit.jsonl.seal",
    ]
    missing = _spu("rotate", str(tmp_path / "none.jsonl"), env=spu_env)
    assert missing.returncode == 2 and missing.stderr.startswith("error: no audit log")


def test_a_keyed_log_needs_its_key_to_rotate(spu_env, tmp_path):
    log = tmp_path / "audit.jsonl"
    AuditLog(log, fsync=False, key=KEY).append({"kind": "http"})
    refused = _spu("rotate", str(log), env=spu_env)
    assert refused.returncode == 2 and "--key" in refused.stderr
    key_file = tmp_path / "key.hex"
    key_file.write_text(KEY.hex())
    assert _spu("rotate", str(log), "--key", str(key_file), env=spu_env).returncode == 0
    assert verify(log, KEY).ok and verify(log, KEY).state == "rotated"


def test_web_calls_continue_after_logrotate_renames_the_log(make_gateway, farm, tmp_path):
    """A real web call through the embedded gateway, a rename as logrotate does it (the log alone, a new
    empty one created), and the next web call: it succeeds, and the new log begins by naming the old."""
    log = tmp_path / "audit" / "audit.jsonl"
    gateway = make_gateway(log=log)
    gateway.call("web_fetch", {"url": farm.url("/page.html")})
    count = len(_records(log))
    os.rename(log, log.with_name("audit.jsonl.1"))
    log.touch()
    assert verify(log).state == "rotated"
    out = gateway.call("web_fetch", {"url": farm.url("/page.html")})
    assert out["title"] == "Amine synthesis review"
    first = _records(log)[0]
    assert first["kind"] == "rotation" and first["by"] == "writer"
    assert first["previous"]["file"] == "audit.jsonl.1" and first["previous"]["count"] == count
    result = verify(log)
    assert result.ok and result.state == "rotated" and result.rotations[0]["records"] == count
