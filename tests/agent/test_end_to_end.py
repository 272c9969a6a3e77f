"""`spu agent` as a user runs it: a subprocess, the real `spu serve` over stdio, then `spu grade`.

The scripted model server stands in for a paid API (the only mock); tools, server and grader are real.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environment.grading import grade
from scaffold.agent.trajectory import read_records
from spu_common.task import load_answers, load_task

REPO = Path(__file__).resolve().parents[2]
G1 = ["e0ea", "d679", "a167", "f502", "e1ce", "dee6", "bf53", "d942"]
G2 = ["afcc", "f066", "cc20", "e3c3", "e902", "f8a7", "d02e", "f8d2"]
RANKINGS = [{"group_id": "g1", "order": G1}, {"group_id": "g2", "order": G2}]


def spu(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
    )


def smiles_of(task_dir: Path) -> list[str]:
    with open(task_dir / "targets.csv", newline="") as handle:
        return [row["smiles"] for row in csv.DictReader(handle)]


@pytest.mark.slow
def test_run_through_the_mcp_tools_leaves_a_submission_that_spu_grade_scores(
    model_server, demo_task, demo_answers, spu_env, tmp_path
):
    smiles = smiles_of(demo_task)
    draft = {"task_id": "demo-aromatic-acidity", "task_version": "1", "rankings": RANKINGS}
    server = model_server(
        [
            {
                "text": "Hardware and structures first.",
                "tool_calls": [
                    {"name": "system_info", "arguments": {}},
                    {"name": "chem_parse", "arguments": {"molecules": smiles}},
                ],
            },
            {
                "tool_calls": [
                    {
                        "name": "chem_descriptors",
                        "arguments": {"molecules": smiles[:3], "preset": "physchem"},
                    },
                    {"name": "chem_parse", "arguments": {"molecules": ["C1CC"]}},
                ]
            },
            {
                "tool_calls": [
                    {"name": "ranking_check", "arguments": {"task_dir": str(demo_task), "draft": draft}}
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "submit_rankings",
                        "arguments": {"rankings": RANKINGS, "report": "# Hammett", "final": True},
                    }
                ]
            },
        ]
    )
    out = tmp_path / "run"
    done = spu(
        "agent",
        "run",
        "--task",
        str(demo_task),
        "--out",
        str(out),
        "--model",
        "openai:scripted-1",
        "--base-url",
        server.url,
        "--json",
        env={**spu_env, "OPENAI_API_KEY": "sk-test"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["exit_status"] == "submitted"
    tools_offered = {t["function"]["name"] for t in server.requests[0]["json"]["tools"]}
    assert {
        "system_info",
        "chem_parse",
        "chem_descriptors",
        "ranking_check",
        "job_wait",
        "submit_rankings",
        "bash",
    } <= tools_offered
    results = {
        r["tool_call_id"]: r for r in read_records(out / "trajectory.jsonl") if r["type"] == "tool_result"
    }
    by_name = {r["name"]: r for r in results.values()}
    parsed = json.loads(by_name["system_info"]["content"])
    assert parsed["cpu_cores"] >= 1 and "provenance" in parsed
    first_parse = results["call_1_1"]
    assert json.loads(first_parse["content"])["n_ok"] == 16
    assert json.loads(by_name["chem_descriptors"]["content"])["items"][0]["ok"] is True
    bad_parse = results["call_2_1"]  # an unclosed ring: a per-item error inside a successful batch
    assert json.loads(bad_parse["content"])["n_failed"] == 1
    check = json.loads(by_name["ranking_check"]["content"])
    assert check["valid"] is True and check["warnings"] == []
    # what the model read next is the MCP result itself
    sent = {
        m["tool_call_id"]: m["content"] for m in server.requests[1]["json"]["messages"] if m["role"] == "tool"
    }
    assert sent["call_1_1"] == first_parse["content"]
    assert (out / "spu-work").is_dir()  # the server's SPU_WORKDIR lives in the run

    graded = spu(
        "grade",
        str(out / "rankings.json"),
        "--task",
        str(demo_task),
        "--answers",
        str(demo_answers),
        "--json",
        env=spu_env,
    )
    assert graded.returncode == 0, graded.stderr
    score = json.loads(graded.stdout)["score"]
    # The Hammett order equals the measured (handbook) order of every group in the demo answers: rho = 1.
    assert score == pytest.approx(1.0)
    assert score == pytest.approx(
        grade(out / "rankings.json", load_task(demo_task), load_answers(demo_answers)).score
    )


@pytest.mark.slow
def test_the_demo_command_replays_the_shipped_recording_and_grades_it(spu_env, tmp_path):
    out = tmp_path / "demo"
    done = spu("agent", "demo", "--out", str(out), "--json", env=spu_env)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout)
    assert record["exit_status"] == "submitted" and record["valid"] is True
    assert record["score"] == pytest.approx(1.0)  # the recording's Hammett order matches the handbook values
    results = [r for r in read_records(out / "trajectory.jsonl") if r["type"] == "tool_result"]
    assert [r["name"] for r in results] == [
        "system_info",
        "chem_parse",
        "python",
        "ranking_check",
        "submit_rankings",
    ]
    assert not any(r["is_error"] for r in results)
    assert json.loads(results[1]["content"])["n_ok"] == 16  # the live tool, not a recorded answer
    assert "e0ea   2.30  2-nitrobenzoic acid" in results[2]["content"]  # ${TASK_DIR} was substituted


def agent_process(task: Path, out: Path, url: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spu",
            "agent",
            "run",
            "--task",
            str(task),
            "--out",
            str(out),
            "--model",
            "openai:scripted-1",
            "--base-url",
            url,
            "-c",
            "model.retry.backoff_initial_s=0.01",
        ],
        cwd=REPO,
        env={**env, "OPENAI_API_KEY": "sk-test"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, timeout_s: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def processes_with_env(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["during a tool call", "while waiting for the model"])
def test_sigterm_mid_run_leaves_valid_files(moment, model_server, demo_task, spu_env, tmp_path):
    out = tmp_path / "run"
    draft = {
        "tool_calls": [{"name": "submit_rankings", "arguments": {"rankings": RANKINGS, "report": "# draft"}}]
    }
    if moment == "during a tool call":
        script = [
            draft,
            {
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "sleep 300 & echo $! > sleeper.pid; wait"}}
                ]
            },
        ]
        server = model_server(script)
    else:
        script = [draft, lambda request, wire: (time.sleep(30), {"text": "too late"})[1]]
        server = model_server(script)
    proc = agent_process(demo_task, out, server.url, spu_env)
    try:
        wait_for(lambda: (out / "drafts" / "draft-001.json").exists(), what="the first draft")
        if moment == "during a tool call":
            wait_for(lambda: (out / "work" / "sleeper.pid").exists(), what="the bash command to start")
        else:
            wait_for(lambda: len(server.requests) >= 2, what="the second model request")
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr[-3000:]
    task = load_task(demo_task)
    submitted = json.loads((out / "rankings.json").read_text())
    assert submitted["rankings"] == RANKINGS  # the draft, not the fallback
    result = json.loads((out / "run.json").read_text())
    assert result["exit_status"] == "interrupted" and result["signal"] == signal.SIGTERM
    assert result["submission"] == "drafts/draft-001.json"
    assert (out / "report.md").read_text().startswith("# draft")
    assert json.loads((out / "sources.json").read_text())["schema"] == "spu.sources/1"
    assert (
        json.loads((out / "trajectory.json").read_text())["final_metrics"]["extra"]["exit_status"]
        == "interrupted"
    )
    assert read_records(out / "trajectory.jsonl")[-1]["type"] == "run_end"
    assert grade(
        out / "rankings.json", task, load_answers(Path(str(demo_task)).parent / "answers.json")
    ).valid
    # nothing the run started is left: not the bash child, not the MCP server
    if moment == "during a tool call":
        sleeper = int((out / "work" / "sleeper.pid").read_text())
        wait_for(
            lambda: (
                not Path(f"/proc/{sleeper}").exists()
                or Path(f"/proc/{sleeper}/stat").read_text().split(")")[-1].split()[0] == "Z"
            ),
            30,
            "the bash command's background child to die",
        )
    marker = f"SPU_WORKDIR={out / 'spu-work'}"
    wait_for(
        lambda: not processes_with_env(marker),
        60,
        f"the tool server and its workers to exit: {processes_with_env(marker)}",
    )


def test_ensemble_writes_the_mean_rank_consensus_and_keeps_members(demo_task, agent_config, tmp_path):
    from scaffold.agent.ensemble import run_ensemble

    reversed_g1 = list(reversed(G1))
    recordings = []
    for name, g1 in (("a", G1), ("b", reversed_g1), ("c", G1)):
        path = tmp_path / f"{name}.jsonl"
        call = {
            "id": "c1",
            "name": "submit_rankings",
            "arguments": {
                "rankings": [{"group_id": "g1", "order": g1}, {"group_id": "g2", "order": G2}],
                "final": True,
            },
        }
        path.write_text(
            json.dumps({"message": {"role": "assistant", "content": "", "tool_calls": [call]}}) + "\n"
        )
        recordings.append(f"replay:{path}")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text(
        json.dumps({"message": {"role": "assistant", "content": "no idea", "tool_calls": []}}) + "\n"
    )
    out = tmp_path / "ensemble"
    summary = run_ensemble(load_task(demo_task), out, [*recordings, f"replay:{garbage}"], 4, agent_config())
    assert summary["submission"] == "consensus" and summary["used"] == [1, 2, 3]
    assert [m["exit_status"] for m in summary["members"]] == ["submitted"] * 3 + ["model_gave_up"]
    final = json.loads((out / "rankings.json").read_text())
    # mean positions: two members say G1, one says its reverse -> G1 order survives; G2 unanimous
    assert final["rankings"] == RANKINGS
    g1_mean = next(g for g in summary["groups"] if g["group_id"] == "g1")["mean_rank"]
    assert g1_mean["e0ea"] == pytest.approx((1 + 8 + 1) / 3)
    for n in range(1, 5):
        assert (out / "members" / f"member-{n}" / "rankings.json").is_file()
    assert "| 4 | replay:" in (out / "report.md").read_text()


def test_replay_goes_on_when_live_tool_results_differ(demo_task, agent_config, tmp_path):
    from scaffold.agent.runner import run_agent

    recording = tmp_path / "rec.jsonl"
    turns = [
        {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls ${TASK_DIR}"}}]},
        {"tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "recorded-but-absent.txt"}}]},
        {
            "tool_calls": [
                {"id": "c3", "name": "submit_rankings", "arguments": {"rankings": RANKINGS, "final": True}}
            ]
        },
    ]
    lines = [
        json.dumps({"type": "model_turn", "message": {"role": "assistant", "content": "", **t}})
        for t in turns
    ]
    lines.insert(1, json.dumps({"type": "tool_result", "content": "a recorded result nobody reads"}))
    recording.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    outcome = run_agent(load_task(demo_task), out, f"replay:{recording}", agent_config())
    assert outcome.exit_status == "submitted"
    results = [r for r in read_records(out / "trajectory.jsonl") if r["type"] == "tool_result"]
    assert "contract.json" in results[0]["content"]  # ${TASK_DIR} became the real task directory
    assert results[1]["is_error"]  # differs from whatever was recorded; the replay carried on

    again = tmp_path / "again.jsonl"
    done = spu("agent", "recording", str(out / "trajectory.jsonl"), "-o", str(again), env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    first = json.loads(again.read_text().splitlines()[0])["message"]["tool_calls"][0]["arguments"]
    assert first == {"command": "ls ${TASK_DIR}"}  # this machine's path turned back into the placeholder
