"""CPU reservations, warm workers and a lazy start-up, through the real server and executor.

Timings are never asserted here (bench/ measures them); these tests check the behaviour that makes them
possible: how many cores a job gets and with whom it runs, what a worker imported before its first job,
and what the server imports before it answers ``initialize``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path

import pytest
from pydantic import BaseModel

from tools_server.core.jobs.local import SEND_AT_ONCE_BYTES, CoreBudget, LocalExecutor
from tools_server.core.jobs.model import Job
from tools_server.core.registry import tool

HERE = Path(__file__).resolve().parent


@pytest.fixture
def perf_env(spu_env, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_perf_tools")
    monkeypatch.setenv("SPU_CPU_SLOTS", "2")
    return dict(os.environ)


def _run_together(server, calls: list[tuple[str, dict]]) -> list[dict]:
    """Submit every call at once (wait_s=0), then wait for each; returns their results in order."""
    ids = []
    for name, args in calls:
        out = server.call_ok(name, {**args, "wait_s": 0})
        ids.append(out.get("job_id") or out["provenance"]["job_id"])
    return [server.call_ok("job_wait", {"job_id": job_id, "wait_s": 60}) for job_id in ids]


def _overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_single_core_jobs_get_one_thread_and_share_the_machine(perf_env, start_mcp_server, tmp_path):
    # Before reservations every job was handed all cores (ctx.threads == cpu count), so two jobs
    # oversubscribed a 2-core machine.
    server = start_mcp_server(perf_env)
    meet = {"meet_dir": str(tmp_path), "seconds": 0}
    a, b = _run_together(
        server,
        [
            ("perf_single", {**meet, "tag": "a", "meet": "b"}),
            ("perf_single", {**meet, "tag": "b", "meet": "a"}),
        ],
    )
    assert a["threads"] == 1 and b["threads"] == 1
    assert a["pid"] != b["pid"]
    assert a["met"] and b["met"], "two single-core jobs on two cores should run at the same time"


def test_an_all_cores_job_never_runs_beside_another(perf_env, start_mcp_server):
    server = start_mcp_server(perf_env)
    whole, single, three = _run_together(
        server,
        [("perf_all", {"tag": "all"}), ("perf_single", {"tag": "one"}), ("perf_three", {"tag": "three"})],
    )
    assert whole["threads"] == 2  # SPU_CPU_SLOTS=2
    assert three["threads"] == 2  # a number above the machine's cores is capped at them
    assert single["threads"] == 1
    assert not _overlap(whole, single) and not _overlap(whole, three) and not _overlap(single, three)


def test_reservation_can_depend_on_the_input(perf_env, start_mcp_server):
    server = start_mcp_server(perf_env)
    one = server.call_ok("perf_batch", {"seconds": 0, "n": 1, "wait_s": 60})
    many = server.call_ok("perf_batch", {"seconds": 0, "n": 5, "wait_s": 60})
    assert (one["threads"], many["threads"]) == (1, 2)


class In(BaseModel):
    x: int = 0


def test_threads_declaration_is_checked():
    for bad in ("some", 0, -2, 1.5, True):
        with pytest.raises(ValueError, match="threads must be"):
            tool(name="perf_bad", resource="cpu", threads=bad)

    @tool(name="perf_fn", resource="cpu", threads=lambda args: "many" if args.x else 2)
    def fn(args: In) -> dict:
        """Doc."""
        return {}

    spec = fn.__spu_tool__
    assert spec.threads_for(In(x=0)) == 2
    with pytest.raises(ValueError, match="threads must be"):
        spec.threads_for(In(x=1))


def test_core_budget_grants_in_order_and_never_over_total():
    budget = CoreBudget(2)
    in_use, peak, order = [0], [0], []
    lock = threading.Lock()

    def job(name: str, cores: int, delay: float) -> None:
        time.sleep(delay)
        assert budget.acquire(cores)
        with lock:
            in_use[0] += cores
            peak[0] = max(peak[0], in_use[0])
            order.append(name)
        time.sleep(0.15)
        with lock:
            in_use[0] -= cores
        budget.release(cores)

    threads = [
        threading.Thread(target=job, args=("one-a", 1, 0.0)),
        threading.Thread(target=job, args=("all", 2, 0.05)),  # waits for one-a; one-b may not pass it
        threading.Thread(target=job, args=("one-b", 1, 0.1)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] <= 2
    assert order == ["one-a", "all", "one-b"]
    assert budget.free == 2
    assert budget.cores_for("all") == 2 and budget.cores_for(5) == 2 and budget.cores_for(1) == 1


def test_core_budget_wait_ends_on_cancel():
    budget = CoreBudget(1)
    assert budget.acquire(1)
    flag = threading.Event()
    threading.Timer(0.2, flag.set).start()
    assert budget.acquire(1, flag.is_set) is False
    budget.release(1)
    assert budget.free == 1


def test_warm_worker_has_imported_the_engines_before_the_first_job(perf_env, start_mcp_server):
    env = {**perf_env, "SPU_WARM_WORKERS": "1", "SPU_CPU_SLOTS": "1"}
    server = start_mcp_server(env)
    _wait_for_warm_up(env)
    out = server.call_ok("perf_warm_probe", {"wait_s": 60})
    assert out["imported"] == {"wave": True, "colorsys": True}


def _wait_for_warm_up(env: dict) -> None:
    logs = Path(env["SPU_WORKDIR"]) / "workers"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the worker says in its log when its warm-up imports are done
        if any("warm imports" in p.read_text() for p in logs.glob("cpu-0-*.log")):
            return
        time.sleep(0.2)
    pytest.fail("the worker never reported its warm-up imports")


def test_jobs_go_to_the_warm_worker_first(perf_env, start_mcp_server):
    # Two CPU slots, one warm worker. Before, idle slots took jobs in turn, so every second call landed on
    # the bare worker and paid the engine imports the warm one had already done.
    env = {**perf_env, "SPU_WARM_WORKERS": "1"}
    server = start_mcp_server(env)
    _wait_for_warm_up(env)
    calls = [server.call_ok("perf_warm_probe", {"wait_s": 60}) for _ in range(4)]
    assert [c["imported"] for c in calls] == [{"wave": True, "colorsys": True}] * 4
    assert len({c["pid"] for c in calls}) == 1


def test_cold_worker_imports_nothing_ahead(perf_env, start_mcp_server):
    server = start_mcp_server(perf_env)  # SPU_WARM_WORKERS=0 (tests' default)
    out = server.call_ok("perf_warm_probe", {"wait_s": 60})
    assert out["imported"] == {"wave": False, "colorsys": False}


def test_server_answers_initialize_before_loading_any_domain(spu_env):
    # The registry (every domain's tool modules) loads after start-up, so the first request does not
    # wait for the web, chemistry or quantum-chemistry modules.
    code = (
        "import sys\n"
        "from tools_server.core.server import SpuServer\n"
        "s = SpuServer()\n"
        "print(s.dispatcher._registry is None, 'tools_server.web.fetch' in sys.modules, "
        "'tools_server.qc.tools' in sys.modules)\n"
        "print('system_info' in s.dispatcher.registry.tools, 'xtb_run' in s.dispatcher.registry.tools)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=spu_env, check=True
    )
    assert out.stdout.split() == ["True", "False", "False", "True", "True"], out.stderr


# --- the local executor sends a job to an idle worker from the submitting thread ---------------------------


def _executor_job(tool: str, **params) -> Job:
    return Job(
        job_id=f"{tool}-{uuid.uuid4().hex[:10]}",
        tool=tool,
        module="spu_perf_tools",
        params={"seconds": 0.0, **params},
        resource="cpu",
        time_limit_s=60,
        memory_limit_mb=None,
    )


def _run(executor: LocalExecutor, job: Job) -> dict:
    """Submit ``job`` and wait for its payload (the finisher's argument)."""
    done: Future = Future()
    executor.submit(job, lambda j, payload: done.set_result(payload) or {})
    return done.result(timeout=60)


@pytest.fixture
def idle_executor(perf_env):
    """One CPU slot whose worker has run a job and waits for the next."""
    executor = LocalExecutor(cpu_slots=1, warm={"cpu": []}, warm_cpu_workers=0)
    assert "result" in _run(executor, _executor_job("perf_single", tag="first"))
    yield executor
    executor.shutdown()


def test_a_job_for_an_idle_worker_is_on_its_way_when_submit_returns(idle_executor):
    # Before, the slot's thread had to wake up to send the job: submit returned with the job queued, and
    # a trivial job's dispatch paid one more thread hand-off before the worker could start.
    job = _executor_job("perf_single", tag="second")
    done: Future = Future()
    idle_executor.submit(job, lambda j, payload: done.set_result(payload) or {})
    assert job.status == "running" and job.started is not None
    assert done.result(timeout=60)["result"]["tag"] == "second"
    assert idle_executor.cores.free == 1  # the reservation taken at submit time was given back


def test_a_large_job_is_sent_by_the_slot_thread(idle_executor):
    # over SEND_AT_ONCE_BYTES the event loop must not write it (the pipe could block): same result
    job = _executor_job("perf_single", tag="x" * (SEND_AT_ONCE_BYTES + 10))
    done: Future = Future()
    idle_executor.submit(job, lambda j, payload: done.set_result(payload) or {})
    assert done.result(timeout=60)["result"]["tag"] == job.params["tag"]
    assert idle_executor.cores.free == 1


def test_a_worker_that_died_while_idle_costs_the_next_job_nothing(idle_executor):
    pid = _run(idle_executor, _executor_job("perf_single", tag="pid"))["result"]["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    # until the worker can be waited for (WNOWAIT: left for the executor to reap), every thread gone
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        assert time.monotonic() < deadline, "the killed worker did not exit"
        time.sleep(0.01)
    payload = _run(idle_executor, _executor_job("perf_single", tag="after"))
    assert "result" in payload, payload
    assert payload["result"]["tag"] == "after" and payload["result"]["pid"] != pid


def test_a_finisher_that_fails_ends_the_job_and_the_slot_lives_on(idle_executor, tmp_path):
    # Before, an exception other than ToolError while finishing a result (say, the artifact folder not
    # writable) ended the slot's thread: the job never finished and its caller waited until wait_s.
    import spu_perf_tools

    from tools_server.core.jobs.manager import JobManager
    from tools_server.core.jobs.store import JobStore
    from tools_server.core.registry import tools_in_module

    (spec,) = [s for s in tools_in_module(spu_perf_tools) if s.name == "perf_single"]
    manager = JobManager(executor=idle_executor, store=JobStore(tmp_path / "jobs"))

    def broken(job: Job, payload: dict) -> dict:
        raise OSError("the artifact folder is not writable")

    job = manager.submit(spec, {"seconds": 0.0}, broken)
    assert job._done.wait(30), "the job never finished"
    assert job.status == "error" and job.error["code"] == "internal_error"
    assert "not writable" in job.error["message"]
    assert manager.store.load(job.job_id)[0]["status"] == "error"
    again = manager.submit(spec, {"seconds": 0.0, "tag": "after"}, lambda j, payload: payload["result"])
    assert again._done.wait(30) and again.result["tag"] == "after"


def test_a_worker_that_cannot_be_started_fails_its_job_and_the_slot_lives_on(perf_env):
    # Before, an OSError from starting the worker process (here: no file descriptor left for its pipes)
    # ended the slot's thread: the job never finished and the slot took no more work.
    import gc
    import resource

    executor = LocalExecutor(cpu_slots=1)  # no warm workers: the first job starts one
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        gc.collect()  # files an earlier test left to the collector are closed now, not in the window below
        lowest_free = os.dup(0)  # a new descriptor takes the lowest free number: no new one below the limit
        os.close(lowest_free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
        try:
            payload = _run(executor, _executor_job("perf_single", tag="no-fds"))
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert payload["error"]["code"] == "engine_crashed"
        assert "failed to start" in payload["error"]["message"]
        assert "Too many open files" in payload["error"]["details"]["stderr_tail"]
        assert _run(executor, _executor_job("perf_single", tag="after"))["result"]["tag"] == "after"
    finally:
        executor.shutdown()
