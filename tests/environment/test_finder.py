"""One finder of tasks and answers (environment/finder.py) behind every command that looks for them: the same
folders give the same tasks and scores through ``spu batch``, ``spu report``, ``spu analyze``,
``spu baselines`` and ``spu view``; each skips ``_``- and ``.``-folders, refuses two task directories (or
two answers files) for one task id with a stable code, and ``spu batch`` loads each task once.

The commands run in this process through their Typer apps (``spu batch`` over runs that are already done:
it plans, snapshots the tasks, skips every run and reports, so no agent is needed)."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from analysis_runs import write_jsonl_run
from env_task_factory import write_task
from typer.testing import CliRunner

import spu_common.task
from environment.finder import FinderError, find_answers, find_tasks
from environment.view.page import build_page
from scaffold.batch import BATCH_KIND
from spu.cli import make_app
from spu_common.outputs import mark

VALUES = {"g": {"e1": 1.0, "e2": 2.0, "e3": 3.0}}
REVERSED = {"g": {"e1": 3.0, "e2": 2.0, "e3": 1.0}}
ORDER = {"g": ["e1", "e2", "e3"]}  # the measured order: scores 1.0 against VALUES, -1.0 against REVERSED


def _suite(root: Path) -> Path:
    """Two tasks, a stale copy of one of them (same id, reversed answers) under ``_drafts`` and a third task
    under ``.hidden``: only ``t-a`` and ``t-b`` are found, each with its answers beside it."""
    suite = root / "suite"
    write_task(suite / "a", VALUES, task_id="t-a")
    write_task(suite / "b", VALUES, task_id="t-b")
    write_task(suite / "_drafts" / "a-old", REVERSED, task_id="t-a")
    write_task(suite / ".hidden" / "c", VALUES, task_id="t-c")
    return suite


def _runs(root: Path, task_ids=("t-a", "t-b")) -> Path:
    """One finished run per task in the layout ``spu batch --name cfg`` writes (marked done, in a runs
    directory marked as the batch's)."""
    runs = root / "runs"
    runs.mkdir()
    mark(runs, BATCH_KIND)
    for task_id in task_ids:
        write_jsonl_run(runs / "cfg" / task_id / "run-1", task_id, [("bash", {"command": "ls"})], final=ORDER)
        (runs / "cfg" / task_id / "run-1" / ".batch-done.json").write_text("{}")
    return runs


def _recording(root: Path) -> Path:
    """A replay recording that names no task (the batch's model check accepts it for any task)."""
    path = root / "rec.jsonl"
    turn = {"type": "model_turn", "message": {"role": "assistant", "content": "done", "tool_calls": []}}
    path.write_text(json.dumps(turn) + "\n")
    return path


def _spu(args: list[str]):
    return CliRunner().invoke(make_app(), [str(a) for a in args], catch_exceptions=False)


def _scores_csv(path: Path) -> dict[str, float]:
    with open(path, newline="") as fh:
        return {
            row["task_id"]: round(float(row["score"]), 6)
            for row in csv.DictReader(fh)
            if row["scored"] == "True"
        }


def via_batch(tmp_path: Path, suite: Path, runs: Path, answers: Path | None = None):
    result = _spu(
        [
            "batch",
            suite,
            "--model",
            f"replay:{_recording(tmp_path)}",
            "--name",
            "cfg",
            "--out",
            runs,
            "--bootstrap",
            "100",
            "--json",
            *(["--answers", answers] if answers else []),
        ]
    )
    if result.exit_code:
        return result
    summary = json.loads(result.stdout)
    assert summary["total"] == summary["skipped_done"]  # nothing ran: the runs were done
    return _scores_csv(runs / "_report" / "runs.csv")


def via_report(tmp_path: Path, suite: Path, runs: Path, answers: Path | None = None):
    out = tmp_path / "report"
    args = ["report", runs, "--tasks", suite, "--answers", answers or suite, "-o", out, "--bootstrap", "100"]
    result = _spu([*args, "--json"])
    return result if result.exit_code else _scores_csv(out / "runs.csv")


def via_analyze(tmp_path: Path, suite: Path, runs: Path, answers: Path | None = None):
    args = ["analyze", runs, "--tasks", suite, "--answers", answers or suite, "-o", tmp_path / "analysis"]
    result = _spu([*args, "--json"])
    if result.exit_code:
        return result
    rows = json.loads(result.stdout)["runs_table"]
    return {row["task"]: round(row["final_score"], 6) for row in rows}


def via_baselines(tmp_path: Path, suite: Path, runs: Path, answers: Path | None = None):
    """Baselines score no runs: the presented order (the measured one here) stands in for a submission."""
    args = [
        "baselines",
        suite,
        "--no-proxies",
        "--draws",
        "100",
        *(["--answers", answers] if answers else []),
    ]
    result = _spu([*args, "--json"])
    if result.exit_code:
        return result
    tasks = json.loads(result.stdout)["tasks"]
    return {t["task_id"]: round(t["presented_order_score"], 6) for t in tasks}


def via_view(tmp_path: Path, suite: Path, runs: Path, answers: Path | None = None):
    """``spu view`` never stops: what it could not use is a note on the page."""
    _, data = build_page(runs, tasks_dir=suite, answers=answers or suite)
    notes = [p["message"] for p in data["problems"]]
    scores = {r["task_id"]: round(r["score"]["score"], 6) for r in data["runs"] if r.get("score")}
    return notes, scores


COMMANDS = [via_batch, via_report, via_analyze, via_baselines, via_view]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda f: f.__name__.removeprefix("via_"))
def test_the_same_folders_give_the_same_tasks_and_scores_through_every_command(command, tmp_path):
    """Each command finds ``t-a`` and ``t-b`` with the answers beside them (score 1.0), never the stale copy
    under ``_drafts`` (reversed answers: -1.0, and its id clashes) nor the task under ``.hidden``. On main
    837ff26 report, analyze and baselines searched ``_drafts`` too (report and analyze stopped on the
    clash; baselines took three tasks) and view ignored --tasks and scored nothing."""
    suite = _suite(tmp_path)
    runs = _runs(tmp_path)
    found = command(tmp_path, suite, runs)
    if command is via_view:
        notes, found = found
        assert notes == []
    assert found == {"t-a": 1.0, "t-b": 1.0}, getattr(found, "output", found)


def _clashing_suite(root: Path) -> Path:
    suite = root / "suite"
    write_task(suite / "a", VALUES, task_id="t-a")
    write_task(suite / "a-copy", VALUES, task_id="t-a")
    return suite


@pytest.mark.parametrize("command", COMMANDS, ids=lambda f: f.__name__.removeprefix("via_"))
def test_a_task_id_used_twice_is_refused_by_every_command(command, tmp_path):
    """Exit 2 and the code ``duplicate_task_id`` naming both folders (view: a note, and the folder is not
    used). On main 837ff26 baselines took both and the others said it without a code."""
    suite = _clashing_suite(tmp_path)
    runs = _runs(tmp_path, ["t-a"])
    result = command(tmp_path, suite, runs)
    if command is via_view:
        notes, scores = result
        assert len(notes) == 1 and "[duplicate_task_id]" in notes[0]
        assert str(suite / "a" / "task") in notes[0] and str(suite / "a-copy" / "task") in notes[0]
        assert scores == {}
        return
    assert result.exit_code == 2, result.output
    assert "[duplicate_task_id] task id 't-a' is used by two task directories" in result.output
    assert "a-copy" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("command", COMMANDS, ids=lambda f: f.__name__.removeprefix("via_"))
def test_two_answers_files_for_one_task_are_refused_by_every_command(command, tmp_path):
    """An answers folder holding two files for one task (which one would grade?) is refused with
    ``duplicate_answers``; on main 837ff26 the last one read won, silently."""
    suite = tmp_path / "suite"
    write_task(suite / "a", VALUES, task_id="t-a")
    answers = tmp_path / "answers"
    write_task(answers / "one", VALUES, task_id="t-a")
    write_task(answers / "two", REVERSED, task_id="t-a")
    runs = _runs(tmp_path, ["t-a"])
    result = command(tmp_path, suite, runs, answers)
    if command is via_view:
        notes, _ = result
        assert len(notes) == 1 and "[duplicate_answers]" in notes[0]
        return
    assert result.exit_code == 2, result.output
    assert "[duplicate_answers] two answers files are for task 't-a'" in result.output


def test_batch_loads_each_task_once(tmp_path, monkeypatch):
    """Counted where every load goes through (the contract's parser). On main 837ff26 ``spu batch`` loaded
    each task three times (planning, the snapshot, the answers for the report)."""
    suite = _suite(tmp_path)
    runs = _runs(tmp_path)
    loads: Counter[Path] = Counter()
    parse = spu_common.task.parse_contract

    def counting(data, root):
        loads[Path(root)] += 1
        return parse(data, root)

    monkeypatch.setattr(spu_common.task, "parse_contract", counting)
    assert via_batch(tmp_path, suite, runs) == {"t-a": 1.0, "t-b": 1.0}
    originals = {p: n for p, n in loads.items() if suite.resolve() in p.parents}
    assert originals == {(suite / "a" / "task").resolve(): 1, (suite / "b" / "task").resolve(): 1}
    copies = {p.name: n for p, n in loads.items() if (runs / "_tasks").resolve() in p.parents}
    assert copies == {"t-a": 1, "t-b": 1}  # the report loads the snapshot once too


def test_the_finder_rules(tmp_path):
    suite = _suite(tmp_path)
    assert list(find_tasks(suite)) == ["t-a", "t-b"]
    assert list(find_tasks([suite / "a" / "task", suite])) == ["t-a", "t-b"]  # one folder reached twice
    assert sorted(find_answers(suite)) == ["t-a", "t-b"]
    assert (
        find_answers(suite / "_drafts" / "a-old" / "answers.json")["t-a"].answers.groups[0].values
        == (REVERSED["g"])
    )
    # the folder given may have any name: only folders below it are skipped
    assert list(find_tasks(suite / "_drafts")) == ["t-a"]
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "nowhere", tmp_path / "empty"):
        with pytest.raises(FinderError) as info:
            find_tasks(path)
        assert info.value.code == "no_tasks" and "Hint: " in str(info.value)
    with pytest.raises(FinderError) as info:
        find_answers(tmp_path / "nowhere")
    assert info.value.code == "no_answers"


def test_analyze_takes_tasks_from_an_answers_folder_only_where_the_finder_finds_them(tmp_path):
    """``spu analyze --answers FOLDER`` reads the tasks from that folder when it holds task directories.
    On 00212bd it asked ``rglob("contract.json")``, which also sees ``_``-folders: a folder of answers with
    an old task under ``_drafts`` was taken for the tasks, the finder then found none there, and analyze
    stopped with ``no_tasks`` although the runs' own task copies (``RUNS_DIR/_tasks``) were there."""
    runs = _runs(tmp_path)
    answers = tmp_path / "answers"
    for name, task_id in (("a", "t-a"), ("b", "t-b")):
        write_task(runs / "_tasks" / name, VALUES, task_id=task_id)
        write_task(answers / name, VALUES, task_id=task_id)
        shutil.rmtree(answers / name / "task")  # the answers alone
    write_task(answers / "_drafts" / "a-old", REVERSED, task_id="t-a")
    result = _spu(["analyze", runs, "--answers", answers, "-o", tmp_path / "analysis", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["runs_table"]
    assert {row["task"]: round(row["final_score"], 6) for row in rows} == {"t-a": 1.0, "t-b": 1.0}


def test_the_old_name_of_the_task_contract_still_imports():
    """``from environment.task import load_task`` raised ImportError on 00212bd (the contract moved to
    spu_common); it gives the same objects, with a DeprecationWarning that names the new module."""
    with pytest.warns(DeprecationWarning, match="spu_common.task.load_task"):
        from environment.task import load_task
    assert load_task is spu_common.task.load_task
    with pytest.raises(ImportError):
        from environment.task import no_such_name  # noqa: F401
