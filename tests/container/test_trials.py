"""Harbor trials in Docker with the project's image: the oracle on a demo task and on a suite task, the
reference agent with the replay model, an agent that fails. After each, the agent's container holds none of
the answers' values and the verifier ran without network (docs/harbor.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from container_helpers import REPO, Trial, check_sandbox, docker, grade_demo, spu, task_dir

from environment.demo_tasks import demo_task_dir

SUITE_TASK = "chem-fragment-pka-logp"


def _export(task: Path, out: Path, image: str, *extra: str) -> Path:
    spu("harbor", "export", str(task), str(out), "--image", image, "--network", "none", *extra)
    return out


def _reward(trial: Trial) -> float:
    assert trial.result.get("exception_info") is None, trial.result["exception_info"]
    return trial.result["verifier_result"]["rewards"]["reward"]


def test_image_runs_as_spu_without_the_demo_answers(test_image):
    """The image (its layers are read whole by test_images.py) runs as the non-root user with the package
    complete, and says where the demo answers are, which it does not hold."""
    cid = docker("run", "-d", "--network", "none", test_image, "sleep", "600").strip()
    try:
        assert docker("exec", cid, "id", "-un").strip() == "spu"
        assert "Usage" in docker("exec", cid, "spu", "--help")
        # the demo needs the demo answers, which the installed package does not hold: it says so
        demo = subprocess.run(
            ["docker", "exec", cid, "spu", "agent", "demo", "--out", "/tmp/demo"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert demo.returncode == 2 and "not part of an installed package" in demo.stderr, demo.stderr[-2000:]
        assert "Traceback" not in demo.stderr
    finally:
        docker("rm", "-f", cid, check=False)


def test_oracle_scores_1_on_a_demo_task(test_image, run_trial, tmp_path):
    task = _export(demo_task_dir("aromatic-acidity"), task_dir(tmp_path, "demo"), test_image, "--oracle")
    trial = run_trial(task, "-a", "oracle")
    assert _reward(trial) == pytest.approx(1.0, abs=1e-12)  # a weighted sum of 1.0s
    check_sandbox(trial)
    summary = spu("harbor", "results", str(trial.jobs_dir))
    assert summary.stdout.startswith("1 trials, 1 rewarded, reward mean 1.0000"), summary.stdout


def test_oracle_scores_1_on_a_suite_task(test_image, run_trial, tmp_path):
    suite = REPO / "environment" / "tasks" / SUITE_TASK / "task"
    task = _export(suite, task_dir(tmp_path, "suite"), test_image, "--oracle")
    trial = run_trial(task, "-a", "oracle")
    assert _reward(trial) == pytest.approx(1.0, abs=1e-12)  # a weighted sum of 1.0s
    check_sandbox(trial)


def test_reference_agent_reward_is_its_spu_grade(test_image, run_trial, tmp_path):
    task = _export(demo_task_dir("aromatic-acidity"), task_dir(tmp_path, "agent"), test_image)
    trial = run_trial(task, "--agent", "scaffold.harbor_agent:SpuAgent", "-m", "replay/demo-aromatic-acidity")
    reward = _reward(trial)
    rankings = trial.trial_dir / "agent" / "rankings.json"
    assert rankings.is_file(), sorted(p.name for p in (trial.trial_dir / "agent").iterdir())
    assert reward == pytest.approx(grade_demo(rankings, "aromatic-acidity")["score"], abs=1e-9)
    assert reward > 0.5  # the recording's ranking (docs/harbor.md gives the figure)
    trajectory = json.loads((trial.trial_dir / "agent" / "trajectory.json").read_text(encoding="utf-8"))
    assert trajectory["schema_version"].startswith("ATIF")
    check_sandbox(trial)


def test_an_agent_that_writes_nothing_scores_minus_1(test_image, run_trial, tmp_path):
    # Harbor's `nop` agent does nothing: no rankings.json, which the strict grader scores -1
    task = _export(demo_task_dir("enzyme-kinetics"), task_dir(tmp_path, "nop"), test_image)
    trial = run_trial(task, "-a", "nop")
    assert _reward(trial) == -1.0
    grade = json.loads((trial.trial_dir / "verifier" / "grade.json").read_text(encoding="utf-8"))
    assert grade["valid"] is False
    check_sandbox(trial)
    # a reward is a result, not a failure; --min-reward makes it one (exit status 1)
    assert spu("harbor", "results", str(trial.jobs_dir)).returncode == 0
    strict = spu("harbor", "results", str(trial.jobs_dir), "--min-reward", "0", check=False)
    assert strict.returncode == 1 and "1 failed" in strict.stdout and "reward -1.0000" in strict.stdout
