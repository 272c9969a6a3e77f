"""Job records on disk: one JSON file per job under ``$SPU_WORKDIR/jobs``, so ``job_wait`` after a server
restart returns the stored result.

A job's record is on disk before its id reaches a client: the final record before its caller is woken
(:meth:`JobStore.save`), the record of a job still queued or running before the call answers with its id
(the dispatcher).

Nothing in the folder can stall or fail a call. Records are read off the event loop (the job tools hand
the reading to a thread), each through :mod:`spu_common.confined`: opened without following a link and
without blocking (a FIFO named ``*.json`` is refused, not waited on), only a regular file of at most
:data:`MAX_RECORD_BYTES` (a larger or sparse one is refused before a byte of it is read). A record that
cannot be used is *damaged*: not such a file, not UTF-8, not JSON, not a job record, another job's id, a
``result`` or ``error`` of the wrong shape, or a result of another tool (:func:`record_problem`). A
damaged record is skipped and counted, and the answers of ``jobs`` (and of ``job_wait`` on its id) name it
in a warning: one damaged file never fails a call.

Records are not fsynced (that would cost milliseconds per job), so a power cut may still take the newest
ones. Job ids therefore carry a tag, an HMAC of the id under a key the work folder keeps
(``jobs/.job-id-key``, written and synced once): an id whose record is missing or unreadable but whose tag
is this folder's was issued here, and reads as ``lost``; an id never issued here is ``job_not_found``."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import math
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from spu_common import confined
from tools_server.core import settings
from tools_server.core.deferred import DeferredWrites
from tools_server.core.jobs.model import JOB_STATUSES, TERMINAL, Job, process_started

_JOB_ID_RE = re.compile(r"^[a-z0-9_]+-[0-9a-f]+$")
log = logging.getLogger(__name__)

#: The largest job record read (bytes); a larger file in the jobs folder is a damaged record, never read.
MAX_RECORD_BYTES = 64 * 2**20
_NUMBERS = ("created", "started", "finished", "progress", "time_limit_s")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def record_problem(record: Any, job_id: str) -> str | None:
    """Why ``record``, read from the file of ``job_id``, is not a usable job record; None when it is."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for key in ("job_id", "status", "tool", "module"):
        if not isinstance(record.get(key), str):
            return f"no {key}"
    if record["job_id"] != job_id:
        return f"it holds another job's record ({record['job_id'][:80]!r})"
    if record["status"] not in (*JOB_STATUSES, *TERMINAL):
        return f"an unknown status {record['status'][:40]!r}"
    if not _number(record.get("created")):
        return "no creation time"
    for key in _NUMBERS[1:]:
        if record.get(key) is not None and not _number(record[key]):
            return f"{key} is not a number"
    for key in ("params", "result", "error"):
        if record.get(key) is not None and not isinstance(record[key], dict):
            return f"its {key} is not an object"
    for key in ("memory_limit_mb", "server_pid"):
        if record.get(key) is not None and not (
            isinstance(record[key], int) and not isinstance(record[key], bool)
        ):
            return f"{key} is not an integer"
    threads = record.get("threads")
    if threads is not None and threads != "all" and not (isinstance(threads, int) and threads > 0):
        return "threads is neither a count nor 'all'"
    if record["status"] == "done" and record.get("result") is None:
        return "a finished job without its result"
    provenance = (record.get("result") or {}).get("provenance", {})
    if not isinstance(provenance, dict) or provenance.get("tool", record["tool"]) != record["tool"]:
        return f"its result is not one of {record['tool'][:80]!r}"
    error = record.get("error")
    if error is not None and not (
        isinstance(error.get("code"), str) and isinstance(error.get("message"), str)
    ):
        return "its error has no code and message"
    if record["status"] in ("error", "cancelled", "lost") and error is None:
        return f"a job that ended {record['status']} without its error"
    return None


def read_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, None)`` for a usable job record in ``path``; ``(None, why)`` for a damaged one;
    ``(None, None)`` when there is no such file. Read through :mod:`spu_common.confined` (below the jobs
    folder, no link followed, no wait on a FIFO, at most :data:`MAX_RECORD_BYTES`)."""
    for attempt in range(2):
        try:
            data = confined.read_file(path, [path.parent], max_bytes=MAX_RECORD_BYTES).data
            break
        except confined.Refused as exc:
            if exc.reason != "missing":
                return None, _why(exc)
            if attempt:
                return None, None
            time.sleep(0.002)  # between the two steps of a record's replacement (JobStore._write): once more
    try:  # records are written without NaN or Infinity (allow_nan=False): one that holds them is damaged
        record = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except (ValueError, RecursionError):
        return None, "not JSON"
    problem = record_problem(record, path.name.removesuffix(".json"))
    return (None, problem) if problem is not None else (record, None)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _why(exc: confined.Refused) -> str:
    return {
        "link": "a symbolic link",
        "not_regular": "not a regular file (a FIFO, socket, device or folder)",
        "hard_link": "a file with several hard links",
        "too_large": f"{exc.size_bytes} bytes, over the {MAX_RECORD_BYTES // 2**20} MiB of a record",
    }.get(exc.reason, exc.message)


def owner_alive(record: dict[str, Any]) -> bool:
    """Whether the server process that wrote ``record`` is still running (this one included)."""
    pid = record.get("server_pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return record.get("server_started") in (None, process_started())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        pass
    started = record.get("server_started")
    if not isinstance(started, int | float):
        return True  # a record written before start times were kept: the pid alone decides
    import psutil

    try:
        return abs(psutil.Process(pid).create_time() - started) < 0.01
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


#: Hex digits of a job id's random part and of its tag.
ID_RANDOM_HEX = 10
ID_TAG_HEX = 8


def _read_key(path: Path) -> bytes:
    """The job id key in ``path`` (:class:`~spu_common.confined.Refused` or ``ValueError`` otherwise)."""
    # made by linking a temporary file into place, so two links while it is made
    read = confined.read_file(path, [path.parent], max_bytes=1024, allow_hard_links=True)
    return bytes.fromhex(read.data.decode("ascii").strip())


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class JobStore:
    """One JSON file per job under ``$SPU_WORKDIR/jobs``, replaced atomically on every state change."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or settings.workdir() / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)

        self._later = DeferredWrites("spu-job-records")
        self._key: bytes | None = None
        # one job's writes never overlap (a deferred write that took the record before the final save must
        # not rename it over the final record); striped, so unrelated jobs rarely wait for each other
        self._locks = [threading.Lock() for _ in range(16)]
        #: damaged records seen by the last :meth:`recent` (file name -> why), and by :meth:`load`
        self.damaged: dict[str, str] = {}
        self._damaged_lock = threading.Lock()

    # -- job ids -----------------------------------------------------------------------------------------
    def new_id(self, tool: str) -> str:
        """A fresh job id for ``tool``: ``tool-<random><tag>`` (see the module docstring)."""
        stem = f"{tool}-{secrets.token_hex(ID_RANDOM_HEX // 2)}"
        return stem + self._tag(stem)

    def issued(self, job_id: str) -> bool:
        """Whether ``job_id`` carries this work folder's tag (it was issued here)."""
        stem, tag = job_id[:-ID_TAG_HEX], job_id[-ID_TAG_HEX:]
        hexpart = stem.rpartition("-")[2]
        if not _JOB_ID_RE.match(job_id) or len(hexpart) != ID_RANDOM_HEX:
            return False
        return hmac.compare_digest(tag, self._tag(stem))

    def _tag(self, stem: str) -> str:
        return hmac.new(self._id_key(), stem.encode(), hashlib.sha256).hexdigest()[:ID_TAG_HEX]

    def _id_key(self) -> bytes:
        """The work folder's job id key, created (written, synced, linked into place) on first use; a folder
        where it cannot be written gets a key for this process only (its ids are not recognised after a
        restart: their records could not be written either)."""
        if self._key is None:
            path = self.root / ".job-id-key"
            try:
                self._key = _read_key(path)
            except confined.Refused as exc:
                if exc.reason == "missing":
                    self._key = self._create_key(path)
                else:  # a FIFO or a link in its place is never waited on or followed
                    log.warning("cannot read the job id key %s: %s", path, exc.message)
                    self._key = secrets.token_bytes(32)
            except ValueError:
                self._key = self._create_key(path)
        return self._key

    def _create_key(self, path: Path) -> bytes:
        tmp = path.with_name(f".job-id-key.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            with open(tmp, "w", encoding="ascii") as fh:
                fh.write(secrets.token_hex(32) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):  # another server made it first: use that one
                os.link(tmp, path)
            _sync_folder(path.parent)
            return _read_key(path)
        except (OSError, ValueError, confined.Refused):
            log.warning("cannot create the job id key %s: job ids will not outlive this process", path)
            return secrets.token_bytes(32)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    # -- records ---------------------------------------------------------------------------------------
    def save(self, job: Job) -> None:
        """Write the job's record now (its final state: before the caller sees the result). A deferred
        write still pending for the job is dropped: it would only write the same record again, and
        renaming over an existing file costs milliseconds on ext4 (it starts the new file's writeback)."""
        self._write(job)
        self._later.discard(job.job_id)  # only now: if this thread dies mid-write, the pending one remains

    def path_of(self, job_id: str) -> Path:
        return self.root / f"{job_id}.json"

    def _write(self, job: Job) -> None:
        """The record in a new file, then the old record removed and the new file renamed into its place.
        Renaming *over* an existing file makes ext4 write the new file out first (its ``auto_da_alloc``
        heuristic: 1.5-4 ms on this project's machines, against 0.1 ms for a free name), and a job's final
        record replaces its submission record on the job's critical path. A reader that comes between the
        two steps finds no file and reads again (:func:`read_record`)."""
        with self._locks[hash(job.job_id) % len(self._locks)]:
            record = job.record()  # taken under the lock: the newest state wins
            data = json.dumps(record, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")
            path = self.path_of(job.job_id)
            tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
            try:
                tmp.write_bytes(data)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                os.rename(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

    def save_later(self, job: Job) -> None:
        """Save the job's record from a background thread (:mod:`tools_server.core.deferred`), off the job's
        critical path. The record is taken when it is written, so it shows the job's state then: a change
        after this call is saved by the ``save_later`` that follows it."""
        self._later.add(job.job_id, lambda: self._write(job))

    def flush(self) -> None:
        """Wait until every record handed to :meth:`save_later` is on disk, and any write under way now
        has ended (a job finishing while the server shuts down)."""
        self._later.flush()
        for lock in self._locks:
            with lock:
                pass

    def load(self, job_id: str) -> tuple[dict[str, Any] | None, str | None]:
        """The record of ``job_id`` (:func:`read_record`: ``(record, None)``, ``(None, why)`` for a damaged
        one, ``(None, None)`` for none). Reads the disk: call it off the event loop."""
        if not _JOB_ID_RE.match(job_id):
            return None, None
        self.flush()
        record, why = read_record(self.path_of(job_id))
        if why is not None:
            self._note_damaged({self.path_of(job_id).name: why}, replace=False)
        return record, why

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest ``limit`` usable records; the damaged ones among them are skipped and kept in
        :attr:`damaged`. Reads the disk: call it off the event loop."""
        self.flush()
        stamped = []
        for path in self.root.glob("*.json"):
            try:
                stamped.append((path.lstat().st_mtime, path))
            except OSError:  # removed meanwhile
                continue
        stamped.sort(reverse=True)
        records, damaged = [], {}
        for _, path in stamped[:limit]:
            record, why = read_record(path)
            if record is not None:
                records.append(record)
            elif why is not None:
                damaged[path.name] = why
        self._note_damaged(damaged, replace=True)
        return records

    def _note_damaged(self, found: dict[str, str], *, replace: bool) -> None:
        for name, why in found.items():
            log.warning("skipping the damaged job record %s: %s", name, why)
        with self._damaged_lock:
            self.damaged = dict(found) if replace else {**self.damaged, **found}

    def damaged_warning(self, names: dict[str, str] | None = None) -> str | None:
        """The warning naming the damaged records (``names``, default all last seen), or None."""
        with self._damaged_lock:
            found = dict(self.damaged if names is None else names)
        if not found:
            return None
        shown = "; ".join(f"{name}: {why}" for name, why in sorted(found.items())[:10])
        more = f"; and {len(found) - 10} more" if len(found) > 10 else ""
        return (
            f"{len(found)} damaged job record{'s' if len(found) > 1 else ''} in {self.root} skipped "
            f"({shown}{more}); remove or repair {'them' if len(found) > 1 else 'it'}"
        )

    def prune(self, older_than_s: float) -> int:
        """Delete records of jobs that finished more than ``older_than_s`` seconds ago; returns how many."""
        cutoff = time.time() - older_than_s
        removed = 0
        for path in self.root.glob("*.json"):
            try:
                if path.lstat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
