"""``spu batch``: the reference agent over many local tasks, N at a time, resumable, then ``spu report``.

Runs directory (the layout ``spu report`` reads, environment/report.py)::

    RUNS_DIR/<configuration>/<task_id>/run-<k>/      one agent run (rankings.json, report.md, trajectory ...)
    RUNS_DIR/<configuration>/<task_id>/run-<k>/.batch-done.json   written when that run ended by itself
    RUNS_DIR/_tasks/<task_id>/                       a copy of each task (no answers) for the report
    RUNS_DIR/_batch/<configuration>.json             what was run: model, options, tasks
    RUNS_DIR/_report/                                the report (report.md, summary.json, runs.csv, PNGs)

Each run is a subprocess (``spu agent run``) in its own session. On SIGINT or SIGTERM the batch stops
starting runs, sends SIGTERM to the running ones (the agent then finishes its files: a valid
rankings.json, report, trajectory) and exits 130/143 without marking them done. Started again with the
same arguments it skips every run holding ``.batch-done.json`` and redoes the rest from a clean directory.
A run counts as done when its agent exited by itself, whatever its exit status (a model that gave up is a
result; the report scores its fallback ranking).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from environment.finder import FoundAnswers, find_answers, find_tasks
from scaffold.agent.models import PROVIDERS
from scaffold.agent.rundir import RUN_KIND
from spu_common.console import echo_json, fail, output_rule
from spu_common.jsonfiles import atomic_write_json
from spu_common.outputs import OutputRefused, claim_folder, kind_of

if TYPE_CHECKING:
    from spu_common.task import Task

DONE_MARKER = ".batch-done.json"
#: the kind of output folder a runs directory is (spu_common.outputs)
BATCH_KIND = "batch-runs"
#: agent exit statuses that mean the run was cut short by a signal (scaffold/agent/runner.py)
INTERRUPTED_CODES = (130, 143)
GRACE_S = 60.0


@dataclass(frozen=True)
class RunJob:
    task_dir: Path
    task_id: str
    run_dir: Path

    @property
    def done(self) -> bool:
        return (self.run_dir / DONE_MARKER).is_file()


def configuration_name(model_spec: str) -> str:
    """A directory name for a model spec: ``anthropic:claude-sonnet-4-5`` ->
    ``anthropic_claude-sonnet-4-5``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_spec).strip("_") or "run"


def plan_jobs(tasks: list[Task], runs_dir: Path, configuration: str, runs: int) -> list[RunJob]:
    return [
        RunJob(task.root, task.task_id, runs_dir / configuration / task.task_id / f"run-{k}")
        for task in tasks
        for k in range(1, runs + 1)
    ]


class Batch:
    """Runs the jobs with ``parallel`` subprocesses; ``stop()`` (from a signal handler) ends it cleanly."""

    def __init__(
        self,
        jobs: list[RunJob],
        agent_args: list[str],
        parallel: int,
        on_event: Callable[[str, RunJob, dict[str, Any]], None] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.jobs = jobs
        self.agent_args = agent_args
        self.parallel = parallel
        self.on_event = on_event or (lambda *_: None)
        self.env = env
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[Path, subprocess.Popen] = {}
        self.results: list[dict[str, Any]] = []

    def stop(self) -> None:
        """Start no more runs; ask the running ones to finish (SIGTERM to their process groups)."""
        self.stopping.set()
        with self._lock:
            procs = list(self._running.values())
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)

    def run(self) -> list[dict[str, Any]]:
        pending = [j for j in self.jobs if not j.done]
        with ThreadPoolExecutor(max_workers=max(1, self.parallel)) as pool:
            for result in pool.map(self._run_one, pending):
                if result is not None:
                    self.results.append(result)
        return self.results

    def _run_one(self, job: RunJob) -> dict[str, Any] | None:
        if self.stopping.is_set():
            return None
        if job.run_dir.exists():  # an unfinished earlier attempt: start over
            shutil.rmtree(job.run_dir)
        job.run_dir.mkdir(parents=True)
        cmd = [
            sys.executable,
            "-m",
            "spu",
            "agent",
            "run",
            str(job.task_dir),
            "--out",
            str(job.run_dir),
            *self.agent_args,
        ]
        started = time.monotonic()
        with open(job.run_dir.parent / f".{job.run_dir.name}.log", "wb") as log:
            with self._lock:
                if self.stopping.is_set():
                    return None
                proc = subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                    start_new_session=True,
                )
                self._running[job.run_dir] = proc
            self.on_event("start", job, {})
            try:
                code = self._wait(proc)
            finally:
                with self._lock:
                    self._running.pop(job.run_dir, None)
        result = {
            "task_id": job.task_id,
            "run_dir": str(job.run_dir),
            "exit_code": code,
            "wall_s": round(time.monotonic() - started, 2),
        }
        run_json = job.run_dir / "run.json"
        if run_json.is_file():
            try:
                record = json.loads(run_json.read_text(encoding="utf-8"))
                result |= {
                    k: record.get(k) for k in ("exit_status", "reason", "submission", "steps", "cost_usd")
                }
            except ValueError:
                pass
        interrupted = (
            code < 0
            or code in INTERRUPTED_CODES
            or (self.stopping.is_set() and code != 0 and result.get("exit_status") == "interrupted")
        )
        if interrupted:
            self.on_event("interrupted", job, result)
            return None
        atomic_write_json(job.run_dir / DONE_MARKER, result)
        self.on_event("done", job, result)
        return result

    def _wait(self, proc: subprocess.Popen) -> int:
        """Wait for the run; after a stop, give it GRACE_S to finish its files, then kill its group."""
        while True:
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            if self.stopping.is_set():
                try:
                    return proc.wait(timeout=GRACE_S)
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    return proc.wait()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def snapshot_tasks(tasks: list[Task], runs_dir: Path) -> Path:
    """Copy the task directories to RUNS_DIR/_tasks (what the report grades against)."""
    root = runs_dir / "_tasks"
    for task in tasks:
        target = root / task.task_id
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(task.root, target)
    return root


def find_answers_for(tasks: list[Task], answers: Path | None) -> dict[str, FoundAnswers]:
    """The answers of ``tasks``, by task id: from ``answers`` (a file, or a folder searched for answers.json),
    else the ``answers.json`` beside each task directory."""
    found = find_answers(answers) if answers is not None else {}
    beside = {task.root.parent / "answers.json" for task in tasks if task.task_id not in found}
    for path in sorted(p for p in beside if p.is_file()):
        found = find_answers(path) | found
    return {task.task_id: found[task.task_id] for task in tasks if task.task_id in found}


def collect_answers(answers: dict[str, FoundAnswers], into: Path) -> int:
    """Copy each task's answers file into ``into/<task_id>/answers.json`` (a temporary folder for the
    report)."""
    for task_id, found in answers.items():
        (into / task_id).mkdir(parents=True)
        shutil.copyfile(found.path, into / task_id / "answers.json")
    return len(answers)


def batch_command(
    tasks: Annotated[
        list[Path] | None,
        typer.Argument(metavar="TASK...", help="Task directories, or folders searched for them."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help=f"PROVIDER:MODEL, PROVIDER one of {', '.join(PROVIDERS)} (replay:FILE replays a recording; "
            "baseline:ENTRY ranks by an entry of each task's card).",
        ),
    ] = None,
    parallel: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Runs at once.")] = 2,
    out: Annotated[Path, typer.Option("--out", "-o", help="Runs directory (spu report layout).")] = Path(
        "spu-runs"
    ),
    name: Annotated[
        str | None, typer.Option("--name", help="Configuration name (default: from --model).")
    ] = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Runs per task.")] = 1,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers", help="answers.json or a folder of them, for the report (default: beside each task)."
        ),
    ] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Model API base URL.")] = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="Agent YAML config.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("-c", help="Agent key=value override; repeatable.")
    ] = None,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Run spu report at the end.")] = True,
    bootstrap: Annotated[
        int | None,
        typer.Option(
            "--bootstrap", min=100, help="Report bootstrap resamples (default: 10,000, as spu report)."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Run in OUT even if spu batch did not make it, or made it for another configuration of this "
            "name.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary instead of a progress bar.")
    ] = False,
    task_alias: Annotated[
        list[Path] | None, typer.Option("--task", hidden=True, help="The same as TASK; repeatable.")
    ] = None,
) -> None:
    """Run the reference agent over many tasks, N in parallel, with a progress bar; then `spu report` over
    the runs directory. Resumable: run again with the same arguments, it keeps the runs that ended and
    redoes the others, in a runs directory it made itself and for the same configuration only."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from scaffold.agent.config import ConfigError, load_config
    from scaffold.agent.models import ModelSpec, check_model
    from spu_common.task import TaskError

    tasks = [*(task_alias or []), *(tasks or [])]
    if not tasks:
        raise fail("missing argument TASK... (task directories, or folders holding them)")
    if model is None:
        raise fail("missing option --model PROVIDER:MODEL")
    try:
        spec = ModelSpec.parse(model)
        config = load_config(config_file, overrides or [])  # refused here, not once per run
        found_tasks = list(find_tasks(tasks).values())
        found_answers = find_answers_for(found_tasks, answers)
        configuration = name or configuration_name(model)
        jobs = plan_jobs(found_tasks, out, configuration, runs)
        for task in found_tasks:  # before any run starts
            check_model(spec, config.model, base_url=base_url, task_id=task.task_id, task_dir=task.root)
    except (ValueError, FileNotFoundError, TaskError, ConfigError) as exc:
        raise fail(str(exc)) from None
    agent_args = ["--model", model]
    if base_url:
        agent_args += ["--base-url", base_url]
    if config_file:
        agent_args += ["--config", str(config_file.absolute())]
    for item in overrides or []:
        agent_args += ["-c", item]
    manifest = {
        "configuration": configuration,
        "model": model,
        "base_url": base_url,
        "runs": runs,
        "config": str(config_file) if config_file else None,
        "overrides": list(overrides or []),
        "tasks": [str(t.root) for t in found_tasks],
        "answers": str(answers.absolute()) if answers else None,
    }
    with output_rule():
        resumed = claim_runs(out, jobs, manifest, force=force)
    snapshot_tasks(found_tasks, out)
    atomic_write_json(out / "_batch" / f"{configuration}.json", manifest)
    console = Console(stderr=True)
    already = sum(j.done for j in jobs)
    if resumed and not as_json:
        console.print(f"resuming in {out}: {already} of {len(jobs)} runs already done, the others redone")
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=as_json,
    )
    bar = progress.add_task(
        configuration, total=len(jobs), completed=already, status=f"{already} already done" if already else ""
    )
    counts = {"running": 0, "done": 0, "interrupted": 0}

    def on_event(kind: str, job: RunJob, result: dict[str, Any]) -> None:
        counts["running"] += 1 if kind == "start" else -1
        if kind == "done":
            counts["done"] += 1
            progress.advance(bar)
            if not as_json:
                progress.console.print(
                    f"{job.task_id}/{job.run_dir.name}: {result.get('exit_status')} "
                    f"({result['wall_s']:.0f} s)"
                )
        elif kind == "interrupted":
            counts["interrupted"] += 1
        progress.update(bar, status=f"{counts['running']} running")

    batch = Batch(jobs, agent_args, parallel, on_event=on_event)
    received: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        received.append(signum)
        batch.stop()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with progress:
            batch.run()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    remaining = sum(not j.done for j in jobs)
    summary: dict[str, Any] = {
        "configuration": configuration,
        "runs_dir": str(out),
        "total": len(jobs),
        "skipped_done": already,
        "completed": counts["done"],
        "remaining": remaining,
        "results": batch.results,
    }
    if received:
        summary["interrupted"] = True
        _finish(
            summary,
            as_json,
            console,
            f"interrupted: {counts['done']} runs finished, {remaining} left; run the same command to resume",
        )
        raise typer.Exit(130 if received[0] == signal.SIGINT else 143)
    summary["resumed"] = resumed
    if report and remaining == 0:
        summary["report"] = _report(found_answers, out, bootstrap, console)
    _finish(summary, as_json, console, f"{len(jobs) - remaining}/{len(jobs)} runs done in {out}")


def _report(answers: dict[str, FoundAnswers], out: Path, bootstrap: int | None, console) -> dict[str, Any]:
    import tempfile

    from environment.report import build_report
    from spu_common.task import TaskError

    with tempfile.TemporaryDirectory(prefix="spu-batch-answers-") as tmp:
        if not collect_answers(answers, Path(tmp)):
            console.print("no answers found (pass --answers): report skipped")
            return {"skipped": "no answers"}
        try:
            # its tasks: out/_tasks; RUNS_DIR/_report belongs to this runs directory, which is the batch's
            summary = build_report(out, answers=Path(tmp), n_boot=bootstrap, force=True)
        except (TaskError, OutputRefused) as exc:
            console.print(f"report failed: {exc}")
            return {"error": str(exc)}
    console.print(f"report: {summary['files'][0]}")
    return {"files": summary["files"], "configurations": summary["configurations"]}


def claim_runs(out: Path, jobs: list[RunJob], manifest: dict[str, Any], *, force: bool) -> bool:
    """Check that ``out`` may take these runs (spu_common.outputs): a folder ``spu batch`` made (or an empty
    one, or any with ``force``), for the same configuration when it ran this name before, whose unfinished
    run folders are runs (they are redone from scratch). True when it resumes an earlier batch."""
    resumed = claim_folder(out, BATCH_KIND, force=force, resume=True)
    earlier_path = out / "_batch" / f"{manifest['configuration']}.json"
    try:
        earlier = json.loads(earlier_path.read_text(encoding="utf-8")) if earlier_path.is_file() else None
    except ValueError:
        earlier = None
    keys = ("model", "base_url", "runs", "config", "overrides")
    if earlier is not None and not force and any(earlier.get(k) != manifest[k] for k in keys):
        changed = ", ".join(k for k in keys if earlier.get(k) != manifest[k])
        raise OutputRefused(
            f"{out} holds runs of configuration {manifest['configuration']!r} made with another {changed}: "
            "give another --name (or --out), or --force to run them again under the new settings"
        )
    for job in jobs:
        run = job.run_dir
        if not job.done and run.is_dir() and any(run.iterdir()) and kind_of(run) != RUN_KIND and not force:
            raise OutputRefused(
                f"{run} is not a run spu batch started: move it away, or --force to replace it"
            )
    return resumed


def _finish(summary: dict[str, Any], as_json: bool, console, message: str) -> None:
    if as_json:
        echo_json(summary)
    else:
        console.print(message)
