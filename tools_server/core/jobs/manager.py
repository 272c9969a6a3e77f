"""The job manager: the job table, its records on disk, and the executor that runs the jobs."""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tools_server.core.errors import ToolError, storage_warning
from tools_server.core.jobs.model import TERMINAL, Finisher, Job, lost_to_restart
from tools_server.core.jobs.store import JobStore, owner_alive
from tools_server.core.registry import ToolSpec

log = logging.getLogger(__name__)

#: Finished jobs stay in memory this long (their records stay on disk for SPU_JOB_RETENTION_S).
IN_MEMORY_S = 600.0
DEFAULT_RETENTION_S = 7 * 24 * 3600.0


def _as_seen_now(record: dict[str, Any]) -> dict[str, Any]:
    """A stored record as it stands now: unfinished, with its server gone, it is ``lost``."""
    if record["status"] in TERMINAL or (owner_alive(record) and record.get("server_pid") != os.getpid()):
        return record
    return {**record, "status": "lost", "error": lost_to_restart()}


def _lost_without_record(job_id: str, damage: str | None = None) -> dict[str, Any]:
    """The record of a job this work folder issued (its id's tag says so) whose record is gone, or damaged
    (``damage`` says how)."""
    why = (
        f"This job's record is damaged ({damage}), so its result cannot be read (job status: lost)."
        if damage
        else "This job's record is missing: the server stopped (killed, or the machine lost power) before "
        "the record reached the disk, or the record was removed after SPU_JOB_RETENTION_S (job status: lost)."
    )
    error = ToolError(
        "engine_crashed", why, "Submit the same call again (finished results are cached).", status="lost"
    ).to_dict()
    tool = job_id.rpartition("-")[0]
    return {"job_id": job_id, "tool": tool, "module": "", "status": "lost", "created": 0.0, "error": error}


class Executor(Protocol):
    """What runs jobs: :class:`~tools_server.core.jobs.local.LocalExecutor` or
    :class:`~tools_server.core.jobs.dask.DaskExecutor`."""

    def submit(self, job: Job, finish: Finisher) -> None: ...

    def cancel(self, job: Job) -> None: ...

    def shutdown(self) -> None: ...


def executor_from_env(warm: dict[str, list[str]] | None = None) -> Executor:
    """``SPU_EXECUTOR=dask`` with ``SPU_DASK_SCHEDULER=tcp://host:port`` picks the cluster backend;
    ``warm`` (local executor only) starts the workers at once, importing those modules in the background."""
    if os.environ.get("SPU_EXECUTOR", "local") == "dask":
        from tools_server.core.jobs.dask import DaskExecutor

        return DaskExecutor(os.environ.get("SPU_DASK_SCHEDULER"))
    from tools_server.core.jobs.local import LocalExecutor

    return LocalExecutor(warm=warm, warm_cpu_workers=int(os.environ.get("SPU_WARM_WORKERS") or 2))


class JobManager:
    """Submits jobs to an executor, keeps their records, and prunes finished ones.

    Finished jobs leave memory :data:`IN_MEMORY_S` after they end (``job_wait`` then reads the stored
    record); stored records are deleted ``retention_s`` after they end (``SPU_JOB_RETENTION_S``, 7 days).
    """

    def __init__(
        self,
        executor: Executor | None = None,
        store: JobStore | None = None,
        retention_s: float | None = None,
    ) -> None:
        self._executor = executor
        self._executor_lock = threading.Lock()
        self.store = store or JobStore()
        self.jobs: dict[str, Job] = {}
        self._recent: collections.deque[str] = collections.deque(maxlen=1000)
        self.retention_s = retention_s or float(os.environ.get("SPU_JOB_RETENTION_S") or DEFAULT_RETENTION_S)
        self._pruned_at = 0.0

    @property
    def executor(self) -> Executor:
        if self._executor is None:  # started on first use (or by warm_up), so the server comes up at once
            with self._executor_lock:
                if self._executor is None:
                    self._executor = executor_from_env()
        return self._executor

    def warm_up(self, modules_for: Callable[[bool], dict[str, list[str]]]) -> None:
        """Start the executor now with warm workers: ``SPU_WARM_WORKERS`` CPU workers (default 2; 0 turns
        warming off) and the GPU worker import their engines in the background.
        ``modules_for(gpu_present)`` says what each slot kind imports."""
        if self._executor is not None or os.environ.get("SPU_WARM_WORKERS", "1") == "0":
            return
        from tools_server.core import hardware

        plan = modules_for(hardware.has_gpu())
        with self._executor_lock:
            if self._executor is None:
                self._executor = executor_from_env(warm=plan)

    def submit(self, spec: ToolSpec, params: dict[str, Any], finish: Finisher, threads: int | str = 1) -> Job:
        """Queue a job; ``threads`` is its CPU reservation (:meth:`ToolSpec.threads_for`)."""
        job = Job(
            job_id=self.store.new_id(spec.name),
            tool=spec.name,
            module=spec.module,
            params=params,
            resource=spec.resource,
            time_limit_s=spec.time_limit_s,
            memory_limit_mb=spec.memory_limit_mb,
            threads=threads,
        )
        self.prune()
        self.jobs[job.job_id] = job
        self._recent.append(job.job_id)
        self.store.save_later(job)

        def complete(job: Job, payload: dict[str, Any]) -> dict[str, Any]:
            payload.pop("kill", None)
            if "error" in payload:
                job.error = payload["error"]
                job.status = "cancelled" if job.error.get("code") == "cancelled" else "error"
            else:
                try:
                    job.result = finish(job, payload)
                    job.status = "done"
                except ToolError as exc:
                    job.error, job.status = exc.to_dict(), "error"
                except Exception as exc:  # the job must end (its caller waits), and the slot live on
                    log.warning("finishing job %s failed", job.job_id, exc_info=True)
                    job.error = ToolError(
                        "internal_error", f"Finishing the result failed: {type(exc).__name__}: {exc}"
                    ).to_dict()
                    job.status = "error"
            if job.status == "done":  # the last progress note ("7/8 molecules") would outlive the job
                job.progress, job.message = 1.0, None
            job.finished = time.time()
            # the final record is on disk before anyone is told (the result cache entry too: the
            # finisher writes it), so a result a client has seen survives the server's death
            self._save_or_warn(
                job, "the job's result stays in this server's memory; after a restart job_wait answers lost"
            )
            job._done.set()
            job._notify()  # last: the waiting call should not wait for this thread to finish its work
            return job.result or {}

        self.executor.submit(job, complete)
        return job

    def _save_or_warn(self, job: Job, consequence: str) -> bool:
        """Write the job's record now; when that fails, say so in the job's result (or error) as a
        ``storage_error`` warning, and in the server log. Returns whether the record was written."""
        try:
            self.store.save(job)
            return True
        except OSError as exc:
            log.warning("could not write the record of job %s: %s", job.job_id, exc)
            warning = storage_warning("the job record", self.store.path_of(job.job_id), exc, consequence)
            job.warnings.append(warning)  # what a caller told of the job's state is told too
            if job.result is not None:
                job.result["warnings"] = [*job.result.get("warnings", []), warning]
            elif job.error is not None:
                details = job.error.setdefault("details", {})
                details["warnings"] = [*details.get("warnings", []), warning]
            return False

    def acknowledge(self, job: Job) -> None:
        """Put the record of a job still queued or running on disk before its id is given to a client (a
        server killed after the answer still knows the job, and reads it ``lost``)."""
        if not job.done and not job.acknowledged:
            job.acknowledged = self._save_or_warn(
                job, "the job runs, but job_wait after a server restart answers lost"
            )

    def lookup(self, job_id: str) -> Job:
        """The job, live or rebuilt from its stored record (an earlier server process, or pruned from
        memory); a job this work folder issued whose record is gone or damaged is ``lost``, never unknown.
        May read the disk: call it off the event loop."""
        if job_id in self.jobs:
            return self.jobs[job_id]
        record, damage = self.store.load(job_id)
        if record is None and self.store.issued(job_id):
            record = _lost_without_record(job_id, damage)
        if record is None:
            found = f" (a damaged record file has its name: {damage})" if damage else ""
            raise ToolError("job_not_found", f"No job with id {job_id!r} is known to this server{found}.")
        return Job.from_record(_as_seen_now(record))

    async def wait(
        self, job: Job, wait_s: float, on_progress: Callable[[Job], Awaitable[None]] | None = None
    ) -> None:
        """Wait until the job finishes or ``wait_s`` passes, reporting progress about once a second."""
        deadline = time.monotonic() + wait_s
        while not job.done:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await job.wait_changed(min(left, 1.0))
            if on_progress is not None and not job.done:
                await on_progress(job)

    def cancel(self, job_id: str) -> Job:
        found = self.lookup(job_id)
        if not found.done:
            self.executor.cancel(found)
        return found

    def prune(self, now: float | None = None) -> None:
        """Drop finished jobs from memory after :data:`IN_MEMORY_S`, and their records after the retention
        time; runs at most once a minute."""
        now = time.time() if now is None else now
        if now - self._pruned_at < 60:
            return
        self._pruned_at = now
        for job_id, job in list(self.jobs.items()):
            if job.done and job.finished is not None and now - job.finished > IN_MEMORY_S:
                del self.jobs[job_id]
        self.store.prune(self.retention_s)

    def listing(self) -> dict[str, Any]:
        """The ``jobs`` tool's answer: the newest jobs, and a warning naming the damaged records skipped.
        Reads the disk: call it off the event loop."""
        live = {jid: self.jobs[jid] for jid in self._recent if jid in self.jobs}
        rows = [
            {k: v for k, v in job.record().items() if k not in ("result", "params")} for job in live.values()
        ]
        for record in self.store.recent():
            if record["job_id"] not in live:
                rows.append({k: v for k, v in _as_seen_now(record).items() if k not in ("result", "params")})
        rows.sort(key=lambda r: r["created"], reverse=True)
        warning = self.store.damaged_warning()
        return {"jobs": rows[:100], **({"warnings": [warning]} if warning else {})}

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
        self.store.flush()
