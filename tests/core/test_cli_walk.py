"""The command line walked as a new user would: every command's --help, one grammar for the same meaning
(``-o/--out`` for what a command writes, ``--force`` to replace it, ``--answers`` for answers, ``--json``
for machine output), and bad invocations of every command answered by an ``error:`` line and the
documented exit status (2 for usage errors, 1 when the thing checked is wrong), never a traceback.

Everything runs through ``spu.cli.main``, the entry point the ``spu`` script calls, in this process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer

from environment.demo_tasks import demo_answers_path, demo_task_dir
from spu.cli import main, make_app

#: the spellings the grammar replaced: still accepted, never shown in a help
HIDDEN_ALIASES = {
    ("agent", "atif"): {"--output"},
    ("agent", "recording"): {"--output"},
    ("harbor", "export"): {"--overwrite", "--task"},
    ("analyze",): {"--answers-dir"},
    # the task folder is positional (TASK) everywhere; --task, its earlier spelling, stays
    **{
        path: {"--task"}
        for path in [
            ("validate",),
            ("grade",),
            ("chance",),
            ("consensus",),
            ("baselines",),
            ("batch",),
            ("task", "show"),
            ("task", "anonymize"),
            ("agent", "run"),
            ("agent", "demo"),
        ]
    },
}


def _commands(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):  # a group (typer vendors its own click)
        return [pair for name, sub in command.commands.items() for pair in _commands(sub, (*prefix, name))]
    return [(prefix, command)]


COMMANDS = _commands(typer.main.get_command(make_app()))


def spu(capsys, *args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``spu ARGS``; any exception but SystemExit fails the test."""
    try:
        main([str(a) for a in args])
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return status, out, err


def test_every_command_has_help_in_one_style(capsys):
    assert len(COMMANDS) > 30
    for path, _ in [((), None), *COMMANDS]:
        status, out, err = spu(capsys, *path, "--help")
        assert status == 0, (path, err)
        assert out.startswith(f"Usage: {' '.join(('spu', *path))} "), (path, out[:200])
        assert "\nOptions:\n" in out and "  --help " in out, path


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


def test_one_grammar_for_output_overwrite_answers_and_json():
    """What a command writes is -o/--out; --force replaces; answers are --answers; machine output --json.
    On 9a09d4a: `agent atif|recording -o/--output`, `agent run --out` without -o, a positional OUT_DIR
    and --overwrite on `harbor export`, --answers-dir on `analyze`."""
    for path, command in COMMANDS:
        shown = [p for p in _options(command) if not p.hidden]
        names = {o for p in shown for o in p.opts}
        hidden = {o for p in _options(command) if p.hidden for o in p.opts}
        assert hidden == HIDDEN_ALIASES.get(path, set()), path
        for option in shown:
            if option.name in ("out", "output"):
                assert set(option.opts) == {"-o", "--out"}, (path, option.opts)
            if "json" in option.name:
                assert option.opts == ["--json"], (path, option.opts)
        assert not names & {"--output", "--overwrite", "--answers-dir", "--out-dir", "--answers-file"}, path
        arguments = [p.name for p in command.params if getattr(p, "param_type_name", "") == "argument"]
        assert not {"out", "out_dir", "output"} & set(arguments), (path, arguments)
    writers = {path for path, command in COMMANDS for p in _options(command) if p.name == "out"}
    assert {("agent", "run"), ("agent", "atif"), ("agent", "recording"), ("harbor", "export")} <= writers


@pytest.fixture
def files(tmp_path, monkeypatch, spu_env) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)
    task = tmp_path / "task"
    shutil.copytree(demo_task_dir("aromatic-acidity"), task)
    (tmp_path / "bad.json").write_text("garbage{")
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text(
        json.dumps({"task_id": "another", "task_version": "1", "groups": []})
    )
    return {
        "task": task,
        "answers": demo_answers_path("aromatic-acidity"),
        "bad": tmp_path / "bad.json",
        "empty": tmp_path / "empty",
        "nope": tmp_path / "nope",
        "other": tmp_path / "other.json",
        "out": tmp_path / "out",
    }


#: (arguments with {file} placeholders, exit status): each must end in one `error:` line, no traceback
BAD = [
    ("bogus", 2),
    ("grade {bad}", 2),  # --task and --answers missing
    ("grade {bad} --task {nope} --answers {answers}", 2),
    ("grade {bad} --task {task} --answers {other}", 2),  # answers of another task
    ("grade {bad} --task {task} --answers {bad}", 2),
    ("validate {bad} --task {empty}", 2),
    ("chance --task {task} --answers {answers} --draws -3", 2),
    ("report {nope}", 2),
    ("consensus {bad} -o {out}", 2),
    ("baselines {empty} --answers {bad}", 2),
    ("analyze {nope} -o {out}", 2),
    ("analyze {empty} -o {out} --answers {nope}", 2),
    ("view {nope}", 2),
    ("view {empty} --port 99999999", 2),
    ("batch {nope} --model replay:x -o {out}", 2),
    ("cache stats --bogus", 2),
    ("config codex --base-url http://127.0.0.1:1/v1", 2),
    ("config codex --write --path {empty}", 2),
    ("config claude --check --project {empty}", 1),
    ("audit verify {empty}", 2),
    ("audit summary {bad}", 2),
    ("audit summary {empty}", 2),
    ("audit sources {bad} -o {out}", 2),
    ("audit summary {nope}", 2),
    ("audit serve --log {out}", 2),  # no token
    ("audit policy check {bad}", 1),
    ("task show {nope}", 2),
    ("task build {nope} -o {out}", 2),
    ("task anonymize {nope} -o {out}", 2),
    ("contamination audit {bad} -o {out}", 2),
    ("contamination blind {nope} --property x -o {out}", 2),
    ("contamination unblind {bad} {bad} -o {out}", 2),
    ("agent run --task {task} -o {out} --model nope", 2),
    ("agent run --task {task} -o {out} --model openai:x -c nokey", 2),
    ("agent demo --task nope", 2),
    ("agent atif {bad}", 2),
    ("agent recording {bad} -o {out}", 2),
    ("agent recording {bad}", 2),  # no -o
    ("harbor export {task} --answers {answers}", 2),  # no -o
    ("harbor export {nope} -o {out}", 2),
    ("harbor export {task} -o {out} {out}", 2),
    ("harbor results {nope}", 2),
    ("doctor --only nope", 2),
    ("doctor --timeout -5 --only mcp", 2),
    ("doctor --profile nope", 2),
    ("serve --port x", 2),
    ("serve --transport nope", 2),
    ("serve --transport http --host 0.0.0.0", 2),
]


@pytest.mark.parametrize(("line", "status"), BAD, ids=[line for line, _ in BAD])
def test_bad_invocations_end_in_an_error_line(line, status, files, capsys):
    args = [word.format(**files) for word in line.split()]
    got, out, err = spu(capsys, *args)
    assert got == status, (line, got, out[-500:], err[-1500:])
    assert "Traceback" not in out + err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, (line, err)


def test_old_spellings_still_work(files, capsys, tmp_path):
    """The hidden aliases do what the new names do (scripts written before the grammar keep working)."""
    first = tmp_path / "h1"
    status, _, err = spu(capsys, "harbor", "export", files["task"], first, "--answers", files["answers"])
    assert status == 0 and (first / "task.toml").is_file(), err
    # an earlier export is replaced; a folder holding anything else needs --force (or --overwrite)
    status, _, err = spu(
        capsys, "harbor", "export", files["task"], "-o", first, "--answers", files["answers"]
    )
    assert status == 0, err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    status, _, err = spu(capsys, "harbor", "export", files["task"], other, "--answers", files["answers"])
    assert status == 2 and "or --force to replace what it holds" in err
    status, _, err = spu(
        capsys, "harbor", "export", files["task"], other, "--answers", files["answers"], "--overwrite"
    )
    assert status == 0 and not (other / "notes.txt").exists(), err
    # the task folder positional or as --task, in every command that takes one
    for args in (
        ["validate", files["task"], first / "x.json"],
        ["validate", first / "x.json", "--task", files["task"]],
    ):
        status, _, err = spu(capsys, *args)
        assert status == 2 and "x.json does not exist" in err, err
    trajectory = tmp_path / "trajectory.jsonl"
    trajectory.write_text(json.dumps({"type": "run_start", "task_id": "t"}) + "\n")
    status, out, err = spu(capsys, "agent", "atif", trajectory, "--output", tmp_path / "a.json", "--json")
    assert status == 0 and json.loads(out)["out"] == str(tmp_path / "a.json"), err
    assert json.loads((tmp_path / "a.json").read_text())["schema_version"].startswith("ATIF")


def test_json_output_goes_through_one_helper():
    """Every command prints its JSON through ``spu_common.console.echo_json`` (indented, or one line for a
    line read as it comes); none writes ``json.dumps`` to stdout by hand."""
    import re

    root = Path(__file__).resolve().parents[2]
    by_hand = re.compile(r"\b(?:typer\.echo|click\.echo|print)\(\s*json\.dumps\(")
    hits = []
    for part in ("spu", "spu_common", "tools_server", "environment", "scaffold"):
        for path in sorted((root / part).rglob("*.py")):
            if path == root / "spu_common" / "console.py":  # the helper itself
                continue
            text = path.read_text(encoding="utf-8")
            hits += [
                f"{path.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}"
                for m in by_hand.finditer(text)
            ]
    assert hits == []
