"""The cluster executor: the same jobs on a Dask ``distributed`` cluster (SLURM and PBS through
dask-jobqueue), under the server's rules.

- **A job runs in a worker process**, as on one machine: each Dask worker keeps warm spu worker processes
  (``tools_server.core.worker``) and hands each job to one, so a native crash is an ``engine_crashed``
  error, not a lost Dask worker.
- **Cancellation and time limits reach the engine**: ``job_cancel`` sets a Dask event the task polls
  every quarter second; the task then kills its worker process (and whatever the engine started) and
  returns, so the Dask worker's thread takes the next task at once.
- **Items fan out**: a tool that declares ``items=`` and gets more than one item (a list of several, or a
  count above one for items it generates) leaves the Dask worker's
  thread pool while it waits (``secede``), and its :func:`~tools_server.core.fanout.map_items` sends the
  batch to the cluster as balanced chunks, gathered in input order. Each chunk runs in a worker process of
  the Dask worker that takes it (:func:`run_chunk`), like a job: a cancellation or the job's time limit
  kills the process running an item, not only the items after it, and a crash in an item is an
  ``engine_crashed`` error, not a lost Dask worker.
- **Files go with the job**: every path-typed argument (``InputPath``, ``InputDir``) has been checked
  under the server's roots before the job leaves; the server reads it the one way tools read files
  (:func:`~tools_server.core.paths.read_input`) and sends its content,
  which the Dask worker writes into its scratch folder and hands the tool instead. A Dask worker never
  opens a path of the server's machine, whatever its own roots allow.
- **The memory limit goes with the job**: the tool's, else the server's ``SPU_JOB_MEMORY_MB``; the Dask
  worker holds the job's process to it, and each process running a chunk of its batch.
- **Progress** goes through a Dask variable the server reads while it waits.
- **Artifacts come back**: the worker process writes them into the Dask worker's scratch folder; the task
  returns them as bytes and the server writes them into its own work directory, with the paths in the
  result pointing there. Cache entries and job records are written by the server, as for local jobs.

CPU reservations: a job gets the cores its tool declares (``threads=``), capped at the threads of the Dask
worker that runs it (``"all"`` is all of them). Start the workers with a ``cores`` resource (``dask worker
--nthreads 8 --resources cores=8``) and each job also reserves its cores there.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import logging
import math
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tools_server.core import hardware
from tools_server.core.errors import ToolError
from tools_server.core.jobs.model import Finisher, Job
from tools_server.core.registry import tool
from tools_server.core.results import ToolResult

log = logging.getLogger(__name__)

#: How often the task checks for a cancellation, and the server for progress (seconds).
POLL_S = 0.25
#: How often a chunk of a batch checks for a cancellation (seconds): a busy Dask worker spends less on it
#: than on :data:`POLL_S`, and the items still stop well within 2 s.
CHUNK_POLL_S = 0.5
#: How long a job's cancel event outlives a job that did not end well (seconds): its task and the chunks of
#: its batch read it within a second, and the scheduler would keep a set event for good.
EVENT_TTL_S = 60.0
#: Artifacts a job may send back from the cluster, and input files it may take along.
MAX_ARTIFACT_BYTES = 256 * 2**20
MAX_INPUT_BYTES = 256 * 2**20

#: Warm worker processes of this Dask worker: those that run jobs, and those that run the chunks of a batch
#: (kept apart, so the engine a chunk loaded, a protein model say, is there for the next chunk).
_idle: dict[str, list[Any]] = {"job": [], "items": []}
_idle_lock = threading.Lock()


def _take_process(scratch: Path, role: str = "job") -> Any:
    """An idle worker process of this Dask worker for ``role``, or a new one (None when it cannot start)."""
    from tools_server.core.jobs.local import start_worker

    with _idle_lock:
        while _idle[role]:
            proc = _idle[role].pop()
            if proc.alive():
                return proc
    roots = os.pathsep.join(filter(None, [str(scratch / "inputs"), os.environ.get("SPU_INPUT_ROOTS")]))
    env = {"SPU_WORKDIR": str(scratch), "SPU_INPUT_ROOTS": roots}
    # a job's process loads the Dask client library while it waits for its first job (a batch that fans out
    # connects to the scheduler from it: about 0.3 s of imports otherwise paid by that job)
    warm = ["distributed", "tools_server.core.fanout"] if role == "job" else []
    proc, _ = start_worker(f"dask-{role}", len(_idle[role]), warm=warm, env_extra=env)
    return proc


def _give_back(proc: Any, role: str = "job") -> None:
    with _idle_lock:
        _idle[role].append(proc)


def _prestart(dask_worker: Any) -> None:
    """Start a worker process for jobs and one for batch items on this Dask worker ahead of its first job,
    from a thread (``client.run``, which passes ``dask_worker``, returns at once): the first job and the
    first chunk of a batch here then find one idle instead of waiting about 0.4 s for it."""
    scratch = Path(dask_worker.local_directory) / "spu-work"

    def start() -> None:
        for role in ("job", "items"):
            proc = _take_process(scratch, role)
            if proc is not None:
                _give_back(proc, role)

    threading.Thread(target=start, daemon=True, name="spu-prestart").start()


class _RemoteJob:
    """The job as the Dask task sees it: its fields, a cancellation read from the server's Dask event, and
    progress written to a Dask variable (both rate-limited to one scheduler call per ``poll_s``). A chunk of
    a batch (:func:`run_chunk`) is one too, with no variable."""

    def __init__(self, job: dict[str, Any], event: Any, variable: Any = None, poll_s: float = POLL_S) -> None:
        self.job_id, self.tool, self.module = job["job_id"], job["tool"], job["module"]
        self.params, self.time_limit_s = job["params"], job["time_limit_s"]
        self.progress, self.message = 0.0, None
        self._event, self._variable, self._poll_s = event, variable, poll_s
        self._checked = self._sent = 0.0
        self.cancelled = False

    @property
    def cancel_requested(self) -> bool:
        now = time.monotonic()
        if self._event is not None and not self.cancelled and now - self._checked >= self._poll_s:
            self._checked = now
            # a scheduler that is gone leaves the job's own limits in force
            with contextlib.suppress(Exception):
                self.cancelled = bool(self._event.is_set())
        return self.cancelled

    def _notify(self) -> None:
        now = time.monotonic()
        if self._variable is not None and (now - self._sent >= self._poll_s or self.progress >= 1.0):
            self._sent = now
            with contextlib.suppress(Exception):
                self._variable.set({"fraction": self.progress, "message": self.message})


def _artifacts(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            if total > MAX_ARTIFACT_BYTES:
                raise ToolError(
                    "too_large",
                    f"The job's artifacts exceed {MAX_ARTIFACT_BYTES // 2**20} MiB and cannot be sent back "
                    "from the cluster.",
                    "Ask for fewer outputs (frames, conformers) or run it on the server's machine.",
                )
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def _dask_task(job: dict[str, Any]) -> dict[str, Any]:
    """One job on a Dask worker; returns ``{"outcome": run_tool payload or error, "artifact_root",
    "files"}``."""
    from distributed import Event, Variable, get_client, get_worker, secede

    from tools_server.core import settings
    from tools_server.core.context import artifact_dir_for
    from tools_server.core.jobs.local import run_job_on

    worker = get_worker()
    available = max(1, int(worker.state.nthreads))
    cores = available if job["threads"] == "all" else max(1, min(int(job["threads"]), available))
    scratch = Path(worker.local_directory) / "spu-work"
    client = get_client()
    remote = _RemoteJob(
        job, Event(job["cancel_key"], client=client), Variable(job["progress_key"], client=client)
    )
    if job["fan_out"]:
        secede()  # the batch's chunks need this thread more than the task waiting for them
    art = (
        scratch
        / "artifacts"
        / artifact_dir_for(job["tool"], job["job_id"]).relative_to(settings.artifacts_dir())
    )
    inputs = scratch / "inputs" / art.name
    remote.params = _unpack_inputs(job["params"], job["inputs"], inputs)
    proc = _take_process(scratch)
    if proc is None:
        error = ToolError("engine_crashed", "The worker process failed to start on the Dask worker.")
        return {"outcome": {"error": error.to_dict()}, "artifact_root": str(art), "files": {}}
    outcome = run_job_on(
        proc,
        remote,
        gpu=job["resource"] == "gpu" and hardware.has_gpu(),
        cores=cores,
        memory_limit_mb=job["memory_limit_mb"] or hardware.job_memory_limit_mb(),
        extra={
            "cluster": worker.scheduler.address if job["fan_out"] else None,
            "cancel_key": job["cancel_key"],
            # the limit for the processes running its items: undeclared, each machine's default there
            "items_memory_limit_mb": job["memory_limit_mb"],
        },
    )
    if outcome.pop("kill", False):
        proc.kill()
    else:
        _give_back(proc)
    if job["fan_out"] and "error" in outcome:  # cancelled, out of time, crashed or failed in one chunk:
        with contextlib.suppress(Exception):  # the batch's chunks still running stop too
            remote._event.set()
    try:
        files = _artifacts(art) if "result" in outcome else {}
    except ToolError as exc:
        outcome, files = {"error": exc.to_dict()}, {}
    finally:
        shutil.rmtree(art, ignore_errors=True)
        shutil.rmtree(inputs, ignore_errors=True)
    return {"outcome": outcome, "artifact_root": str(art), "files": files}


def _pickled(value: Any) -> str:
    import cloudpickle

    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def _unpickled(text: str) -> Any:
    import cloudpickle

    return cloudpickle.loads(base64.b64decode(text))


class _ItemsInput(BaseModel):
    payload: str  # (func, shared, jobs), pickled


class ItemsChunkResult(ToolResult):
    results: str  # the items' results, pickled


@tool(name="spu_run_items", resource="cpu", cacheable=False)
def run_items(args: _ItemsInput) -> ItemsChunkResult:
    """A chunk of a batch's items, run by :func:`run_chunk` in a worker process of a Dask worker (an internal
    job, not a tool the server offers): ``func(*shared, *job)`` for each job, the results pickled."""
    func, shared, jobs = _unpickled(args.payload)
    return ItemsChunkResult(results=_pickled([func(*shared, *job) for job in jobs]))


def run_chunk(
    func: Any,
    jobs: list[tuple[Any, ...]],
    artifact_dir: str | None,
    cancel_key: str | None,
    shared: tuple[Any, ...] = (),
    memory_limit_mb: int | None = None,
) -> tuple[list[Any], dict[str, bytes], bool]:
    """A chunk of a batch (:func:`~tools_server.core.fanout.map_items`) as a Dask task: its items run in a
    worker process of this Dask worker, one after the other, writing artifacts into a folder of the chunk's
    own (shipped back as bytes, since the Dask worker may be another machine). The process is followed as a
    job's is (:func:`~tools_server.core.jobs.local.run_job_on`): once the job's cancel event is set (a
    ``job_cancel``, or the job stopped for its time limit) it is killed, engine and all, within
    :data:`CHUNK_POLL_S`, and so it is when it uses more than the job's ``memory_limit_mb`` (each process
    running a chunk is held to the job's limit). Returns (results, files, stopped); a process that dies or
    goes over the memory limit is raised as ``engine_crashed``."""
    from distributed import Event, get_client, get_worker

    from tools_server.core.jobs.local import run_job_on

    event = Event(cancel_key, client=get_client()) if cancel_key else None
    chunk = _RemoteJob(
        {
            "job_id": f"chunk-{uuid.uuid4().hex[:12]}",
            "tool": "spu_run_items",
            "module": __name__,
            "params": None,  # below
            "time_limit_s": math.inf,  # the job's own limit stops the chunk through the event
        },
        event,
        poll_s=CHUNK_POLL_S,
    )
    if chunk.cancel_requested:
        return [], {}, True
    local_dir = tempfile.mkdtemp(prefix="spu-chunk-")
    try:
        args = [
            tuple(local_dir if artifact_dir is not None and a == artifact_dir else a for a in job)
            for job in jobs
        ]
        chunk.params = {"payload": _pickled((func, shared, args))}
        proc = _take_process(Path(get_worker().local_directory) / "spu-work", "items")
        if proc is None:
            raise ToolError("engine_crashed", "The worker process failed to start on the Dask worker.")
        limit = memory_limit_mb or hardware.job_memory_limit_mb()
        reply = run_job_on(proc, chunk, gpu=False, cores=1, memory_limit_mb=limit)
        if reply.pop("kill", False):  # cancelled, over the memory limit, or died
            proc.kill()
            if chunk.cancelled:
                return [], {}, True
            raise ToolError.from_dict(reply["error"])
        _give_back(proc, "items")
        if reply["type"] == "error":
            raise ToolError.from_dict(reply["error"])
        results = [relocate(r, local_dir, artifact_dir) for r in _unpickled(reply["result"]["results"])]
        files = {
            p.relative_to(local_dir).as_posix(): p.read_bytes()
            for p in Path(local_dir).rglob("*")
            if p.is_file()
        }
        return results, files, False
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)


def relocate(value: Any, old: str, new: str | None) -> Any:
    """``value`` (a result: dicts, lists, models) with every string that starts with the folder ``old``
    pointing into ``new`` instead."""
    if new is None:
        return value
    if isinstance(value, str):
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: relocate(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(relocate(v, old, new) for v in value)
    if isinstance(value, BaseModel):  # an item model: its fields, as they were set
        moved = {k: relocate(getattr(value, k), old, new) for k in value.model_fields_set}
        return value.model_copy(update=moved)
    return value


class DaskExecutor:
    """Jobs on a Dask ``distributed`` cluster: ``DaskExecutor(address)`` or ``DaskExecutor(client=...)``."""

    def __init__(self, address: str | None = None, client: Any = None) -> None:
        from distributed import Client

        self.client = client or Client(address)
        #: (when, event): the cancel events of jobs that ended in an error or a cancel, cleared once due
        self._expiring: collections.deque[tuple[float, Any]] = collections.deque()
        self._expiring_lock = threading.Lock()
        workers = self.client.scheduler_info().get("workers", {}).values()
        declared = [w.get("resources", {}).get("cores") for w in workers]
        #: the most ``cores`` one worker declares, or None when the workers declare none
        self.max_cores: int | None = max((int(c) for c in declared if c), default=None)
        try:  # one worker process waiting on each Dask worker there now (workers that join later start
            self.client.run(_prestart)  # theirs with their first job)
        except Exception:
            log.warning("could not start worker processes ahead of the first jobs", exc_info=True)

    def submit(self, job: Job, finish: Finisher) -> None:
        from distributed import Event, Variable

        job.device = "dask"
        extra: dict[str, Any] = {}
        if self.max_cores:
            wanted = self.max_cores if job.threads == "all" else min(int(job.threads), self.max_cores)
            extra["resources"] = {"cores": wanted}
        cancel_key, progress_key = f"spu-cancel-{job.job_id}", f"spu-progress-{job.job_id}"
        try:
            inputs = _pack_inputs(job)
        except (ToolError, OSError) as exc:
            error = (
                exc
                if isinstance(exc, ToolError)
                else ToolError("invalid_input", f"Cannot read an input: {exc}")
            )
            finish(job, {"error": error.to_dict()})
            return
        payload = {
            "job_id": job.job_id,
            "tool": job.tool,
            "module": job.module,
            "params": job.params,
            "resource": job.resource,
            "threads": job.threads,
            "time_limit_s": job.time_limit_s,
            # the tool's limit, else the server's SPU_JOB_MEMORY_MB, else the Dask worker's own default
            "memory_limit_mb": job.memory_limit_mb or hardware.job_memory_setting_mb(),
            "fan_out": _fans_out(job),
            "inputs": inputs,
            "cancel_key": cancel_key,
            "progress_key": progress_key,
        }
        future = self.client.submit(_dask_task, payload, pure=False, key=f"spu-{job.job_id}", **extra)
        job.status = "running"
        job.started = time.time()
        job._notify()
        event = Event(cancel_key, client=self.client)
        variable = Variable(progress_key, client=self.client)
        variable.set({"fraction": 0.0, "message": None})  # so reading it never waits
        threading.Thread(target=self._watch, args=(job, finish, future, event, variable), daemon=True).start()

    def _watch(self, job: Job, finish: Finisher, future: Any, event: Any, variable: Any) -> None:
        # the task enforces the time limit itself once it runs; this one also covers the wait for a worker.
        # The wait is on the future's done callback, and the result is read once it is done: Dask's
        # future.result(timeout=...) runs its own timeout on the client's loop as well, and when that one
        # wins the race under load it raises UnboundLocalError ("cannot access local variable 'result'").
        deadline = time.monotonic() + job.time_limit_s + 60
        finished = threading.Event()
        future.add_done_callback(lambda _: finished.set())
        try:
            while not finished.wait(POLL_S):
                self._read_progress(job, variable)
                if job.cancel_requested or time.monotonic() > deadline:
                    event.set()  # the task kills its worker process and frees its thread
                    future.cancel()
                    code = "cancelled" if job.cancel_requested else "timeout"
                    finish(job, {"error": ToolError(code, f"The job was {code} on the cluster.").to_dict()})
                    return
            try:
                reply = future.result()
            except Exception as exc:
                finish(job, {"error": ToolError("engine_crashed", f"Dask task failed: {exc}").to_dict()})
                return
            finish(job, _land(job, reply))
        finally:
            with contextlib.suppress(Exception):
                variable.delete()
            if job.status != "done":  # its event may be set (a cancel, or a batch that failed)
                self._retire(event)

    def _retire(self, event: Any) -> None:
        """Clear ``event`` :data:`EVENT_TTL_S` from now (at the next job that does not end well), and the
        events now due."""
        now = time.monotonic()
        with self._expiring_lock:
            self._expiring.append((now + EVENT_TTL_S, event))
            due = []
            while self._expiring and self._expiring[0][0] <= now:
                due.append(self._expiring.popleft()[1])
        for old in due:
            with contextlib.suppress(Exception):
                old.clear()

    @staticmethod
    def _read_progress(job: Job, variable: Any) -> None:
        try:
            latest = variable.get(timeout=0)
        except Exception:  # not set yet
            return
        if isinstance(latest, dict) and latest.get("fraction", 0) != job.progress:
            job.progress = float(latest["fraction"])
            job.message = latest.get("message")
            job._notify()

    def cancel(self, job: Job) -> None:
        job.cancel_requested = True

    def shutdown(self) -> None:
        self.client.close()


def _pack_inputs(job: Job) -> list[dict[str, Any]]:
    """The content of every file (or folder) the job's path-typed arguments name, read on the server the
    one way tools read files (:func:`~tools_server.core.paths.read_input`: below the server's roots, no
    link followed, from the descriptor that was checked; a folder's links and special files are left out)."""
    from tools_server.core.execute import resolve
    from tools_server.core.paths import path_fields, path_locations, path_marker, read_input

    try:
        model = resolve(job.tool, job.module).input_model
    except ToolError:
        return []
    packed: list[dict[str, Any]] = []
    total = 0
    for dotted, kind in path_fields(model).items():
        if kind not in ("file", "dir"):
            continue  # a text that may name a file is read where the tool runs
        size_kind = getattr(path_marker(model, dotted), "size_kind", None) or "file"
        for where in path_locations(job.params, dotted):
            value: Any = job.params
            for key in where:
                value = value[key]
            root = Path(value)
            names = ["."] if kind == "file" else [e.relative for e in _folder_files(root)]
            files = {}
            for name in names:
                data = read_input(root if name == "." else root / name, kind=size_kind).data
                total += len(data)
                if total > MAX_INPUT_BYTES:
                    raise ToolError(
                        "too_large",
                        f"The job's input files exceed {MAX_INPUT_BYTES // 2**20} MiB, too much to send to "
                        "the cluster.",
                        "Run it with the local executor, or give smaller inputs.",
                    )
                files[name] = data
            packed.append({"where": list(where), "kind": kind, "name": root.name, "files": files})
    return packed


def _folder_files(root: Path) -> list[Any]:
    """The regular files below the input folder ``root`` (no link followed)."""
    from spu_common import confined
    from tools_server.core.paths import allowed_roots, tool_error

    try:
        return [e for e in confined.walk(root, allowed_roots()) if e.kind == "file"]
    except confined.Refused as exc:
        raise tool_error(exc) from None


def _unpack_inputs(params: dict[str, Any], inputs: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    """The arguments with each shipped file written under ``folder`` and its path pointing there."""
    import copy

    params = copy.deepcopy(params)
    for n, item in enumerate(inputs):
        target = folder / str(n) / item["name"]
        if item["kind"] == "file":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(item["files"]["."])
        else:
            target.mkdir(parents=True, exist_ok=True)
            for rel, data in item["files"].items():
                path = (target / rel).resolve()
                if path.is_relative_to(target.resolve()):  # a name that would leave the folder is dropped
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
        holder: Any = params
        for key in item["where"][:-1]:
            holder = holder[key]
        holder[item["where"][-1]] = str(target)
    return params


def _fans_out(job: Job) -> bool:
    """Whether the job's tool declared ``items`` and the call has more than one: a list field holding
    several, or a count field (the conformers a tool generates from one molecule) above one."""
    from tools_server.core.execute import resolve

    try:
        field = resolve(job.tool, job.module).items
    except ToolError:
        return False
    value = job.params.get(field) if field else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value > 1
    return isinstance(value, list) and len(value) > 1


def _land(job: Job, reply: dict[str, Any]) -> dict[str, Any]:
    """The task's outcome with its artifacts written into the server's work directory."""
    from tools_server.core.context import artifact_dir_for

    outcome = reply["outcome"]
    if not reply["files"]:
        return outcome
    target = artifact_dir_for(job.tool, job.job_id)
    for rel, data in reply["files"].items():
        path = (target / rel).resolve()
        if not path.is_relative_to(target.resolve()):
            continue  # a name that would leave the job's folder
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    os.makedirs(target, exist_ok=True)
    return relocate(outcome, reply["artifact_root"], str(target))
