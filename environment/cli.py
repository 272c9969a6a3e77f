"""Benchmark commands: ``spu task show|build|sources|anonymize``, ``spu validate``, ``spu grade``,
``spu chance``, ``spu report``, ``spu consensus``. Exit codes: 0 ok, 1 the checked thing is wrong, 2 usage
error."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from spu_common.console import (
    EXIT_INVALID,
    EXIT_USAGE,
    TaskAlias,
    TaskArg,
    echo_json,
    fail,
    output_rule,
    task_argument,
)

task_app = typer.Typer(help="Inspect and prepare benchmark task directories.", no_args_is_help=True)


def _load_task(path: Path):
    from spu_common.task import TaskError, load_task

    try:
        return load_task(path)
    except TaskError as exc:
        raise fail(str(exc)) from None


def _load_task_and_answers(task_dir: Path, answers_path: Path):
    from spu_common.task import TaskError, check_answers, load_answers

    task = _load_task(task_dir)
    try:
        answers = load_answers(answers_path)
        check_answers(task, answers)
    except TaskError as exc:
        raise fail(str(exc)) from None
    return task, answers


AnswersOpt = Annotated[
    Path | None, typer.Option("--answers", help="answers.json of the task (kept outside the task).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace the output even if this command did not write it.")
]


@task_app.command("show")
def task_show(
    task_dir: TaskArg = None,
    spec: Annotated[
        Path | None,
        typer.Option("--spec", help="Spec the task was built from (default: ../spec beside the task)."),
    ] = None,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers", help="answers.json of the task (default: ../answers.json beside the task)."
        ),
    ] = None,
    as_json: JsonOpt = False,
    task_alias: TaskAlias = None,
) -> None:
    """Check a task directory and summarize it: identity, groups, columns, input files; with its answers
    known, the chance threshold, power and the card beside the answers; with its spec known, the author
    warnings and whether the task matches a fresh build.

    Exit 0 the task is valid (and matches its spec), 1 the task has drifted from its spec (the differing
    files are listed: rebuild with spu task build), 2 the task, its answers or its spec cannot be read."""
    task_dir, _ = task_argument(task_dir, task_alias)
    task = _load_task(task_dir)
    measured = _measured(task_dir, answers)
    authoring = _authoring(task_dir, spec)
    summary = {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "title": task.title,
        "root": str(task.root),
        "experiments": task.n_experiments,
        "groups": [
            {"group_id": g.group_id, "endpoint": g.endpoint, "weight": g.weight, "n": len(g.experiment_ids)}
            for g in task.groups
        ],
        "condition_columns": task.condition_columns(),
        "numeric_columns": task.numeric_columns,
        "input_files": task.input_files,
        "has_experiment_md": bool(task.experiment),
        "has_protocol_json": bool(task.protocol),
    }
    if measured is not None:
        summary |= measured
    if authoring is not None:
        summary["authoring"] = {
            **authoring,
            "warnings": [{"code": w.code, "group": w.group, "text": str(w)} for w in authoring["warnings"]],
        }
    drifted = bool(authoring and authoring["differs_from_build"])
    if as_json:
        echo_json(summary)
        raise typer.Exit(EXIT_INVALID if drifted else 0)
    typer.echo(f"{task.task_id} (version {task.task_version}): {task.title}")
    typer.echo(f"{task.n_experiments} experiments in {len(task.groups)} groups")
    for g in summary["groups"]:
        typer.echo(f"  {g['group_id']}: n={g['n']} weight={g['weight']:.3g}  {g['endpoint']}")
    typer.echo(
        f"conditions: {', '.join(summary['condition_columns']) or '-'} (numeric: "
        f"{', '.join(task.numeric_columns) or '-'})"
    )
    typer.echo(f"input files: {', '.join(task.input_files) or '-'}")
    if measured is not None:
        _echo_measured(measured)
    if authoring is not None:
        _echo_authoring(authoring)
    if drifted:
        raise typer.Exit(EXIT_INVALID)


def _measured(task_dir: Path, answers: Path | None) -> dict[str, Any] | None:
    """Chance and power of the task, and its card, when its answers are given or lie beside it."""
    from environment.chance import chance_threshold
    from environment.taskbuild import CARD_FILE
    from environment.taskbuild.card import read_card

    path = answers if answers is not None else task_dir.resolve().parent / "answers.json"
    if answers is None and not path.is_file():
        return None
    task, loaded = _load_task_and_answers(task_dir, path)
    chance = chance_threshold(task, loaded)
    keys = (
        "chance_threshold",
        "chance_method",
        "sampled_threshold",
        "attainable_max",
        "presented_order_score",
    )
    keys += ("presented_order_above_chance", "reversed_presented_order_above_chance", "power")
    keys += ("effect_for_80pct_power", "power_runs", "power_effect", "power_threshold", "power_method")
    keys += ("power_single_run", "runs_for_80pct_power")
    return {"chance": {k: chance[k] for k in keys}, "card": read_card(path.parent / CARD_FILE)}


def _echo_measured(measured: dict[str, Any]) -> None:
    chance = measured["chance"]
    typer.echo(
        f"chance threshold {chance['chance_threshold']:.4f} ({chance['chance_method']}); presented order "
        f"{chance['presented_order_score']:+.4f}" + _presented_flag(chance)
    )
    typer.echo(_power_line(chance))
    card = measured["card"]
    if card is None:
        return
    screen = card["screen"]
    p_value = "" if screen["p_value"] is None else f" (family-wise p = {screen['p_value']:.4f})"
    typer.echo(f"card: screen {screen['verdict']}{p_value}")
    if card["selection"]:
        selection = card["selection"]
        typer.echo(
            f"  selection: {selection['kept']} kept of {selection['tried']} tried: {selection['rule']}"
        )
    if card["design_screen"]:
        typer.echo("  " + _design_line(card["design_screen"]))


def _authoring(task_dir: Path, spec: Path | None) -> dict[str, Any] | None:
    from environment.taskbuild import SpecError, check_built_task, spec_of_task

    spec = spec if spec is not None else spec_of_task(task_dir)
    if spec is None:
        return None
    try:
        return check_built_task(task_dir, spec)
    except SpecError as exc:
        raise fail(f"spec {spec}:\n" + str(exc)) from None


def _echo_authoring(authoring: dict[str, Any]) -> None:
    typer.echo(f"spec: {authoring['spec']}")
    differs = authoring["differs_from_build"]
    if differs:
        typer.echo(f"  differs from a fresh build of the spec: {', '.join(differs)} (run spu task build)")
    else:
        typer.echo("  matches a fresh build of the spec")
    for warning in authoring["warnings"]:
        typer.echo(f"  warning {warning}")
    for note in authoring["notes"]:
        typer.echo(f"  note: {note}")
    if not authoring["warnings"]:
        typer.echo("  no author warnings")


@task_app.command("build")
def task_build(
    spec: Annotated[Path, typer.Argument(help="Spec folder (spec.yaml and its experiments CSV).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Writes OUT/task/, OUT/answers.json and OUT/card.json.")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT/task even if it is not a build of this task.")
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when there are author warnings.")] = False,
    allow_presented_order: Annotated[
        bool,
        typer.Option(
            "--allow-presented-order",
            help="Write the task even though its presented order, or its reverse, is above chance (the "
            "card records it).",
        ),
    ] = False,
    design_screen: Annotated[
        int,
        typer.Option(
            "--design-screen",
            min=0,
            metavar="N",
            help="Re-draw the spec's design N times (seeds 0..N-1) and report its prior rate in the card.",
        ),
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Build a task directory, its answers and its card from a spec, run the task checks, print author
    warnings.

    Exit 0 built, 1 built with warnings under --strict, 2 the spec has problems (each listed), including a
    presented order above chance without --allow-presented-order."""
    from environment.taskbuild import SpecError, build_task

    progress = None
    if design_screen and not as_json:

        def progress(done: int, total: int) -> None:
            if done == total or done % 10 == 0:
                typer.echo(f"design screen: {done}/{total} draws", err=True)

    try:
        result = build_task(
            spec,
            out,
            force=force,
            allow_presented_order=allow_presented_order,
            design_screen=design_screen,
            progress=progress,
        )
    except SpecError as exc:
        if as_json:
            echo_json({"built": False, "problems": [{**p.__dict__, "text": str(p)} for p in exc.problems]})
        n = len(exc.problems)  # one line, the problems numbered (--json lists them one by one)
        listed = " ".join(f"({k}) {' '.join(str(p).split())}" for k, p in enumerate(exc.problems, start=1))
        raise fail(f"{spec}: {n} problem{'s' if n != 1 else ''}: {listed}") from None
    code = EXIT_INVALID if strict and result.warnings else 0
    if as_json:
        echo_json({"built": True, **result.to_dict()})
        raise typer.Exit(code)
    typer.echo(
        f"built {result.task_id} (version {result.task_version}): {result.experiments} experiments in "
        f"{result.groups} groups -> {result.task_dir}, {result.answers}, {result.card}"
    )
    typer.echo(f"screen: {result.prior_verdict}")
    if result.design_screen is not None:
        typer.echo(_design_line(result.design_screen))
    for warning in result.warnings:
        typer.echo(f"warning {warning}")
    for note in result.notes:
        typer.echo(f"note: {note}")
    if not result.warnings:
        typer.echo("no author warnings")
    raise typer.Exit(code)


def _design_line(screened: dict[str, Any]) -> str:
    """One line of a design screen's result."""
    drawn = screened["draws"] - screened["failed_draws"]
    if not drawn:
        return f"design screen: none of {screened['draws']} draws could fill the groups"
    return (
        f"design screen: {screened['prior_solvable']} of {drawn} draws prior-solvable "
        f"({screened['prior_rate']:.0%}; {screened['undecided']} undecided); with shuffled values "
        f"{screened['shuffled_prior_solvable']} of {drawn} ({screened['shuffled_prior_rate']:.0%})"
        + (
            f"; {screened['failed_draws']} draws could not fill the groups"
            if screened["failed_draws"]
            else ""
        )
    )


@task_app.command("sources")
def task_sources(
    specs: Annotated[list[Path], typer.Argument(help="Spec folders whose values to re-read.")],
    repo: Annotated[
        list[str],
        typer.Option(
            "--repo",
            metavar="OWNER/NAME=PATH",
            help="A local copy of a source repository: a git directory (read at the pinned commit) or a "
            "checked-out folder. Repeat for each repository the specs name.",
        ),
    ] = [],  # noqa: B006 (Typer reads the default)
    as_json: JsonOpt = False,
) -> None:
    """Re-read every value of each spec from its pinned source file (``source_files`` in spec.yaml, and the
    ``source_file``, ``source_line`` and ``source_column`` of each experiments row) and compare.

    Exit 0 every value equals its cell, 1 a value differs or a file does not hash to its pin, 2 usage, a spec
    with problems, or a repository with no local copy given."""
    from environment.taskbuild import SpecError
    from environment.taskbuild.sources import check_sources, git_copy_reader

    copies: dict[str, Path] = {}
    for item in repo:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise fail(f"--repo {item!r} is not OWNER/NAME=PATH")
        copies[name.strip()] = Path(path)
    read = git_copy_reader(copies)
    results = []
    for spec in specs:
        try:
            results.append(check_sources(spec, read))
        except SpecError as exc:
            raise fail(
                f"{spec}: {len(exc.problems)} spec problem(s); run spu task build to list them"
            ) from None
    unavailable = [line for r in results for line in r.unreadable]
    code = EXIT_USAGE if unavailable else (EXIT_INVALID if not all(r.ok for r in results) else 0)
    if as_json:
        echo_json(
            {
                "tasks": [r.__dict__ | {"ok": r.ok} for r in results],
                "checked": sum(r.checked for r in results),
                "mismatches": sum(len(r.mismatches) for r in results),
            }
        )
        raise typer.Exit(code)
    for r in results:
        status = "ok" if r.ok else ("FAILED" if r.mismatches else "not read")
        typer.echo(
            f"{r.task_id}: {r.checked - len(r.mismatches)}/{r.checked} values equal their cells ({status})"
        )
        for line in r.unreadable + r.mismatches:
            typer.echo(f"  {line}")
    total = sum(r.checked for r in results)
    wrong = sum(len(r.mismatches) for r in results)
    typer.echo(f"{total - wrong}/{total} values equal their source cells in {len(results)} spec(s)")
    if unavailable:
        typer.echo(f"error: {unavailable[0]}", err=True)
    raise typer.Exit(code)


@task_app.command("anonymize")
def task_anonymize(
    source: TaskArg = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="New task directory (absent or empty, or --force).")
    ] = None,
    answers: Annotated[Path | None, typer.Option("--answers", help="Readable answers.json to remap.")] = None,
    answers_out: Annotated[
        Path | None,
        typer.Option("--answers-out", help="Where to write the remapped answers (default: beside OUT)."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for reproducible ids and order.")] = None,
    no_rewrite_text: Annotated[
        bool, typer.Option("--no-rewrite-text", help="Do not replace old ids inside text files.")
    ] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    task_alias: TaskAlias = None,
) -> None:
    """Write a copy of a task (TASK) with random experiment ids and shuffled order; the mapping goes with
    the answers. OUT and the mapping's file are written only when absent or empty (or with --force)."""
    from environment.anonymize import anonymize_task, mapping_path
    from spu_common.outputs import claim_file, claim_folder
    from spu_common.task import TaskError

    source, _ = task_argument(source, task_alias)
    if out is None:
        raise fail("missing option -o/--out OUT (the new task directory)")
    _load_task(source)
    if answers is not None:
        _load_task_and_answers(source, answers)
    with output_rule():
        claim_file(mapping_path(out, answers, answers_out), force=force)
        claim_folder(out, None, force=force, inputs=[source, *([answers] if answers else [])])
    try:
        result = anonymize_task(
            source, out, answers=answers, answers_out=answers_out, seed=seed, rewrite_text=not no_rewrite_text
        )
    except TaskError as exc:
        raise fail(str(exc)) from None
    if as_json:
        echo_json(result)
    else:
        typer.echo(f"anonymized task written to {result['task_dir']}; id mapping in {result['mapping_file']}")


def validate_cmd(
    task: TaskArg = None,
    submission: Annotated[
        Path | None, typer.Argument(metavar="SUBMISSION", help="rankings.json to check.", show_default=False)
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Do not try recovering schema departures of a rejected file.")
    ] = False,
    as_json: JsonOpt = False,
    task_alias: TaskAlias = None,
) -> None:
    """Validate a submission (SUBMISSION) against a task (TASK) under the strict grader's rules; errors per
    group; exit 1 if invalid, 2 when the file is not there.

    A file with a schema departure is invalid (the grader scores it -1); unless --strict, the report also
    says whether the departures could be recovered."""
    from spu_common.submission import validate_submission

    task, (submission,) = task_argument(task, task_alias, [submission])
    if submission is None:
        raise fail("missing argument SUBMISSION (the rankings.json to check)")
    if not os.path.lexists(submission):
        raise fail(f"{submission} does not exist")
    if submission.is_dir():
        raise fail(f"{submission} is a folder: give the rankings.json file")
    loaded = _load_task(task)
    report = validate_submission(submission, loaded, recover=False)
    recovery = None
    if report.file_errors and not strict:
        recovery = validate_submission(submission, loaded, recover=True)
    if as_json:
        data = report.model_dump()
        data["recovery"] = recovery.model_dump() if recovery is not None else None
        echo_json(data)
    else:
        status = "valid" if report.valid else "INVALID"
        typer.echo(f"{submission}: {status}")
        for line in report.messages():
            typer.echo(f"  error: {line}")
        if recovery is not None and recovery.recovered:
            verdict = "valid" if recovery.valid else "still invalid"
            typer.echo(f"  after recovering the schema departures the file is {verdict}:")
            for line in recovery.recovered:
                typer.echo(f"    recovered {line}")
            for line in recovery.messages():
                typer.echo(f"    error: {line}")
    raise typer.Exit(0 if report.valid else EXIT_INVALID)


def grade_cmd(
    task: TaskArg = None,
    submission: Annotated[
        Path | None, typer.Argument(metavar="SUBMISSION", help="rankings.json to score.", show_default=False)
    ] = None,
    answers: AnswersOpt = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Skip the recovered score (the score is always the strict one).")
    ] = False,
    as_json: JsonOpt = False,
    task_alias: TaskAlias = None,
) -> None:
    """Score a submission (SUBMISSION) of a task (TASK): Spearman per group (average ranks for ties),
    weighted task score.

    The score is the strict grader's (official): a schema departure anywhere scores -1, and so does a
    missing file (a run that wrote nothing is a result). For a rejected file the score after recovering
    the departures is printed beside it. Exit 1 when the submission is invalid or missing (it is still
    scored: -1 for the file or for each invalid group)."""
    from environment.grading import grade

    task, (submission,) = task_argument(task, task_alias, [submission])
    if submission is None:
        raise fail("missing argument SUBMISSION (the rankings.json to score)")
    if answers is None:
        raise fail("missing option --answers (the task's answers.json)")
    loaded, loaded_answers = _load_task_and_answers(task, answers)
    result = grade(submission, loaded, loaded_answers, recover=not strict)
    code = 0 if result.valid else EXIT_INVALID
    if as_json:
        echo_json(result.model_dump())
        raise typer.Exit(code)
    verdict = ""
    if result.rejected:
        verdict = " (file rejected by the strict grader)"
    elif not result.valid:
        verdict = " (submission invalid)"
    typer.echo(f"{result.task_id}: score {result.score:.4f}{verdict}")
    for error in result.file_errors:
        typer.echo(f"  file error: {error}")
    if result.recovery_accepted is not None:
        if result.recovery_accepted:
            typer.echo(
                f"  recovered score {result.recovered_score:.4f} after recovering: "
                + "; ".join(result.departures)
            )
        else:
            typer.echo(
                f"  recovered score {result.recovered_score:.4f}: recovery does not make the file acceptable"
                f" ({'; '.join(result.recovered_file_errors)})"
            )
    groups = result.groups if not result.rejected or not result.recovered_groups else result.recovered_groups
    if groups is not result.groups:
        typer.echo("  groups after recovery:")
    for g in groups:
        extra = (
            f"  error: {g.error}"
            if g.error
            else (
                f"  pairs in order {g.pairs_in_order:.3f}  top-1 {'hit' if g.top1_hit else 'miss'}"
                if g.pairs_in_order is not None and not math.isnan(g.pairs_in_order)
                else ""
            )
        )
        typer.echo(f"  {g.group_id}: rho {g.rho:+.4f}  weight {g.weight:.3g}  n={g.n}{extra}")
    raise typer.Exit(code)


def chance_cmd(
    task: TaskArg = None,
    answers: AnswersOpt = None,
    draws: Annotated[
        int, typer.Option("--draws", min=1, help="Random valid submissions drawn (the sampled threshold).")
    ] = 4000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    power_runs: Annotated[
        int, typer.Option("--power-runs", min=1, help="Runs averaged by the method whose power is reported.")
    ] = 5,
    power_effect: Annotated[
        float, typer.Option("--power-effect", help="Expected score of that method (random scores 0).")
    ] = 0.3,
    as_json: JsonOpt = False,
    task_alias: TaskAlias = None,
) -> None:
    """Chance threshold of a task (TASK; 95th percentile of random valid submissions: exact where every
    order can be counted, else sampled), attainable maximum, and power: the chance that the mean of K runs
    of a method with expected score S is above chance."""
    from environment.chance import chance_threshold

    task, _ = task_argument(task, task_alias)
    if answers is None:
        raise fail("missing option --answers (the task's answers.json)")
    loaded, loaded_answers = _load_task_and_answers(task, answers)
    result = chance_threshold(
        loaded, loaded_answers, draws=draws, seed=seed, power_runs=power_runs, power_effect=power_effect
    )
    if as_json:
        echo_json(result)
        return
    typer.echo(
        f"{result['task_id']}: chance threshold {result['chance_threshold']:.4f} "
        f"({result['chance_method']}); attainable max {result['attainable_max']:.4f}"
    )
    if result["chance_method"] == "sampled":
        low, high = result["sampled_threshold_interval"]
        typer.echo(
            f"  a sample: the 95th percentile of {draws} random submissions (seed {seed}), 95% interval "
            f"[{low:.4f}, {high:.4f}]"
        )
    typer.echo(f"  presented order scores {result['presented_order_score']:+.4f}" + _presented_flag(result))
    typer.echo("  " + _power_line(result))
    for g in result["groups"]:
        typer.echo(
            f"  {g['group_id']}: n={g['n']} threshold {g['chance_threshold']:.4f} "
            f"attainable max {g['attainable_max']:.4f}"
        )


def _presented_flag(result: dict[str, Any]) -> str:
    if result["presented_order_above_chance"]:
        return "  ABOVE CHANCE"
    if result["reversed_presented_order_above_chance"]:
        return f" (reversed {-result['presented_order_score']:+.4f}: ABOVE CHANCE)"
    return ""


def _power_line(result: dict[str, Any]) -> str:
    """Power in words: the mean of K runs of a method of expected score S against chance, one run, and the
    runs that reach 80%."""
    needed = result["runs_for_80pct_power"]
    runs = f"{needed} run{'s' if needed != 1 else ''}" if needed is not None else "more than 50 runs"
    return (
        f"power: {result['power']:.2f} that the mean of {result['power_runs']} runs of a method with "
        f"expected score {result['power_effect']:+.2f} is above chance (threshold of a "
        f"{result['power_runs']}-run mean {result['power_threshold']:.4f}, {result['power_method']}); "
        f"{result['power_single_run']:.2f} for one run; 80% power with {runs}, or over "
        f"{result['power_runs']} runs from an expected score of {result['effect_for_80pct_power']:+.3f}"
    )


def report_cmd(
    runs_dir: Annotated[
        Path, typer.Argument(help="RUNS_DIR/<configuration>/<task_id>[/<run>]/rankings.json")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output directory (default RUNS_DIR/_report).")
    ] = None,
    force: ForceOpt = False,
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="Directory searched for task dirs (default: demo tasks).")
    ] = None,
    answers: Annotated[
        Path | None,
        typer.Option("--answers", help="answers.json file or directory searched for them (default: demo)."),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option(
            "--bootstrap", min=100, help="Bootstrap resamples of tasks (default: 10,000, as spu batch)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for bootstrap and chance draws.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Statistics across runs: scored tasks, raw and task-adjusted means with bootstrap intervals, chance,
    coverage, paired Wilcoxon tests with Holm correction; writes report.md, summary.json, runs.csv, PNGs."""
    from environment.report import build_report
    from spu_common.task import TaskError

    try:
        with output_rule():
            summary = build_report(
                runs_dir, out, tasks_dir=tasks, answers=answers, n_boot=bootstrap, seed=seed, force=force
            )
    except TaskError as exc:
        raise fail(str(exc)) from None
    if as_json:
        echo_json(summary)
        return
    for row in summary["configurations"]:
        runs = row["above_chance_runs"]
        raw = "\u2013" if row["raw_mean"] is None else f"{row['raw_mean']:.3f}"
        typer.echo(
            f"{row['configuration']}: {row['scored_tasks']} scored tasks, raw mean {raw}, "
            f"mean at -1 {row['mean_at_minus_one']:.3f}, runs above chance {runs['count']}/{runs['of']}"
        )
    typer.echo(f"report: {summary['files'][0]}")


def consensus_cmd(
    task: TaskArg = None,
    submissions: Annotated[
        list[Path] | None,
        typer.Argument(metavar="SUBMISSION...", help="Submissions (rankings.json files) to combine."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Where to write the consensus rankings.json.")
    ] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    task_alias: TaskAlias = None,
) -> None:
    """Consensus ranking of a task (TASK) by mean rank over the valid submissions (ties broken by
    experiment id)."""
    from environment.consensus import ConsensusError, consensus_details
    from spu_common.outputs import claim_file
    from spu_common.submission import write_submission_atomic

    task, submissions = task_argument(task, task_alias, submissions, variadic=True)
    if not submissions:
        raise fail("missing argument SUBMISSION... (the rankings.json files to combine)")
    if out is None:
        raise fail("missing option -o/--out OUT (the consensus rankings.json to write)")
    for path in submissions:
        if not os.path.lexists(path):
            raise fail(f"{path} does not exist")
    loaded = _load_task(task)
    with output_rule():
        claim_file(out, force=force)
    try:
        result = consensus_details(list(submissions), loaded)
    except ConsensusError as exc:  # no usable submission: an input that cannot be read as its kind
        raise fail(str(exc)) from None
    write_submission_atomic(out, result["submission"])
    if as_json:
        echo_json({"out": str(out), **result})
        return
    counts = ", ".join(f"{g['group_id']}: {g['n_submissions']}" for g in result["groups"])
    typer.echo(
        f"consensus of {len(submissions)} submissions written to {out} (valid orders per group: {counts})"
    )
    for skipped in result["skipped"]:
        typer.echo(
            f"  skipped {submissions[skipped['index']]}"
            + (f" group {skipped['group_id']}" if "group_id" in skipped else "")
            + f": {'; '.join(skipped['errors'])}"
        )


def register(app: typer.Typer) -> None:
    """Add the benchmark commands to the root ``spu`` app."""
    app.add_typer(task_app, name="task")
    app.command("validate")(validate_cmd)
    app.command("grade")(grade_cmd)
    app.command("chance")(chance_cmd)
    app.command("report")(report_cmd)
    app.command("consensus")(consensus_cmd)
