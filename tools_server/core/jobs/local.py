"""The local executor: long-lived worker processes on this machine, one per CPU slot plus one for the GPU.

Each job has a time and a memory limit; a timeout or cancellation kills the worker's whole process group;
a worker that dies (segfault, abort, out of memory) becomes an ``engine_crashed`` error carrying the tail
of its stderr, and a fresh worker takes the next job.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from tools_server.core import hardware, settings
from tools_server.core.errors import ToolError
from tools_server.core.jobs.model import Finisher, Job, lost_to_restart

#: How often :meth:`_Worker.rss_mb` looks for the processes a worker started (seconds).
TREE_REFRESH_S = 1.0


class _Worker:
    """One worker process and its protocol stream."""

    def __init__(
        self, kind: str, index: int, warm: list[str] | None = None, env_extra: dict[str, str] | None = None
    ) -> None:
        env = {**os.environ, **(env_extra or {})}
        log_dir = Path(env.get("SPU_WORKDIR") or settings.workdir()) / "workers"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"{kind}-{index}-{uuid.uuid4().hex[:6]}.log"
        # Small jobs run best single-threaded, one worker per core; tools that parallelise internally
        # raise their own thread count from ctx.threads at run time.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.setdefault(var, "1")
        env["SPU_WORKER_PARENT"] = str(os.getpid())  # the worker dies with this process (core/worker.py)
        env["SPU_WORKER_PDEATHSIG"] = "1" if threading.current_thread() is threading.main_thread() else "0"
        env["SPU_WORKER_WARM"] = ",".join(warm or ())
        if kind == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = env.get("SPU_CPU_WORKER_CUDA", "")
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - the worker writes to it for its lifetime
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tools_server.core.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
                env=env,
                bufsize=0,
            )
        except BaseException:
            self._stderr.close()
            raise
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._buffer = bytearray()
        self._eof = False
        self._tree: list[psutil.Process] = []  # the worker and its children, for rss_mb
        self._tree_at: float | None = None

    def next_message(self, timeout: float | None) -> dict[str, Any] | None:
        """The worker's next protocol message; ``{}`` when ``timeout`` seconds pass without one, None when
        the worker is gone. Read by the slot's own thread (no hand-off through a reader thread)."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                try:
                    return json.loads(line)
                except ValueError:
                    continue
            if self._eof:
                return None
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return {}
            chunk = os.read(self._fd, 1 << 16)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, line: bytes) -> None:
        """Write one message line (:func:`job_message`)."""
        assert self.proc.stdin is not None
        view = memoryview(line)
        while view:  # an unbuffered pipe may take a large job in several writes
            view = view[self.proc.stdin.write(view) :]

    def rss_mb(self) -> float:
        """The memory of the worker and the processes it started. Finding those reads every process on the
        machine, so the list is refreshed once every :data:`TREE_REFRESH_S`; the memory of each is read at
        every call (a process the engine starts is counted from the next refresh on)."""
        now = time.monotonic()
        try:
            if self._tree_at is None or now - self._tree_at >= TREE_REFRESH_S:
                root = self._tree[0] if self._tree else psutil.Process(self.proc.pid)
                self._tree, self._tree_at = [root, *root.children(recursive=True)], now
            total = 0
            for process in self._tree:
                with contextlib.suppress(psutil.NoSuchProcess):  # a child that ended since the refresh
                    total += process.memory_info().rss
            return total / 2**20
        except psutil.Error:
            return 0.0

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._stderr.close()

    def stderr_tail(self, limit: int = 3000) -> str:
        try:
            data = self.stderr_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace")


def start_worker(
    kind: str, index: int, warm: list[str] | None = None, env_extra: dict[str, str] | None = None
) -> tuple[_Worker | None, str]:
    """A started worker that said it is ready, or None and why not (its stderr tail, or the error that kept
    the process from being made: too many open files, no memory, ...)."""
    try:
        worker = _Worker(kind, index, warm, env_extra)
    except OSError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if worker.next_message(None) is None:
        tail = worker.stderr_tail()
        worker.kill()
        return None, tail
    return worker, ""


def _exit_reason(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class CoreBudget:
    """The executor's cores, reserved by running jobs and granted in arrival order, so a job that needs
    every core is not overtaken forever by single-core ones and reservations never add up to more than
    ``total``."""

    def __init__(self, total: int) -> None:
        self.total = max(1, total)
        self.free = self.total
        self._cond = threading.Condition()
        self._waiting: collections.deque[object] = collections.deque()

    def cores_for(self, threads: int | str) -> int:
        """What a job's ``threads`` (a number or ``"all"``) gets on this machine."""
        if threads == "all":
            return self.total
        return max(1, min(int(threads), self.total))

    def acquire(self, n: int, cancelled: Any = None) -> bool:
        """Wait for ``n`` cores (at most ``total``); False when ``cancelled()`` turned true while waiting."""
        ticket = object()
        with self._cond:
            self._waiting.append(ticket)
            while self._waiting[0] is not ticket or self.free < n:
                if cancelled is not None and cancelled():
                    self._waiting.remove(ticket)
                    self._cond.notify_all()
                    return False
                self._cond.wait(0.1)
            self._waiting.popleft()
            self.free -= n
            self._cond.notify_all()
        return True

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` cores if they are free now and no one waits for cores; never waits."""
        with self._cond:
            if self._waiting or self.free < n:
                return False
            self.free -= n
        return True

    def release(self, n: int) -> None:
        with self._cond:
            self.free += n
            self._cond.notify_all()


#: a job, its finisher, and the cores it holds when it was already sent to the slot's worker (else 0)
_Item = tuple[Job, Finisher, int] | None
#: the largest job message sent from the submitting thread: an idle worker's empty pipe takes it at once
#: (a pipe holds 64 KiB), so the event loop never waits on a write
SEND_AT_ONCE_BYTES = 32 * 1024


class _Handout:
    """Hands each job of one slot kind to an idle slot, preferring a slot whose worker imported its engines
    ahead of time (``warm``), then the one that finished a job most recently (its worker has imported what
    recent jobs needed); jobs wait in arrival order while every slot is busy."""

    def __init__(self, warm: Callable[[int], bool]) -> None:
        self._warm = warm
        self._lock = threading.Lock()
        self._backlog: collections.deque[_Item] = collections.deque()
        self._idle: dict[int, tuple[threading.Event, list[_Item]]] = {}
        self._last_done: dict[int, float] = {}

    def _rank(self, index: int) -> tuple[bool, float]:
        return (not self._warm(index), -self._last_done.get(index, 0.0))

    def put(self, item: _Item, start: Callable[[int, _Item], _Item] | None = None) -> None:
        """Hand ``item`` to an idle slot, or queue it; ``start(index, item)`` runs first when a slot is idle
        (it may send the job to that slot's worker, and returns the item the slot gets)."""
        with self._lock:
            if not self._idle:
                self._backlog.append(item)
                return
            index = min(self._idle, key=self._rank)
            event, box = self._idle.pop(index)
        if start is not None:
            item = start(index, item)
        box.append(item)
        event.set()

    def take(self, index: int, finished_one: bool) -> _Item:
        """The next item for slot ``index`` (waiting while there is none)."""
        event, box = threading.Event(), []
        with self._lock:
            if finished_one:
                self._last_done[index] = time.monotonic()
            if self._backlog:
                return self._backlog.popleft()
            self._idle[index] = (event, box)
        event.wait()
        return box[0]


class LocalExecutor:
    """Worker processes on this machine: ``cpu_slots`` for CPU jobs and one slot for the GPU, if any."""

    def __init__(
        self,
        cpu_slots: int | None = None,
        gpu_slots: int | None = None,
        memory_limit_mb: int | None = None,
        warm: dict[str, list[str]] | None = None,
        warm_cpu_workers: int = 2,
    ) -> None:
        """``warm`` maps a slot kind (``cpu``, ``gpu``) to the modules its worker imports in the background
        (while it has no job) as soon as it starts; with it, every slot starts its worker at once instead of
        on its first job. Only the first ``warm_cpu_workers`` CPU workers import engines (each import of
        every engine costs memory: about a gigabyte with torch); the others start bare."""
        self.cpu_slots = cpu_slots or hardware.cpu_count()
        self.gpu_slots = (1 if hardware.has_gpu() else 0) if gpu_slots is None else gpu_slots
        self.memory_limit_mb = memory_limit_mb or hardware.job_memory_limit_mb()
        self.cores = CoreBudget(self.cpu_slots)
        self.warm = warm
        self.warm_cpu_workers = warm_cpu_workers
        self.failed_tail = ""
        self.handouts = {
            "cpu": _Handout(lambda i: self.warm is not None and i < self.warm_cpu_workers),
            "gpu": _Handout(lambda i: self.warm is not None),
        }
        self._threads: list[threading.Thread] = []
        #: each slot's worker, set by the slot's thread; read by the submitting thread only while the slot
        #: is idle (its thread is waiting for a job and changes nothing)
        self._workers: dict[tuple[str, int], _Worker | None] = {}
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
        kind = self.queue_for(job)
        job.device = kind
        self.handouts[kind].put((job, finish, 0), lambda index, item: self._send_now(kind, index, item))

    def _send_now(self, kind: str, index: int, item: _Item) -> _Item:
        """Send a job to the idle slot ``index``'s worker from the submitting thread, when its worker is up,
        its cores are free and the message is small: the worker starts at once instead of after the slot's
        thread wakes up (about a tenth of a trivial job's dispatch), and that thread then follows the job.
        Otherwise the slot's thread does all of it."""
        assert item is not None
        job, finish, _ = item
        worker = self._workers.get((kind, index))
        if worker is None or job.cancel_requested or not worker.alive():
            return item
        cores = 1 if kind == "gpu" else self.cores.cores_for(job.threads)
        message = job_message(job, gpu=kind == "gpu", cores=cores, memory_limit_mb=self._memory_limit(job))
        if len(message) > SEND_AT_ONCE_BYTES or not self.cores.try_acquire(cores):
            return item
        job.status = "running"
        job.started = time.time()
        with self._lock:
            self._running[job.job_id] = worker
        with contextlib.suppress(OSError):  # a dead worker: the slot's thread reads its end and reports it
            worker.send(message)
        return job, finish, cores

    def _memory_limit(self, job: Job) -> int:
        return job.memory_limit_mb or self.memory_limit_mb

    def cancel(self, job: Job) -> None:
        job.cancel_requested = True

    def _slot(self, kind: str, index: int) -> None:
        worker: _Worker | None = None
        if self.warm is not None:
            worker = self._start_worker(kind, index)
        finished_one = False
        while True:
            self._workers[kind, index] = worker
            item = self.handouts[kind].take(index, finished_one)
            if item is None:
                break
            finished_one = True
            job, finish, cores = item
            if cores:  # already sent to this slot's worker (_send_now)
                assert worker is not None
                try:
                    worker = self._follow(worker, job, finish, kind, cores, sent=True)
                finally:
                    self.cores.release(cores)
                continue
            # a GPU job drives the GPU from one core; a CPU job reserves what its tool declared
            cores = 1 if kind == "gpu" else self.cores.cores_for(job.threads)
            if job.cancel_requested or not self.cores.acquire(cores, lambda j=job: j.cancel_requested):
                finish(
                    job,
                    {"error": ToolError("cancelled", "The job was cancelled before it started.").to_dict()},
                )
                continue
            try:
                worker = self._serve(kind, index, worker, job, finish, cores)
            finally:
                self.cores.release(cores)
        self._workers[kind, index] = None
        if worker is not None:
            worker.kill()

    def _serve(
        self, kind: str, index: int, worker: _Worker | None, job: Job, finish: Finisher, cores: int
    ) -> _Worker | None:
        """Run one job on this slot's worker (started if needed); returns the worker still usable, if any."""
        # the job has its slot and cores: starting a worker for it is part of running it, not queueing
        # (no wake-up for waiters: they wait for progress or the end, and a wake-up here would compete with
        # sending the job to its worker)
        job.status = "running"
        job.started = time.time()
        if worker is None or not worker.alive():
            worker = self._start_worker(kind, index)
            if worker is None:
                finish(
                    job,
                    {
                        "error": ToolError(
                            "engine_crashed",
                            "The worker process failed to start.",
                            stderr_tail=self.failed_tail,
                        ).to_dict()
                    },
                )
                return None
        return self._follow(worker, job, finish, kind, cores, sent=False)

    def _follow(
        self, worker: _Worker, job: Job, finish: Finisher, kind: str, cores: int, *, sent: bool
    ) -> _Worker | None:
        """Run ``job`` on ``worker`` (``sent``: the job is already on its way) to its end and finish it;
        returns the worker if it is still usable."""
        outcome = self._run_on(worker, job, kind, cores, sent)
        if outcome.get("kill"):
            worker.kill()
            worker = None
        finish(job, outcome)
        return worker

    def _start_worker(self, kind: str, index: int) -> _Worker | None:
        """A started worker that said it is ready, or None (its stderr tail is in ``self.failed_tail``)."""
        modules = (self.warm or {}).get(kind)
        if kind == "cpu" and index >= self.warm_cpu_workers:
            modules = None
        worker, self.failed_tail = start_worker(kind, index, modules)
        return worker

    def _run_on(self, worker: _Worker, job: Job, kind: str, cores: int, sent: bool) -> dict[str, Any]:
        with self._lock:
            self._running[job.job_id] = worker
        try:
            return run_job_on(
                worker,
                job,
                gpu=kind == "gpu",
                cores=cores,
                memory_limit_mb=self._memory_limit(job),
                closed=lambda: self._closed,
                sent=sent,
            )
        finally:
            with self._lock:
                self._running.pop(job.job_id, None)

    def shutdown(self) -> None:
        self._closed = True
        for kind, handout in self.handouts.items():
            for _ in range(self.cpu_slots if kind == "cpu" else self.gpu_slots):
                handout.put(None)
        with self._lock:
            workers = list(self._running.values())
        for worker in workers:
            worker.kill()


def job_message(
    job: Any, *, gpu: bool, cores: int, memory_limit_mb: int, extra: dict[str, Any] | None = None
) -> bytes:
    """The line that sends ``job`` to a worker (:mod:`tools_server.core.worker`)."""
    message = {
        "job_id": job.job_id,
        "tool": job.tool,
        "module": job.module,
        "params": job.params,
        "threads": cores,
        "gpu": gpu,
        "memory_limit_mb": memory_limit_mb,
        **(extra or {}),
    }
    return json.dumps(message).encode() + b"\n"


def run_job_on(
    worker: _Worker,
    job: Any,
    *,
    gpu: bool,
    cores: int,
    memory_limit_mb: int,
    closed: Callable[[], bool] = lambda: False,
    extra: dict[str, Any] | None = None,
    sent: bool = False,
) -> dict[str, Any]:
    """Send ``job`` to ``worker`` (unless it was ``sent`` already) and follow it to its end: progress goes to
    the job, and a cancellation, the time limit or the memory limit stops it. Returns the worker's result or
    error message; ``kill`` in it means the worker must be killed. ``job`` is a :class:`Job` or anything
    with its fields (the Dask executor's task passes its own). ``extra`` goes into the message (a cluster
    address)."""
    if not sent:
        message = job_message(job, gpu=gpu, cores=cores, memory_limit_mb=memory_limit_mb, extra=extra)
        try:
            worker.send(message)
        except (BrokenPipeError, OSError):
            return crash_report(worker)
    deadline = time.monotonic() + job.time_limit_s
    memory_checked = time.monotonic()
    while True:
        msg = worker.next_message(0.1)
        if msg is None and closed():  # the server is stopping and took the worker with it
            return {"error": lost_to_restart()}
        if msg is None:
            return crash_report(worker)
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
                    "timeout", f"The job exceeded its time limit of {job.time_limit_s:g} s and was stopped."
                ).to_dict(),
            }
        if time.monotonic() - memory_checked < 0.1:  # reading every process costs ~1 ms
            continue
        memory_checked = time.monotonic()
        rss = worker.rss_mb()
        if rss > memory_limit_mb:
            return {"kill": True, "error": over_memory(rss, memory_limit_mb).to_dict()}


def over_memory(rss_mb: float, memory_limit_mb: int) -> ToolError:
    """The error of a job whose processes hold ``rss_mb`` (over ``memory_limit_mb``); the figure is rounded
    up to whole MiB, so that it reads as over the limit (500.3 MiB is "501 MiB", not "500")."""
    used = math.ceil(rss_mb)
    return ToolError(
        "engine_crashed",
        f"The job used {used} MiB, over its memory limit of {memory_limit_mb} MiB, and was stopped.",
        "Use a smaller input or a cheaper method, or raise SPU_JOB_MEMORY_MB.",
        memory_mb=used,
        memory_limit_mb=memory_limit_mb,
    )


def crash_report(worker: _Worker) -> dict[str, Any]:
    """The error for a worker whose pipe closed: it died, or (stopped here after 5 s) it lives on without
    its pipe, which no job can come back through."""
    try:
        returncode = worker.proc.wait(timeout=5)
        what = f"died ({_exit_reason(returncode)})"
    except subprocess.TimeoutExpired:
        worker.kill()
        returncode = worker.proc.returncode
        what = "closed its result pipe and did not exit; it was stopped"
    return {
        "kill": True,
        "error": ToolError(
            "engine_crashed",
            f"The engine's worker process {what}. The server is still running.",
            stderr_tail=worker.stderr_tail(),
            exit_code=returncode,
        ).to_dict(),
    }
