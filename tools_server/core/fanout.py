"""Spreading a batch's independent items over cores, or over a Dask cluster.

:func:`map_items` runs ``func(*job)`` for each job of a batch (one molecule, one ligand, one sequence) and
returns the results in input order. On one machine, the calling process and a pool of single-threaded
helper processes each take the biggest job left whenever they are free (list scheduling, biggest first).
When the job runs on a Dask cluster and its tool declared ``items=`` (``@tool(..., items="molecules")``),
the worker process running the job has a cluster address (:func:`use_cluster`), and the batch becomes
Dask tasks instead: balanced chunks, biggest first, each run in a worker process of the Dask worker that
takes it (:func:`tools_server.core.jobs.dask.run_chunk`), gathered back in input order. Per-item errors are
the tool's own business (``func`` returns them as results), so both paths give the same result, item for
item.

A batch whose items need one large object in common (a docking receptor) passes it as ``shared``: each item
gets it as ``func``'s first arguments, and on the cluster it travels to each Dask worker once (scattered)
rather than once per task (each chunk then passes it to the local worker process running its items).
"""

from __future__ import annotations

import collections
import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# The local path: a process pool of single-threaded helpers
# --------------------------------------------------------------------------------------------------


def _pool_initializer() -> None:
    # One OpenMP thread per pool process: small xTB jobs scale better across processes than threads.
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"


_ATOM = re.compile(r"Cl|Br|\[[^\]]*\]|[BCNOSPFI]|[bcnosp]")


def job_size(job: tuple[Any, ...]) -> int:
    """A cheap proxy for a job's cost, to start the biggest first: the atom count of its molecule (the
    first string of the job's arguments): an XYZ block's first line, else the atoms written in a SMILES or
    molblock line count."""
    text = next((x for x in job if isinstance(x, str)), "")
    first = text.lstrip().split("\n", 1)[0].strip()
    if first.isdigit():
        return int(first)
    if "\n" in text.strip():
        return text.count("\n")
    return len(_ATOM.findall(text))


_POOLS: dict[int, Any] = {}


def _pool(workers: int) -> Any:
    """A spawned process pool kept for the worker's lifetime: a batch after the first does not pay the
    pool's start and engine imports again (a job timeout kills the pool with the worker's process group)."""
    pool = _POOLS.get(workers)
    if pool is None or getattr(pool, "_broken", False):  # a helper died (segfault): start a fresh pool
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")  # fork after OpenMP start-up can deadlock
        saved = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"  # spawned children inherit it before importing the engine
        try:
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_pool_initializer)
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        _POOLS[workers] = pool
    return pool


def map_items(
    func: Any,
    jobs: list[tuple[Any, ...]],
    threads: int,
    progress: Any = None,
    shared: tuple[Any, ...] = (),
) -> list[Any]:
    """Run ``func(*shared, *job)`` for each job on ``threads`` cores (or on the cluster, see
    :func:`use_cluster`): this process and a pool of ``threads - 1``
    spawned single-threaded processes each take the biggest job left whenever they are free (list
    scheduling, biggest first, so no core waits at the end for one large molecule, and no job is queued
    behind a busy process while another is idle). Results come back in input order. ``shared`` holds the
    arguments every job has in common (not counted in a job's size; sent to each Dask worker once)."""
    if _cluster["address"] and len(jobs) > 1:
        return _map_on_cluster(func, jobs, progress, shared)
    if shared:
        jobs = [(*shared, *job) for job in jobs]
    results: list[Any] = [None] * len(jobs)
    left = collections.deque(sorted(range(len(jobs)), key=lambda k: -job_size(jobs[k])))
    lock = threading.Condition()
    state = {"done": 0, "in_pool": 0}
    failures: list[BaseException] = []

    def finished(k: int, value: Any) -> None:
        with lock:
            results[k] = value
            state["done"] += 1
            done = state["done"]
        if progress:
            progress(done, len(jobs))

    def take() -> int | None:
        with lock:
            return left.popleft() if left and not failures else None

    helpers = min(threads, len(jobs)) - 1
    pool = None
    if helpers > 0:
        try:
            pool = _pool(helpers)
        except Exception:
            pool = None  # no pool (a sandbox without process spawning): everything runs here

    def feed() -> None:
        """Give the pool its next job (called at the start and as each pool job ends)."""
        k = take()
        if k is None:
            return
        with lock:
            state["in_pool"] += 1
        try:
            future = pool.submit(func, *jobs[k])
        except Exception as exc:  # the pool broke: this process takes the rest
            with lock:
                left.appendleft(k)
                state["in_pool"] -= 1
                lock.notify_all()
            log.warning("helper pool unavailable (%s); continuing in one process", exc)
            return
        future.add_done_callback(lambda f, k=k: landed(k, f))

    def landed(k: int, future: Any) -> None:
        try:
            value = future.result()
        except BaseException as exc:
            with lock:
                failures.append(exc)
        else:
            finished(k, value)
            feed()
        with lock:
            state["in_pool"] -= 1
            lock.notify_all()

    if pool is not None:
        for _ in range(helpers):
            feed()
    try:
        while (k := take()) is not None:
            finished(k, func(*jobs[k]))
    except BaseException as exc:
        with lock:
            failures.append(exc)  # the pool takes no more jobs
        raise
    with lock:
        while state["in_pool"]:
            lock.wait()
    if failures:
        raise failures[0]
    return results


# --------------------------------------------------------------------------------------------------
# The cluster path: Dask tasks in balanced chunks
# --------------------------------------------------------------------------------------------------

#: On the cluster, a batch of up to this many jobs is one Dask task per job (larger ones: balanced chunks);
#: a tool that groups its work into jobs itself (protein models) keeps to it, so that Dask runs its jobs
#: in the order given.
ONE_TASK_EACH = 64

_cluster: dict[str, Any] = dict.fromkeys(("address", "artifact_dir", "cancel_key", "memory_limit_mb"))
_clients: dict[str, Any] = {}


@contextmanager
def use_cluster(
    address: str | None,
    artifact_dir: str | None,
    cancel_key: str | None,
    memory_limit_mb: int | None = None,
) -> Iterator[None]:
    """While the block runs, :func:`map_items` sends batches to the Dask scheduler at ``address`` (the
    worker process of a job that a Dask executor ran, for a tool that declared ``items``).
    ``artifact_dir`` is the job's artifact folder (chunks write into a folder of their own and their files
    are copied back), ``cancel_key`` names the Dask event that stops the chunks (kills their processes),
    ``memory_limit_mb`` is the limit each process running a chunk is held to (None: the default of the
    machine it runs on, :func:`~tools_server.core.hardware.job_memory_limit_mb`)."""
    saved = dict(_cluster)
    _cluster.update(
        address=address, artifact_dir=artifact_dir, cancel_key=cancel_key, memory_limit_mb=memory_limit_mb
    )
    try:
        yield
    finally:
        _cluster.update(saved)


def _client(address: str) -> Any:
    client = _clients.get(address)
    if client is None or client.status not in ("running", "connecting"):
        from distributed import Client

        client = _clients[address] = Client(address, set_as_default=False, timeout=30)
    return client


def _chunks(jobs: list[tuple[Any, ...]], n_chunks: int) -> list[list[int]]:
    """Job indices in ``n_chunks`` chunks of about equal cost: the biggest job left goes to the lightest
    chunk (longest processing time first)."""
    chunks: list[list[int]] = [[] for _ in range(n_chunks)]
    load = [0] * n_chunks
    for k in sorted(range(len(jobs)), key=lambda k: -job_size(jobs[k])):
        lightest = min(range(n_chunks), key=lambda c: load[c])
        chunks[lightest].append(k)
        load[lightest] += max(1, job_size(jobs[k]))
    return [c for c in chunks if c]


def _map_on_cluster(
    func: Any, jobs: list[tuple[Any, ...]], progress: Any, shared: tuple[Any, ...] = ()
) -> list[Any]:
    from pathlib import Path

    from distributed import as_completed

    from tools_server.core.jobs.dask import run_chunk

    client = _client(_cluster["address"])
    threads = sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values()) or 1
    # one item per task up to ONE_TASK_EACH items (Dask hands them out biggest first as threads free up:
    # list scheduling, as on one machine), then balanced chunks, a few per thread, so thousands of tiny
    # items do not become thousands of tasks
    chunks = _chunks(jobs, min(len(jobs), max(ONE_TASK_EACH, 4 * threads)))
    artifact_dir = _cluster["artifact_dir"]
    cancel_key = _cluster["cancel_key"]
    # the common arguments go to the cluster once; each Dask worker fetches them once for all its chunks
    # (released with the last reference to its future, when this call returns)
    common: Any = client.scatter([shared], hash=False)[0] if shared else ()
    futures = {
        client.submit(
            run_chunk,
            func,
            [jobs[k] for k in chunk],
            artifact_dir,
            cancel_key,
            common,
            _cluster["memory_limit_mb"],
            pure=False,
            priority=sum(job_size(jobs[k]) for k in chunk),
        ): chunk
        for chunk in chunks
    }
    results: list[Any] = [None] * len(jobs)
    done = 0
    try:
        for future in as_completed(futures, loop=client.loop):
            values, files, stopped = future.result()
            if stopped:
                from tools_server.core.errors import ToolError

                raise ToolError("cancelled", "The job was cancelled.")
            for k, value in zip(futures[future], values, strict=True):
                results[k] = value
            for rel, data in files.items():
                target = Path(artifact_dir or ".") / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            done += len(values)
            if progress:
                progress(done, len(jobs))
    finally:
        client.cancel([f for f in futures if not f.done()])
    return results
