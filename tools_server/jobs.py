"""Jobs: ``cpu`` and ``gpu`` tools run in worker processes while the server keeps answering.

A :class:`JobManager` owns the job table, persists each job's record under ``$SPU_WORKDIR/jobs`` (so
``job_wait`` after a restart returns the stored result) and hands jobs to an executor:

* :class:`LocalExecutor` (default): long-lived worker processes, one per CPU slot plus one for the GPU
  when present. Each job has a time and a memory limit; a timeout or cancellation kills the worker's whole
  process group; a worker that dies (segfault, abort, out of memory) becomes an ``engine_crashed`` error
  carrying the tail of its stderr, and a fresh worker takes the next job.
* :class:`DaskExecutor`: the same jobs on a Dask ``distributed`` cluster (which reaches SLURM/PBS through
  dask-jobqueue); no progress reports, and a timed-out task is cancelled rather than killed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tools_server import hardware, settings
from tools_server.errors import ToolError
from tools_server.registry import ToolSpec

TERMINAL = ("done", "error", "cancelled")
_JOB_ID_RE = re.compile(r"^[a-z0-9_]+-[0-9a-f]+$")
#: Called in the executor's thread with the job and the raw payload of run_tool; returns the final result.
Finisher = Callable[["Job", dict[str, Any]], dict[str, Any]]


@dataclass
class Job:
    job_id: str
    tool: str
    module: str
    params: dict[str, Any]
    resource: str
    time_limit_s: float
    memory_limit_mb: int | None
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
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list, repr=False)
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
            "status": self.status,
            "progress": round(self.progress, 4),
            "message": self.message,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "device": self.device,
            "result": self.result,
            "error": self.error,
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
        }

    def _notify(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the waiting loop has closed
                pass

    async def wait_changed(self, timeout: float) -> None:
        """Sleep until the job's progress or state changes, or ``timeout`` passes."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            self._waiters.append(entry)
        try:
            if not self.done:
                await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.remove(entry)


class JobStore:
    """One JSON file per job under ``$SPU_WORKDIR/jobs``, replaced atomically on every state change."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or settings.workdir() / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)

    def save(self, job: Job) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(job.record(), fh, default=str)
        os.replace(tmp, self.root / f"{job.job_id}.json")

    def load(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID_RE.match(job_id):
            return None
        try:
            return json.loads((self.root / f"{job_id}.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        paths = sorted(self.root.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:limit]
        out = []
        for path in paths:
            try:
                out.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError):
                continue
        return out


class _Worker:
    """One worker process and the thread reading its protocol stream."""

    def __init__(self, kind: str, index: int) -> None:
        log_dir = settings.workdir() / "workers"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"{kind}-{index}-{uuid.uuid4().hex[:6]}.log"
        env = dict(os.environ)
        # Small jobs run best single-threaded, one worker per core; tools that parallelise internally
        # raise their own thread count from ctx.threads at run time.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.setdefault(var, "1")
        if kind == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = env.get("SPU_CPU_WORKER_CUDA", "")
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - the worker writes to it for its lifetime
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools_server.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
            env=env,
            text=True,
            bufsize=1,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.messages.put(json.loads(line))
            except json.JSONDecodeError:
                continue
        self.messages.put(None)  # end of stream: the worker is gone

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def rss_mb(self) -> float:
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
            return sum(p.memory_info().rss for p in procs) / 2**20
        except psutil.Error:
            return 0.0

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._stderr.close()

    def stderr_tail(self, limit: int = 3000) -> str:
        try:
            data = self.stderr_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace")


def _exit_reason(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class LocalExecutor:
    """Worker processes on this machine: ``cpu_slots`` for CPU jobs and one slot for the GPU, if any."""

    def __init__(
        self, cpu_slots: int | None = None, gpu_slots: int | None = None, memory_limit_mb: int | None = None
    ) -> None:
        self.cpu_slots = cpu_slots or hardware.cpu_count()
        self.gpu_slots = (1 if hardware.has_gpu() else 0) if gpu_slots is None else gpu_slots
        default_mem = int(os.environ.get("SPU_JOB_MEMORY_MB") or 0) or int(hardware.memory_total_mb() * 0.8)
        self.memory_limit_mb = memory_limit_mb or default_mem
        self.queues: dict[str, queue.Queue[tuple[Job, Finisher] | None]] = {
            "cpu": queue.Queue(),
            "gpu": queue.Queue(),
        }
        self._threads: list[threading.Thread] = []
        self._running: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self._closed = False
        for i in range(self.cpu_slots):
            self._start_slot("cpu", i)
        for i in range(self.gpu_slots):
            self._start_slot("gpu", i)

    def _start_slot(self, kind: str, index: int) -> None:
        thread = threading.Thread(
            target=self._slot, args=(kind, index), daemon=True, name=f"spu-{kind}-slot-{index}"
        )
        thread.start()
        self._threads.append(thread)

    def queue_for(self, job: Job) -> str:
        return "gpu" if job.resource == "gpu" and self.gpu_slots else "cpu"

    def submit(self, job: Job, finish: Finisher) -> None:
        job.device = "gpu" if self.queue_for(job) == "gpu" else "cpu"
        self.queues[self.queue_for(job)].put((job, finish))

    def cancel(self, job: Job) -> None:
        job.cancel_requested = True

    def _slot(self, kind: str, index: int) -> None:
        worker: _Worker | None = None
        while True:
            item = self.queues[kind].get()
            if item is None:
                break
            job, finish = item
            if job.cancel_requested:
                finish(
                    job,
                    {"error": ToolError("cancelled", "The job was cancelled before it started.").to_dict()},
                )
                continue
            if worker is None or not worker.alive():
                worker = _Worker(kind, index)
                ready = worker.messages.get()
                if ready is None:
                    finish(
                        job,
                        {
                            "error": ToolError(
                                "engine_crashed",
                                "The worker process failed to start.",
                                stderr_tail=worker.stderr_tail(),
                            ).to_dict()
                        },
                    )
                    worker.kill()
                    worker = None
                    continue
            outcome = self._run_on(worker, job, kind)
            if outcome.get("kill"):
                worker.kill()
                worker = None
            finish(job, outcome)
        if worker is not None:
            worker.kill()

    def _run_on(self, worker: _Worker, job: Job, kind: str) -> dict[str, Any]:
        job.status = "running"
        job.started = time.time()
        job._notify()
        with self._lock:
            self._running[job.job_id] = worker
        memory_limit = job.memory_limit_mb or self.memory_limit_mb
        try:
            worker.send(
                {
                    "job_id": job.job_id,
                    "tool": job.tool,
                    "module": job.module,
                    "params": job.params,
                    "threads": hardware.cpu_count(),
                    "gpu": kind == "gpu",
                    "memory_limit_mb": memory_limit,
                }
            )
        except (BrokenPipeError, OSError):
            return self._crashed(worker)
        deadline = time.monotonic() + job.time_limit_s
        try:
            while True:
                try:
                    msg = worker.messages.get(timeout=0.1)
                except queue.Empty:
                    msg = {}
                if msg is None:
                    return self._crashed(worker)
                kind_ = msg.get("type")
                if kind_ == "progress":
                    job.progress = msg["fraction"]
                    job.message = msg.get("message")
                    job._notify()
                elif kind_ in ("result", "error"):
                    return msg
                if job.cancel_requested:
                    return {"kill": True, "error": ToolError("cancelled", "The job was cancelled.").to_dict()}
                if time.monotonic() > deadline:
                    return {
                        "kill": True,
                        "error": ToolError(
                            "timeout",
                            f"The job exceeded its time limit of {job.time_limit_s:g} s and was stopped.",
                        ).to_dict(),
                    }
                rss = worker.rss_mb()
                if rss > memory_limit:
                    return {
                        "kill": True,
                        "error": ToolError(
                            "engine_crashed",
                            f"The job used {rss:.0f} MiB, over its memory limit of {memory_limit} MiB, and was stopped.",
                            "Use a smaller input or a cheaper method, or raise SPU_JOB_MEMORY_MB.",
                            memory_mb=round(rss),
                            memory_limit_mb=memory_limit,
                        ).to_dict(),
                    }
        finally:
            with self._lock:
                self._running.pop(job.job_id, None)

    @staticmethod
    def _crashed(worker: _Worker) -> dict[str, Any]:
        returncode = worker.proc.wait(timeout=5)
        return {
            "kill": True,
            "error": ToolError(
                "engine_crashed",
                f"The engine's worker process died ({_exit_reason(returncode)}). The server is still running.",
                stderr_tail=worker.stderr_tail(),
                exit_code=returncode,
            ).to_dict(),
        }

    def shutdown(self) -> None:
        for kind, q in self.queues.items():
            for _ in range(self.cpu_slots if kind == "cpu" else self.gpu_slots):
                q.put(None)
        with self._lock:
            workers = list(self._running.values())
        for worker in workers:
            worker.kill()


def _dask_task(tool: str, module: str, params: dict[str, Any], job_id: str) -> dict[str, Any]:
    from tools_server.execute import resolve, run_tool

    try:
        return run_tool(resolve(tool, module), params, job_id, threads=1)
    except ToolError as exc:
        return {"error": exc.to_dict()}


class DaskExecutor:
    """Jobs on a Dask ``distributed`` cluster: ``DaskExecutor(address)`` or ``DaskExecutor(client=...)``."""

    def __init__(self, address: str | None = None, client: Any = None) -> None:
        from distributed import Client

        self.client = client or Client(address)

    def submit(self, job: Job, finish: Finisher) -> None:
        job.device = "dask"
        future = self.client.submit(
            _dask_task, job.tool, job.module, job.params, job.job_id, pure=False, key=f"spu-{job.job_id}"
        )
        job.status = "running"
        job.started = time.time()
        job._notify()
        job._future = future  # type: ignore[attr-defined]

        def watch() -> None:
            from distributed import TimeoutError as DaskTimeout

            deadline = time.monotonic() + job.time_limit_s
            while True:
                try:
                    finish(job, future.result(timeout=0.2))
                    return
                except (DaskTimeout, TimeoutError):
                    if job.cancel_requested or time.monotonic() > deadline:
                        future.cancel()
                        code = "cancelled" if job.cancel_requested else "timeout"
                        finish(job, {"error": ToolError(code, f"The Dask task was {code}.").to_dict()})
                        return
                except Exception as exc:  # noqa: BLE001 - a lost worker or a serialisation error
                    finish(job, {"error": ToolError("engine_crashed", f"Dask task failed: {exc}").to_dict()})
                    return

        threading.Thread(target=watch, daemon=True).start()

    def cancel(self, job: Job) -> None:
        job.cancel_requested = True

    def shutdown(self) -> None:
        self.client.close()


def executor_from_env() -> LocalExecutor | DaskExecutor:
    """``SPU_EXECUTOR=dask`` with ``SPU_DASK_SCHEDULER=tcp://host:port`` picks the cluster backend."""
    if os.environ.get("SPU_EXECUTOR", "local") == "dask":
        return DaskExecutor(os.environ.get("SPU_DASK_SCHEDULER"))
    return LocalExecutor()


class JobManager:
    def __init__(
        self, executor: LocalExecutor | DaskExecutor | None = None, store: JobStore | None = None
    ) -> None:
        self._executor = executor
        self.store = store or JobStore()
        self.jobs: dict[str, Job] = {}
        self._recent: collections.deque[str] = collections.deque(maxlen=1000)

    @property
    def executor(self) -> LocalExecutor | DaskExecutor:
        if self._executor is None:  # started on first use, so the server comes up at once
            self._executor = executor_from_env()
        return self._executor

    def submit(self, spec: ToolSpec, params: dict[str, Any], finish: Finisher) -> Job:
        job = Job(
            job_id=f"{spec.name}-{uuid.uuid4().hex[:10]}",
            tool=spec.name,
            module=spec.module,
            params=params,
            resource=spec.resource,
            time_limit_s=spec.time_limit_s,
            memory_limit_mb=spec.memory_limit_mb,
        )
        self.jobs[job.job_id] = job
        self._recent.append(job.job_id)
        self.store.save(job)

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
            job.progress = 1.0 if job.status == "done" else job.progress
            job.finished = time.time()
            self.store.save(job)
            job._done.set()
            job._notify()
            return job.result or {}

        self.executor.submit(job, complete)
        return job

    def lookup(self, job_id: str) -> Job | dict[str, Any]:
        """The live job, or its stored record from an earlier server process."""
        if job_id in self.jobs:
            return self.jobs[job_id]
        record = self.store.load(job_id)
        if record is None:
            raise ToolError("job_not_found", f"No job with id {job_id!r} is known to this server.")
        if record["status"] not in TERMINAL:
            record = {
                **record,
                "status": "error",
                "error": ToolError(
                    "engine_crashed",
                    "The server restarted while this job was running; its result was lost.",
                    "Submit the same call again (finished results are cached).",
                ).to_dict(),
            }
        return record

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

    def cancel(self, job_id: str) -> Job | dict[str, Any]:
        found = self.lookup(job_id)
        if isinstance(found, Job) and not found.done:
            self.executor.cancel(found)
        return found

    def listing(self) -> list[dict[str, Any]]:
        live = {jid: self.jobs[jid] for jid in self._recent if jid in self.jobs}
        rows = [
            {k: v for k, v in job.record().items() if k not in ("result", "params")} for job in live.values()
        ]
        for record in self.store.recent():
            if record["job_id"] not in live:
                rows.append({k: v for k, v in record.items() if k not in ("result", "params")})
        rows.sort(key=lambda r: r["created"], reverse=True)
        return rows[:100]

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
