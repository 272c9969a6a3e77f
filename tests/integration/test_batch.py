"""`spu batch`: the reference agent (replay model) over the demo tasks, interrupted with SIGINT/SIGTERM and
resumed; finished runs are not redone, and the report covers every task at the end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environment.demo_tasks import DEMO_TASKS, demo_task_dir

REPO = Path(__file__).resolve().parents[2]


def _slow_recording(path: Path, seconds: int) -> Path:
    """One model turn that runs `sleep` in bash (long enough to be interrupted), then the recording ends."""
    call = {
        "id": "call_1",
        "name": "bash",
        "arguments": {"command": f"sleep {seconds}"},
        "arguments_raw": json.dumps({"command": f"sleep {seconds}"}),
        "error": None,
    }
    turn = {
        "type": "model_turn",
        "message": {"role": "assistant", "content": "waiting", "tool_calls": [call]},
    }
    path.write_text(json.dumps(turn) + "\n")
    return path


def _batch(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "spu", "batch", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done_markers(runs: Path) -> dict[str, float]:
    return {str(p.parent.relative_to(runs)): p.stat().st_mtime for p in runs.rglob(".batch-done.json")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_batch_interrupted_and_resumed(spu_env, tmp_path, sig):
    runs = tmp_path / "runs"
    recording = _slow_recording(tmp_path / "slow.jsonl", 4)
    tasks = [str(demo_task_dir(slug)) for slug in DEMO_TASKS]
    args = [
        *tasks,
        "--model",
        f"replay:{recording}",
        "--name",
        "slow",
        "-j",
        "1",
        "--out",
        str(runs),
        "--bootstrap",
        "200",
        "--json",
    ]
    proc = _batch(args, spu_env)
    deadline = time.monotonic() + 120
    while not _done_markers(runs) and time.monotonic() < deadline:  # the first run has finished
        time.sleep(0.2)
    while time.monotonic() < deadline:  # the second run is inside its `sleep` (its agent is handling signals)
        trajectories = [
            p
            for p in runs.glob("slow/*/run-1/trajectory.jsonl")
            if not (p.parent / ".batch-done.json").exists()
        ]
        if trajectories and '"model_turn"' in trajectories[0].read_text():
            break
        time.sleep(0.2)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), stderr
    first = json.loads(stdout)
    assert first["interrupted"] is True and first["completed"] == 1 and first["remaining"] == 2
    done = _done_markers(runs)
    assert len(done) == 1
    interrupted_runs = [p for p in (runs / "slow").glob("*/run-1") if not (p / ".batch-done.json").exists()]
    # the interrupted agent still left a valid fallback submission and its run record
    started = [p for p in interrupted_runs if (p / "run.json").exists()]
    assert len(started) == 1
    assert json.loads((started[0] / "run.json").read_text())["exit_status"] == "interrupted"
    assert not (runs / "_report").exists()

    proc = _batch(args, spu_env)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    second = json.loads(stdout)
    assert second["skipped_done"] == 1 and second["completed"] == 2 and second["remaining"] == 0
    after = _done_markers(runs)
    assert len(after) == 3
    for run, mtime in done.items():  # the finished run was not redone
        assert after[run] == mtime
    summary = json.loads((runs / "_report" / "summary.json").read_text())
    assert summary["configurations"][0]["configuration"] == "slow"
    assert summary["configurations"][0]["scored_tasks"] == 3


@pytest.mark.slow
def test_batch_demo_replay_scores_and_rerun_is_a_no_op(spu_env, tmp_path):
    runs = tmp_path / "runs"
    args = [
        str(demo_task_dir("aromatic-acidity")),
        "--model",
        "replay:demo-aromatic-acidity",
        "--runs",
        "2",
        "-j",
        "2",
        "--out",
        str(runs),
        "--bootstrap",
        "200",
        "--json",
    ]
    proc = _batch(args, spu_env)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["completed"] == 2
    assert [r["exit_status"] for r in result["results"]] == ["submitted", "submitted"]
    rows = (runs / "_report" / "runs.csv").read_text().splitlines()
    assert len(rows) == 3  # header and two runs
    # the shipped recording is the aromatic-acidity demo run: it ranks that task perfectly (environment
    # helper's demo answers; the same check as `spu agent demo`)
    assert all(",1.0," in row for row in rows[1:])
    proc = _batch(args, spu_env)
    stdout, _ = proc.communicate(timeout=120)
    again = json.loads(stdout)
    assert again["skipped_done"] == 2 and again["completed"] == 0


@pytest.mark.parametrize(
    ("model", "env", "message"),
    [
        # a recording that is not there (the presented-order fallback was scored, exit 0, 100% coverage)
        (
            "replay:no-such-recording",
            {},
            "--model replay:no-such-recording: no recording 'no-such-recording'",
        ),
        # the shipped recording names demo-aromatic-acidity in its drafts: the other demo tasks are refused
        ("replay:demo-aromatic-acidity", {}, "the recording was made for task demo-aromatic-acidity, not"),
        # the provider's own API without a key (it retried for 164 s per run before)
        ("openai:gpt-4.1", {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY is not set and no --base-url is given"),
        ("anthropic:claude-x", {"ANTHROPIC_API_KEY": ""}, "ANTHROPIC_API_KEY is not set"),
    ],
)
def test_a_model_that_cannot_work_stops_the_batch_before_any_run(spu_env, tmp_path, model, env, message):
    runs = tmp_path / "runs"
    demo_tasks = str(REPO / "environment" / "demo_tasks")
    proc = subprocess.run(
        [sys.executable, "-m", "spu", "batch", demo_tasks, "--model", model, "--out", str(runs)],
        cwd=REPO,
        env={**spu_env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and message in proc.stderr
    assert "Traceback" not in proc.stderr and not runs.exists()  # nothing ran, nothing was written


def test_batch_usage_errors(spu_env, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "spu", "batch", str(tmp_path), "--model", "replay:x"],
        cwd=REPO,
        env=spu_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "[no_tasks] no task directory in or below" in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "batch",
            str(demo_task_dir(DEMO_TASKS[0])),
            "--model",
            "nonsense",
        ],
        cwd=REPO,
        env=spu_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "PROVIDER:MODEL" in proc.stderr


def test_report_analyze_and_view_after_a_batch_need_no_options(spu_env, tmp_path):
    """The README's order: `spu batch` on a task outside the repository, then `spu report runs --out
    report`, `spu analyze runs --out analysis` and `spu view runs` find its task (RUNS_DIR/_tasks) and
    answers (beside the task the batch ran) by themselves."""
    sys.path.insert(0, str(REPO / "tests" / "environment"))
    from env_task_factory import write_task

    values = {"g1": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, "g2": {"e": 4.0, "f": 3.0, "g": 2.0, "h": 1.0}}
    task_dir, _ = write_task(tmp_path / "tasks" / "t-batch", values, task_id="t-batch")
    measured = [{"group_id": g, "order": sorted(v, key=v.get)} for g, v in values.items()]
    call = {"id": "call_1", "name": "submit_rankings", "arguments": {"rankings": measured, "final": True}}
    recording = tmp_path / "submit.jsonl"
    recording.write_text(
        json.dumps({"type": "model_turn", "message": {"role": "assistant", "tool_calls": [call]}})
    )
    env = {**spu_env, "SPU_TOOL_MODULES": ""}

    def spu(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spu", *args],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    done = spu(
        "batch",
        str(task_dir),
        "--model",
        f"replay:{recording}",
        "--out",
        "runs",
        "--no-report",
        "-c",
        "tools.mcp.enabled=false",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    done = spu("report", "runs", "--out", "report", "--bootstrap", "200", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["tasks"][0]["task_id"] == "t-batch" and summary["warnings"] == []
    assert summary["configurations"][0]["scored_tasks"] == 1
    # the measured order: Spearman 1 in both groups (to rounding)
    assert summary["tasks"][0]["scores"][summary["configurations"][0]["configuration"]] == pytest.approx(1.0)
    done = spu("analyze", "runs", "--out", "analysis", "--json")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["runs_table"][0]
    assert row["task"] == "t-batch" and row["final_score"] == pytest.approx(1.0)
    done = spu("view", "runs", "--out", "page.html", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 1
