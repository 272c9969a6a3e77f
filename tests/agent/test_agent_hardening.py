"""Agent defects found by using it: orphaned children, file modes, nudge count, wrong-shape replies, and a
first request larger than the model's window (issue: clients and tools as users meet them)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from scaffold.agent.loop import compact_tool
from scaffold.agent.models.base import ToolDef
from scaffold.agent.runner import run_agent
from scaffold.agent.tools.mcp_tools import offered
from scaffold.agent.trajectory import read_records
from spu_common.task import load_task

G1 = ["e0ea", "d679", "a167", "f502", "e1ce", "dee6", "bf53", "d942"]
G2 = ["afcc", "f066", "cc20", "e3c3", "e902", "f8a7", "d02e", "f8d2"]
RANKINGS = [{"group_id": "g1", "order": G1}, {"group_id": "g2", "order": G2}]


def run(server, demo_task, out, config, provider="openai"):
    return run_agent(load_task(demo_task), out, f"{provider}:scripted-1", config, base_url=server.url)


def test_max_nudges_replies_without_a_tool_call_end_the_run(model_server, demo_task, agent_config, tmp_path):
    server = model_server([], default={"text": "Thinking aloud, no tools."})
    outcome = run(server, demo_task, tmp_path / "run", agent_config("limits.max_nudges=3"))
    assert outcome.exit_status == "model_gave_up"
    # exactly max_nudges replies (it took 4 before), and the reminders count down to the last one
    assert outcome.result["steps"] == 3 and len(server.requests) == 3
    records = read_records(tmp_path / "run" / "trajectory.jsonl")
    reminders = [r["message"]["content"] for r in records if r.get("kind") == "reminder_no_tool"]
    assert len(reminders) == 2
    assert "after 2 more replies" in reminders[0] and "after 1 more replies" in reminders[1]


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("openai", {"choices": [{"message": "a string, not a message object"}]}),
        ("openai", {"choices": "none"}),
        ("openai-responses", {"output": {"not": "a list"}}),
        ("anthropic", {"content": [1, 2, 3]}),
    ],
)
def test_a_wrong_shape_reply_is_a_model_error_with_a_clear_message(
    provider, body, model_server, demo_task, agent_config, tmp_path
):
    server = model_server([{"status": 200, "body": body}])
    outcome = run(server, demo_task, tmp_path / "run", agent_config(), provider)
    assert outcome.exit_status == "model_error"
    assert f"is not a {provider} response: expected" in outcome.reason
    assert "Check that the provider prefix matches" in outcome.reason
    assert "Traceback" not in outcome.reason
    # the run still leaves a valid fallback ranking, mode 0644 like every other output file
    assert json.loads((tmp_path / "run" / "rankings.json").read_text())["rankings"]


def test_output_files_share_one_mode(model_server, demo_task, agent_config, tmp_path):
    submit = {"tool_calls": [{"name": "submit_rankings", "arguments": {"rankings": RANKINGS, "final": True}}]}
    server = model_server([submit])
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        outcome = run(server, demo_task, out, agent_config())
    finally:
        os.umask(old)
    assert outcome.exit_status == "submitted"
    files = [out / n for n in ("rankings.json", "report.md", "sources.json", "run.json", "trajectory.json")]
    files.append(out / "drafts" / "draft-001.json")
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}
    assert set(modes.values()) == {0o644}, modes


def test_a_first_request_larger_than_the_window_stops_before_any_request(
    model_server, demo_task, agent_config, tmp_path
):
    server = model_server([])
    outcome = run(server, demo_task, tmp_path / "run", agent_config("model.context_window_tokens=1500"))
    assert outcome.exit_status == "model_error"
    assert (
        "the first request is about" in outcome.reason
        and "model.context_window_tokens=1500" in outcome.reason
    )
    assert "tools.mcp.include" in outcome.reason
    assert server.requests == []  # the provider never saw it (llama.cpp's server crashed on it)
    assert json.loads((tmp_path / "run" / "rankings.json").read_text())["rankings"]


def test_include_and_exclude_patterns():
    names = ["chem_parse", "chem_descriptors", "xtb_run", "job_wait", "system_info"]
    picked = [n for n in names if offered(n, ["chem_*", "job_wait"], ["chem_descriptors"])]
    assert picked == ["chem_parse", "job_wait"]
    assert [n for n in names if offered(n, None, ["xtb_*"])] == [
        "chem_parse",
        "chem_descriptors",
        "job_wait",
        "system_info",
    ]


def test_compact_tool_keeps_names_and_types_and_drops_prose():
    tool = ToolDef(
        "demo",
        "First sentence. A long second sentence that costs tokens.",
        {
            "type": "object",
            "title": "DemoInput",
            "properties": {
                "description": {"type": "string", "description": "a property named description"},
                "n": {"type": "integer", "minimum": 1, "description": "how many"},
            },
            "required": ["description"],
        },
    )
    small = compact_tool(tool)
    assert small.description == "First sentence."
    assert small.parameters == {
        "type": "object",
        "properties": {"description": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["description"],
    }


AGENT_WITH_SLEEPER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from scaffold.agent.rundir import RunDir
    from scaffold.agent.config import load_config
    from scaffold.agent.tools.builtin import BuiltinTools
    from spu_common.task import load_task

    task_dir, out, marker = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    rundir = RunDir(out, load_task(task_dir))
    rundir.create()
    tools = BuiltinTools(rundir, load_config(None, ["tools.max_output_chars=2000"]).tools)
    # a command whose shell starts a grandchild: both must die with this process
    tools.call("bash", {"command": f"sleep 300 & echo $! > {marker}; sleep 300"})
    """
)


def test_bash_children_die_with_a_sigkilled_agent(demo_task, tmp_path):
    marker = tmp_path / "grandchild.pid"
    script = tmp_path / "agent.py"
    script.write_text(AGENT_WITH_SLEEPER)
    repo = Path(__file__).resolve().parents[2]
    agent = subprocess.Popen(
        [sys.executable, str(script), str(demo_task), str(tmp_path / "run"), str(marker)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the bash tool never started"
    grandchild = int(marker.read_text())
    descendants = psutil.Process(agent.pid).children(recursive=True)
    assert grandchild in {p.pid for p in descendants}
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=10)
    _, alive = psutil.wait_procs(descendants, timeout=10)
    assert alive == [], f"orphaned after SIGKILL of the agent: {[p.pid for p in alive]}"


FINAL = {"tool_calls": [{"name": "submit_rankings", "arguments": {"rankings": RANKINGS, "final": True}}]}


def test_a_window_too_small_for_all_schemas_gets_compact_descriptions(
    model_server, demo_task, agent_config, spu_env, tmp_path
):
    """With the real server's ~40 tools (about 65 KB of schemas) an 18k-token window only fits the compact
    descriptions; the first request then carries first sentences and no parameter descriptions."""
    server = model_server([FINAL])
    out = tmp_path / "run"
    outcome = run(server, demo_task, out, agent_config("model.context_window_tokens=18000", mcp=True))
    assert outcome.exit_status == "submitted", outcome.reason
    tools = {t["function"]["name"]: t["function"] for t in server.requests[0]["json"]["tools"]}
    assert "system_info" in tools and "chem_parse" in tools
    assert tools["chem_parse"]["description"].count(". ") == 0  # one sentence
    assert "description" not in json.dumps(tools["chem_parse"]["parameters"])
    assert "description" in json.dumps(tools["bash"]["parameters"])  # built-in tools are left as they are
    event = next(r for r in read_records(out / "trajectory.jsonl") if r.get("event") == "tools_compacted")
    assert event["tokens_after"] < 18000 * 0.75 < event["tokens_before"]
    assert len(server.requests[0]["raw"]) < 18000 * 3.5


def test_an_8k_window_needs_a_tool_subset(model_server, demo_task, agent_config, spu_env, tmp_path):
    refused = model_server([])
    outcome = run(
        refused, demo_task, tmp_path / "all", agent_config("model.context_window_tokens=8192", mcp=True)
    )
    assert outcome.exit_status == "model_error" and "tools.mcp.include" in outcome.reason
    assert refused.requests == []
    subset = model_server([FINAL])
    config = agent_config(
        "model.context_window_tokens=8192", "tools.mcp.include=[system_info,job_wait,chem_parse]", mcp=True
    )
    outcome = run(subset, demo_task, tmp_path / "subset", config)
    assert outcome.exit_status == "submitted", outcome.reason
    offered = {t["function"]["name"] for t in subset.requests[0]["json"]["tools"]}
    assert {"system_info", "job_wait", "chem_parse", "submit_rankings"} <= offered
    assert not offered & {"chem_descriptors", "md_run", "web_fetch"}
