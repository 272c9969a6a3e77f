"""The audit log's writing side: one hash-chained JSON line per web attempt, fsynced, with a seal file.

The format and the reading side (verify, summary, sources) live in ``environment.audit_log``. Each append
takes an exclusive file lock (``audit.jsonl.lock``), so threads and processes can share one log; the line is
written with one ``write`` and fsynced before :meth:`AuditLog.append` returns, so a process killed with
SIGKILL afterwards loses nothing that was reported as logged. Then the seal file is overwritten in place
(fixed size); a seal one record behind the log (a crash between the two writes) is reported by ``verify``
as a warning, not an error.

Before each append the log is checked against the seal (record count and last hash): when the log was
truncated, emptied, edited at its end, or the seal deleted, the append is refused with ``ToolError``
``audit_log_invalid`` and nothing is written (``spu audit verify`` says what is wrong); the seal is never
rewritten to match a shortened log. A torn last line (no newline: a writer died inside ``write``) and a
corrupt line after the sealed records (a writer died before its seal update) are cut, and a ``recovery``
record with the cut bytes' length and SHA-256 is appended.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from filelock import FileLock

from environment.audit_log import GENESIS, read_records, record_hash, seal_path, utc_now
from spu_common.jsonfiles import canonical_json

_SEAL_BYTES = 192  # fixed size, so a seal update is one in-place write


def _read_last_line(fh, size: int) -> bytes:
    """The last complete line of a file that ends with a newline (without the newline)."""
    block = 8192
    end = size - 1  # skip the final newline
    buf = b""
    pos = end
    while pos > 0:
        start = max(0, pos - block)
        fh.seek(start)
        buf = fh.read(pos - start) + buf
        pos = start
        nl = buf.rfind(b"\n")
        if nl >= 0:
            return buf[nl + 1 :]
    return buf


class AuditLog:
    """An append-only, hash-chained, fsynced JSON-lines log safe for threads and processes."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._thread_lock = threading.Lock()
        self._file_lock = FileLock(str(self.path) + ".lock")
        self._cached: tuple[int, str, int] | None = None  # (file size, head hash, count)

    def _head(self, fh) -> tuple[str, int]:
        """Head hash and record count, reading the tail only when another writer appended."""
        size = os.fstat(fh.fileno()).st_size
        if (
            self._cached is not None
            and self._cached[0] == size
            and self._read_seal()
            == (
                self._cached[2],
                self._cached[1],
            )
        ):
            return self._cached[1], self._cached[2]
        seal = self._read_seal()
        if size == 0:
            if seal is not None and seal[0] > 0:
                self._refuse(f"the log is empty but the seal counts {seal[0]} records")
            return GENESIS, 0
        fh.seek(size - 1)
        if fh.read(1) != b"\n":
            self._drop_torn_tail(fh, size)
            return self._head(fh)
        raw_last = _read_last_line(fh, size)
        try:
            last = json.loads(raw_last)
            head, count, prev = last["hash"], int(last["seq"]) + 1, last["prev"]
        except (ValueError, KeyError, TypeError):
            # a corrupt last line: cut it only when the records before it are exactly the sealed ones
            keep = size - len(raw_last) - 1
            if seal is not None and keep > 0 and self._sealed_prefix(fh, keep, seal):
                self._drop_torn_tail(fh, size, keep=keep)
                return self._head(fh)
            self._refuse("the last line of the log is not a valid record")
        if seal is None:
            self._refuse(f"the seal file is missing but the log holds {count} records")
        sealed_count, sealed_head = seal
        if sealed_count == count and sealed_head == head:
            return head, count
        if sealed_count == count - 1 and sealed_head == prev:
            return head, count  # the writer stopped between the log and the seal: the next seal covers it
        if sealed_count > count:
            self._refuse(f"the log holds {count} records but the seal counts {sealed_count} (truncated)")
        self._refuse(f"the log ({count} records) does not match its seal ({sealed_count} records)")
        raise AssertionError  # unreachable

    def _read_seal(self) -> tuple[int, str] | None:
        try:
            seal = json.loads(seal_path(self.path).read_bytes())
            return int(seal["count"]), str(seal["head"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, OSError):
            self._refuse("the seal file is not valid")
            raise AssertionError from None  # unreachable

    def _sealed_prefix(self, fh, keep: int, seal: tuple[int, str]) -> bool:
        """Whether the first ``keep`` bytes end with the sealed record."""
        try:
            last = json.loads(_read_last_line(fh, keep))
            return int(last["seq"]) + 1 == seal[0] and last["hash"] == seal[1]
        except (ValueError, KeyError, TypeError):
            return False

    def _refuse(self, why: str) -> None:
        from tools_server.core.errors import ToolError

        self._cached = None
        raise ToolError(
            "audit_log_invalid",
            f"The audit log {self.path.name} no longer matches its seal: {why}. Nothing was appended.",
            hint="Run `spu audit verify` on the log; keep the damaged log as evidence and start a new one "
            "(point SPU_WORKDIR at a new work directory).",
        )

    def _drop_torn_tail(self, fh, size: int, keep: int | None = None) -> None:
        """A writer died inside ``write``: cut the partial line, and record that we did."""
        fh.seek(0)
        data = fh.read(size)
        if keep is None:
            keep = data.rfind(b"\n") + 1
        torn = data[keep:]
        os.truncate(self.path, keep)
        self._cached = None
        prev, count = self._head(fh) if keep else (GENESIS, 0)
        self._write(
            fh,
            {
                "kind": "recovery",
                "dropped_bytes": len(torn),
                "dropped_sha256": hashlib.sha256(torn).hexdigest(),
            },
            prev,
            count,
        )

    def _write(self, fh, fields: dict[str, Any], prev: str, seq: int) -> dict[str, Any]:
        record = {"seq": seq, "ts": utc_now(), **fields, "prev": prev}
        record["hash"] = record_hash(record)
        line = (canonical_json(record) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        size = os.fstat(fh.fileno()).st_size
        self._cached = (size, record["hash"], seq + 1)
        self._write_seal(record["hash"], seq + 1)
        return record

    def _write_seal(self, head: str, count: int) -> None:
        """Overwrite the seal in place with one fixed-size ``pwrite`` (no rename: that costs ms per
        append)."""
        data = canonical_json({"count": count, "head": head, "ts": utc_now()}).encode()
        data = data.ljust(_SEAL_BYTES - 1) + b"\n"
        fd = os.open(seal_path(self.path), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Append one record (``seq``, ``ts``, ``prev`` and ``hash`` are added); durable on return."""
        if "hash" in fields or "prev" in fields or "seq" in fields:
            raise ValueError("seq, prev and hash are set by the log")
        with self._thread_lock, self._file_lock:
            self.path.touch(exist_ok=True)
            with open(self.path, "rb") as fh:
                prev, count = self._head(fh)
                return self._write(fh, fields, prev, count)

    def check(self) -> None:
        """Raise ``ToolError`` ``audit_log_invalid`` when the log no longer matches its seal (called before
        a web call opens any connection, so nothing goes out that could not be recorded)."""
        with self._thread_lock, self._file_lock:
            self.path.touch(exist_ok=True)
            with open(self.path, "rb") as fh:
                self._head(fh)

    def records(self) -> list[dict[str, Any]]:
        return list(read_records(self.path))
