"""The audit log's writing side: one hash-chained JSON line per web attempt, fsynced, with a seal file.

The format and the reading side (verify, summary, sources) live in ``environment.audit_log``. Each append
takes an exclusive file lock (``audit.jsonl.lock``), so threads and processes can share one log; the line is
written with one ``write`` and fsynced before :meth:`AuditLog.append` returns, so a process killed with
SIGKILL afterwards loses nothing that was reported as logged. Then the seal file is overwritten in place
(fixed size); a seal one record behind the log (a crash between the two writes) is reported by ``verify``
as a warning, not an error.

Before each append (and before each web call, :meth:`AuditLog.check`) the whole chain is checked, from a
checkpoint: the bytes this process has already verified are read again and compared with the copy kept at
the checkpoint (or, past 64 MiB, with its SHA-256), with no parsing, and only the records after it are
parsed and chained (``seq``, ``prev``, ``hash``, and ``mac`` when keyed). Then the log is checked against
the seal (record count and last hash). Any break (a record edited, moved, removed or added in the middle,
the log truncated, emptied or edited at its end, the seal deleted or altered) refuses the append with
``ToolError`` ``audit_log_invalid`` and nothing is written (``spu audit verify`` says what is wrong); the
seal is never rewritten to match a changed log. A torn last line (no newline: a writer died inside
``write``) and a corrupt line after the sealed records (a writer died before its seal update) are cut, and a
``recovery`` record with the cut bytes' length and SHA-256 is appended.

With a ``key`` (the audit service keeps one beside its log, unreadable to the agent), every record also
carries ``mac``, an HMAC-SHA256 of its hash, and so does the seal: a record forged or re-chained by
someone who can write the log but not read the key fails verification.

Waiting for the log's lock counts against the caller's deadline (:meth:`AuditLog.deadline`): a process
that holds the lock gets the call a ``timeout`` error by its deadline, never a stalled call.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from environment.audit_log import GENESIS, read_records, record_hash, record_mac, seal_mac, seal_path, utc_now
from spu_common.jsonfiles import canonical_json

_SEAL_BYTES = 256  # fixed size, so a seal update is one in-place write
_BLOCK = 1 << 20
#: Up to this size the writer keeps the verified bytes themselves and compares (about 0.3 ms per MB);
#: beyond it, only their SHA-256 (about 2.5 ms per MB here).
KEEP_BYTES = 64 * 2**20


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


@dataclass
class _Checkpoint:
    """The log's first ``size`` bytes hold ``count`` verified records ending in ``head``; ``digest`` is
    their SHA-256 state and ``data`` the bytes themselves (None past :data:`KEEP_BYTES`)."""

    size: int
    count: int
    head: str
    digest: Any  # hashlib object
    before_head: str  # the hash before the last record (a seal one record behind names it)
    data: bytearray | None

    def extend(self, line: bytes, head: str) -> _Checkpoint:
        self.digest.update(line)
        if self.data is not None:
            self.data += line
            if len(self.data) > KEEP_BYTES:
                self.data = None
        return _Checkpoint(self.size + len(line), self.count + 1, head, self.digest, self.head, self.data)

    def matches(self, fh) -> bool:
        """Whether the file's first ``size`` bytes are still the verified ones."""
        fh.seek(0)
        if self.data is not None:
            return fh.read(self.size) == self.data
        digest = hashlib.sha256()
        left = self.size
        while left:
            block = fh.read(min(_BLOCK, left))
            if not block:
                return False
            digest.update(block)
            left -= len(block)
        return digest.digest() == self.digest.digest()


class _BadLine(Exception):
    def __init__(self, offset: int, why: str) -> None:
        self.offset, self.why = offset, why


class AuditLog:
    """An append-only, hash-chained, fsynced JSON-lines log safe for threads and processes."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True, key: bytes | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.key = key
        self._thread_lock = threading.Lock()
        self._file_lock = FileLock(str(self.path) + ".lock")
        self._checkpoint: _Checkpoint | None = None
        self._local = threading.local()

    # -- deadlines -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def deadline(self, at_monotonic: float) -> Iterator[None]:
        """Within this block (this thread), waiting for the log's lock ends at ``at_monotonic`` with
        ``ToolError`` ``timeout``."""
        saved = getattr(self._local, "deadline", None)
        self._local.deadline = at_monotonic if saved is None else min(saved, at_monotonic)
        try:
            yield
        finally:
            self._local.deadline = saved

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        deadline = getattr(self._local, "deadline", None)
        wait = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._thread_lock.acquire(timeout=wait):
            self._lock_timeout()
        try:
            left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self._file_lock.acquire(timeout=left)
            except Timeout:
                self._lock_timeout()
            try:
                yield
            finally:
                self._file_lock.release()
        finally:
            self._thread_lock.release()

    def _lock_timeout(self) -> None:
        from tools_server.core.errors import ToolError

        raise ToolError(
            "timeout",
            f"The audit log {self.path.name} stayed locked by another process until this call's deadline; "
            "nothing was sent or recorded.",
            hint="Try again shortly; if it persists, tell the operator: a process is holding the audit "
            "log's lock.",
        )

    # -- checking --------------------------------------------------------------------------------------
    def _head(self, fh) -> tuple[str, int]:
        """Head hash and record count after checking the chain from the checkpoint and the seal."""
        size = os.fstat(fh.fileno()).st_size
        seal = self._read_seal()
        if size == 0:
            if seal is not None and seal[0] > 0:
                self._refuse(f"the log is empty but the seal counts {seal[0]} records")
            self._checkpoint = None
            return GENESIS, 0
        fh.seek(size - 1)
        if fh.read(1) != b"\n":
            self._drop_torn_tail(fh, size)
            return self._head(fh)
        try:
            checkpoint, prev_of_last = self._chain(fh, size)
        except _BadLine as bad:
            last_start = size - len(_read_last_line(fh, size)) - 1
            # a corrupt last line: cut it only when the records before it are exactly the sealed ones
            if bad.offset == last_start and bad.why == "not valid JSON" and seal is not None:
                keep = last_start
                if self._sealed_prefix(fh, keep, seal):
                    self._drop_torn_tail(fh, size, keep=keep)
                    return self._head(fh)
            self._refuse(bad.why)
            raise AssertionError from None  # unreachable
        head, count = checkpoint.head, checkpoint.count
        if seal is None:
            self._refuse(f"the seal file is missing but the log holds {count} records")
            raise AssertionError  # unreachable
        sealed_count, sealed_head = seal
        if not (
            (sealed_count == count and sealed_head == head)
            # the writer stopped between the log and the seal: the next seal covers it
            or (sealed_count == count - 1 and sealed_head == prev_of_last)
        ):
            if sealed_count > count:
                self._refuse(f"the log holds {count} records but the seal counts {sealed_count} (truncated)")
            self._refuse(f"the log ({count} records) does not match its seal ({sealed_count} records)")
        self._checkpoint = checkpoint
        return head, count

    def _chain(self, fh, size: int) -> tuple[_Checkpoint, str]:
        """Verify the log from the checkpoint on; returns the new checkpoint and the hash before the last
        record. Raises :class:`_BadLine` at the first break."""
        cp = self._checkpoint
        if cp is not None and cp.size > size:
            raise _BadLine(-1, f"the log is shorter than its {cp.count} verified records (truncated)")
        if cp is not None and not cp.matches(fh):
            raise _BadLine(
                -1,
                f"the first {cp.count} records changed since they were verified (a record was edited, "
                "removed, moved or inserted)",
            )
        if cp is None:
            cp = _Checkpoint(0, 0, GENESIS, hashlib.sha256(), GENESIS, bytearray())
        fh.seek(cp.size)
        rest = fh.read(size - cp.size)
        pos = 0
        while pos < len(rest):
            end = rest.index(b"\n", pos)
            line = rest[pos:end]
            where = cp.size
            pos = end + 1
            if not line.strip():
                raise _BadLine(where, f"record {cp.count}: an empty line in the log")
            try:
                record = json.loads(line)
            except ValueError:
                raise _BadLine(where, "not valid JSON") from None
            if not isinstance(record, dict):
                raise _BadLine(where, f"record {cp.count}: not a JSON object")
            problem = self._record_problem(record, cp.count, cp.head)
            if problem:
                raise _BadLine(where, f"record {cp.count}: {problem}")
            cp = cp.extend(line + b"\n", record["hash"])
        return cp, cp.before_head

    def _record_problem(self, record: dict[str, Any], seq: int, prev: str) -> str | None:
        if record.get("seq") != seq:
            return f"seq {record.get('seq')!r} where {seq} was expected (a record was removed or moved)"
        if record.get("prev") != prev:
            return "prev does not match the previous record's hash (the chain is broken)"
        if record.get("hash") != record_hash(record):
            return "its hash does not match its content (the record was edited)"
        if self.key is not None and not hmac.compare_digest(
            str(record.get("mac", "")), record_mac(self.key, record["hash"])
        ):
            return "its MAC does not match (the record was forged or re-chained without the key)"
        return None

    def _read_seal(self) -> tuple[int, str] | None:
        try:
            seal = json.loads(seal_path(self.path).read_bytes())
            count, head = int(seal["count"]), str(seal["head"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, OSError):
            self._refuse("the seal file is not valid")
            raise AssertionError from None  # unreachable
        if self.key is not None and not hmac.compare_digest(
            str(seal.get("mac", "")), seal_mac(self.key, count, head)
        ):
            self._refuse("the seal's MAC does not match (the seal was rewritten without the key)")
        return count, head

    def _sealed_prefix(self, fh, keep: int, seal: tuple[int, str]) -> bool:
        """Whether the first ``keep`` bytes end with the sealed record."""
        try:
            last = json.loads(_read_last_line(fh, keep))
            return int(last["seq"]) + 1 == seal[0] and last["hash"] == seal[1]
        except (ValueError, KeyError, TypeError):
            return False

    def _refuse(self, why: str) -> None:
        from tools_server.core.errors import ToolError

        self._checkpoint = None
        raise ToolError(
            "audit_log_invalid",
            f"The audit log {self.path.name} failed its check: {why}. Nothing was appended.",
            hint="Run `spu audit verify` on the log; keep the damaged log as evidence and start a new one "
            "(point SPU_WORKDIR at a new work directory).",
        )

    # -- writing ---------------------------------------------------------------------------------------
    def _drop_torn_tail(self, fh, size: int, keep: int | None = None) -> None:
        """A writer died inside ``write``: cut the partial line, and record that we did."""
        fh.seek(0)
        data = fh.read(size)
        if keep is None:
            keep = data.rfind(b"\n") + 1
        torn = data[keep:]
        os.truncate(self.path, keep)
        self._checkpoint = None
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
        if self.key is not None:
            record["mac"] = record_mac(self.key, record["hash"])
        line = (canonical_json(record) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        cp = self._checkpoint
        if cp is not None and cp.count == seq:
            self._checkpoint = cp.extend(line, record["hash"])
        else:
            self._checkpoint = None  # verified from the start next time
        self._write_seal(record["hash"], seq + 1)
        return record

    def _write_seal(self, head: str, count: int) -> None:
        """Overwrite the seal in place with one fixed-size ``pwrite`` (no rename: that costs ms per
        append)."""
        seal: dict[str, Any] = {"count": count, "head": head, "ts": utc_now()}
        if self.key is not None:
            seal["mac"] = seal_mac(self.key, count, head)
        data = canonical_json(seal).encode()
        data = data.ljust(_SEAL_BYTES - 1) + b"\n"
        fd = os.open(seal_path(self.path), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Append one record (``seq``, ``ts``, ``prev``, ``hash`` and ``mac`` are added); durable on
        return."""
        if {"hash", "prev", "seq", "mac"} & set(fields):
            raise ValueError("seq, prev, hash and mac are set by the log")
        with self._locked():
            self.path.touch(exist_ok=True)
            with open(self.path, "rb") as fh:
                prev, count = self._head(fh)
                return self._write(fh, fields, prev, count)

    def check(self) -> None:
        """Raise ``ToolError`` ``audit_log_invalid`` when the chain or the seal is broken (called before a
        web call opens any connection, so nothing goes out that could not be recorded)."""
        with self._locked():
            self.path.touch(exist_ok=True)
            with open(self.path, "rb") as fh:
                self._head(fh)

    def records(self) -> list[dict[str, Any]]:
        return list(read_records(self.path))


def load_or_create_key(path: str | os.PathLike[str]) -> bytes:
    """The log's HMAC key from ``path`` (32 random bytes, hex), created with mode 0600 when missing."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        key = os.urandom(32).hex()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(key + "\n")
        return bytes.fromhex(key)
    try:
        key_bytes = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{path}: not a hex key") from None
    if len(key_bytes) < 16:
        raise ValueError(f"{path}: the key is shorter than 16 bytes")
    return key_bytes
