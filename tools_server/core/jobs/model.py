"""A job: one call of a ``cpu`` or ``gpu`` tool, its state, and how callers wait on it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A job ends done, error or cancelled; ``lost`` is read from a record whose server process is gone (it
#: was running or queued when that server stopped, and its worker went with it).
TERMINAL = ("done", "error", "cancelled", "lost")
#: Called in the executor's thread with the job and the raw payload of run_tool; returns the final result.
Finisher = Callable[["Job", dict[str, Any]], dict[str, Any]]


def lost_to_restart() -> dict[str, Any]:
    """The error of a job whose server stopped while it ran (its worker went with the server)."""
    from tools_server.core.errors import ToolError

    return ToolError(
        "engine_crashed",
        "The server restarted while this job was running; its result was lost (job status: lost).",
        "Submit the same call again (finished results are cached).",
        status="lost",
    ).to_dict()


@functools.cache
def process_started() -> float | None:
    """When this process started (seconds since the epoch; None when unknown). With the pid it tells a
    server apart from a later process that got the same pid (after a reboot)."""
    import psutil

    try:
        return psutil.Process().create_time()
    except psutil.Error:
        return None


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


#: every status a job has (docs/server.md lists them; a test checks both ways): queued and running while
#: it is pending, then done, error or cancelled
JOB_STATUSES = ("queued", "running", "done", "error", "cancelled")
#: what a pending job answers in place of a result
PENDING_STATUSES = ("queued", "running")


@dataclass
class Job:
    job_id: str
    tool: str
    module: str
    params: dict[str, Any]
    resource: str
    time_limit_s: float
    memory_limit_mb: int | None
    #: cores the job reserves: a number, or "all" (every core of the executor)
    threads: int | str = 1
    status: str = "queued"
    progress: float = 0.0
    message: str | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    device: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cancel_requested: bool = False
    #: ``storage_error`` warnings about the job's record (a write of it failed)
    warnings: list[str] = field(default_factory=list)
    #: whether the record of the job, unfinished, was written before its id was first given out
    acknowledged: bool = False
    #: the server process that runs the job (a record whose server is gone reads ``lost``)
    server_pid: int = field(default_factory=os.getpid)
    server_started: float | None = field(default_factory=process_started)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def eta_s(self) -> float | None:
        if self.started is None or self.progress <= 0.01 or self.done:
            return None
        elapsed = time.time() - self.started
        return round(elapsed / self.progress * (1 - self.progress), 1)

    def record(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "tool": self.tool,
            "module": self.module,
            "params": self.params,
            "resource": self.resource,
            "time_limit_s": self.time_limit_s,
            "memory_limit_mb": self.memory_limit_mb,
            "threads": self.threads,
            "status": self.status,
            "progress": round(self.progress, 4),
            "message": self.message,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "device": self.device,
            "result": self.result,
            "error": self.error,
            "server_pid": self.server_pid,
            "server_started": self.server_started,
        }

    def status_payload(self) -> dict[str, Any]:
        """What a caller sees while the job is not finished."""
        return {
            "status": self.status if self.status != "queued" else "queued",
            "job_id": self.job_id,
            "tool": self.tool,
            "progress": round(self.progress, 3),
            "message": self.message,
            "eta_s": self.eta_s(),
            "hint": f"Call job_wait with job_id={self.job_id!r} to wait for the result.",
            **({"warnings": list(self.warnings)} if self.warnings else {}),
        }

    def _notify(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # the waiting loop may have closed
                loop.call_soon_threadsafe(_wake, future)

    async def wait_changed(self, timeout: float) -> None:
        """Sleep until the job's progress or state changes, or ``timeout`` passes."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            self._waiters.append(entry)
        try:
            if not self.done:
                timer = loop.call_later(timeout, _wake, future)
                try:
                    await future
                finally:
                    timer.cancel()
        finally:
            with self._lock:
                self._waiters.remove(entry)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Job:
        """A finished job rebuilt from its stored record (an earlier server process ran it)."""
        job = cls(
            job_id=record["job_id"],
            tool=record["tool"],
            module=record["module"],
            params=record.get("params") or {},
            resource=record.get("resource", "cpu"),
            time_limit_s=float(record.get("time_limit_s") or 0.0),
            memory_limit_mb=record.get("memory_limit_mb"),
            threads=record.get("threads") or 1,
            status=record["status"],
            progress=float(record.get("progress") or 0.0),
            message=record.get("message"),
            created=record.get("created") or time.time(),
            started=record.get("started"),
            finished=record.get("finished"),
            device=record.get("device"),
            result=record.get("result"),
            error=record.get("error"),
            server_pid=int(record.get("server_pid") or 0),
            server_started=record.get("server_started"),
        )
        job._done.set()
        return job
