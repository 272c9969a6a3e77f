"""The deferred writer behind job records and cache entries (tools_server/core/deferred.py)."""

from __future__ import annotations

import time

from tools_server.core.deferred import DELAY_S, DeferredWrites


def test_only_the_newest_write_per_key_runs_and_flush_waits_for_it():
    ran: list[str] = []
    writes = DeferredWrites("test-writes")
    started = time.monotonic()
    for version in ("v1", "v2", "v3"):
        writes.add("job-a", lambda v=version: ran.append(f"a:{v}"))
    writes.add("job-b", lambda: ran.append("b"))
    assert ran == []  # nothing on the caller's path
    writes.flush()
    assert time.monotonic() - started >= DELAY_S
    assert ran == ["a:v3", "b"]
    writes.add("job-a", lambda: ran.append("a:v4"))  # the thread, idle now, wakes for a new write
    writes.flush()
    assert ran == ["a:v3", "b", "a:v4"]


def test_a_failing_write_does_not_stop_the_others():
    ran: list[str] = []
    writes = DeferredWrites("test-writes")

    def broken() -> None:
        raise OSError("disk full")

    writes.add("bad", broken)
    writes.add("good", lambda: ran.append("good"))
    writes.flush()
    assert ran == ["good"]


def test_a_discarded_write_does_not_run_and_flush_returns():
    ran: list[str] = []
    writes = DeferredWrites("test-writes")
    writes.add("job-a", lambda: ran.append("a"))
    writes.add("job-b", lambda: ran.append("b"))
    writes.discard("job-a")
    writes.discard("job-c")  # nothing pending for it: no effect
    writes.flush()
    assert ran == ["b"]


def test_a_final_job_record_is_not_written_again_by_the_pending_submission_write(tmp_path):
    """A short job's final record is written once: the deferred write of its submission record, still
    pending, used to rename the same record over it again (milliseconds on ext4, off the caller's path but
    not off the disk's)."""
    from tools_server.core.jobs.model import Job
    from tools_server.core.jobs.store import JobStore

    store = JobStore(tmp_path)
    job = Job(
        job_id="bench_noop_job-0123456789",
        tool="bench_noop_job",
        module="m",
        params={},
        resource="cpu",
        time_limit_s=60,
        memory_limit_mb=None,
    )
    store.save_later(job)  # the submission record, DELAY_S later
    job.status, job.result, job.finished = "done", {"ok": True}, time.time()
    store.save(job)  # the final record, now
    written = (tmp_path / f"{job.job_id}.json").stat().st_ino
    store.flush()
    time.sleep(2 * DELAY_S)
    assert (tmp_path / f"{job.job_id}.json").stat().st_ino == written  # not replaced
    assert store.load(job.job_id)[0]["status"] == "done"
