"""Nothing in the jobs folder can stall or fail a call: a FIFO named like a record, a 2 GiB sparse file,
bad UTF-8, another job's id, a ``result`` that is not an object or is another tool's are damaged records:
skipped, counted, named in a warning, never an error of the call. ``system_info`` answers while ``jobs()``
meets them, and ``job_wait`` on a good job returns its result."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_job_durability import RawServer

from tools_server.core.dispatch import Dispatcher
from tools_server.core.errors import ToolError
from tools_server.core.jobs import JobManager
from tools_server.core.jobs.model import Job
from tools_server.core.jobs.store import JobStore, read_record

pytestmark = pytest.mark.slow  # servers, and hundreds of generated records
PROFILE = settings(
    max_examples=1000 if os.environ.get("SPU_HYPOTHESIS") == "deep" else 200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _parse(server: RawServer, tool: str, molecule: str) -> str:
    answer = server.call(tool, {"molecules": [molecule], "wait_s": 60})
    assert not answer.get("isError"), answer
    return answer["structuredContent"]["provenance"]["job_id"]


def test_a_fifo_a_huge_file_and_damaged_records_never_stall_or_fail_a_call(job_env):
    jobs = Path(job_env["SPU_WORKDIR"]) / "jobs"
    server = RawServer(job_env)
    try:
        good = _parse(server, "chem_parse", "CCO")
        spoiled = _parse(server, "chem_parse", "CCN")
    finally:
        server.kill()
    record = json.loads((jobs / f"{spoiled}.json").read_text())
    (jobs / f"{spoiled}.json").write_text(json.dumps({**record, "result": "a string"}))  # job_wait: -32603
    os.mkfifo(jobs / "chem_parse-00000000f1.json")  # read on the event loop: every call waited
    with open(jobs / "chem_parse-00000000f2.json", "wb") as fh:
        fh.truncate(2 * 2**30)  # sparse: read whole before
    (jobs / "chem_parse-00000000f3.json").write_bytes(b'{"job_id": "\xff"}')
    other = {**record, "job_id": "chem_parse-00000000f4", "result": {**record["result"]}}
    other["result"]["provenance"] = {**record["result"]["provenance"], "tool": "xtb_run"}
    (jobs / "chem_parse-00000000f4.json").write_text(json.dumps(other))  # another tool's result
    (jobs / "chem_parse-00000000f5.json").write_text(json.dumps({**record, "job_id": good}))  # another id

    server = RawServer(job_env)
    try:
        listing_id = server.ask("tools/call", {"name": "jobs", "arguments": {}})
        info_id = server.ask("tools/call", {"name": "system_info", "arguments": {}})
        info = server.reply(info_id, timeout=120)["result"]  # an event, not a clock: the reply comes or not
        listing = server.reply(listing_id, timeout=120)["result"]
        assert not info.get("isError") and info["structuredContent"]["cpu_cores"] >= 1
        assert not listing.get("isError"), listing
        rows = {r["job_id"] for r in listing["structuredContent"]["jobs"]}
        assert good in rows and spoiled not in rows
        (warning,) = listing["structuredContent"]["warnings"]
        assert warning.startswith("6 damaged job records")
        for name in ("f1", "f2", "f3", "f4", "f5"):
            assert f"chem_parse-00000000{name}.json" in warning
        assert "not a regular file" in warning and "2147483648 bytes" in warning and "not UTF-8" in warning
        assert f"{spoiled}.json: its result is not an object" in warning

        waited = server.request("tools/call", {"name": "job_wait", "arguments": {"job_id": good}})
        assert (
            "error" not in waited and waited["result"]["structuredContent"]["items"][0]["formula"] == "C2H6O"
        )
        lost = server.request("tools/call", {"name": "job_wait", "arguments": {"job_id": spoiled}})
        assert "error" not in lost, lost  # a JSON-RPC error (-32603) before
        error = lost["result"]["structuredContent"]["error"]
        assert lost["result"]["isError"] and error["code"] == "engine_crashed"
        assert error["details"]["status"] == "lost" and "its result is not an object" in error["message"]
        unknown = server.call("job_wait", {"job_id": "chem_parse-00000000f4"})
        assert unknown["structuredContent"]["error"]["code"] == "job_not_found"
        assert "damaged record" in unknown["structuredContent"]["error"]["message"]
    finally:
        server.kill()


# -- generated records ---------------------------------------------------------------------------------

GOOD = {
    "job_id": "chem_parse-0123456789",
    "tool": "chem_parse",
    "module": "tools_server.chem.tools",
    "params": {"molecules": ["CCO"]},
    "resource": "cpu",
    "time_limit_s": 600.0,
    "memory_limit_mb": None,
    "threads": 1,
    "status": "done",
    "progress": 1.0,
    "message": None,
    "created": 1.0,
    "started": 2.0,
    "finished": 3.0,
    "device": "cpu",
    "result": {"n_molecules": 1, "provenance": {"tool": "chem_parse", "input_hash": "ab"}},
    "error": None,
    "server_pid": 1,
    "server_started": 1.0,
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A good record with some fields replaced by any JSON value, dropped, or the file's bytes spoiled."""
    record = copy.deepcopy(GOOD)
    for key in draw(st.lists(st.sampled_from(sorted(GOOD)), max_size=4, unique=True)):
        if draw(st.booleans()):
            record.pop(key)
        else:
            record[key] = draw(JSON)
    if draw(st.booleans()):
        record["result"] = {**GOOD["result"], "provenance": {"tool": draw(st.sampled_from(["xtb_run", 1]))}}
    data = json.dumps(record).encode()  # NaN and Infinity too: a reader must refuse them
    spoil = draw(st.sampled_from(["none", "cut", "latin1", "prefix"]))
    if spoil == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif spoil == "latin1":
        data = data.replace(b"chem_parse", "chém_parse".encode("latin-1"), 1)
    elif spoil == "prefix":
        data = b"\xff\xfe" + data
    return data


@PROFILE
@given(data=damaged())
def test_any_record_is_read_or_named_damaged_and_never_fails_job_wait(tmp_path, data):
    """Whatever the bytes, reading gives a usable record or a reason; a usable record's job answers
    ``job_wait`` with a result object or a tool error, never another exception."""
    store = JobStore(tmp_path / "jobs")
    path = store.path_of(GOOD["job_id"])
    path.write_bytes(data)
    record, why = read_record(path)
    assert (record is None) != (why is None)
    if record is None:
        return
    try:
        outcome = Dispatcher.job_outcome(Job.from_record(record))
    except ToolError:
        return
    assert isinstance(outcome, dict)


def test_a_damaged_record_of_an_issued_id_reads_lost_with_the_damage_named(tmp_path):
    store = JobStore(tmp_path / "jobs")
    job_id = store.new_id("chem_parse")
    bad: dict[str, Any] = {**GOOD, "job_id": job_id, "result": ["not", "an", "object"]}
    store.path_of(job_id).write_text(json.dumps(bad))
    manager = JobManager(store=store)
    try:
        Dispatcher.job_outcome(manager.lookup(job_id))
    except ToolError as exc:
        assert exc.code == "engine_crashed" and exc.details["status"] == "lost"
        assert "its result is not an object" in exc.message
    else:
        raise AssertionError("a damaged record answered as a result")
    assert manager.listing()["jobs"] == []
    assert "1 damaged job record" in manager.listing()["warnings"][0]
