"""The Dask executor against itself and the local executor: one batch call spread over a cluster, and how
long a cancelled job holds its worker.

    .venv/bin/python bench/dask.py [--molecules 16] [--repeats 2] [--json]

Everything runs on loopback: a LocalCluster of one-thread worker processes stands in for ``dask scheduler``
and ``dask worker`` (the documented SLURM/PBS setup is the same executor with other workers). Printed, each
measured in this run:

1. one ``xtb_run`` call optimising ``--molecules`` drug-size molecules (GFN2, tblite) on 2 one-thread Dask
   workers against 1 (target 1.8x or more), and on the local executor with 2 slots against 1;
2. ``cancel ... N.N s``: from ``job_cancel`` on a job holding a Dask worker to that worker finishing another
   job (the engine process killed, the thread free); and from ``job_cancel`` on a batch whose items hold
   both workers to a small batch's result (the processes running the items killed).

The two sizes are measured in turn (a fresh cluster for each call, in the order 1-2, 2-1, ...; the two local
executors side by side, called in turn), so a shared machine's changing speed falls on both alike; the
ratio of each pair of calls is printed beside the ratio of the medians. Before a measured call each
cluster is warmed by small calls (the job's worker process has run the tool, and every Dask worker has a
worker process for batch items with the engine imported), as on a server that has run before; every call
has the cache off (a fresh input each time: the molecules' order is rotated).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# this file is named dask.py: its folder must not stand before the real dask on the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))


#: Drug-size molecules (20-40 atoms): a GFN2 optimisation of each takes 0.3-2 s on one core, enough work per
#: item for the spread over workers to show (bench/qc.py's small molecules take ~0.1 s each).
DRUGS = [
    "CN1C=NC2=C1C(=O)N(C(=O)N2C)C",  # caffeine
    "CC(=O)OC1=CC=CC=C1C(=O)O",  # aspirin
    "CC(C)CC1=CC=C(C=C1)C(C)C(=O)O",  # ibuprofen
    "CC(=O)NC1=CC=C(O)C=C1",  # paracetamol
    "CN1CCCC1C1=CN=CC=C1",  # nicotine
    "CCN(CC)CC(=O)NC1=C(C)C=CC=C1C",  # lidocaine
    "CCOC(=O)C1=CC=C(N)C=C1",  # benzocaine
    "CN1C2=C(C(=O)N(C1=O)C)NC=N2",  # theophylline
    "OC(=O)C1=CC=CC=C1O",  # salicylic acid
    "COC1=CC2=CC(C(C)C(=O)O)=CC=C2C=C1",  # naproxen
    "CCOC1=CC=C(NC(C)=O)C=C1",  # phenacetin
    "CCN(CC)CCOC(=O)C1=CC=C(N)C=C1",  # procaine
    "CN1N(C(=O)C=C1C)C1=CC=CC=C1",  # antipyrine
    "CC(C)C1CCC(C)CC1O",  # menthol
    "CC1(C)C2CCC1(C)C(=O)C2",  # camphor
    "COC1=C(O)C=CC(C=O)=C1",  # vanillin
]


def _dispatcher(executor):
    """A dispatcher with an empty cache of its own: every configuration computes every call."""
    from tools_server.core.cache import ResultCache
    from tools_server.core.dispatch import Dispatcher
    from tools_server.core.jobs import JobManager
    from tools_server.core.registry import load_registry

    manager = JobManager(executor)
    cache = ResultCache(Path(tempfile.mkdtemp(prefix="spu-bench-dask-cache-")))
    return Dispatcher(manager, registry=load_registry(), cache=cache), manager


def _batch_call(dispatcher, molecules: list[str], r: int) -> tuple[float, int]:
    """Seconds for call ``r`` (a fresh input each time: the molecules' order is rotated) and its n_ok."""
    batch = molecules[r % len(molecules) :] + molecules[: r % len(molecules)]
    args = {"molecules": batch, "task": "optimize", "wait_s": 600, "max_steps": 200 + r}
    start = time.perf_counter()
    out = asyncio.run(dispatcher.call("xtb_run", args))
    return time.perf_counter() - start, out["n_ok"]


def _interleaved(one, two, molecules: list[str], repeats: int) -> dict:
    """The same calls on ``one`` and ``two`` (dispatchers), in turn, so a shared machine's changing speed
    falls on both alike; the first call on each warms its workers and is not counted."""
    times: dict[str, list[float]] = {"1": [], "2": []}
    n_ok = {}
    for r in range(repeats + 1):
        for label, dispatcher in (("1", one), ("2", two)):
            took, n_ok[label] = _batch_call(dispatcher, molecules, r)
            if r:
                times[label].append(took)
    pairs = [a / b for a, b in zip(times["1"], times["2"], strict=True)]
    return {
        "1_s": statistics.median(times["1"]),
        "2_s": statistics.median(times["2"]),
        "1_ok": n_ok["1"],
        "2_ok": n_ok["2"],
        "pair_ratios": [round(x, 3) for x in pairs],
    }


def _cancel_to_free(dispatcher, manager) -> float:
    """Seconds from cancelling a job that holds the only worker to another job's result."""

    async def scenario() -> float:
        held = await dispatcher.call("xtb_run", {"molecules": ["C" * 60], "task": "frequencies", "wait_s": 0})
        await asyncio.sleep(2.0)  # it has started: the worker is busy
        start = time.perf_counter()
        manager.cancel(held["job_id"])
        await dispatcher.call("xtb_run", {"molecules": ["O"], "task": "energy", "wait_s": 120})
        return time.perf_counter() - start

    return asyncio.run(scenario())


def _cancel_batch_to_free(dispatcher, manager, molecules: list[str]) -> float:
    """Seconds from cancelling a batch whose items hold every Dask worker to a small batch's result."""

    async def scenario() -> float:
        held = await dispatcher.call("xtb_run", {"molecules": molecules, "task": "optimize", "wait_s": 0})
        await asyncio.sleep(3.0)  # its items are running on every worker
        start = time.perf_counter()
        manager.cancel(held["job_id"])
        await dispatcher.call("xtb_run", {"molecules": ["O", "N"], "task": "energy", "wait_s": 120})
        return time.perf_counter() - start

    return asyncio.run(scenario())


def _ran_items(dask_worker) -> bool:
    """Whether this Dask worker has run a chunk of batch items (its items process has the engine imported;
    an idle one alone proves nothing: one starts on every Dask worker when the executor connects)."""
    elapsed = dask_worker.state.task_counter.cumulative_elapsed()
    return any(prefix == "run_chunk" and state == "executing" for prefix, state in elapsed)


def _warm(dispatcher, client) -> None:
    """Small calls until every Dask worker has run batch items (engine imported) and the job's worker
    process has run the tool, as on a server that has run before."""
    for _ in range(5):
        asyncio.run(dispatcher.call("xtb_run", {"molecules": ["C", "O", "N", "CC"], "wait_s": 120}))
        if all(client.run(_ran_items).values()):
            return
    raise RuntimeError("a Dask worker ran no batch item in five warm-up calls")


def bench_dask(molecules: list[str], repeats: int) -> dict:
    """A fresh cluster for each call, the two sizes in turn (ABBA...): an idle cluster beside a busy one
    takes about a tenth of a core here (heartbeats, memory monitors), which a 2-worker run needs."""
    from distributed import Client, LocalCluster

    from tools_server.core.jobs.dask import DaskExecutor

    times: dict[int, list[float]] = {1: [], 2: []}
    out: dict = {}
    for r in range(repeats):
        for n_workers in (1, 2) if r % 2 == 0 else (2, 1):
            with (
                LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                ) as cluster,
                Client(cluster) as client,
            ):
                dispatcher, manager = _dispatcher(DaskExecutor(client=client))
                _warm(dispatcher, client)
                took, out[f"dask_{n_workers}_ok"] = _batch_call(dispatcher, molecules, r + 1)
                times[n_workers].append(took)
                if n_workers == 1 and r == 0:
                    out["cancel_to_free_s"] = _cancel_to_free(dispatcher, manager)
                if n_workers == 2 and r == 0:
                    out["cancel_batch_to_free_s"] = _cancel_batch_to_free(dispatcher, manager, molecules)
    out["dask_1_s"], out["dask_2_s"] = statistics.median(times[1]), statistics.median(times[2])
    out["dask_pair_ratios"] = [round(a / b, 3) for a, b in zip(times[1], times[2], strict=True)]
    out["dask_speedup"] = out["dask_1_s"] / out["dask_2_s"]
    return out


def bench_local(molecules: list[str], repeats: int) -> dict:
    from tools_server.core.jobs.local import LocalExecutor

    executors = {slots: LocalExecutor(cpu_slots=slots) for slots in (1, 2)}
    try:
        got = _interleaved(_dispatcher(executors[1])[0], _dispatcher(executors[2])[0], molecules, repeats)
    finally:
        for executor in executors.values():
            executor.shutdown()
    out = {f"local_{k}": v for k, v in got.items()}
    out["local_speedup"] = out["local_1_s"] / out["local_2_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--molecules", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    molecules = DRUGS[: args.molecules]
    with tempfile.TemporaryDirectory(prefix="spu-bench-dask-", ignore_cleanup_errors=True) as tmp:
        os.environ["SPU_WORKDIR"] = str(Path(tmp) / "work")
        os.environ["SPU_CACHE_DIR"] = str(Path(tmp) / "cache")
        results = {**bench_dask(molecules, args.repeats), **bench_local(molecules, args.repeats)}
    results["n_molecules"] = len(molecules)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    n = len(molecules)
    print(f"xtb_run, {n} optimisations in one call (median of {args.repeats}):")
    print(
        f"  dask, 2 one-thread workers vs 1: {results['dask_2_s']:.2f} s vs {results['dask_1_s']:.2f} s "
        f"= {results['dask_speedup']:.2f}x (target >= 1.8x); call by call {results['dask_pair_ratios']}"
    )
    print(
        f"  local, 2 slots vs 1:             {results['local_2_s']:.2f} s vs {results['local_1_s']:.2f} s "
        f"= {results['local_speedup']:.2f}x; call by call {results['local_pair_ratios']}"
    )
    print(f"  dask 2 workers vs local 2 slots: {results['local_2_s'] / results['dask_2_s']:.2f}x")
    free_s = results["cancel_to_free_s"]
    print(f"cancel a job holding the only Dask worker, until the next job's result: {free_s:.1f} s")
    free_s = results["cancel_batch_to_free_s"]
    print(f"cancel a batch whose items hold both Dask workers, until a small batch's result: {free_s:.1f} s")


if __name__ == "__main__":
    main()
