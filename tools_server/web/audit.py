"""The audit log's writing side: one hash-chained JSON line per web attempt, fsynced, with a seal file.

The format and the reading side (verify, summary, sources) live in ``spu_common.audit_log``. Each append
takes an exclusive file lock (``audit.jsonl.lock``), so threads and processes can share one log; the line is
written in full and fsynced before :meth:`AuditLog.append` returns, so a process killed with SIGKILL
afterwards loses nothing that was reported as logged. Then the seal file is overwritten in place (fixed
size) with the new record count, head hash, and the size and SHA-256 of the log; a seal one record behind
the log (a crash between the two writes) is reported by ``verify`` as a warning, not an error.

**Appends take constant time, whatever the log's length.** The writer keeps the chain's state in memory:
the record count, the head hash, the SHA-256 state of the log's bytes, and the log's inode, size and
modification and change times after its last write. Before each append (and before each web call,
:meth:`AuditLog.check`) it compares those with the log's ``fstat`` and re-reads the seal (512 bytes): when
nothing else touched either, it appends at once. When another writer appended, only the records after the
writer's own state are parsed and chained (``seq``, ``prev``, ``hash``, and ``mac`` when keyed), and the
SHA-256 state, carried over them, must give the seal's. Otherwise (a new writer, or a log changed some other
way) the log's bytes are hashed (about 1 s per GB, no record parsed) and compared with the seal. A seal
written before it held the log's size and SHA-256 is checked once by parsing the whole chain.

Any break (a record edited, moved, removed or inserted, the log truncated, emptied or edited at its end, the
seal deleted or altered) refuses the append with ``ToolError`` ``audit_log_invalid`` and nothing is written
(``spu audit verify`` says which record); the seal is never rewritten to match a changed log. A torn last
line (no newline: a writer died inside ``write``) and a corrupt line after the sealed records (a writer
died before its seal update) are cut, and a ``recovery`` record with the cut bytes' length and SHA-256 is
appended. The writer notices a change between its own appends by the log's size, inode and times: on a
kernel whose file times are coarse (a clock tick), a rewrite in place that keeps the log's size within the
same tick as an append is found by the next writer to start and by ``spu audit verify``, not before the
next append.

**A write that fails is never counted.** A full disk, a quota, a read-only folder or an I/O error during
the record's write, its fsync or the seal's write cuts the log back to its size before the write, leaves
the seal as it was, and raises ``ToolError`` ``storage_error``; the next append after space returns
continues the chain.

With a ``key`` (the audit service keeps one beside its log, unreadable to the agent), every record also
carries ``mac``, an HMAC-SHA256 of its hash, and so does the seal: a record forged or re-chained by
someone who can write the log but not read the key fails verification.

Waiting for the log's lock counts against the caller's deadline (:meth:`AuditLog.deadline`): a process
that holds the lock gets the call a ``timeout`` error by its deadline, never a stalled call.
"""

from __future__ import annotations

import contextlib
import errno
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

from spu_common.audit_log import (
    GENESIS,
    Seal,
    find_rotated,
    parse_seal,
    read_records,
    record_hash,
    record_hash_ok,
    record_mac,
    rotation_fields,
    rotation_of,
    seal_path,
    utc_now,
)
from spu_common.jsonfiles import canonical_json

_BLOCK = 1 << 20


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What changes when anyone writes the file: inode, size, modification and change time."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class _State:
    """The log's first ``size`` bytes hold ``count`` verified records ending in ``head``; ``digest`` is
    their SHA-256 state. ``stat`` and ``seal`` are the log's signature and the seal's bytes when the writer
    last saw them (None: not seen since this state was computed)."""

    size: int
    count: int
    head: str
    digest: Any  # hashlib object
    stat: tuple[int, int, int, int] | None = None
    seal: bytes | None = None
    #: the record whose write made this state
    record: dict[str, Any] | None = None

    @classmethod
    def empty(cls) -> _State:
        return cls(0, 0, GENESIS, hashlib.sha256())

    def extended(self, line: bytes, head: str) -> _State:
        digest = self.digest.copy()
        digest.update(line)
        return _State(self.size + len(line), self.count + 1, head, digest)

    def seal_for(self) -> Seal:
        return Seal(self.count, self.head, self.size, self.digest.hexdigest())


def _hash_prefix(fh, size: int) -> Any:
    """The SHA-256 state of the file's first ``size`` bytes (None when it is shorter)."""
    digest = hashlib.sha256()
    fh.seek(0)
    left = size
    while left:
        block = fh.read(min(_BLOCK, left))
        if not block:
            return None
        digest.update(block)
        left -= len(block)
    return digest


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``; a write that takes nothing is a full disk (``OSError`` ENOSPC)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


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
        self._state: _State | None = None
        #: a recovery record that a full disk kept from being written (written before the next record)
        self._pending_recovery: dict[str, Any] | None = None
        self._local = threading.local()
        #: the log's descriptor while it is checked and appended to (under the locks)
        self._fd = -1

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
            except OSError as exc:  # the lock file cannot be made: a read-only folder, a full disk
                raise self._storage_error(exc) from None
            try:
                yield
            finally:
                self._file_lock.release()
        finally:
            self._thread_lock.release()

    def _lock_timeout(self) -> None:
        from tools_server.plugin import ToolError

        raise ToolError(
            "timeout",
            f"The audit log {self.path.name} stayed locked by another process until this call's deadline; "
            "nothing was sent or recorded.",
            hint="Try again shortly; if it persists, tell the operator: a process is holding the audit "
            "log's lock.",
        )

    # -- checking --------------------------------------------------------------------------------------
    def _current(self, fh) -> _State:
        """The log's verified state, after checking it against this writer's state and the seal (see the
        module docstring); refuses a log that no longer matches its seal."""
        st = os.fstat(fh.fileno())
        seal_bytes = self._seal_bytes()
        state = self._state
        if state is not None and state.stat == _signature(st) and state.seal == seal_bytes:
            return state  # nothing touched the log or the seal since this writer last saw them
        self._state = None
        seal = self._parse_seal(seal_bytes)
        grown = None
        if (
            state is not None
            and state.stat is not None
            and state.stat[0] == st.st_ino
            and seal is not None
            and seal.size == st.st_size > state.size
        ):
            grown = self._appended_by_another(fh, state, seal)
        fresh = grown or self._full_check(fh, st.st_size, seal)
        fresh.stat, fresh.seal = _signature(os.fstat(fh.fileno())), self._seal_bytes()
        self._state = fresh
        return fresh

    def _appended_by_another(self, fh, state: _State, seal: Seal) -> _State | None:
        """The state after the records another writer appended, when they chain from ``state`` and end
        where its seal says; else None (the full check decides)."""
        try:
            grown = self._chain(fh, state, seal.size or 0)
        except _BadLine:
            return None
        if (grown.count, grown.head, grown.digest.hexdigest()) != (seal.count, seal.head, seal.sha256):
            return None
        return grown

    def _full_check(self, fh, size: int, seal: Seal | None) -> _State:
        if size == 0:
            if seal is not None and seal.count > 0:
                return self._rotated_or_refuse(
                    fh, size, seal, f"the log is empty but its seal counts {seal.count} records (truncated)"
                )
            return _State.empty()
        if seal is None:
            self._refuse(f"the seal file is missing but the log holds {size} bytes")
            raise AssertionError  # unreachable
        if seal.size is None:  # a seal from before sizes were sealed: parse the chain up to it, once
            state = self._sealed_by_chain(fh, seal)
        else:
            if size < seal.size:
                return self._rotated_or_refuse(
                    fh,
                    size,
                    seal,
                    f"the log holds {size} bytes but its seal covers {seal.size} ({seal.count} records): "
                    "it was truncated",
                )
            digest = _hash_prefix(fh, seal.size)
            if digest is None or digest.hexdigest() != seal.sha256:
                return self._rotated_or_refuse(
                    fh,
                    size,
                    seal,
                    f"the log's first {seal.count} records are not those its seal covers (a record was "
                    "edited, removed, moved or inserted)",
                )
            state = _State(seal.size, seal.count, seal.head, digest)
        return self._after_seal(fh, state, size) if size > state.size else state

    # -- rotation --------------------------------------------------------------------------------------
    def _rotated_or_refuse(self, fh, size: int, seal: Seal, why: str) -> _State:
        """The log no longer holds what its seal covers: a rotation when a file beside it does (the new
        log is empty, or begins with the rotation record naming it), else refused with ``why``."""
        state = self._after_rotation(fh, size, seal) if seal.size is not None and seal.count > 0 else None
        if state is None:
            self._refuse(why)
            raise AssertionError  # unreachable
        return state

    def _after_rotation(self, fh, size: int, seal: Seal) -> _State | None:
        archive = find_rotated(self.path, seal.size or 0, seal.sha256 or "")
        if archive is None:
            return None
        self._keep_seal(archive, self._seal_bytes() or b"")
        if size == 0:  # renamed or copied away: the new log begins by naming it
            return self._write(_State.empty(), rotation_fields(archive.name, seal, "writer"))
        # the rotation record is already written (its writer stopped before the seal update)
        fh.seek(0)
        try:
            named = rotation_of(json.loads(fh.readline().decode("utf-8")))
            state = self._chain(fh, _State.empty(), size)
        except (ValueError, AttributeError, _BadLine):
            return None
        if named is None or state.count != 1 or named != Seal(seal.count, seal.head, seal.size, seal.sha256):
            return None
        return state

    def _keep_seal(self, archive: Path, data: bytes) -> None:
        """Give ``archive`` the seal that covered it (``data``), unless it has one; fsynced."""
        try:
            fd = os.open(seal_path(archive), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return
        except OSError as exc:
            raise self._storage_error(exc) from None
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(seal_path(archive))
            raise self._storage_error(exc) from None
        finally:
            os.close(fd)

    def rotate(self) -> dict[str, Any] | None:
        """Rename the log to ``LOG.<UTC time>`` (its seal copied beside it) and start a new one whose first
        record names it (``rotation``). The log must pass its check first (a damaged log is not rotated:
        ``audit_log_invalid``). Returns the archive's path, record count and head hash; None for a log
        without records (nothing is renamed)."""
        with self._locked():
            with self._opened() as fh:
                state = self._current(fh)
                if self._pending_recovery is not None:
                    state = self._write(state, self._pending_recovery)
                    self._pending_recovery = None
                if state.count == 0:
                    return None
                sealed = state.seal_for()
                data = sealed.to_bytes(self.key)
                archive = self._archive_path()
                try:
                    self._write_seal(data, self._seal_bytes())  # the seal covers the last record
                    os.rename(self.path, archive)
                except OSError as exc:
                    raise self._storage_error(exc) from None
                self._keep_seal(archive, data)
            self._state = None
            with self._opened():
                self._write(_State.empty(), rotation_fields(archive.name, sealed, "spu audit rotate"))
        return {"archive": str(archive), "count": sealed.count, "head": sealed.head}

    def _archive_path(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for n in range(1, 1000):
            candidate = self.path.with_name(f"{self.path.name}.{stamp}" + (f"-{n}" if n > 1 else ""))
            if not candidate.exists() and not seal_path(candidate).exists():
                return candidate
        raise FileExistsError(f"no free archive name for {self.path.name}")

    def _sealed_by_chain(self, fh, seal: Seal) -> _State:
        """Parse the chain from the start up to the sealed record (a seal without size and SHA-256)."""
        try:
            state = self._chain(fh, _State.empty(), os.fstat(fh.fileno()).st_size, upto=seal.count)
        except _BadLine as bad:
            self._refuse(bad.why)
            raise AssertionError from None  # unreachable
        if state.count < seal.count:
            self._refuse(f"the log holds {state.count} records but the seal counts {seal.count} (truncated)")
        if state.head != seal.head:
            self._refuse(f"the log ({state.count} records) does not match its seal's head hash")
        return state

    def _after_seal(self, fh, state: _State, size: int) -> _State:
        """The bytes after the sealed records: one complete record (a writer stopped before its seal
        update) is kept; a torn or corrupt last line is cut and recorded; anything more is refused."""
        fh.seek(state.size)
        tail = fh.read(size - state.size)
        keep = tail.rfind(b"\n") + 1
        lines = tail[:keep].split(b"\n")[:-1]
        if len(lines) > 1:
            self._refuse(
                f"{len(lines)} lines follow the {state.count} records its seal covers (a writer adds one "
                "record before it updates the seal)"
            )
        cut_from = state.size + keep
        if lines:
            try:
                state = self._chain(fh, state, state.size + keep)
            except _BadLine as bad:
                if bad.why != "not valid JSON":
                    self._refuse(bad.why)
                cut_from = state.size  # a corrupt line a dying writer left
        if cut_from < size:
            fh.seek(cut_from)
            self._cut(cut_from, fh.read(size - cut_from))
            state = self._write(state, self._pending_recovery or {})
            self._pending_recovery = None
        return state

    def _chain(self, fh, state: _State, end: int, upto: int | None = None) -> _State:
        """Parse and chain the records from ``state`` up to byte ``end`` (or ``upto`` records); raises
        :class:`_BadLine` at the first break."""
        fh.seek(state.size)
        while state.size < end and (upto is None or state.count < upto):
            line = fh.readline(end - state.size)
            if not line.endswith(b"\n"):
                raise _BadLine(state.size, "not valid JSON" if line.strip() else "a torn line")
            if not line.strip():
                raise _BadLine(state.size, f"record {state.count}: an empty line in the log")
            try:
                record = json.loads(line.decode("utf-8"))  # a str skips json's encoding detection
            except ValueError:
                raise _BadLine(state.size, "not valid JSON") from None
            if not isinstance(record, dict):
                raise _BadLine(state.size, f"record {state.count}: not a JSON object")
            problem = self._record_problem(line, record, state.count, state.head)
            if problem:
                raise _BadLine(state.size, f"record {state.count}: {problem}")
            state = state.extended(line, record["hash"])
        return state

    def _record_problem(self, line: bytes, record: dict[str, Any], seq: int, prev: str) -> str | None:
        if record.get("seq") != seq:
            return f"seq {record.get('seq')!r} where {seq} was expected (a record was removed or moved)"
        if record.get("prev") != prev:
            return "prev does not match the previous record's hash (the chain is broken)"
        if not record_hash_ok(line, record):
            return "its hash does not match its content (the record was edited)"
        if self.key is not None and not hmac.compare_digest(
            str(record.get("mac", "")), record_mac(self.key, record["hash"])
        ):
            return "its MAC does not match (the record was forged or re-chained without the key)"
        return None

    def _seal_bytes(self) -> bytes | None:
        try:
            return seal_path(self.path).read_bytes()
        except FileNotFoundError:
            return None

    def _parse_seal(self, data: bytes | None) -> Seal | None:
        if data is None:
            return None
        try:
            seal = parse_seal(data)
        except ValueError:
            self._refuse("the seal file is not valid")
            raise AssertionError from None  # unreachable
        if self.key is not None and not seal.mac_ok(self.key):
            self._refuse("the seal's MAC does not match (the seal was rewritten without the key)")
        return seal

    def _refuse(self, why: str) -> None:
        from tools_server.plugin import ToolError

        self._state = None
        raise ToolError(
            "audit_log_invalid",
            f"The audit log {self.path.name} failed its check: {why}. Nothing was appended.",
            hint="Run `spu audit verify` on the log; keep the damaged log as evidence and start a new one "
            "(point SPU_WORKDIR at a new work directory).",
        )

    def _storage_error(self, exc: OSError) -> Exception:
        from tools_server.plugin import ToolError

        return ToolError(
            "storage_error",
            f"The audit log {self.path.name} could not be written ({exc.strerror or exc}); nothing was "
            "appended, and nothing unrecorded is returned.",
            hint="Tell the operator: free disk space or make the audit log's folder writable, then call "
            "again; the log continues where it stopped.",
            path=str(self.path),
            reason=exc.strerror or str(exc),
        )

    # -- writing ---------------------------------------------------------------------------------------
    def _cut(self, keep: int, torn: bytes) -> None:
        """A writer died inside ``write`` (or before its seal): cut the bytes after ``keep``, and keep the
        recovery record to append next."""
        os.ftruncate(self._fd, keep)
        self._pending_recovery = {
            "kind": "recovery",
            "dropped_bytes": len(torn),
            "dropped_sha256": hashlib.sha256(torn).hexdigest(),
        }

    def _write(self, state: _State, fields: dict[str, Any]) -> _State:
        """Append one record after ``state`` and seal it; on any failure the log and the seal stay as they
        were (``storage_error``). Returns the new state (its ``record`` is the record written)."""
        record = {"seq": state.count, "ts": utc_now(), **fields, "prev": state.head}
        record["hash"] = record_hash(record)
        if self.key is not None:
            record["mac"] = record_mac(self.key, record["hash"])
        line = (canonical_json(record) + "\n").encode("utf-8")
        new = state.extended(line, record["hash"])
        seal = new.seal_for().to_bytes(self.key)
        fd = self._fd  # the descriptor the log was checked on: a rename meanwhile cannot split the two
        try:
            _write_all(fd, line)
            if self.fsync:
                os.fsync(fd)
            self._write_seal(seal, state.seal if state.seal is not None else self._seal_bytes())
        except OSError as exc:
            with contextlib.suppress(OSError):  # the record never counted: the log is as it was
                os.ftruncate(fd, state.size)
            self._state = None
            raise self._storage_error(exc) from None
        new.stat = _signature(os.fstat(fd))
        new.seal, new.record = seal, record
        self._state = new
        return new

    def _write_seal(self, data: bytes, previous: bytes | None) -> None:
        """Overwrite the seal in place with one fixed-size ``pwrite`` (no rename: that costs ms per append);
        on failure put back the ``previous`` seal, or remove a seal this write created."""
        target = seal_path(self.path)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            try:
                if os.pwrite(fd, data, 0) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                if self.fsync:
                    os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    if previous is None:
                        target.unlink()
                    else:
                        os.pwrite(fd, previous, 0)
                raise
        finally:
            os.close(fd)

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Append one record (``seq``, ``ts``, ``prev``, ``hash`` and ``mac`` are added); durable on
        return. ``ToolError`` ``audit_log_invalid`` for a log that fails its check, ``storage_error`` for a
        write that failed (nothing counted)."""
        if {"hash", "prev", "seq", "mac"} & set(fields):
            raise ValueError("seq, prev, hash and mac are set by the log")
        with self._locked(), self._opened() as fh:
            state = self._current(fh)
            if self._pending_recovery is not None:
                state = self._write(state, self._pending_recovery)
                self._pending_recovery = None
            return self._write(state, fields).record

    def check(self) -> None:
        """Raise ``ToolError`` ``audit_log_invalid`` when the chain or the seal is broken (called before a
        web call opens any connection, so nothing goes out that could not be recorded)."""
        with self._locked(), self._opened() as fh:
            self._current(fh)

    @contextlib.contextmanager
    def _opened(self) -> Iterator[Any]:
        """The log opened once (created when missing) for the check and the append that follows; a
        ``storage_error`` when that fails."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._storage_error(exc) from None
        with open(fd, "rb") as fh:
            self._fd = fd
            try:
                yield fh
            finally:
                self._fd = -1

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
