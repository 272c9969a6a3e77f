"""The Dask executor on a LocalCluster of two one-thread workers on loopback (the documented setup, with
``dask scheduler`` and ``dask worker`` processes replaced by a LocalCluster): item fan-out, cancellation
reaching the worker process, progress, artifacts and the cache on the server."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(spu_env, monkeypatch):
    from distributed import Client, LocalCluster

    from tools_server.core.dispatch import Dispatcher
    from tools_server.core.jobs import JobManager
    from tools_server.core.jobs.dask import DaskExecutor
    from tools_server.core.registry import load_registry

    sys.path.insert(0, str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_dask_tools")
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
        manager = JobManager(DaskExecutor(client=client))
        yield Dispatcher(manager, registry=load_registry()), manager, client


def _local_result(values: list[float]) -> list[dict]:
    from spu_dask_tools import ItemsInput, items_job

    from tools_server.core.context import ToolContext

    out = items_job(ItemsInput(values=values), ToolContext("dask_items", "local-reference", threads=1))
    return out["items"]


def test_a_batch_spreads_over_both_workers_with_per_item_errors_kept(cluster):
    dispatcher, _, _ = cluster
    values = [1, 2, 3, -1, 4, 5, 6, 7]
    out = asyncio.run(dispatcher.call("dask_items", {"values": values, "seconds": 0.3}))
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


def test_a_repeated_batch_is_a_cache_hit_written_by_the_server(cluster):
    dispatcher, _, _ = cluster
    args = {"values": [1, 2, 3], "seconds": 0}
    first = asyncio.run(dispatcher.call("dask_items", args))
    again = asyncio.run(dispatcher.call("dask_items", args))
    assert first["provenance"]["cache"] == "miss" and again["provenance"]["cache"] == "hit"
    assert again["items"] == first["items"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split(")")[-1].split()[0] != "Z"


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
        await asyncio.sleep(1.0)  # a progress report reaches the server through the Dask variable
        status = manager.lookup(holds[0][0]).status_payload()
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


def test_doctor_reports_the_scheduler_and_its_workers(cluster, monkeypatch):
    from tools_server.core.doctor import run_doctor

    _, _, client = cluster
    monkeypatch.setenv("SPU_EXECUTOR", "dask")
    monkeypatch.setenv("SPU_DASK_SCHEDULER", client.scheduler.address)
    check = run_doctor(only=["executor"])["checks"][0]
    assert check["status"] == "ok" and "2 worker(s), 2 thread(s)" in check["detail"]
    assert [w["threads"] for w in check["facts"]["workers"]] == [1, 1]


def test_doctor_fails_on_an_unreachable_scheduler(spu_env, monkeypatch):
    import socket

    from tools_server.core.doctor import run_doctor

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
    out = asyncio.run(dispatcher.call("dask_read", {"path": str(inside)}))
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
    remote = asyncio.run(dispatcher.call("chem_conformers", args))
    local = chem_conformers(
        ConformerInput(**args), ToolContext("chem_conformers", "local-conformers", threads=1)
    )
    strip = lambda rows: [{k: v for k, v in r.items() if k != "sdf"} for r in rows]  # noqa: E731
    assert strip(remote["items"]) == strip(local["items"])
    assert [r["ok"] for r in remote["items"]] == [True, True, True, False]
    for row in remote["items"][:3]:
        assert Path(row["sdf"]).resolve().is_relative_to(Path(os.environ["SPU_WORKDIR"]).resolve())
        assert Path(row["sdf"]).read_text().count("$$$$") == row["n_conformers"]


def test_mlip_run_on_the_cluster_equals_one_process(cluster):
    """SevenNet-0 (its weights ship in the sevenn wheel): energies of a batch on the cluster, item for item
    the one-process result."""
    pytest.importorskip("sevenn")
    from tools_server.core.context import ToolContext
    from tools_server.mlip.tools import MlipInput, mlip_run

    dispatcher, _, _ = cluster
    args = {"molecules": ["O", "CCO", "[Og]", "C"], "engine": "sevennet", "task": "energy"}
    remote = asyncio.run(dispatcher.call("mlip_run", args))
    local = mlip_run(MlipInput(**args), ToolContext("mlip_run", "local-mlip", threads=1))
    assert [it["ok"] for it in remote["items"]] == [True, True, False, True]
    assert remote["items"][2]["error"]["code"] == "unsupported_element"
    for r, loc in zip(remote["items"], local["items"], strict=True):
        if r["ok"]:
            assert r["energy_ev"] == pytest.approx(loc["energy_ev"], abs=1e-6)
