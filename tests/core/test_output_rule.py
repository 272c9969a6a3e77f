"""One rule for what a command writes (spu_common.outputs, docs/cli.md#outputs): a target that is absent
or empty, or that the command wrote itself, is written (an earlier output replaced, never mixed with the
new one); anything else only with --force; a folder holding an input or the current folder is never
cleared; `spu batch` resumes only its own runs.

On 39e2847 `report`, `analyze`, `view --out`, `consensus`, `agent recording` and `agent atif` overwrote
whatever was there without a word, and `agent run --out` into a folder holding a run appended to it: three
runs in one trajectory.jsonl, read as one by `spu view` and `spu analyze`."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from environment.demo_tasks import demo_answers_path, demo_task_dir
from spu.cli import main
from spu_common.outputs import MARKER, OutputRefused, claim_file, claim_folder, kind_of, mark
from spu_common.submission import fallback_submission
from spu_common.task import load_task

pytestmark = pytest.mark.slow  # real runs, batches and reports

KINDS = ("report", "analysis", "agent-run")


def spu(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry below ``folder``: a file's bytes, None for a folder."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


names = st.text("abcdefgh_.-", min_size=1, max_size=6).filter(lambda n: n not in (".", "..", MARKER))
trees = st.dictionaries(
    st.lists(names, min_size=1, max_size=3).map(tuple), st.binary(max_size=20), max_size=5
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    tree=trees,
    marker=st.sampled_from([None, "same", "other", "garbage"]),
    force=st.booleans(),
    resume=st.booleans(),
)
def test_a_folder_is_written_only_when_empty_or_its_own_or_forced(
    tree, marker, force, resume, tmp_path_factory
):
    root = tmp_path_factory.mktemp("claim")
    folder = root / "out"
    folder.mkdir()
    for parts, data in tree.items():
        path = folder.joinpath(*parts)
        if (
            any(p.is_file() for p in [folder.joinpath(*parts[:k]) for k in range(1, len(parts))])
            or path.is_dir()
        ):
            continue  # a name already taken by a file or folder
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if marker == "same":
        mark(folder, "report")
    elif marker == "other":
        mark(folder, "analysis")
    elif marker == "garbage":
        (folder / MARKER).write_bytes(b"\xff{not json")
    before = snapshot(folder)
    empty = not before
    own = marker == "same"
    try:
        earlier = claim_folder(folder, "report", force=force, resume=resume)
    except OutputRefused as exc:
        assert not empty and not own and not force, exc
        assert snapshot(folder) == before  # nothing touched
        assert "--force" in str(exc)
        return
    assert empty or own or force
    assert earlier == own
    assert kind_of(folder) == "report"
    if resume:  # kept as it was, marked
        assert {k: v for k, v in snapshot(folder).items() if k != MARKER} == {
            k: v for k, v in before.items() if k != MARKER
        }
    else:  # replaced: only the new marker is left
        assert sorted(os.listdir(folder)) == [MARKER]


def test_a_folder_holding_an_input_or_the_current_folder_is_never_cleared(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    (runs / "cfg").mkdir(parents=True)
    (runs / "cfg" / "rankings.json").write_text("{}")
    with pytest.raises(OutputRefused, match="holds the input"):
        claim_folder(tmp_path, "report", force=True, inputs=[runs])
    monkeypatch.chdir(runs / "cfg")
    with pytest.raises(OutputRefused, match="holds the current folder"):
        claim_folder(runs, "report", force=True)
    assert (runs / "cfg" / "rankings.json").read_text() == "{}"


def test_a_file_is_replaced_only_when_it_is_of_the_commands_kind_or_forced(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html>mine</html>")
    with pytest.raises(OutputRefused, match="was not written by this command"):
        claim_file(page, ours=lambda p: b"spu" in p.read_bytes())
    claim_file(page, ours=lambda p: b"mine" in p.read_bytes())
    claim_file(page, force=True)
    (tmp_path / "empty").write_text("")
    claim_file(tmp_path / "empty")
    with pytest.raises(OutputRefused, match="is a folder"):
        claim_file(tmp_path, force=True)


@pytest.fixture
def task(tmp_path) -> Path:
    folder = tmp_path / "suite" / "aromatic" / "task"
    shutil.copytree(demo_task_dir("aromatic-acidity"), folder)
    shutil.copyfile(demo_answers_path("aromatic-acidity"), folder.parent / "answers.json")
    return folder


def test_agent_run_twice_into_one_folder_keeps_one_run(task, tmp_path, spu_env):
    """The second run replaces the first: one run_start in trajectory.jsonl (on 39e2847: two, and three
    after a third run). A folder holding anything else is refused and left as it was."""
    out = tmp_path / "run"
    for _ in range(2):
        status, _, err = spu("agent", "run", task, "-o", out, "--model", "replay:demo-aromatic-acidity")
        assert status == 0, err
    records = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    assert sum(r.get("type") == "run_start" for r in records) == 1
    assert kind_of(out) == "agent-run"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep me")
    status, _, err = spu("agent", "run", task, "-o", mine, "--model", "replay:demo-aromatic-acidity")
    assert status == 2 and err.startswith(f"error: {mine} is not empty") and err.count("\n") == 1, err
    assert snapshot(mine) == {"notes.md": b"keep me"}


def test_report_analyze_view_consensus_atif_and_recording_follow_the_rule(task, tmp_path):
    runs = tmp_path / "runs"
    status, _, err = spu(
        "agent",
        "run",
        task,
        "-o",
        runs / "cfg" / "demo-aromatic-acidity",
        "--model",
        "replay:demo-aromatic-acidity",
    )
    assert status == 0, err
    answers = task.parent / "answers.json"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("mine")
    trajectory = runs / "cfg" / "demo-aromatic-acidity" / "trajectory.jsonl"
    rankings = runs / "cfg" / "demo-aromatic-acidity" / "rankings.json"
    not_ours = tmp_path / "notes.txt"
    not_ours.write_text("mine")
    folder_commands = {
        "report": ["report", runs, "--answers", answers, "--bootstrap", "100", "-o"],
        "analyze": ["analyze", runs, "--answers", answers, "-o"],
    }
    for name, args in folder_commands.items():
        out = tmp_path / f"{name}-out"
        for _ in range(2):  # its own output: replaced
            status, _, err = spu(*args, out)
            assert status == 0, (name, err)
        stale = out / "stale.png"
        stale.write_text("from an earlier version")
        assert spu(*args, out)[0] == 0 and not stale.exists(), name  # replaced, not mixed
        status, _, err = spu(*args, foreign)
        assert status == 2 and "--force" in err and snapshot(foreign) == {"thesis.tex": b"mine"}, (name, err)
    file_commands = {
        "view": (["view", runs, "--out"], "page.html"),
        "atif": (["agent", "atif", trajectory, "-o"], "trajectory.json"),
        "recording": (["agent", "recording", trajectory, "-o"], "rec.jsonl"),
        "consensus": (["consensus", task, rankings, rankings, "-o"], "consensus.json"),
    }
    for name, (args, file_name) in file_commands.items():
        target = tmp_path / file_name
        status, _, err = spu(*args, target)
        assert status == 0, (name, err)
        again = spu(*args, target)
        assert again[0] == (2 if name == "consensus" else 0), (name, again)  # consensus cannot tell its own
        status, _, err = spu(*args, not_ours)
        assert status == 2 and err.count("\n") == 1 and not_ours.read_text() == "mine", (name, err)
        assert spu(*args, not_ours, "--force")[0] == 0, name
        not_ours.write_text("mine")


def test_batch_resumes_only_its_own_runs(task, tmp_path):
    """A runs directory spu batch did not make, or a configuration name run with another model, stops the
    batch before it starts; its own runs directory is resumed, and it says so."""
    rec = tmp_path / "rec.jsonl"
    rec.write_text(
        json.dumps({"type": "model_turn", "message": {"role": "assistant", "content": "done"}}) + "\n"
    )
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("x\n")
    args = ["batch", task, "--model", f"replay:{rec}", "--name", "cfg", "--no-report"]
    status, _, err = spu(*args, "-o", foreign)
    assert status == 2 and "--force" in err and snapshot(foreign) == {"data.csv": b"x\n"}, err
    runs = tmp_path / "runs"
    status, out, err = spu(*args, "-o", runs, "--json")
    assert status == 0 and json.loads(out)["resumed"] is False, err
    status, out, err = spu(*args, "-o", runs, "--json")
    summary = json.loads(out)
    assert status == 0 and summary["resumed"] is True and summary["skipped_done"] == 1, err
    other = tmp_path / "rec2.jsonl"
    shutil.copyfile(rec, other)
    status, _, err = spu(
        "batch", task, "--model", f"replay:{other}", "--name", "cfg", "-o", runs, "--no-report"
    )
    assert status == 2 and "made with another model" in err, err


def test_task_anonymize_writes_an_empty_destination_only(task, tmp_path):
    out = tmp_path / "anon" / "task"
    out.mkdir(parents=True)
    (out / "keep.txt").write_text("mine")
    status, _, err = spu("task", "anonymize", task, "-o", out, "--seed", "1")
    assert status == 2 and "--force" in err and snapshot(out) == {"keep.txt": b"mine"}, err
    status, _, err = spu("task", "anonymize", task, "-o", out, "--seed", "1", "--force")
    assert status == 0, err
    assert not (out / "keep.txt").exists() and load_task(out).task_id == load_task(task).task_id
    # the mapping's file is an output too: an existing one is kept unless --force
    status, _, err = spu("task", "anonymize", task, "-o", tmp_path / "anon2" / "task")
    assert status == 0, err
    (tmp_path / "anon3").mkdir()
    (tmp_path / "anon3" / "id_map.json").write_text("{}")
    status, _, err = spu("task", "anonymize", task, "-o", tmp_path / "anon3" / "task")
    assert status == 2 and "id_map.json" in err, err
    assert fallback_submission(load_task(task))  # the task itself is untouched
