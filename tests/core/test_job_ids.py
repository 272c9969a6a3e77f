"""An acknowledged job id always resolves (a result, an error, ``cancelled`` or ``lost``), never
``job_not_found``: its record is on disk before the id is given out, an id this work folder issued whose
record is gone (a power cut) reads ``lost``, and a record's server is its pid *and* start time (a pid reused
after a reboot does not keep a job ``running`` for ever)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_job_durability import RawServer

from tools_server.core.errors import ToolError
from tools_server.core.jobs import JobManager, JobStore
from tools_server.core.jobs.manager import _as_seen_now


def test_issued_ids_are_known_to_their_work_folder_only(tmp_path):
    store = JobStore(tmp_path / "a" / "jobs")
    job_id = store.new_id("xtb_run")
    assert job_id.startswith("xtb_run-") and store.issued(job_id)
    assert JobStore(tmp_path / "a" / "jobs").issued(job_id)  # the key is on disk: a restart knows it
    assert not JobStore(tmp_path / "b" / "jobs").issued(job_id)  # another work folder never issued it
    forged = job_id[:-1] + ("0" if job_id[-1] != "0" else "1")
    assert not store.issued(forged)
    assert not store.issued("xtb_run-0123456789")  # the ids of earlier versions carry no tag


def test_a_missing_record_of_an_issued_id_is_lost_and_an_unknown_id_is_not_found(tmp_path):
    manager = JobManager(store=JobStore(tmp_path / "jobs"))
    job_id = manager.store.new_id("xtb_run")  # issued, and then the machine lost power before the write
    job = manager.lookup(job_id)
    assert job.status == "lost" and job.tool == "xtb_run"
    assert job.error["code"] == "engine_crashed" and job.error["details"]["status"] == "lost"
    (tmp_path / "jobs" / f"{job_id}.json").write_bytes(b"")  # a record emptied by the crash
    assert manager.lookup(job_id).status == "lost"
    with pytest.raises(ToolError) as err:
        manager.lookup("xtb_run-0123456789abcdef01")
    assert err.value.code == "job_not_found"


def test_a_pid_reused_by_another_process_does_not_keep_a_job_running():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = {
            "job_id": "xtb_run-0123456789",
            "tool": "xtb_run",
            "module": "tools_server.qc.tools",
            "status": "running",
            "created": 1.0,
            "server_pid": other.pid,  # alive, but it is not the server that wrote the record
            "server_started": 1.0,
        }
        assert _as_seen_now(record)["status"] == "lost"
    finally:
        other.kill()
        other.wait()


def test_a_pending_answer_is_on_disk_before_it_is_sent(job_env):
    """The server is killed the moment the acknowledgement arrives: the record is there, and a new server
    answers ``lost`` for it."""
    jobs_dir = Path(job_env["SPU_WORKDIR"]) / "jobs"
    server = RawServer(job_env)
    try:
        acks = [
            server.call("test_sleep", {"seconds": 30, "tag": f"ack-{i}", "wait_s": 0})["structuredContent"]
            for i in range(5)
        ]
    finally:
        server.kill()
    for ack in acks:
        assert ack["status"] in ("queued", "running")
        record = json.loads((jobs_dir / f"{ack['job_id']}.json").read_text())
        assert record["job_id"] == ack["job_id"] and record["status"] in ("queued", "running")
    server = RawServer(job_env)
    try:
        for ack in acks:
            waited = server.call("job_wait", {"job_id": ack["job_id"], "wait_s": 0})
            assert waited["isError"] and waited["structuredContent"]["error"]["details"]["status"] == "lost"
    finally:
        server.kill()
