"""Jobs: a result a client has seen is on disk (job record and cache entry) even when the server is killed
at once; after a restart a job that was running reads ``lost``; a damaged record is skipped, never fatal."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mcp_wire import RawServer


def _cache_entries(env: dict[str, str]) -> list[Path]:
    return list((Path(env["SPU_CACHE_DIR"]) / "v2").rglob("*.json"))  # the result entries


def test_a_seen_result_survives_an_immediate_kill(job_env):
    jobs_dir = Path(job_env["SPU_WORKDIR"]) / "jobs"
    for i in range(6):
        server = RawServer(job_env)
        try:
            result = server.call(
                "test_sleep", {"seconds": 0.01, "steps": 1, "tag": f"durable-{i}", "wait_s": 30}
            )
        finally:
            server.kill()  # at once: nothing may be left pending in the server
        structured = result["structuredContent"]
        job_id = structured["provenance"]["job_id"]
        record = json.loads((jobs_dir / f"{job_id}.json").read_text())
        assert record["status"] == "done" and record["result"]["tag"] == f"durable-{i}"
        assert len(_cache_entries(job_env)) == i + 1
    # a fresh server answers the same call from the cache, and job_wait from the record
    server = RawServer(job_env)
    try:
        again = server.call("test_sleep", {"seconds": 0.01, "steps": 1, "tag": "durable-5", "wait_s": 30})
        assert again["structuredContent"]["provenance"]["cache"] == "hit"
        waited = server.call("job_wait", {"job_id": job_id, "wait_s": 1})
        assert waited["structuredContent"]["tag"] == "durable-5"
    finally:
        server.kill()


def test_a_job_killed_with_its_server_reads_lost(job_env):
    server = RawServer(job_env)
    running = server.call("test_sleep", {"seconds": 20, "tag": "killed", "wait_s": 0})["structuredContent"]
    assert running["status"] in ("queued", "running")
    record = Path(job_env["SPU_WORKDIR"]) / "jobs" / f"{running['job_id']}.json"
    deadline = time.monotonic() + 60  # bounds the wait for the deferred submission record; no speed
    while not record.exists():
        assert time.monotonic() < deadline, "the job's record was never written"
        time.sleep(0.02)
    server.kill()
    server = RawServer(job_env)
    try:
        listing = server.call("jobs", {})["structuredContent"]
        rows = {r["job_id"]: r for r in listing["jobs"]}
        assert rows[running["job_id"]]["status"] == "lost"
        waited = server.call("job_wait", {"job_id": running["job_id"], "wait_s": 1})
        error = waited["structuredContent"]["error"]
        assert (
            waited["isError"] and error["code"] == "engine_crashed" and error["details"]["status"] == "lost"
        )
    finally:
        server.kill()


def test_damaged_records_are_skipped(job_env):
    jobs_dir = Path(job_env["SPU_WORKDIR"]) / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    (jobs_dir / "test_sleep-00000000aa.json").write_bytes(b'{"job_id": "\xff\xfe"}')  # not UTF-8
    (jobs_dir / "test_sleep-00000000bb.json").write_text('{"job_id": "test_sleep-00000000bb", ')
    (jobs_dir / "test_sleep-00000000cc.json").write_text('["not", "a", "record"]')
    (jobs_dir / "test_sleep-00000000dd.json").write_text('{"job_id": "test_sleep-00000000dd"}')
    server = RawServer(job_env)
    try:
        done = server.call("test_sleep", {"seconds": 0.01, "steps": 1, "tag": "ok", "wait_s": 30})
        listing = server.call("jobs", {})
        assert not listing.get("isError"), listing
        ids = [r["job_id"] for r in listing["structuredContent"]["jobs"]]
        assert ids == [done["structuredContent"]["provenance"]["job_id"]]
        for bad in ("aa", "bb", "cc", "dd"):
            waited = server.call("job_wait", {"job_id": f"test_sleep-00000000{bad}", "wait_s": 0})
            assert waited["structuredContent"]["error"]["code"] == "job_not_found"
    finally:
        server.kill()
