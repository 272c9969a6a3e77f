"""The Dask executor on a LocalCluster of two one-thread workers on loopback (the documented setup, with
``dask scheduler`` and ``dask worker`` processes replaced by a LocalCluster): item fan-out, cancellation
reaching the worker process, progress, artifacts and the cache on the server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def _local_cluster():
    """A LocalCluster of two one-thread worker processes on loopback, and its client."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env={"SPU_INPUT_ROOTS": "/"},  # the workers' own rule would let any file through
        ) as local,
        Client(local) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def cluster_env(tmp_path_factory):
    """What the Dask workers inherit when they start: the test tools on PYTHONPATH, a work folder of their
    own, and a weights folder (the ESM-2 test writes its model there)."""
    root = tmp_path_factory.mktemp("dask-cluster")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(HERE))
        mp.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
        mp.setenv("SPU_TOOL_MODULES", "spu_dask_tools")
        mp.setenv("SPU_WORKDIR", str(root / "work"))
        mp.setenv("SPU_CACHE_DIR", str(root / "cache"))
        mp.setenv("SPU_WARM_WORKERS", "0")  # as spu_env has it
        mp.setenv("SPU_WEIGHTS_DIR", str(root / "weights"))
        mp.setenv("TORCH_HOME", str(root / "torch_home"))
        mp.delenv("SPU_WEIGHTS_DOWNLOAD", raising=False)
        yield root


@pytest.fixture(scope="module")
def shared_client(cluster_env):
    """One cluster for the module's tests (a server's cluster outlives its jobs, too): starting one costs
    two Dask worker processes and their warm spu worker processes, about 10 s of CPU."""
    with _local_cluster() as client:
        yield client


def _executor_over(client):
    from tools_server.core.dispatch import Dispatcher
    from tools_server.core.jobs import JobManager
    from tools_server.core.jobs.dask import DaskExecutor
    from tools_server.core.registry import load_registry

    manager = JobManager(DaskExecutor(client=client))
    return Dispatcher(manager, registry=load_registry()), manager, client


def _busy(client) -> list[str]:
    """The tasks the scheduler has on its workers now."""
    return [key for keys in client.processing().values() for key in keys]


@pytest.fixture
def cluster(shared_client, spu_env):
    """A server (dispatcher and job manager, with this test's work folder and cache) on the shared cluster.
    Each test finds both workers free: at its end, a job it left is cancelled, and a task still on a worker
    30 s later (a test that failed midway) gets the workers restarted, as a cluster of its own would."""
    dispatcher, manager, client = _executor_over(shared_client)
    yield dispatcher, manager, client
    for job in list(manager.jobs.values()):
        if not job.done:
            manager.cancel(job.job_id)
    deadline = time.monotonic() + 30  # bounds the wait for the tasks to end; no speed is asserted
    while _busy(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left := _busy(client):
        print(f"restarting the Dask workers: tasks left on them {left}")
        client.restart()


@pytest.fixture
def own_cluster(cluster_env, spu_env):
    """A server on a cluster of its own, for a test about a cluster that has run nothing yet."""
    with _local_cluster() as client:
        yield _executor_over(client)


def _local_result(values: list[float]) -> list[dict]:
    from spu_dask_tools import ItemsInput, items_job

    from tools_server.core.context import ToolContext

    out = items_job(ItemsInput(values=values), ToolContext("dask_items", "local-reference", threads=1))
    return out["items"]


def test_a_batch_spreads_over_both_workers_with_per_item_errors_kept(cluster):
    dispatcher, _, _ = cluster
    values = [1, 2, 3, -1, 4, 5, 6, 7]
    out = asyncio.run(dispatcher.call("dask_items", {"values": values, "seconds": 0.3, "wait_s": 600}))
    items = out["items"]
    assert [it["value"] for it in items] == values  # input order
    assert out["n_ok"] == 7 and items[3] == {
        "ok": False,
        "value": -1,
        "error": {"code": "invalid_input", "message": "negative"},
    }
    assert len({it["pid"] for it in items if it["ok"]}) == 2, "both Dask workers took items"
    local = _local_result(values)
    strip = lambda it: {k: v for k, v in it.items() if k not in ("pid", "file")}  # noqa: E731
    assert [strip(it) for it in items] == [strip(it) for it in local]
    # artifacts written by the chunks came back to the server's work directory
    work = Path(os.environ["SPU_WORKDIR"]).resolve()
    for it in items[:3]:
        path = Path(it["file"])
        assert path.resolve().is_relative_to(work), path
        assert path.read_text() == f"{it['value'] ** 2}\n"


def _idle_processes(dask_worker) -> tuple[int, int]:
    from tools_server.core.jobs import dask as spu_dask

    return tuple(sum(1 for p in spu_dask._idle[role] if p.alive()) for role in ("job", "items"))


def test_each_dask_worker_has_worker_processes_waiting_before_its_first_job(own_cluster):
    """The executor starts one worker process for jobs and one for batch items on every Dask worker when it
    connects, so neither a Dask worker's first job nor its first chunk of a batch waits for one (about 0.4 s
    each)."""
    _, _, client = own_cluster
    deadline = time.monotonic() + 60  # bounds the wait for four process starts; no speed is asserted
    counts: dict = {}
    while time.monotonic() < deadline:
        counts = client.run(_idle_processes)
        if len(counts) == 2 and all(n == (1, 1) for n in counts.values()):
            break
        time.sleep(0.2)
    assert len(counts) == 2 and all(tuple(n) == (1, 1) for n in counts.values()), counts


def test_a_repeated_batch_is_a_cache_hit_written_by_the_server(cluster):
    dispatcher, _, _ = cluster
    args = {"values": [1, 2, 3], "seconds": 0, "wait_s": 600}
    first = asyncio.run(dispatcher.call("dask_items", args))
    again = asyncio.run(dispatcher.call("dask_items", args))
    assert first["provenance"]["cache"] == "miss" and again["provenance"]["cache"] == "hit"
    assert again["items"] == first["items"]


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not; nor does a process reaped while its state is read)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_cancel_stops_the_worker_process_and_frees_the_worker(cluster, tmp_path):
    dispatcher, manager, _ = cluster

    async def scenario():
        holds = []
        for i in range(2):  # one per Dask worker: both are busy
            pid_file = tmp_path / f"hold-{i}.pid"
            out = await dispatcher.call("dask_hold", {"pid_file": str(pid_file), "seconds": 300, "wait_s": 0})
            holds.append((out["job_id"], pid_file))
        deadline = time.monotonic() + 60
        while not all(p.exists() for _, p in holds) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        pids = [int(p.read_text()) for _, p in holds]
        while True:  # the progress report reaches the server through the Dask variable
            status = manager.lookup(holds[0][0]).status_payload()
            if status.get("progress") == 0.5 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        cancelled_at = time.monotonic()
        for job_id, _ in holds:
            manager.cancel(job_id)
        while any(_alive(pid) for pid in pids) and time.monotonic() - cancelled_at < 30:
            await asyncio.sleep(0.05)
        stopped_s = time.monotonic() - cancelled_at
        quick = await dispatcher.call("dask_items", {"values": [9], "seconds": 0, "wait_s": 60})
        return status, pids, stopped_s, quick, time.monotonic() - cancelled_at

    status, pids, stopped_s, quick, freed_s = asyncio.run(scenario())
    assert status["status"] == "running" and status["progress"] == 0.5 and status["message"] == "holding"
    assert not any(_alive(pid) for pid in pids)
    # no-hang bounds, not speeds: without the kill the holds would run for 300 s
    assert stopped_s < 30 and quick["items"][0]["square"] == 81 and freed_s < 60


def _scheduler_events(dask_scheduler) -> list[str]:
    return list(dask_scheduler.extensions["events"]._events)


def test_the_cancel_events_of_ended_jobs_are_cleared_on_the_scheduler(cluster, tmp_path, monkeypatch):
    """A cancel sets the job's Dask event, which the scheduler would keep for good (one per cancelled or
    failed job, for the life of the cluster): it is cleared EVENT_TTL_S later (2 s here), at the next job
    that does not end well."""
    from tools_server.core.jobs import dask as spu_dask

    monkeypatch.setattr(spu_dask, "EVENT_TTL_S", 2.0, raising=False)
    dispatcher, manager, client = cluster

    def hold_and_cancel(name: str) -> str:
        pid_file = tmp_path / f"{name}.pid"
        args = {"pid_file": str(pid_file), "seconds": 300, "wait_s": 0}
        job_id = asyncio.run(dispatcher.call("dask_hold", args))["job_id"]
        deadline = time.monotonic() + 60  # bounds the wait for the job to start
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        manager.cancel(job_id)
        assert _gone_within([int(pid_file.read_text())], 30)
        while manager.lookup(job_id).status == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        return job_id

    first = hold_and_cancel("first")
    assert f"spu-cancel-{first}" in client.run_on_scheduler(_scheduler_events)
    time.sleep(2.5)
    second = hold_and_cancel("second")
    events = client.run_on_scheduler(_scheduler_events)
    assert f"spu-cancel-{first}" not in events, "the first job's event outlived its time"
    assert f"spu-cancel-{second}" in events  # not yet due: its task and chunks may still read it


def _item_pids(pid_dir: Path, n: int) -> list[int]:
    deadline = time.monotonic() + 60  # bounds the wait for the items to start
    while len(list(pid_dir.glob("*.pid"))) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    return [int(p.read_text()) for p in sorted(pid_dir.glob("*.pid"))]


def _gone_within(pids: list[int], bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(pid) for pid in pids)


def test_cancelling_a_batch_stops_the_processes_running_its_items(cluster, tmp_path):
    """A cancel reaches the items that are running, not only those after them: each chunk runs in a worker
    process the Dask worker kills (it used to run in the Dask worker's thread, which computed on)."""
    dispatcher, manager, _ = cluster
    args = {"values": [1, 2], "pid_dir": str(tmp_path), "seconds": 300, "wait_s": 0}
    job_id = asyncio.run(dispatcher.call("dask_items_hold", args))["job_id"]
    pids = _item_pids(tmp_path, 2)
    assert len(pids) == 2 and os.getpid() not in pids
    manager.cancel(job_id)
    # no-hang bounds, not speeds: without the kill the items would sleep for 300 s
    assert _gone_within(pids, 30), "the processes running the items outlived the cancel"
    quick = asyncio.run(dispatcher.call("dask_items", {"values": [3, 4], "seconds": 0, "wait_s": 60}))
    assert [it["square"] for it in quick["items"]] == [9, 16]


def test_a_batch_out_of_time_stops_the_processes_running_its_items(cluster, tmp_path):
    """The job's time limit (4 s here) stops the chunks as well: their processes are killed, and the job ends
    as ``timeout``."""
    dispatcher, manager, _ = cluster
    args = {"values": [1, 2], "pid_dir": str(tmp_path), "seconds": 300, "wait_s": 0}
    job_id = asyncio.run(dispatcher.call("dask_items_brief", args))["job_id"]
    pids = _item_pids(tmp_path, 2)
    assert len(pids) == 2
    assert _gone_within(pids, 60), "the processes running the items outlived the job's time limit"
    deadline = time.monotonic() + 60
    job = manager.lookup(job_id)
    while job.status == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.status == "error" and job.error["code"] == "timeout", (job.status, job.error)


def test_a_crash_in_an_item_fails_the_call_and_the_dask_workers_live_on(cluster):
    """A native crash in an item kills the worker process running its chunk, not the Dask worker: the call
    fails as ``engine_crashed`` and the same Dask workers take the next call."""
    from tools_server.core.errors import ToolError

    dispatcher, _, client = cluster
    workers = set(client.scheduler_info()["workers"])
    with pytest.raises(ToolError) as err:
        asyncio.run(dispatcher.call("dask_items_crash", {"values": [1, -1, 2], "wait_s": 120}))
    assert err.value.code == "engine_crashed", err.value.to_dict()
    quick = asyncio.run(dispatcher.call("dask_items", {"values": [5, 6], "seconds": 0, "wait_s": 60}))
    assert [it["square"] for it in quick["items"]] == [25, 36]
    assert set(client.scheduler_info()["workers"]) == workers, "a Dask worker was lost and replaced"


def test_a_batch_that_fails_stops_its_other_items(own_cluster, tmp_path):
    """When one item's crash fails the call, the items still running in other chunks are stopped as well
    (they used to run to their end, holding their Dask workers). On a cluster of its own: on one that ran
    the tests before it, the scheduler may queue both chunks on one worker, behind the item that holds."""
    from tools_server.core.errors import ToolError

    dispatcher, _, _ = own_cluster
    with pytest.raises(ToolError) as err:
        args = {"values": [1, -1], "pid_dir": str(tmp_path), "seconds": 300, "wait_s": 120}
        asyncio.run(dispatcher.call("dask_items_crash_held", args))
    assert err.value.code == "engine_crashed", err.value.to_dict()
    pids = _item_pids(tmp_path, 1)
    assert len(pids) == 1
    # a no-hang bound, not a speed: without the stop the item would sleep for 300 s
    assert _gone_within(pids, 30), "the process running the other item outlived the failed call"


def test_an_item_over_the_jobs_memory_limit_is_stopped(cluster, monkeypatch):
    """The job's memory limit (the server's SPU_JOB_MEMORY_MB, 500 MiB, set after the Dask workers started,
    so it can only reach them with the job) holds for the processes running its items too: an item that
    takes 1.5 GiB is killed and the call fails as ``engine_crashed`` (the items used to run to their end,
    as large as they grew), while the same batch within the limit comes back whole."""
    from tools_server.core.errors import ToolError

    monkeypatch.setenv("SPU_JOB_MEMORY_MB", "500")
    dispatcher, _, _ = cluster
    small = asyncio.run(dispatcher.call("dask_items_hog", {"values": [1, 2], "megabytes": 50, "wait_s": 120}))
    assert [it["megabytes"] for it in small["items"]] == [50, 50]
    with pytest.raises(ToolError) as err:  # without the limit the items hold for 60 s and come back whole
        args = {"values": [1, 2], "megabytes": 1536, "seconds": 60, "wait_s": 120}
        asyncio.run(dispatcher.call("dask_items_hog", args))
    assert err.value.code == "engine_crashed", err.value.to_dict()
    assert err.value.details["memory_limit_mb"] == 500 and err.value.details["memory_mb"] > 500
    quick = asyncio.run(dispatcher.call("dask_items", {"values": [5, 6], "seconds": 0, "wait_s": 60}))
    assert [it["square"] for it in quick["items"]] == [25, 36]


def test_doctor_reports_the_scheduler_and_its_workers(cluster, monkeypatch):
    from tools_server.commands.doctor import run_doctor

    _, _, client = cluster
    monkeypatch.setenv("SPU_EXECUTOR", "dask")
    monkeypatch.setenv("SPU_DASK_SCHEDULER", client.scheduler.address)
    check = run_doctor(only=["executor"])["checks"][0]
    assert check["status"] == "ok" and "2 worker(s), 2 thread(s)" in check["detail"]
    assert [w["threads"] for w in check["facts"]["workers"]] == [1, 1]


def test_doctor_fails_on_an_unreachable_scheduler(spu_env, monkeypatch):
    import socket

    from tools_server.commands.doctor import run_doctor

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SPU_EXECUTOR", "dask")
    monkeypatch.setenv("SPU_DASK_SCHEDULER", f"tcp://127.0.0.1:{port}")
    summary = run_doctor(only=["executor"], timeout_s=3)
    assert summary["ok"] is False and summary["checks"][0]["status"] == "fail"
    assert f"127.0.0.1:{port}" in summary["checks"][0]["detail"]


def test_files_are_checked_and_read_by_the_server_and_sent_as_content(cluster, tmp_path):
    import hashlib

    from tools_server.core.errors import ToolError

    dispatcher, _, _ = cluster
    work = Path(os.environ["SPU_WORKDIR"])
    inside = work / "inputs" / "data.txt"
    inside.parent.mkdir(parents=True, exist_ok=True)
    inside.write_bytes(b"measured on the server's machine\n")
    out = asyncio.run(dispatcher.call("dask_read", {"path": str(inside), "wait_s": 600}))
    assert out["sha256"] == hashlib.sha256(inside.read_bytes()).hexdigest()
    assert not Path(out["path"]).resolve().is_relative_to(work.resolve()), "the worker read its own copy"
    outside = tmp_path / "elsewhere" / "secret.txt"  # outside the server's roots, inside the workers'
    outside.parent.mkdir()
    outside.write_text("not for the cluster")
    with pytest.raises(ToolError) as info:
        asyncio.run(dispatcher.call("dask_read", {"path": str(outside)}))
    assert info.value.code == "invalid_input"


def test_batch_tools_give_the_local_result_item_for_item(cluster, monkeypatch):
    """chem_conformers and mlip_run declare their items too: on the cluster the molecules are tasks, and
    each item equals the one the tool computes in one process (paths aside)."""
    from tools_server.chem.tools import ConformerInput, chem_conformers
    from tools_server.core.context import ToolContext

    dispatcher, _, _ = cluster
    args = {"molecules": ["CCO", "c1ccccc1O", "CC(=O)O", "not a molecule"], "n_conformers": 4, "seed": 7}
    remote = asyncio.run(dispatcher.call("chem_conformers", {**args, "wait_s": 600}))
    local = chem_conformers.__spu_tool__.call(  # what the server sends of the one-process result
        ConformerInput(**args), ToolContext("chem_conformers", "local-conformers", threads=1)
    )
    strip = lambda rows: [{k: v for k, v in r.items() if k != "sdf"} for r in rows]  # noqa: E731
    assert strip(remote["items"]) == strip(local["items"])
    assert [r["ok"] for r in remote["items"]] == [True, True, True, False]
    for row in remote["items"][:3]:
        assert Path(row["sdf"]).resolve().is_relative_to(Path(os.environ["SPU_WORKDIR"]).resolve())
        assert Path(row["sdf"]).read_text().count("$$$$") == row["n_conformers"]


def test_mlip_tools_on_the_cluster_equal_one_process(cluster):
    """SevenNet-0 (its weights ship in the sevenn wheel): energies of a batch on the cluster, item for item
    the one-process result; then mlip_conformers on the same cluster (its workers have the model loaded):
    each conformer's optimisation is a task, and energies, ranks and the SDF equal the one-process result."""
    pytest.importorskip("sevenn")
    from tools_server.core.context import ToolContext
    from tools_server.mlip.tools import MlipConformersInput, MlipInput, mlip_conformers, mlip_run

    dispatcher, _, _ = cluster
    args = {"molecules": ["O", "CCO", "[Og]", "C"], "engine": "sevennet", "task": "energy"}
    remote = asyncio.run(dispatcher.call("mlip_run", {**args, "wait_s": 600}))
    assert "status" not in remote, remote  # finished, not still running (the default wait is 40 s)
    local = mlip_run.__spu_tool__.call(MlipInput(**args), ToolContext("mlip_run", "local-mlip", threads=1))
    assert [it["ok"] for it in remote["items"]] == [True, True, False, True]
    assert remote["items"][2]["error"]["code"] == "unsupported_element"
    for r, loc in zip(remote["items"], local["items"], strict=True):
        if r["ok"]:
            assert r["energy_ev"] == pytest.approx(loc["energy_ev"], abs=1e-6)

    args = {"molecule": "CCCO", "n_conformers": 3, "engine": "sevennet", "fmax_ev_a": 0.2, "max_steps": 25}
    remote, tasks = _on_cluster(cluster, "mlip_conformers", args)
    local = mlip_conformers.__spu_tool__.call(
        MlipConformersInput(**args), ToolContext("mlip_conformers", "local-mc", threads=1)
    )
    assert remote["n_conformers"] >= 2 and len(tasks) == remote["n_conformers"], "one task per conformer"
    assert [c["input_index"] for c in remote["conformers"]] == [c["input_index"] for c in local["conformers"]]
    for r, loc in zip(remote["conformers"], local["conformers"], strict=True):
        assert r["energy_hartree"] == pytest.approx(loc["energy_hartree"], abs=4e-7)  # 1e-5 eV
        assert r["n_steps"] == loc["n_steps"] and r["converged"] == loc["converged"]
    assert _under_workdir(remote["sdf"])
    assert Path(remote["sdf"]).read_text().count("$$$$") == remote["n_unique"]


# --------------------------------------------------------------------------------------------------
# The other batch tools that declare their items: one call on the cluster against one process
# --------------------------------------------------------------------------------------------------


def _on_cluster(cluster, tool: str, args: dict):
    """The result of one call of ``tool`` through the Dask executor, and the item tasks (``run_chunk``)
    the scheduler ran meanwhile."""
    from distributed import get_task_stream

    dispatcher, _, client = cluster
    with get_task_stream(client=client) as stream:
        out = asyncio.run(dispatcher.call(tool, {**args, "wait_s": 600}))
    assert "status" not in out, out  # finished, not still running
    return out, [t for t in stream.data if str(t["key"]).startswith("run_chunk")]


def _under_workdir(path: str) -> bool:
    return Path(path).resolve().is_relative_to(Path(os.environ["SPU_WORKDIR"]).resolve())


def test_xtb_conformers_spreads_its_conformers_and_ranks_them_as_one_process(cluster):
    """The conformers of one molecule (items="n_conformers") are tasks, one each; the ensemble (energies,
    duplicates, Boltzmann weights) equals the one-process result."""
    pytest.importorskip("tblite")
    from tools_server.core.context import ToolContext
    from tools_server.qc.tools import XtbConformerInput, xtb_conformers

    args = {"molecule": "CCCC", "n_conformers": 4, "seed": 3, "max_steps": 100}
    remote, tasks = _on_cluster(cluster, "xtb_conformers", args)
    local = xtb_conformers.__spu_tool__.call(  # what the server sends of the one-process result
        XtbConformerInput(**args), ToolContext("xtb_conformers", "local-xc", threads=1)
    )
    assert remote["n_conformers"] >= 2 and len(tasks) == remote["n_conformers"], "one task per conformer"
    for key in ("n_conformers", "n_optimised", "n_failed", "n_duplicates", "n_unique"):
        assert remote[key] == local[key], key
    assert remote["lowest_energy_hartree"] == pytest.approx(local["lowest_energy_hartree"], abs=1e-8)
    for r, loc in zip(remote["conformers"], local["conformers"], strict=True):
        assert r["energy_hartree"] == pytest.approx(loc["energy_hartree"], abs=1e-8)
        assert r["boltzmann_weight"] == pytest.approx(loc["boltzmann_weight"], abs=1e-6)
        assert r["converged"] == loc["converged"]
    assert (
        _under_workdir(remote["sdf"]) and Path(remote["sdf"]).read_text().count("$$$$") == remote["n_unique"]
    )


def test_dock_spreads_its_ligands_with_per_item_errors_kept(cluster):
    """The ligands of one receptor and box are tasks, one each (the receptor prepared once, shared); scores,
    RMSDs to the reference residue and the per-item error equal the one-process result."""
    pytest.importorskip("vina")
    pytest.importorskip("meeko")
    pytest.importorskip("pdbfixer")
    from tools_server.core.context import ToolContext
    from tools_server.dock.tools import DockInput, dock

    receptor = (HERE.parent / "dock" / "data" / "t4l99a_pxylene.pdb").read_text()
    args = {
        "ligands": ["Cc1ccc(C)cc1", "C1CC", "c1ccccc1"],
        "receptor_text": receptor,
        "box_ligand": "TMP",
        "exhaustiveness": 1,
        "n_poses": 2,
        "seed": 11,
    }
    remote, tasks = _on_cluster(cluster, "dock", args)
    local = dock.__spu_tool__.call(DockInput(**args), ToolContext("dock", "local-dock", threads=1))
    assert len(tasks) == 3, "one task per ligand"
    assert [r["ok"] for r in remote["ligands"]] == [True, False, True]
    assert remote["ligands"][1]["error"]["code"] == local["ligands"][1]["error"]["code"] == "invalid_smiles"
    assert remote["n_ok"] == local["n_ok"] == 2 and remote["box"] == local["box"]
    for r, loc in zip(remote["ligands"], local["ligands"], strict=True):
        if not r["ok"]:
            continue
        assert r["smiles"] == loc["smiles"] and len(r["poses"]) == len(loc["poses"])
        for p, q in zip(r["poses"], loc["poses"], strict=True):
            assert p["vina_score_kcal_mol"] == pytest.approx(q["vina_score_kcal_mol"], abs=1e-3)
            assert p.get("rmsd_to_reference_angstrom") == pytest.approx(
                q.get("rmsd_to_reference_angstrom"), abs=1e-3
            )
        assert _under_workdir(r["poses_sdf"])
        assert Path(r["poses_sdf"]).read_text().count("$$$$") == len(r["poses"])
    assert "rmsd_to_reference_angstrom" in remote["ligands"][0]["poses"][0]


@pytest.fixture
def esm_weights(cluster_env):
    """A tiny random ESM-2 in the cluster's SPU_WEIGHTS_DIR, which its workers had when they started."""
    pytest.importorskip("torch")
    pytest.importorskip("esm")
    from tools_server.protein import weights

    weights._load_esm_cached.cache_clear()
    weights.save_random_esm2(cluster_env / "weights" / "esm" / "esm2_t2_dask_test.pt")
    return "esm2_t2_dask_test"


WT = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQ"


def test_protein_tools_spread_their_items_as_one_process(esm_weights, cluster):
    """protein_variant_scores (11 mutated positions: two runs of model batches) and protein_embed (10
    sequences: two runs) on the cluster: two tasks each, and the numbers of one process."""
    from tools_server.core.context import ToolContext
    from tools_server.protein.tools import (
        ProteinEmbedInput,
        VariantScoresInput,
        protein_embed,
        protein_variant_scores,
    )

    singles = [f"{WT[p - 1]}{p}{'W' if WT[p - 1] != 'W' else 'A'}" for p in range(2, 46, 4)]
    args = {"wild_type": WT, "variants": [*singles, "K2E:T3S", "Z9A", "WT"], "model": esm_weights}
    remote, tasks = _on_cluster(cluster, "protein_variant_scores", args)
    local = protein_variant_scores.__spu_tool__.call(  # what the server sends of the one-process result
        VariantScoresInput(**args), ToolContext("pvs", "local-pvs", threads=1)
    )
    assert len(tasks) == 2, "12 positions: two runs of 8 forward passes at most"
    assert [it["ok"] for it in remote["items"]] == [it["ok"] for it in local["items"]]
    assert remote["items"][12]["error"]["code"] == local["items"][12]["error"]["code"] == "invalid_mutation"
    for r, loc in zip(remote["items"], local["items"], strict=True):
        if r["ok"]:
            assert r["score"] == pytest.approx(loc["score"], abs=1e-4)
    assert remote["items"][13]["score"] == 0.0
    assert remote["ranking_high_to_low"] == local["ranking_high_to_low"]

    seqs = [WT[k : k + 20 + k] for k in range(10)]
    eargs = {"sequences": seqs, "model": esm_weights}
    remote, tasks = _on_cluster(cluster, "protein_embed", eargs)
    local = protein_embed.__spu_tool__.call(
        ProteinEmbedInput(**eargs), ToolContext("protein_embed", "local-pe", threads=1)
    )
    assert len(tasks) == 2, "10 sequences: two runs of 8 at most"
    assert remote["norms"] == pytest.approx(local["norms"], abs=1e-4)
    assert np.allclose(remote["cosine_similarity"], local["cosine_similarity"], atol=1e-4)
    emb = np.load(remote["artifacts"]["embeddings_npy"])
    assert _under_workdir(remote["artifacts"]["embeddings_npy"]) and emb.shape == (10, 32)
    assert np.allclose(emb, np.load(local["artifacts"]["embeddings_npy"]), atol=1e-5)
