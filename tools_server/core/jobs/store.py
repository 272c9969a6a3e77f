"""Job records on disk: one JSON file per job under ``$SPU_WORKDIR/jobs``, so ``job_wait`` after a server
restart returns the stored result.

A job's record is on disk before its id reaches a client: the final record before its caller is woken
(:meth:`JobStore.save`), the record of a job still queued or running before the call answers with its id
(the dispatcher). A record that cannot be read (not UTF-8, not JSON, not a job record) is skipped with a
warning: one damaged file never fails ``jobs()`` or ``job_wait``.

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
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from tools_server.core import settings
from tools_server.core.deferred import DeferredWrites
from tools_server.core.jobs.model import Job, process_started

_JOB_ID_RE = re.compile(r"^[a-z0-9_]+-[0-9a-f]+$")
log = logging.getLogger(__name__)


def read_record(path: Path) -> dict[str, Any] | None:
    """The job record in ``path``, or None (with a warning) when it is unreadable or not a job record."""
    try:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            time.sleep(0.002)  # between the two steps of a record's replacement (JobStore._write): once more
            data = path.read_bytes()
        record = json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        log.warning("skipping the unreadable job record %s: %s", path.name, exc)
        return None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("job_id"), str)
        and isinstance(record.get("status"), str)
        and isinstance(record.get("created"), int | float)
        and isinstance(record.get("tool"), str)
        and isinstance(record.get("module"), str)
    ):
        log.warning("skipping %s: not a job record", path.name)
        return None
    return record


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
                self._key = bytes.fromhex(path.read_text(encoding="ascii").strip())
            except (FileNotFoundError, ValueError):
                self._key = self._create_key(path)
            except OSError:
                log.warning("cannot read the job id key %s", path, exc_info=True)
                self._key = secrets.token_bytes(32)
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
            return bytes.fromhex(path.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
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

    def load(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID_RE.match(job_id):
            return None
        self.flush()
        record = read_record(self.root / f"{job_id}.json")
        return record if record is not None and record["job_id"] == job_id else None

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        self.flush()
        stamped = []
        for path in self.root.glob("*.json"):
            try:
                stamped.append((path.stat().st_mtime, path))
            except OSError:  # removed meanwhile
                continue
        stamped.sort(reverse=True)
        return [r for _, path in stamped[:limit] if (r := read_record(path)) is not None]

    def prune(self, older_than_s: float) -> int:
        """Delete records of jobs that finished more than ``older_than_s`` seconds ago; returns how many."""
        cutoff = time.time() - older_than_s
        removed = 0
        for path in self.root.glob("*.json"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
