"""Built-in tools: bash and python (timeouts kill the process group, head/tail truncation), files, submit."""

from __future__ import annotations

import json
import os
import time

import pytest

from scaffold.agent.config import load_config
from scaffold.agent.rundir import RunDir
from scaffold.agent.tools.builtin import BuiltinTools
from scaffold.agent.tools.output import cut_middle
from spu_common.task import load_task


@pytest.fixture
def tools(tmp_path, demo_task):
    rundir = RunDir(tmp_path / "out", load_task(demo_task))
    rundir.create()
    config = load_config(None, ["tools.command_timeout_s=30", "tools.max_output_chars=1000"])
    return BuiltinTools(rundir, config.tools)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it has exited all the same
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split(")")[-1].split()[0] != "Z"


def test_bash_timeout_kills_the_whole_process_group(tools):
    started = time.monotonic()
    result = tools.call(
        "bash", {"command": "sleep 300 & echo $! > child.pid; echo started; wait", "timeout_s": 1}
    )
    assert time.monotonic() - started < 150  # a no-hang bound: not the 300 s the command would take
    assert (
        result.is_error
        and result.content.startswith("killed after 1 s (timeout)")
        and "started" in result.content
    )
    child = int((tools.rundir.work / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_commands_never_outlive_the_runs_wall_time_budget(tools):
    tools.time_left = lambda: 2.0  # two seconds of the run's budget remain
    started = time.monotonic()
    result = tools.call("bash", {"command": "sleep 20", "timeout_s": 25})
    assert result.is_error and result.content.startswith("killed after 2 s (timeout)")
    assert time.monotonic() - started < 20  # a no-hang bound: the sleep did not run out


def test_a_background_process_does_not_outlive_its_command(tools):
    result = tools.call("bash", {"command": "(sleep 300 & echo $! > bg.pid); echo ok"})
    assert result.content == "exit code 0\nok\n"
    child = int((tools.rundir.work / "bg.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_long_output_keeps_head_and_tail(tools):
    result = tools.call("bash", {"command": "seq 1 100000"})
    text = result.content
    assert text.startswith("exit code 0\n1\n2\n3\n")
    assert text.rstrip().endswith("99999\n100000")
    assert "characters omitted from the middle" in text
    assert len(text) < 1400  # 1000 kept + the note + the exit line


def test_cut_middle_counts_what_it_drops():
    text = "a" * 600 + "b" * 400 + "c" * 1000
    out = cut_middle(text, 1000)
    assert out.startswith("a" * 600) and out.endswith("c" * 400)
    assert "[... 1000 characters omitted from the middle of a 2000-character output" in out
    assert cut_middle("short", 1000) == "short"


def test_python_runs_saved_scripts_with_exit_codes(tools):
    ok = tools.call("python", {"code": "import rdkit, sys\nprint('rdkit', rdkit.__version__ > '2020')"})
    assert ok.content.splitlines() == ["(saved as scripts/script-001.py)", "exit code 0", "rdkit True"]
    bad = tools.call("python", {"code": "raise SystemExit(3)"})
    assert bad.is_error and "exit code 3" in bad.content
    assert (tools.rundir.scripts / "script-002.py").read_text() == "raise SystemExit(3)"


def test_commands_do_not_see_the_model_api_keys(tools, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("SPU_VISIBLE", "yes")
    result = tools.call("bash", {"command": "echo key=${OPENAI_API_KEY:-none} other=$SPU_VISIBLE"})
    assert "key=none other=yes" in result.content


def test_read_file_pages_by_line(tools, demo_task):
    result = tools.call("read_file", {"path": str(demo_task / "targets.csv"), "offset": 2, "limit": 2})
    lines = result.content.splitlines()
    assert lines[0] == "     2\te1ce,g1,4-chlorobenzoic acid,OC(=O)c1ccc(Cl)cc1,water,25"
    assert lines[2] == "[14 more lines; continue with offset=4]"  # targets.csv has 17 lines
    missing = tools.call("read_file", {"path": "nope.txt"})
    assert missing.is_error and "does not exist" in missing.content


def test_write_file_stays_in_the_run_and_off_the_submission(tools, tmp_path):
    ok = tools.call("write_file", {"path": "notes/plan.md", "content": "plan"})
    assert not ok.is_error and (tools.rundir.work / "notes" / "plan.md").read_text() == "plan"
    outside = tools.call("write_file", {"path": str(tmp_path / "elsewhere.txt"), "content": "x"})
    assert outside.is_error and "outside the run's output directory" in outside.content
    ranking = tools.call("write_file", {"path": "../rankings.json", "content": "{}"})
    assert ranking.is_error and "submit_rankings" in ranking.content
    assert (
        json.loads(tools.rundir.rankings.read_text())["rankings"][0]["order"][0] == "e1ce"
    )  # still the fallback


def test_submit_rankings_validates_before_writing(tools):
    g1 = ["e0ea", "d679", "a167", "f502", "e1ce", "dee6", "bf53", "d942"]
    g2 = ["afcc", "f066", "cc20", "e3c3", "e902", "f8a7", "d02e", "f8d2"]
    bad = tools.call(
        "submit_rankings",
        {"rankings": [{"group_id": "g1", "order": g1[:-1]}, {"group_id": "g2", "order": g2}]},
    )
    assert bad.is_error and "NOT accepted" in bad.content and "d942" in bad.content
    assert not list(tools.rundir.drafts.iterdir())
    # a departure the grader recovers (ordering under another key) is accepted and written canonically
    good = tools.call(
        "submit_rankings",
        {"rankings": [{"group_id": "g1", "ranking": g1}, {"group_id": "g2", "order": g2}], "final": True},
    )
    assert not good.is_error and good.final and "Recovered schema departures" in good.content
    written = json.loads(tools.rundir.rankings.read_text())
    assert written["rankings"] == [{"group_id": "g1", "order": g1}, {"group_id": "g2", "order": g2}]
    assert json.loads((tools.rundir.drafts / "draft-001.json").read_text()) == written


def test_submit_notes_a_presented_order(tools, demo_task):
    task = load_task(demo_task)
    rankings = [{"group_id": g.group_id, "order": list(g.experiment_ids)} for g in task.groups]
    result = tools.call(
        "submit_rankings", {"rankings": json.dumps(rankings)}
    )  # a JSON string is accepted too
    assert not result.is_error
    assert "groups ['g1', 'g2'] are in the presented order" in result.content
