"""`spu task anonymize`: random ids, shuffled order, mapping kept with the answers, same scores."""

from __future__ import annotations

import json

import pytest
from env_task_factory import write_task
from typer.testing import CliRunner

from environment.anonymize import anonymize_task
from environment.grading import grade
from spu.cli import app
from spu_common.task import TaskError, load_answers, load_task


def test_anonymize_keeps_the_mapping_and_the_scores(tmp_path):
    groups = {
        "g1": {f"cmpd_{i}": float(v) for i, v in enumerate([3, 1, 4, 1.5, 5, 9, 2, 6])},
        "g2": {"alpha_x": 1.0, "beta_x": 2.0, "gamma_x": 0.5},
    }
    task_dir, answers = write_task(tmp_path / "src", groups, conditions={"cmpd_0": {"temp": "20"}})
    (task_dir / "instruction.md").write_text("See cmpd_0 and cmpd_1. cmpd_10 is not an id.\n")
    (task_dir / "structures").mkdir()
    (task_dir / "structures" / "cmpd_2.smi").write_text("CCO cmpd_2\n")
    out = tmp_path / "anon" / "task"
    result = anonymize_task(task_dir, out, answers=answers, seed=5)
    again = anonymize_task(task_dir, tmp_path / "anon2" / "task", answers=answers, seed=5)
    assert result["id_map"] == again["id_map"]

    new_task = load_task(out)
    new_answers = load_answers(tmp_path / "anon" / "answers.json")
    id_map = new_answers.model_extra["id_map"]
    assert sorted(id_map.values()) == sorted(e for g in groups.values() for e in g)
    assert all(len(e) == 4 and e[0] in "abcdef" for e in id_map)
    readable_order = [id_map[e] for e in new_task.group("g1").experiment_ids]
    assert readable_order != list(groups["g1"])  # shuffled (seed 5)
    for new_id, old_id in id_map.items():
        group = "g1" if old_id.startswith("cmpd") else "g2"
        assert new_answers.group(group).values[new_id] == groups[group][old_id]
    text = (out / "instruction.md").read_text()
    assert "cmpd_0" not in text and "cmpd_10 is not an id" in text
    inverse = {old: new for new, old in id_map.items()}
    assert (out / "structures" / f"{inverse['cmpd_2']}.smi").read_text() == f"CCO {inverse['cmpd_2']}\n"
    assert [r["experiment_id"] for r in new_task.targets][:8] == new_task.group("g1").experiment_ids
    assert not (out / "answers.json").exists()

    # the measured order scores the same before and after
    old_task, old_answers = load_task(task_dir), load_answers(answers)
    old_orders = {g: sorted(v, key=v.get) for g, v in groups.items()}
    old_sub = {
        "task_id": old_task.task_id,
        "rankings": [{"group_id": g, "order": o} for g, o in old_orders.items()],
    }
    new_sub = {
        "task_id": old_task.task_id,
        "rankings": [{"group_id": g, "order": [inverse[e] for e in o]} for g, o in old_orders.items()],
    }
    assert grade(new_sub, new_task, new_answers).score == pytest.approx(
        grade(old_sub, old_task, old_answers).score
    )


def test_anonymize_refuses_existing_destination_and_cli_exit_codes(tmp_path):
    task_dir, answers = write_task(tmp_path / "src", {"g": {"a_1": 1.0, "a_2": 2.0, "a_3": 3.0}})
    with pytest.raises(TaskError, match="already exists"):
        anonymize_task(task_dir, tmp_path, answers=answers)
    runner = CliRunner()
    out = tmp_path / "built" / "task"
    result = runner.invoke(
        app,
        [
            "task",
            "anonymize",
            str(task_dir),
            "--out",
            str(out),
            "--answers",
            str(answers),
            "--seed",
            "1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["mapping_file"].endswith("answers.json")
    again = runner.invoke(app, ["task", "anonymize", str(task_dir), "--out", str(out)])
    assert again.exit_code == 2
