"""What ``spu view PATH`` shows, gathered from PATH into one JSON-ready dict.

PATH is one run directory, a directory of runs (found by :func:`environment.runs.find_runs`, no link
followed out of PATH), a ``spu report`` output or a ``spu analyze`` output. Report and analyze outputs
are also picked up inside a runs directory (sub-directories whose names start with ``_``, such as
``_report``) and beside it. Runs are graded when the task and its answers can be found
(:func:`environment.runs.load_tasks_and_answers`: the demo tasks and answers, what a ``spu batch`` into
the runs directory ran, ``--tasks`` and ``--answers``; else the run's own task directory and the
``answers.json`` beside it); without
answers the pages show everything but scores. No file is read through a link that leads out of the
folder it belongs to.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import gzip
import io
import json
import math
from pathlib import Path
from typing import Any

from environment import runs as run_folders
from environment.runs import RunFolder, is_run_dir, within
from environment.view.categories import CATEGORIES
from environment.view.runs import problem, read_in, read_json_file, read_run

#: files that make a directory a ``spu report`` output
REPORT_FILES = ("summary.json", "report.md")
#: files that make a directory a ``spu analyze`` output
ANALYZE_FILES = ("activities.csv", "drafts.csv", "agreement.csv", "consensus.csv", "summary.md")
#: figures shown, in this order, when present
FIGURES = ("scores_vs_chance.png", "configuration_means.png", "activities.png", "drafts.png")
#: CSV tables shown (first rows), when present
TABLES = ("runs.csv", "agreement.csv", "consensus.csv")
MAX_TABLE_ROWS = 200


class ViewError(Exception):
    """PATH cannot be shown at all (it does not exist); everything else becomes a problem on the page."""


def is_report_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in REPORT_FILES)


def is_analyze_dir(path: Path) -> bool:
    return any((path / name).is_file() for name in ANALYZE_FILES) and not is_run_dir(path)


def find_runs(root: Path) -> list[RunFolder]:
    """Run folders at or under ``root`` (:func:`environment.runs.find_runs`), no link followed out of it."""
    return run_folders.find_runs(root, confine=True)


def _image(raw: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")


def _table(name: str, raw: bytes, problems: list[dict[str, str]]) -> dict[str, Any] | None:
    try:
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8", errors="replace"))))
    except csv.Error as exc:
        problems.append(problem("error", name, f"cannot be read as CSV: {exc}"))
        return None
    if not rows:
        return None
    return {
        "name": name,
        "columns": rows[0],
        "rows": rows[1 : MAX_TABLE_ROWS + 1],
        "total": len(rows) - 1,
    }


def read_outputs(folder: Path, problems: list[dict[str, str]]) -> dict[str, Any]:
    """A ``spu report`` or ``spu analyze`` output: its markdown, figures and tables (each file read once
    below ``folder``, through no link)."""
    kind = "report" if is_report_dir(folder) else "analyze"

    def inside(name: str) -> bytes | None:
        return read_in(folder / name, folder, problems, f"{folder.name}/{name}")

    markdown = ""
    for name in ("report.md", "summary.md"):
        if (raw := inside(name)) is not None:
            markdown = raw.decode("utf-8", errors="replace")[:200_000]
            break
    figures = [{"name": n, "src": _image(raw)} for n in FIGURES if (raw := inside(n)) is not None]
    tables = [t for n in TABLES if (raw := inside(n)) is not None and (t := _table(n, raw, problems))]
    summary = read_json_file(folder / "summary.json", problems, f"{folder.name}/summary.json", folder)
    return {
        "kind": kind,
        "name": folder.name,
        "markdown": markdown,
        "figures": figures,
        "tables": tables,
        "summary": summary if isinstance(summary, dict) else None,
    }


def _output_dirs(root: Path) -> list[Path]:
    """Report and analyze outputs inside a runs directory (``_report``, ``_analyze`` …)."""
    try:
        children = sorted(
            p for p in root.iterdir() if p.is_dir() and p.name.startswith("_") and within(root, p)
        )
    except OSError:
        return []
    return [p for p in children if is_report_dir(p) or is_analyze_dir(p)]


def _named_runs(output: Path) -> set[str]:
    """Configurations and run paths named in an output's CSV files (columns ``configuration``, ``config``,
    ``run``)."""
    names: set[str] = set()
    for table in ("runs.csv", "activities.csv", "drafts.csv"):
        raw = read_in(output / table, output, [], table)  # no link followed; problems are not this page's
        if raw is None:
            continue
        try:
            with io.StringIO(raw.decode("utf-8"), newline="") as handle:
                for k, row in enumerate(csv.DictReader(handle)):
                    if k >= 1000:
                        break
                    for key in ("configuration", "config", "run"):
                        value = (row.get(key) or "").strip().strip("/")
                        if value and ".." not in Path(value).parts:
                            names.add(value)
        except (OSError, csv.Error, UnicodeDecodeError):
            continue
    return names


def runs_root_of(output: Path) -> Path | None:
    """The runs directory a report or analyze output describes, when it can be found next to it.

    Inside it (``RUNS_DIR/_report``), or a directory beside the output (or its parent) that holds the
    configurations or runs named in the output's CSV files."""
    if output.name.startswith("_"):
        return output.parent
    names = _named_runs(output)
    if not names:
        return None
    try:
        siblings = sorted(p for p in output.parent.iterdir() if p.is_dir() and p != output)
    except OSError:
        siblings = []
    for candidate in (output.parent, *siblings):
        if any((candidate / name).is_dir() for name in names):
            return candidate
    return None


class Grader:
    """Finds each run's task and answers and grades drafts and submissions; silent when it cannot."""

    def __init__(self, tasks_dir: Path | None, answers: Path | None, runs_root: Path | None) -> None:
        from environment.runs import load_tasks_and_answers
        from spu_common.task import TaskError

        self._chance: dict[str, dict[str, Any]] = {}
        notes: list[str] = []
        if tasks_dir is not None and not tasks_dir.is_dir():
            notes.append(f"--tasks {tasks_dir} is not a directory; ignored")
            tasks_dir = None
        if answers is not None and not answers.exists():
            notes.append(f"--answers {answers} does not exist; ignored")
            answers = None
        try:
            self.tasks, self.answers, found = load_tasks_and_answers(runs_root, tasks_dir, answers)
        except TaskError as exc:  # --tasks or --answers cannot be read: grade with what the runs hold
            notes.append(f"--tasks/--answers: {exc}; ignored")
            self.tasks, self.answers, found = load_tasks_and_answers(runs_root)
        self.notes = notes + found

    def task_for(self, task_id: str | None, task_dir: str | None) -> Any:
        from spu_common.task import TaskError, load_task

        if task_id in self.tasks:
            return self.tasks[task_id]
        if task_dir and Path(task_dir).is_dir():
            try:
                task = load_task(Path(task_dir))
            except TaskError:
                return None
            self.tasks[task.task_id] = task
            return task
        return None

    def answers_for(self, task: Any, task_dir: str | None) -> Any:
        """The answers of ``task``: those found for the runs, else the ``answers.json`` beside the task
        folder the run names (where ``spu task build`` and the suite keep them)."""
        from environment.finder import FinderError, find_answers
        from spu_common.task import TaskError

        if task.task_id in self.answers:
            return self.answers[task.task_id]
        beside = Path(task_dir).parent / "answers.json" if task_dir else None
        if beside is None or not beside.is_file():
            return None
        try:
            found = find_answers(beside).get(task.task_id)
        except (FinderError, TaskError):
            return None
        if found is not None:
            self.answers[task.task_id] = found.answers
        return found.answers if found is not None else None

    def chance(self, task: Any, answers: Any) -> dict[str, Any]:
        from environment.chance import chance_threshold

        if task.task_id not in self._chance:
            result = chance_threshold(task, answers, draws=2000, seed=0)
            self._chance[task.task_id] = {
                k: result[k] for k in ("chance_threshold", "attainable_max", "presented_order_score")
            }
        return self._chance[task.task_id]

    def grade_run(self, run: dict[str, Any], path: Path) -> None:
        """Add ``score`` (with chance threshold and attainable maximum), draft scores and true ranks."""
        from environment.grading import grade
        from spu_common.task import TaskError

        task = self.task_for(run.get("task_id"), run.get("task_dir"))
        answers = self.answers_for(task, run.get("task_dir")) if task is not None else None
        if task is None or answers is None:
            run["grading"] = (
                "not graded: "
                + ("the task was not found" if task is None else f"no answers for {task.task_id}")
                + " (give --tasks and --answers)"
            )
            return
        try:
            run["chance"] = self.chance(task, answers)
            # the bytes read once below the run folder, through no link (never the file by name again)
            if (submitted := read_in(path / "rankings.json", path, [], "rankings.json")) is not None:
                run["score"] = _grade_dict(grade(submitted, task, answers))
            for draft in run["drafts"]:
                if (raw := read_in(path / draft["file"], path, [], draft["file"])) is not None:
                    draft["score"] = _grade_dict(grade(raw, task, answers))
        except TaskError as exc:
            run["grading"] = f"not graded: {exc}"
            return
        truth: dict[str, dict[str, int]] = {}
        for group in answers.groups:
            ordered = sorted(group.values, key=lambda k: group.values[k])
            truth[group.group_id] = {exp: i + 1 for i, exp in enumerate(ordered)}
        run["truth"] = truth
        run["groups"] = [
            {"group_id": g.group_id, "weight": g.weight, "endpoint": g.endpoint, "n": len(g.experiment_ids)}
            for g in task.groups
        ]


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _grade_dict(result: Any) -> dict[str, Any]:
    return {
        "score": _finite(result.score),
        "strict_score": _finite(result.strict_score),
        "recovered_score": _finite(getattr(result, "recovered_score", result.score)),
        "valid": bool(result.valid),
        "groups": {g.group_id: _finite(g.rho) for g in result.groups},
        "file_errors": list(result.file_errors),
    }


def _run_entry(run: RunFolder, grader: Grader | None) -> dict[str, Any]:
    entry = read_run(run)
    entry["label"] = run.label
    entry["configuration"] = run.configuration or entry.get("model") or "run"
    if not entry.get("task_id") and run.task_folder:
        entry["task_id"] = run.task_folder  # RUNS_DIR/<configuration>/<task_id>[/<run>]
    if grader is not None:
        grader.grade_run(entry, run.path)
    return entry


def overview(runs: list[dict[str, Any]], chance: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per task and configuration: mean score of the runs, chance threshold, attainable max, runs.

    ``chance`` (by task id) takes precedence over the thresholds computed for each run."""
    configs = sorted({r["configuration"] for r in runs})
    tasks: dict[str, dict[str, Any]] = {}
    for index, run in enumerate(runs):
        task_id = run.get("task_id") or "(unknown task)"
        entry = tasks.setdefault(task_id, {"task_id": task_id, "chance": run.get("chance"), "cells": {}})
        entry["chance"] = (chance or {}).get(task_id) or entry["chance"] or run.get("chance")
        cell = entry["cells"].setdefault(run["configuration"], {"runs": [], "scores": []})
        cell["runs"].append(index)
        if run.get("score") and run["score"]["score"] is not None:
            cell["scores"].append(run["score"]["score"])
    for entry in tasks.values():
        for cell in entry["cells"].values():
            cell["mean"] = sum(cell["scores"]) / len(cell["scores"]) if cell["scores"] else None
    coverage = {}
    for config in configs:
        scored = [t for t in tasks.values() if (t["cells"].get(config) or {}).get("mean") is not None]
        # above chance is judged per run, against its task's threshold
        mine = [r for r in runs if r["configuration"] == config]
        graded = [
            r
            for r in mine
            if r.get("score")
            and r["score"]["score"] is not None
            and tasks[r["task_id"] or "(unknown task)"]["chance"]
        ]
        above = [
            r
            for r in graded
            if r["score"]["score"] > tasks[r["task_id"] or "(unknown task)"]["chance"]["chance_threshold"]
        ]
        coverage[config] = {
            "tasks": len(tasks),
            "scored": len(scored),
            "runs": len(mine),
            "graded_runs": len(graded),
            "runs_above_chance": len(above),
        }
    return {
        "configurations": configs,
        "tasks": sorted(tasks.values(), key=lambda t: t["task_id"]),
        "coverage": coverage,
    }


def _report_chance(outputs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Chance thresholds from a ``spu report`` summary, by task id, so the runs page and report agree."""
    found: dict[str, dict[str, Any]] = {}
    for out in outputs:
        for task in (out.get("summary") or {}).get("tasks") or []:
            if isinstance(task, dict) and isinstance(task.get("chance_threshold"), int | float):
                found[str(task.get("task_id"))] = {
                    k: task.get(k) for k in ("chance_threshold", "attainable_max", "presented_order_score")
                }
    return found


def collect(
    path: str | Path,
    *,
    tasks_dir: str | Path | None = None,
    answers: str | Path | None = None,
    grade: bool = True,
) -> dict[str, Any]:
    """The viewer's data for PATH. Raises :class:`ViewError` only when PATH does not exist."""
    root = Path(path)
    if not root.exists():
        raise ViewError(f"{root} does not exist")
    if root.is_file():
        if root.name in ("trajectory.jsonl", "run.json", "rankings.json"):
            root = root.parent
        else:
            raise ViewError(f"{root} is a file; give a run directory, a runs directory or a report directory")
    root = root.absolute()
    problems: list[dict[str, str]] = []
    outputs: list[dict[str, Any]] = []
    runs_root = root
    if is_report_dir(root) or is_analyze_dir(root):
        outputs.append(read_outputs(root, problems))
        found = runs_root_of(root)
        runs_root = found or root.parent
        run_paths = []
        if found is not None:
            run_paths = find_runs(found)
            outputs.extend(read_outputs(p, problems) for p in _output_dirs(found) if p != root)
        else:
            problems.append(
                problem(
                    "warning",
                    root.name,
                    "its runs were not found (not inside it, nor beside it under the names in its CSV files)",
                    "`spu view RUNS_DIR` shows the runs with the reports inside RUNS_DIR (such as _report)",
                )
            )
    else:
        run_paths = find_runs(root)
        outputs.extend(read_outputs(p, problems) for p in _output_dirs(root))
    grader = None
    if grade and run_paths:
        grader = Grader(Path(tasks_dir) if tasks_dir else None, Path(answers) if answers else None, runs_root)
        problems.extend(problem("warning", "grading", note) for note in grader.notes)
    runs = [_run_entry(p, grader) for p in run_paths]
    if not runs and not outputs:
        problems.append(
            problem(
                "error",
                root.name,
                "holds no agent run (no trajectory.jsonl, rankings.json, run.json or drafts/ at any depth) "
                "and no `spu report` or `spu analyze` output",
                "give `spu view` the directory of `spu agent run --out`, of `spu batch --out`, or of "
                "`spu report --out`",
            )
        )
    view = overview(runs, _report_chance(outputs)) if runs else None
    single = len(runs) == 1 and run_paths[0].path == root
    return {
        "title": root.name,
        "path": str(root),
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "single_run": single,
        "problems": problems,
        "runs": runs,
        "overview": view,
        "outputs": outputs,
        "categories": {k: {"label": v[0], "color": v[1]} for k, v in CATEGORIES.items()},
    }


def problem_data(root: Path, message: str, hint: str = "") -> dict[str, Any]:
    """The data of a page that shows only one problem (nothing else could be drawn)."""
    return {
        "title": root.name,
        "path": str(root.absolute()),
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "single_run": False,
        "problems": [problem("error", root.name, message, hint)],
        "runs": [],
        "overview": None,
        "outputs": [],
        "categories": {k: {"label": v[0], "color": v[1]} for k, v in CATEGORIES.items()},
    }


def encode_data(data: Any) -> str:
    """The data as gzip-compressed JSON in base64, for a ``<script>`` element the page inflates.

    Compression keeps a 10,000-step run's page small enough for the browser to read and parse at once;
    base64 holds no ``<``, so no text in a run can close the element early.
    """
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:  # NaN or Infinity somewhere in a run's records: JSON has no such number
        text = json.dumps(
            _finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str
        )
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=5, mtime=0)).decode("ascii")


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
