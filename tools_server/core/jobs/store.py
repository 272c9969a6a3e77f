"""Job records on disk: one JSON file per job under ``$SPU_WORKDIR/jobs``, so ``job_wait`` after a server
restart returns the stored result."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from spu_common.jsonfiles import atomic_write_json
from tools_server.core import settings
from tools_server.core.deferred import DeferredWrites
from tools_server.core.jobs.model import Job

_JOB_ID_RE = re.compile(r"^[a-z0-9_]+-[0-9a-f]+$")


class JobStore:
    """One JSON file per job under ``$SPU_WORKDIR/jobs``, replaced atomically on every state change."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or settings.workdir() / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)

        self._later = DeferredWrites("spu-job-records")

    def save(self, job: Job) -> None:
        self._write(job.job_id, job.record())

    def _write(self, job_id: str, record: dict[str, Any]) -> None:
        atomic_write_json(self.root / f"{job_id}.json", record, indent=None, fsync=False, default=str)

    def save_later(self, job: Job) -> None:
        """Save the job's record from a background thread (:mod:`tools_server.core.deferred`), off the job's
        critical path. The record is taken when it is written, so it shows the job's state then: a change
        after this call is saved by the ``save_later`` that follows it."""
        self._later.add(job.job_id, lambda: self._write(job.job_id, job.record()))

    def flush(self) -> None:
        """Wait until every record handed to :meth:`save_later` is on disk."""
        self._later.flush()

    def load(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID_RE.match(job_id):
            return None
        self.flush()
        try:
            return json.loads((self.root / f"{job_id}.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        self.flush()
        paths = sorted(self.root.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:limit]
        out = []
        for path in paths:
            try:
                out.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError):
                continue
        return out

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
