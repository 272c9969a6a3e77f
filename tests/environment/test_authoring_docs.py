"""The worked example of docs/authoring-tasks.md, run as a newcomer would: copy the spec, build it, then
`spu validate`, `spu grade`, `spu chance` and `spu harbor export` on the result; the warning section too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spu_common.task import load_answers

DOC = Path(__file__).resolve().parents[2] / "docs" / "authoring-tasks.md"
BLOCK = re.compile(r"<!-- (file|append): ([\w.]+) -->\n```\w*\n(.*?)```", re.DOTALL)


def _blocks(kind: str) -> dict[str, str]:
    return {name: body for k, name, body in BLOCK.findall(DOC.read_text(encoding="utf-8")) if k == kind}


def _spu(*args: str):
    from spu.cli import app

    return CliRunner().invoke(app, list(args))


def _quoted(doc: str, command: str) -> str:
    """The output lines the docs print after ``$ command``."""
    block = doc.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    return block


def test_worked_example_builds_and_passes_every_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = _blocks("file")
    assert sorted(files) == ["experiments.csv", "spec.yaml"]
    spec = tmp_path / "logp" / "spec"
    spec.mkdir(parents=True)
    for name, body in files.items():
        (spec / name).write_text(body, encoding="utf-8")

    result = _spu("task", "build", "logp/spec", "-o", "logp")
    assert result.exit_code == 0, result.output
    assert result.output == _quoted(DOC.read_text(encoding="utf-8"), "spu task build logp/spec -o logp")

    contract = json.loads(Path("logp/task/contract.json").read_text())
    draft = {
        "task_id": contract["task_id"],
        "task_version": contract["task_version"],
        "rankings": [{"group_id": g["group_id"], "order": g["experiment_ids"]} for g in contract["groups"]],
    }
    Path("rankings.json").write_text(json.dumps(draft))
    result = _spu("validate", "rankings.json", "--task", "logp/task")
    assert result.exit_code == 0 and "valid" in result.output
    result = _spu("grade", "rankings.json", "--task", "logp/task", "--answers", "logp/answers.json", "--json")
    assert result.exit_code == 0, result.output
    assert -1.0 <= json.loads(result.output)["score"] <= 1.0

    # the measured order scores 1
    answers = load_answers("logp/answers.json")
    best = {
        **draft,
        "rankings": [
            {
                "group_id": g["group_id"],
                "order": sorted(g["experiment_ids"], key=answers.group(g["group_id"]).values.get),
            }
            for g in contract["groups"]
        ],
    }
    Path("best.json").write_text(json.dumps(best))
    result = _spu("grade", "best.json", "--task", "logp/task", "--answers", "logp/answers.json", "--json")
    assert json.loads(result.output)["score"] == pytest.approx(1.0)

    result = _spu("chance", "--task", "logp/task", "--answers", "logp/answers.json", "--json")
    assert result.exit_code == 0
    chance = json.loads(result.output)
    doc = DOC.read_text()  # the thresholds the docs quote
    assert f"{chance['chance_threshold']:.4f} exact" in doc and chance["chance_method"] == "exact"
    assert f"power: {chance['power']:.2f} that the mean of 5 runs" in doc
    assert f"{chance['power_single_run']:.2f} for one run" in doc
    assert f"80% power takes {chance['runs_for_80pct_power']} runs" in doc
    assert f"needs an expected score of {chance['effect_for_80pct_power']:.3f}" in doc
    assert chance["attainable_max"] == pytest.approx(1.0)

    result = _spu("harbor", "export", "logp/task", "-o", "logp-harbor", "--answers", "logp/answers.json")
    assert result.exit_code == 0, result.output
    assert Path("logp-harbor/task.toml").is_file()
    assert Path("logp-harbor/tests/answers.json").read_bytes() == Path("logp/answers.json").read_bytes()

    # task show finds the spec beside the task and repeats the one warning the docs explain
    result = _spu("task", "show", "logp/task")
    assert "matches a fresh build of the spec" in result.output
    (warning,) = [line.strip() for line in result.output.splitlines() if "[prior-solvable]" in line]
    assert warning.removeprefix("warning ") in DOC.read_text(encoding="utf-8")


def test_warning_section_prints_what_the_docs_say(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "logp" / "spec"
    spec.mkdir(parents=True)
    for name, body in _blocks("file").items():
        (spec / name).write_text(body, encoding="utf-8")
    for name, body in _blocks("append").items():
        with open(spec / name, "a", encoding="utf-8") as fh:
            fh.write(body)
    result = _spu("task", "build", "logp/spec", "-o", "logp")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning")]
    assert [w.split("]")[0] for w in warnings] == ["warning [within-noise", "warning [prior-solvable"]
    assert warnings[0] in DOC.read_text(encoding="utf-8")


def test_docs_example_error_lines_match_the_builder(tmp_path):
    """The two problems shown under 'Spec problems' are what the builder prints for those mistakes."""
    spec = tmp_path / "logp" / "spec"
    spec.mkdir(parents=True)
    files = _blocks("file")
    (spec / "spec.yaml").write_text(
        files["spec.yaml"].replace("members: [phenol,", "members: [fluorophenol, phenol,")
    )
    (spec / "experiments.csv").write_text(files["experiments.csv"].replace(",2.57,", ",about 2.5,"))
    result = _spu("task", "build", str(spec), "-o", str(tmp_path / "logp"))
    assert result.exit_code == 2
    doc = DOC.read_text(encoding="utf-8")
    (line,) = result.output.splitlines()  # one error line, the problems numbered
    assert line.startswith(f"error: {spec}: 2 problems: (1) ")
    assert line.split(": 2 problems: ", 1)[1] in doc  # the example, but for the folder's path
    problems = re.split(r" \(\d\) ", line)[1:]
    assert len(problems) == 2
