"""Commands ``spu baselines`` and ``spu analyze`` (docs/analysis.md).

Exit codes: 0 done, 2 usage or an input that could not be read or analysed (the message names the file and
line); neither command judges its input, so neither exits 1.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from spu_common.console import EXIT_USAGE, TaskAlias, echo_json, fail, output_rule, task_argument


def _fail(exc: Exception, code: int = EXIT_USAGE) -> typer.Exit:
    from environment.analysis.errors import AnalysisError

    if isinstance(exc, AnalysisError):
        return fail(f"[{exc.code}] {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""), code)
    return fail(str(exc), code)


def _holds_tasks(folder: Path) -> bool:
    """Whether the finder finds a task directory in ``folder`` (``_``- and ``.``-folders are not searched)."""
    from environment.finder import FinderError, task_dirs

    try:
        return bool(task_dirs(folder))
    except FinderError:
        return False


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _task_pairs(task_dir: Path, answers: Path | None) -> list[tuple[Any, Any]]:
    """``(task, found answers)`` for one task directory or every task below a directory, each loaded once
    (:mod:`environment.finder`'s rules)."""
    from environment.finder import find_answers, find_tasks
    from spu_common.task import TaskError

    tasks = find_tasks(task_dir)
    if (task_dir / "contract.json").is_file():
        path = answers or task_dir.parent / "answers.json"
        if path.is_dir():
            path = path / "answers.json"
        return [(task, next(iter(find_answers(path).values()))) for task in tasks.values()]
    root = answers or task_dir
    if root.is_file():
        raise TaskError("--answers must be a directory when TASK_DIR holds several tasks")
    by_id = find_answers(root)
    pairs = []
    for task_id, task in tasks.items():
        if task_id not in by_id:
            raise TaskError(f"{task.root}: no answers.json with task_id {task_id!r} under {root}")
        pairs.append((task, by_id[task_id]))
    return pairs


def baselines_cmd(
    task_dir: Annotated[
        Path | None,
        typer.Argument(metavar="TASK", help="A task directory, or a directory of tasks.", show_default=False),
    ] = None,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers", help="answers.json (default: beside the task dir); a directory for several."
        ),
    ] = None,
    proxies: Annotated[
        Path | None,
        typer.Option("--proxies", help="Proxy declaration (default: baselines.json beside the answers)."),
    ] = None,
    no_proxies: Annotated[bool, typer.Option("--no-proxies", help="Do not run declared proxies.")] = False,
    server_command: Annotated[
        str | None, typer.Option("--server-command", help="Command that starts the MCP server over stdio.")
    ] = None,
    draws: Annotated[
        int, typer.Option("--draws", min=1, help="Random submissions for the threshold.")
    ] = 4000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random submissions and shuffles.")] = 0,
    write_readme: Annotated[
        bool,
        typer.Option(
            "--write-readme",
            help="Rewrite the generated tables of TASK_DIR/README.md and of each task's README from the "
            "cards (and, when proxies run, write their scores into the cards).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")] = False,
    task_alias: TaskAlias = None,
) -> None:
    """Chance, power, attainable maximum, the trivial-descriptor screen with its family-wise verdict,
    monotone priors and declared proxies."""
    from environment.analysis.errors import AnalysisError
    from spu_common.task import TaskError

    task_dir, _ = task_argument(task_dir, task_alias)
    try:
        pairs = _task_pairs(task_dir, answers)
    except TaskError as exc:
        raise _fail(exc, EXIT_USAGE) from None
    if write_readme:  # before the baselines run: a README that cannot take them fails at once
        from environment.analysis.readme import check_readmes

        suite = task_dir / "README.md" if not (task_dir / "contract.json").is_file() else None
        try:
            check_readmes(suite, [found[0].parent for _, found in pairs])
        except AnalysisError as exc:
            raise _fail(exc) from None
    _check_proxies_option(proxies, pairs)
    command = shlex.split(server_command) if server_command else None
    results = [
        _task_baselines(
            task, found, proxies, run_declared=not no_proxies, command=command, draws=draws, seed=seed
        )
        for task, found in pairs
    ]
    if write_readme:
        try:
            written = _write_readmes(task_dir, pairs, results, proxies_ran=not no_proxies)
        except AnalysisError as exc:
            raise _fail(exc) from None
        for path in written:
            typer.echo(f"wrote {path}", err=True)
    if as_json:
        echo_json(_clean(results[0] if len(results) == 1 else {"tasks": results}))
        return
    for result in results:
        _print_baselines(result)


def _check_proxies_option(proxies: Path | None, pairs: list[tuple[Any, Any]]) -> None:
    """``--proxies`` names an existing declaration, for one task."""
    if proxies is not None and not proxies.is_file():
        raise _fail(ValueError(f"--proxies {proxies} does not exist"), EXIT_USAGE)
    if proxies is not None and len(pairs) > 1:
        raise _fail(ValueError("--proxies names one declaration: give one task directory"), EXIT_USAGE)


def _task_baselines(
    task: Any,
    found: tuple[Path, Any],
    proxies: Path | None,
    *,
    run_declared: bool,
    command: list[str] | None,
    draws: int,
    seed: int,
) -> dict[str, Any]:
    """One task's baselines, with its declaration (``--proxies`` or ``baselines.json`` beside the answers)
    and its card; a usage error for answers that do not fit the task, an analysis error otherwise."""
    from environment.analysis.baselines import DECLARATION_FILE, baselines
    from environment.analysis.errors import AnalysisError
    from environment.taskbuild.card import CARD_FILE, read_card
    from spu_common.task import TaskError, check_answers

    answers_path, loaded = found
    try:
        check_answers(task, loaded)
    except TaskError as exc:
        raise _fail(exc, EXIT_USAGE) from None
    try:
        return baselines(
            task,
            loaded,
            declaration=proxies or answers_path.parent / DECLARATION_FILE,
            run_declared=run_declared,
            command=command,
            draws=draws,
            seed=seed,
            card=read_card(answers_path.parent / CARD_FILE),
        )
    except AnalysisError as exc:
        raise _fail(exc) from None


def _write_readmes(
    task_dir: Path, pairs: list[tuple[Any, Any]], results: list[dict[str, Any]], *, proxies_ran: bool
) -> list[Path]:
    """Proxies' scores into each card (when they ran), then the READMEs' tables from the cards."""
    from environment.analysis.errors import AnalysisError
    from environment.analysis.readme import write_readmes
    from environment.taskbuild.card import (
        CARD_FILE,
        DECLARATION_FILE,
        dump_card,
        proxies_digest,
        read_card,
        with_proxy_scores,
    )
    from spu_common.jsonfiles import atomic_write_bytes

    cards = []
    for (_, (answers_path, _)), result in zip(pairs, results, strict=True):
        folder = answers_path.parent
        card = read_card(folder / CARD_FILE)
        if card is None:
            raise AnalysisError(
                "card_missing",
                f"{folder / CARD_FILE} does not exist",
                f"Build the task with spu task build SPEC -o {folder} to write its card.",
            )
        if proxies_ran and result["declaration"] is not None:
            digest = proxies_digest(folder / DECLARATION_FILE, answers_path.read_bytes())
            card = with_proxy_scores(card, result["proxies"], digest)
            atomic_write_bytes(folder / CARD_FILE, dump_card(card))
        cards.append((folder / "README.md", card))
    suite = task_dir / "README.md" if not (task_dir / "contract.json").is_file() else None
    return write_readmes(suite, cards)


def _print_baselines(result: dict[str, Any]) -> None:
    from environment.analysis.baselines import format_baselines

    typer.echo("\n".join(format_baselines(result)))


def analyze_cmd(
    runs_dir: Annotated[Path, typer.Argument(help="Directory of runs (reference agent or Harbor jobs).")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Where to write the tables, plots and summary.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the output folder even if spu analyze did not write it.")
    ] = False,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers",
            help="answers.json, or a folder searched for them (matched by task_id); default: those of the "
            "tasks spu batch ran into RUNS_DIR.",
        ),
    ] = None,
    answers_dir: Annotated[Path | None, typer.Option("--answers-dir", hidden=True)] = None,
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            help="Directory searched for task dirs (besides the demo tasks and RUNS_DIR/_tasks of spu "
            "batch; default: the --answers folder when it holds tasks, as the suite in environment/tasks "
            "does).",
        ),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="List unreadable runs in summary.md instead of stopping.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")] = False,
) -> None:
    """Activities, drafts and revisions, the monotone prior, agreement, consensus gain, errors and GPU use."""
    from environment.analysis.analyze import analyze
    from environment.analysis.errors import AnalysisError
    from environment.runs import load_tasks_and_answers
    from spu_common.task import TaskError

    if out is None:
        raise fail("missing option -o/--out OUT (the folder for the tables, plots and summary)")
    if not runs_dir.exists():
        raise fail(f"{runs_dir} does not exist: give the folder of runs")
    answers = answers or answers_dir  # --answers-dir: the earlier spelling, kept for scripts
    for given, option in ((answers, "--answers"), (tasks, "--tasks")):
        if given is not None and not given.exists():
            raise _fail(ValueError(f"{option} {given} does not exist"), EXIT_USAGE)
    if tasks is None and answers is not None and answers.is_dir() and _holds_tasks(answers):
        tasks = answers  # the tasks sit beside their answers
    try:
        loaded_tasks, loaded_answers, notes = load_tasks_and_answers(
            runs_dir if runs_dir.is_dir() else None, tasks, answers, demo_answers=False
        )
    except TaskError as exc:
        raise _fail(exc, EXIT_USAGE) from None
    for note in notes:
        typer.echo(f"warning: {note}", err=True)
    try:
        with output_rule():
            summary = analyze(
                runs_dir, out, loaded_tasks, loaded_answers, skip_invalid=skip_invalid, force=force
            )
    except AnalysisError as exc:
        raise _fail(exc) from None
    if as_json:
        echo_json(_clean(summary))
        return
    typer.echo(f"{summary['runs']} runs, {summary['tool_calls']} tool calls analysed; outputs in {out}")
    for row in summary["runs_table"]:
        score = row["final_score"]
        typer.echo(
            f"  {row['run']}: {row['task']} [{row['config']}] score "
            + ("-" if score is None else f"{score:+.3f}")
            + f", {row['n_drafts']} drafts, {row['n_revisions']} revisions"
            + (f", follows {row['monotone_field']}" if row["monotone_field"] else "")
        )
    for line in summary["skipped"]:
        typer.echo(f"  skipped: {line}")


def register(app: typer.Typer) -> None:
    """Add ``spu baselines`` and ``spu analyze`` to the root app."""
    app.command("baselines")(baselines_cmd)
    app.command("analyze")(analyze_cmd)
