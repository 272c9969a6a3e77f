"""`spu analyze` on a batch of real reference-agent runs of the demo suite (replay and scripted models).

The runs are made by the reference agent itself: replayed recordings written here, the shipped demo
recording through the real `spu serve`, and a run against the scripted model server on loopback. Then
`spu analyze` reads them as a user would, in a subprocess.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_model_server import ScriptedModelServer

from environment.demo_tasks import DEMO_TASKS, demo_answers_path, demo_task_dir
from spu_common.task import load_answers, load_task

REPO = Path(__file__).resolve().parents[2]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _turn(name: str, arguments: dict, i: int) -> dict:
    return {
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": f"c{i}", "name": name, "arguments": arguments}],
        }
    }


def _rankings(orders: dict[str, list[str]]) -> list[dict]:
    return [{"group_id": g, "order": o} for g, o in orders.items()]


def _orders(slug: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(measured order, reversed presented order) of every group of a demo task."""
    task = load_task(demo_task_dir(slug))
    answers = load_answers(demo_answers_path(slug))
    measured = {
        g.group_id: sorted(g.experiment_ids, key=lambda e: answers.group(g.group_id).values[e])
        for g in task.groups
    }
    reversed_presented = {g.group_id: list(reversed(g.experiment_ids)) for g in task.groups}
    return measured, reversed_presented


def _recordings(tmp: Path, slug: str) -> dict[str, Path]:
    measured, backwards = _orders(slug)
    careful = [
        _turn("read_file", {"path": "${TASK_DIR}/targets.csv"}, 1),
        _turn("python", {"code": "import math\nprint(math.log(10))"}, 2),
        _turn("submit_rankings", {"rankings": _rankings(backwards)}, 3),
        _turn("bash", {"command": "echo checking"}, 4),
        _turn("submit_rankings", {"rankings": _rankings(measured), "final": True}, 5),
    ]
    quick = [
        _turn("bash", {"command": "ls ${TASK_DIR}"}, 1),
        _turn("submit_rankings", {"rankings": _rankings(backwards), "final": True}, 2),
    ]
    paths = {}
    for name, turns in (("careful", careful), ("quick", quick)):
        path = tmp / f"{slug}-{name}.jsonl"
        path.write_text("".join(json.dumps(t) + "\n" for t in turns))
        paths[name] = path
    return paths


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory) -> Path:
    from scaffold.agent.config import load_config
    from scaffold.agent.runner import run_agent

    tmp = tmp_path_factory.mktemp("suite")
    runs = tmp / "runs"
    no_mcp = load_config(None, ["tools.mcp.enabled=false"])
    for slug in DEMO_TASKS:
        task_id = load_task(demo_task_dir(slug)).task_id
        recordings = _recordings(tmp, slug)
        for config in ("careful", "quick"):
            for repeat in (1, 2):
                out = runs / f"replay-{config}" / task_id / f"run-{repeat}"
                outcome = run_agent(
                    load_task(demo_task_dir(slug)), out, f"replay:{recordings[config]}", no_mcp
                )
                assert outcome.exit_status == "submitted"
    # the shipped demo recording, through the real tool server
    demo = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "agent",
            "demo",
            "--out",
            str(runs / "demo" / "aromatic" / "r1"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    # a scripted model over the OpenAI wire format
    measured, _ = _orders("enzyme-kinetics")
    script = [
        {
            "text": "",
            "tool_calls": [
                {
                    "name": "read_file",
                    "arguments": {"path": str(demo_task_dir("enzyme-kinetics") / "experiment.md")},
                }
            ],
        },
        {
            "text": "",
            "tool_calls": [
                {"name": "submit_rankings", "arguments": {"rankings": _rankings(measured), "final": True}}
            ],
        },
    ]
    with ScriptedModelServer(script) as server:
        config = load_config(None, ["tools.mcp.enabled=false", "model.retry.backoff_initial_s=0.01"])
        import os

        os.environ.setdefault("OPENAI_API_KEY", "sk-test")
        outcome = run_agent(
            load_task(demo_task_dir("enzyme-kinetics")),
            runs / "scripted" / "enzyme" / "r1",
            "openai:scripted",
            config,
            base_url=server.url,
        )
        assert outcome.exit_status == "submitted"
    return runs


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_analyze_a_batch_of_suite_runs(suite_runs, tmp_path):
    out = tmp_path / "analysis"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "analyze",
            str(suite_runs),
            "--answers-dir",
            str(REPO / "environment" / "demo_tasks"),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("activities.csv", "drafts.csv", "runs.csv", "agreement.csv", "consensus.csv", "summary.md"):
        assert (out / name).stat().st_size > 0
    for name in ("activities.png", "drafts.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    runs = {r["run"]: r for r in _csv(out / "runs.csv")}
    assert len(runs) == 3 * 2 * 2 + 2
    careful = [r for r in runs.values() if r["config"] == "replay-careful"]
    assert {r["first_draft_step"] for r in careful} == {"3"}
    assert {r["n_revisions"] for r in careful} == {"1"}
    assert all(float(r["final_score"]) == pytest.approx(load_max(r["task"]), abs=1e-8) for r in careful)
    assert runs["demo/aromatic/r1"]["final_score"] == "1"
    assert runs["scripted/enzyme/r1"]["config"] == "scripted"
    categories = {r["category"] for r in _csv(out / "activities.csv")}
    assert {"inputs", "code", "drafting", "computation", "system"} <= categories
    # per task: every run together, and each configuration with two runs
    consensus = _csv(out / "consensus.csv")
    assert {(c["task"], c["members"]) for c in consensus} >= {
        ("demo-electrolyte-solvents", "*"),
        ("demo-electrolyte-solvents", "replay-careful"),
    }
    quick_pair = [a for a in _csv(out / "agreement.csv") if a["config_a"] == a["config_b"] == "replay-quick"]
    assert quick_pair and all(float(a["mean_spearman"]) == pytest.approx(1.0) for a in quick_pair)
    summary = (out / "summary.md").read_text()
    assert "| replay-careful | 6 |" in summary


def load_max(task_id: str) -> float:
    from environment.chance import attainable_max

    slug = next(s for s in DEMO_TASKS if load_task(demo_task_dir(s)).task_id == task_id)
    return attainable_max(load_task(demo_task_dir(slug)), load_answers(demo_answers_path(slug)))


def test_the_jsonl_and_its_atif_export_give_the_same_calls(suite_runs):
    from environment.analysis.trajectories import read_atif, read_jsonl

    runs = sorted(suite_runs.rglob("trajectory.jsonl"))
    assert len(runs) == 14
    for path in runs:
        jsonl, atif = read_jsonl(path), read_atif(path.with_suffix(".json"))
        assert [(c.step, c.name, c.is_error) for c in jsonl.calls] == [
            (c.step, c.name, c.is_error) for c in atif.calls
        ], path
        assert (jsonl.task_id, jsonl.model, jsonl.n_steps) == (atif.task_id, atif.model, atif.n_steps)
