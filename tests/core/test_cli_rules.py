"""The whole `spu --help` tree walked with generated bad inputs: every command found in the app (none is
listed here), every path it takes given a missing file, a folder where a file belongs (or a file where a
folder does), a file that is not UTF-8, a file that is not JSON, YAML or TOML; every number option given a
word; every command an option it does not have. Each answer must be one `error:` line on stderr, no
traceback, and the exit status of the rule: 2 for usage and for input that is missing or cannot be read
as its kind, 1 for a negative verdict of a command that judges its input.

The other arguments of each invocation are good ones (a task, its answers, a submission, a run, an audit
log ...), chosen by the parameter's name, so the bad one is what the command must answer. A parameter
whose name has no good value here and that the command requires fails the test: add its value.

On 39e2847 this walk found missing files given to `validate`, `audit verify` and `audit policy check`
answered with exit 1, unreadable files given to `audit summary|sources` and `agent recording|atif` with
exit 1, `analyze` on a missing folder with exit 1, and analysis errors and `spu view` on two lines."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from environment.demo_tasks import demo_answers_path, demo_task_dir
from spu.cli import main, make_app
from spu_common.submission import fallback_submission
from spu_common.task import load_task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environment"))
from analysis_runs import write_jsonl_run  # tests/environment: writes run folders by hand

#: every case runs a command in this process; the walk takes about a minute
pytestmark = pytest.mark.slow

#: what a parameter holds, by name: a file, a folder, or either (an answers file or a folder of them)
FILE, FOLDER, EITHER, TEXT = "file", "folder", "either", "text"  # TEXT: any UTF-8 text is good
KINDS = {
    "task": FOLDER,
    "task_dir": FOLDER,
    "source": FOLDER,
    "spec": FOLDER,
    "runs_dir": FOLDER,
    "tasks": FOLDER,
    "jobs_dir": FOLDER,
    "project": FOLDER,
    "task_root": FOLDER,
    "workdir": FOLDER,
    "path": EITHER,  # spu view PATH: a run, a folder of runs or a report; spu config --path: a file
    "answers": EITHER,
    "submission": FILE,
    "submissions": FILE,
    "trajectory": FILE,
    "log": FILE,
    "file": FILE,
    "table": FILE,
    "dataset": FILE,
    "template": TEXT,
    "parameters": FILE,
    "predictions": FILE,
    "config_file": FILE,
    "proxies": FILE,
    "key": FILE,
    "policy": FILE,
    "agents_path": FILE,
}
#: outputs and folders a command creates when they are absent (walked with a file where the folder goes
#: and, for -o/--out, a folder holding what the command did not write)
CREATED = {"out", "answers_out", "workdir", "project", "agents_path"}
CREATED_BY = {
    ("audit", "serve"): {"log", "key"},
    ("config", "codex"): {"path"},
    ("config", "claude"): {"path"},
}
#: options whose files are read only in one mode of the command (config's: with --write or --check), and
#: --task-root, which may name a folder that comes later (a container's /app/task): their content is not
#: read in the walk's invocation
UNREAD = {
    ("config", "codex"): {"path", "agents_path", "task_root"},
    ("config", "claude"): {"path", "task_root"},
}
#: inputs a command judges: present but wrong is its negative verdict (1); missing or not a file is 2,
#: except for `spu grade`, which scores a missing or unreadable submission -1 (a run that wrote nothing)
JUDGED = {
    ("validate",): {"submission": {"broken": 1}},
    ("grade",): {"submission": {"missing": 1, "wrong_kind": 1, "broken": 1}},
    ("audit", "verify"): {"log": {"broken": 1}},
    ("audit", "policy", "check"): {"file": {"broken": 1}},
}


def _commands(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):  # a group (typer vendors its own click)
        return [pair for name, sub in command.commands.items() for pair in _commands(sub, (*prefix, name))]
    return [(prefix, command)]


COMMANDS = dict(_commands(typer.main.get_command(make_app())))


def _shown(command: Any) -> list[Any]:
    return [p for p in command.params if not getattr(p, "hidden", False)]


def _annotation(param: Any) -> Any:
    """The Python type a parameter converts to (typer keeps it on the parameter; a list: its item)."""
    annotation = param.type_descriptor.annotation
    return (
        next(iter(typing.get_args(annotation)), annotation) if typing.get_origin(annotation) else annotation
    )


def _is_path(param: Any) -> bool:
    return _annotation(param) is Path


def _is_number(param: Any) -> bool:
    return _annotation(param) in (int, float)


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False))


class Workspace:
    """Good inputs of every kind, made once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.task = root / "suite" / "aromatic" / "task"
        shutil.copytree(demo_task_dir("aromatic-acidity"), self.task)
        self.answers = self.task.parent / "answers.json"
        shutil.copyfile(demo_answers_path("aromatic-acidity"), self.answers)
        task = load_task(self.task)
        self.submission = root / "rankings.json"
        self.submission.write_text(json.dumps(fallback_submission(task)))
        self.runs = root / "runs"
        orders = {g.group_id: list(g.experiment_ids) for g in task.groups}
        write_jsonl_run(
            self.runs / "cfg" / task.task_id / "run-1", task.task_id, [("bash", {})], final=orders
        )
        self.trajectory = self.runs / "cfg" / task.task_id / "run-1" / "trajectory.jsonl"
        from tools_server.web.audit import AuditLog

        self.log = root / "audit" / "audit.jsonl"
        AuditLog(self.log, fsync=False).append({"kind": "call", "tool": "web_search", "outcome": "ok"})
        self.policy = root / "policy.json"
        self.policy.write_text(json.dumps({"dois": ["10.1021/jacs.5b01234"]}))
        self.table = root / "predictions.csv"
        rows = ["model,benchmark,item_id,prediction,label"]
        rows += [f"m,b,i{k},{1.234 + k / 7:.3f},{1.234 + k / 7:.3f}" for k in range(12)]
        self.table.write_text("\n".join(rows) + "\n")
        self.dataset = root / "dataset.csv"
        self.dataset.write_text("smiles,label\nCCO,1.5\nCCCO,2.5\nCCCCO,3.5\n")
        blinded = root / "blinded"
        status, _, err = spu(
            "contamination", "blind", self.dataset, "--property", "solubility", "-o", blinded
        )
        assert status == 0, err
        self.parameters = blinded / "blinding.json"
        self.predictions = next(blinded.glob("*/dataset.csv"))
        self.spec = root / "spec"
        # any suite task's spec: the first in the listing, so that renaming a task cannot break this test
        suite = Path(__file__).resolve().parents[2] / "environment" / "tasks"
        shutil.copytree(min(suite.glob("*/spec/spec.yaml")).parent, self.spec)
        self.jobs = root / "jobs"
        self.jobs.mkdir()

    def good(self, command: tuple[str, ...], name: str, fresh: Path) -> list[str] | None:
        """A good value of parameter ``name`` of ``command`` (its words), or None when this test has none."""
        if (command, name) == (("view",), "path"):
            return [str(self.runs)]
        if name == "model" and command[0] == "config":  # there the model's name, not PROVIDER:MODEL
            return None
        values: dict[str, Callable[[], Any]] = {
            "task": lambda: self.task,
            "task_dir": lambda: self.task,
            "source": lambda: self.task,
            "answers": lambda: self.answers,
            "submission": lambda: self.submission,
            "submissions": lambda: self.submission,
            "runs_dir": lambda: self.runs,
            "trajectory": lambda: self.trajectory,
            "log": lambda: self.log,
            "file": lambda: self.policy,
            "table": lambda: self.table,
            "dataset": lambda: self.dataset,
            "parameters": lambda: self.parameters,
            "predictions": lambda: self.predictions,
            "spec": lambda: self.spec,
            "specs": lambda: self.spec,
            "jobs_dir": lambda: self.jobs,
            "out": lambda: fresh / "out",
            "model": lambda: "replay:demo-aromatic-acidity",
            "property_name": lambda: "solubility",
        }
        return [str(values[name]())] if name in values else None


def spu(*args: Any) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``spu ARGS`` in this process; a command that does not end within
    120 s fails (a server started by a bad input would wait for ever)."""
    out, err = io.StringIO(), io.StringIO()

    def too_long(*_: Any) -> None:
        raise TimeoutError(f"spu {' '.join(map(str, args))} did not end within 120 s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(120)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
                status = 0
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("good"))


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "spu-work"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "spu-cache"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.setenv("HOME", str(tmp_path))


def bad_values(kind: str, where: Path) -> dict[str, Path]:
    """Bad paths for a parameter holding ``kind``: ``missing``; ``wrong_kind`` (a folder for a file, a
    file for a folder); ``broken`` (not JSON, YAML, TOML or CSV); ``not_utf8``; ``foreign`` (a folder
    holding what the command did not write, a ``task/`` folder included)."""
    where.mkdir(parents=True, exist_ok=True)
    broken_text = where / "broken.json"
    broken_text.write_text('{"a": [1, \n[b\nc = "')  # not JSON, not YAML (an open flow), not TOML
    not_utf8 = where / "latin1.json"
    not_utf8.write_bytes(b'{"caf\xe9": 1}\n')
    folder = where / "a-folder"
    (folder / "task").mkdir(parents=True)
    (folder / "task" / "notes.txt").write_text("mine")
    values = {"missing": where / "does-not-exist", "broken": broken_text, "not_utf8": not_utf8}
    return values | {"wrong_kind": not_utf8 if kind == FOLDER else folder, "foreign": folder}


def kind_of_param(name: str) -> str:
    return KINDS.get(name, FOLDER if name in CREATED else FILE)


def bad_kinds(path: tuple[str, ...], name: str) -> list[str]:
    kind = kind_of_param(name)
    if name in CREATED | CREATED_BY.get(path, set()):
        return ["wrong_kind", "foreign"] if name == "out" else ["wrong_kind"]
    kinds = ["missing", "wrong_kind", "broken", "not_utf8"]
    if kind == FOLDER:
        kinds.remove("broken")  # a file in a folder's place is wrong_kind already
        kinds.remove("not_utf8")
    if kind == EITHER:
        kinds.remove("wrong_kind")
    if kind == TEXT:
        kinds.remove("broken")
    return kinds


def cases() -> list[tuple[tuple[str, ...], str, str]]:
    """(command, parameter, bad kind) for every path parameter of every command, plus per command an
    unknown option and a word for every number option."""
    found = []
    for path, command in COMMANDS.items():
        found.append((path, "--bogus-option", "usage"))
        for param in _shown(command):
            if _is_path(param):
                found += [(path, param.name, bad) for bad in bad_kinds(path, param.name)]
            elif _is_number(param):
                found.append((path, param.name, "word"))
    return found


CASES = cases()


def _words(param: Any, value: str) -> list[str]:
    if param.param_type_name == "argument":
        return [value]
    return [param.opts[0], value]


def invocation(path: tuple[str, ...], walked: str, bad: str, ws: Workspace, tmp: Path) -> list[str]:
    command = COMMANDS[path]
    args: list[str] = [*path]
    for param in _shown(command):
        if _is_flag(param):
            continue
        if param.name == walked:
            value = "many" if bad == "word" else str(bad_values(kind_of_param(walked), tmp / "bad")[bad])
            args += _words(param, value)
            continue
        good = ws.good(path, param.name, tmp)
        if good is None:
            assert not param.required, f"spu {' '.join(path)}: no good value for {param.name}: add one"
            continue
        args += [w for value in good for w in _words(param, value)]
    if walked == "--bogus-option":
        args.append("--bogus-option")
    return args


def expected(path: tuple[str, ...], walked: str, bad: str) -> set[int]:
    if walked in UNREAD.get(path, set()):
        return {0, 2} if bad == "wrong_kind" else {0}
    judged = JUDGED.get(path, {}).get(walked)
    if judged is not None:
        return {judged.get("broken" if bad == "not_utf8" else bad, 2)}
    return {2}


@pytest.mark.parametrize(
    ("path", "walked", "bad"), CASES, ids=[f"{' '.join(p)}:{w}:{b}" for p, w, b in CASES]
)
def test_every_command_answers_a_bad_input_by_the_rule(path, walked, bad, workspace, tmp_path):
    args = invocation(path, walked, bad, workspace, tmp_path)
    status, out, err = spu(*args)
    shown = " ".join(args)
    assert "Traceback" not in out + err, (shown, err[-3000:])
    assert status in expected(path, walked, bad), (shown, status, out[-500:], err[-1500:])
    lines = err.splitlines()
    if status == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), (shown, err)
    elif status == 1:  # a verdict: its report on stdout, at most its one error line on stderr
        assert len(lines) <= 1 and all(line.startswith("error: ") for line in lines), (shown, err)


def test_the_walk_covers_every_command():
    walked = {path for path, _, _ in CASES}
    assert walked == set(COMMANDS) and len(COMMANDS) > 30
    assert sum(bad == "not_utf8" for _, _, bad in CASES) > 20
