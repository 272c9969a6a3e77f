"""The job manager through the real MCP client: results, polling, progress, limits, crashes, restarts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st


def test_quick_job_returns_result_with_provenance(job_server):
    out = job_server.call_ok("test_square", {"x": 3})
    assert out["square"] == 9
    prov = out["provenance"]
    assert prov["tool"] == "test_square" and prov["cache"] == "miss"
    assert prov["device"] == "cpu" and prov["job_id"].startswith("test_square-")
    assert out["pid"] != os.getpid()  # ran in a worker process


def test_cache_hit_on_second_call(job_server):
    first = job_server.call_ok("test_square", {"x": 5})
    second = job_server.call_ok("test_square", {"x": 5})
    assert first["provenance"]["cache"] == "miss"
    assert second["provenance"]["cache"] == "hit"
    assert second["square"] == 25 and second["provenance"]["input_hash"] == first["provenance"]["input_hash"]


def test_long_job_returns_running_then_job_wait(job_server):
    out = job_server.call_ok("test_sleep", {"seconds": 3, "wait_s": 0.5})
    # queued while a worker is still starting (a loaded machine), running once it has the job
    assert out["status"] in ("queued", "running") and out["job_id"].startswith("test_sleep-")
    assert 0 <= out["progress"] < 1
    listed = job_server.call_ok("jobs")["jobs"]
    assert any(j["job_id"] == out["job_id"] and j["status"] in ("queued", "running") for j in listed)
    done = job_server.call_ok("job_wait", {"job_id": out["job_id"], "wait_s": 30})
    assert done["slept_s"] == 3


def test_progress_notifications_reach_the_client(job_server):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    out = job_server.call_ok("test_sleep", {"seconds": 3, "steps": 6, "tag": "p"}, progress=on_progress)
    assert out["slept_s"] == 3
    assert len(seen) >= 2, seen
    assert all(0 <= p <= 1 for p, _ in seen) and any(m and m.startswith("step") for _, m in seen)


def test_a_finished_job_keeps_no_progress_note(job_server):
    """jobs() showed a done job with its last note ("7 of 8 ...") as if it were still at that step."""
    pending = job_server.call_ok("test_sleep", {"seconds": 0.6, "steps": 4, "tag": "note", "wait_s": 0})
    job_server.call_ok("job_wait", {"job_id": pending["job_id"], "wait_s": 60})
    (row,) = [j for j in job_server.call_ok("jobs")["jobs"] if j["job_id"] == pending["job_id"]]
    assert row["status"] == "done" and row["progress"] == 1.0 and row["message"] is None


def test_timeout_kills_the_whole_process_group(job_server):
    err = job_server.call_error("test_spawn_child", {"seconds": 60, "wait_s": 20})
    assert err["code"] == "timeout"
    workdir = Path(job_server.env["SPU_WORKDIR"])
    pid = int(next(workdir.glob("artifacts/test_spawn_child/*/child.pid")).read_text())
    time.sleep(0.5)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("how,signal_name", [("segfault", "SIGSEGV"), ("abort", "SIGABRT")])
def test_native_crash_becomes_engine_crashed(job_server, how, signal_name):
    err = job_server.call_error("test_crash", {"how": how})
    assert err["code"] == "engine_crashed"
    assert signal_name in err["message"]
    assert "about to crash" in err["details"]["stderr_tail"]
    # the server keeps answering and a fresh worker takes the next job
    assert job_server.call_ok("test_square", {"x": 7})["square"] == 49


def test_a_worker_that_loses_its_pipe_and_hangs_is_stopped(job_server):
    # Before, waiting 5 s for such a worker to exit raised in the slot's thread: the thread ended, the job
    # never finished (its caller waited until wait_s) and the slot took no more work.
    err = job_server.call_error("test_crash", {"how": "hang_without_pipe", "wait_s": 60})
    assert err["code"] == "engine_crashed"
    assert "closed its result pipe and did not exit" in err["message"]
    assert job_server.call_ok("test_square", {"x": 7})["square"] == 49


def test_memory_limit_stops_the_job(job_server):
    err = job_server.call_error("test_allocate", {"megabytes": 600, "hold_s": 10})
    assert err["code"] == "engine_crashed"
    assert "memory limit of 300 MiB" in err["message"]
    assert job_server.call_ok("test_allocate", {"megabytes": 50, "hold_s": 0})["allocated_mb"] == 50


@given(limit=st.integers(1, 2**20), over=st.floats(0, 2**20, exclude_min=True, allow_nan=False))
def test_a_job_over_its_memory_limit_is_said_to_use_more_than_the_limit(limit, over):
    """Whatever the excess, the figure the error reports is over the limit (a job at 500.3 MiB under a
    500 MiB limit was said to have used "500 MiB, over its memory limit of 500 MiB")."""
    from tools_server.core.jobs.local import over_memory

    rss = limit + over
    assume(rss > limit)
    err = over_memory(rss, limit).to_dict()
    assert err["code"] == "engine_crashed"
    assert err["details"]["memory_mb"] > limit and err["details"]["memory_limit_mb"] == limit
    used = int(err["message"].split("The job used ", 1)[1].split(" MiB", 1)[0])
    assert used == err["details"]["memory_mb"] and used - 1 < rss <= used


def test_memory_limit_counts_the_processes_a_job_starts(job_server):
    """An engine binary the tool starts counts against the job's memory limit (the worker's children are
    looked up again every second)."""
    err = job_server.call_error("test_allocate", {"megabytes": 600, "hold_s": 10, "in_child": True})
    assert err["code"] == "engine_crashed"
    assert "memory limit of 300 MiB" in err["message"]


def test_cancel_kills_running_job(job_server):
    out = job_server.call_ok("test_sleep", {"seconds": 20, "wait_s": 0.5, "tag": "cancel"})
    res = job_server.call_ok("job_cancel", {"job_id": out["job_id"]})
    assert res["cancelled"] is True
    err = job_server.call_error("job_wait", {"job_id": out["job_id"], "wait_s": 1})
    assert err["code"] == "cancelled"


def test_unknown_job_id(job_server):
    assert job_server.call_error("job_wait", {"job_id": "nope-123"})["code"] == "job_not_found"


def test_job_wait_after_server_restart(job_env, start_mcp_server):
    first = start_mcp_server(job_env)
    out = first.call_ok("test_sleep", {"seconds": 1.5, "wait_s": 0, "tag": "restart"})
    job_id = out["job_id"]
    first.call_ok("job_wait", {"job_id": job_id, "wait_s": 30})
    running = first.call_ok("test_sleep", {"seconds": 30, "wait_s": 0, "tag": "lost"})
    first.close()
    second = start_mcp_server(job_env)
    again = second.call_ok("job_wait", {"job_id": job_id, "wait_s": 1})
    assert again["slept_s"] == 1.5 and again["tag"] == "restart"
    lost = second.call_error("job_wait", {"job_id": running["job_id"], "wait_s": 1})
    assert lost["code"] == "engine_crashed" and "restarted" in lost["message"]


def test_invalid_arguments_are_invalid_input(job_server):
    err = job_server.call_error("test_sleep", {"seconds": -1})
    assert err["code"] == "invalid_input" and "seconds" in err["message"]
    assert job_server.call_error("no_such_tool", {})["code"] == "unknown_tool"


def test_wait_s_is_checked_not_clamped(job_server):
    """Compute tools and job_wait refuse a wait_s outside [0, 600] the same way (it used to be clamped)."""
    err = job_server.call_error("test_square", {"x": 2, "wait_s": 1000})
    assert err["code"] == "invalid_input" and "between 0 and 600" in err["message"]
    assert (
        job_server.call_error("job_wait", {"job_id": "test_square-00", "wait_s": -1})["code"]
        == "invalid_input"
    )
    tools = {t.name: t for t in job_server.list_tools()}
    for name in ("test_square", "job_wait"):
        schema = tools[name].input_schema["properties"]["wait_s"]
        assert (schema["minimum"], schema["maximum"]) == (0, 600.0)


def test_cache_hit_names_no_stale_job(job_server):
    first = job_server.call_ok("test_square", {"x": 21})
    hit = job_server.call_ok("test_square", {"x": 21})
    assert hit["provenance"]["cache"] == "hit" and hit["provenance"]["job_id"] is None
    assert hit["provenance"]["computed_at"] == first["provenance"]["finished_at"]
