"""``spu agent``: run the reference agent, its demo, and tools for recordings and trajectories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scaffold.agent.models import PROVIDERS
from spu_common.console import TaskAlias, TaskArg, echo_json, fail, output_rule, task_argument

if TYPE_CHECKING:
    from scaffold.agent.config import AgentConfig
    from scaffold.agent.models import ModelSpec
    from spu_common.task import Task

DEMO_SLUG = "aromatic-acidity"
DEMO_RECORDING = "demo-aromatic-acidity"

agent_app = typer.Typer(
    help="The reference agent: a minimal loop that drives any model API through the spu tools.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(agent_app, name="agent")


def _config(config_file: Path | None, overrides: list[str] | None) -> AgentConfig:
    from scaffold.agent.config import ConfigError, load_config

    try:
        return load_config(config_file, overrides or [])
    except ConfigError as exc:
        raise fail(str(exc)) from None


ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="Replace OUT even if it does not hold a run (an earlier run is replaced anyway)."
    ),
]


@agent_app.command("run")
def run_command(
    task: TaskArg = None,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--out", help="Output directory for rankings.json, report.md, trajectory ..."),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            help=f"PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)} (replay:FILE replays a "
            "recording; baseline:ENTRY ranks by an entry of the task's card), or module:Class:MODEL for an "
            "adapter of your own. Repeat it with --ensemble to mix models.",
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="API base URL (vLLM, llama.cpp, OpenRouter ...).")
    ] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="YAML file merged over the defaults.")
    ] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("-c", help="key=value override, dotted keys; repeatable.")
    ] = None,
    ensemble: Annotated[
        int, typer.Option("--ensemble", min=1, help="K independent runs and their consensus.")
    ] = 1,
    force: ForceOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run record as JSON.")] = False,
    task_alias: TaskAlias = None,
) -> None:
    """Run the agent on a task (TASK). A valid rankings.json is in OUT from the first second to the end,
    whatever happens. OUT holds one run: an earlier run there is replaced, never appended to; a folder
    holding anything else is refused unless --force."""
    from scaffold.agent.models import ModelSpec, check_model
    from scaffold.agent.rundir import RUN_KIND
    from spu_common.outputs import claim_folder
    from spu_common.task import TaskError, load_task

    task, _ = task_argument(task, task_alias)
    if out is None:
        raise fail("missing option -o/--out OUT (the run's folder)")
    if not model:
        raise fail("missing option --model PROVIDER:MODEL")
    config = _config(config_file, overrides)
    try:
        loaded = load_task(task)  # the one parse of the task: everything below gets this object
        specs = [ModelSpec.parse(spec) for spec in model]
        for spec in specs:  # a model that cannot work stops here, before any run starts
            check_model(spec, config.model, base_url=base_url, task_id=loaded.task_id, task_dir=loaded.root)
    except (TaskError, ValueError) as exc:
        raise fail(str(exc)) from None
    with output_rule():
        claim_folder(out, RUN_KIND, force=force, inputs=[task])
    size = max(ensemble, config.ensemble.size)
    if size > 1 or len(specs) > 1:
        _run_ensemble(loaded, out, specs, size, config, base_url, as_json)
        return
    _run_single(loaded, out, specs[0], config, base_url, as_json)


def _run_single(
    task: Task, out: Path, spec: ModelSpec, config: AgentConfig, base_url: str | None, as_json: bool
) -> int:
    from scaffold.agent.runner import exit_code, run_agent

    outcome = run_agent(task, out, spec, config, base_url=base_url)
    if as_json:
        echo_json(outcome.result)
    else:
        r = outcome.result
        typer.echo(f"{r['exit_status']}: {r['reason']}")
        typer.echo(f"submission: {r['submission']} -> {Path(out) / 'rankings.json'}")
        typer.echo(
            f"{r['steps']} model calls, {r['elapsed_s']:.1f} s, ${r['cost_usd']:.4f}, {r['drafts']} drafts"
        )
    code = exit_code(outcome)
    if code:
        raise typer.Exit(code)
    return code


def _run_ensemble(
    task: Task,
    out: Path,
    specs: list[ModelSpec],
    size: int,
    config: AgentConfig,
    base_url: str | None,
    as_json: bool,
) -> None:
    from scaffold.agent.ensemble import run_ensemble

    def progress(member: dict) -> None:
        if not as_json:
            typer.echo(
                f"member {member['member']} ({member['model']}): {member['exit_status']}, "
                f"{member['submission']}"
            )

    summary = run_ensemble(task, out, specs, size, config, base_url=base_url, on_member=progress)
    if as_json:
        echo_json(summary)
    else:
        typer.echo(
            f"submission: {summary['submission']} of members {summary['used']} -> "
            f"{Path(out) / 'rankings.json'}"
        )
    if summary["submission"] != "consensus":
        raise typer.Exit(1)


@agent_app.command("demo")
def demo_command(
    slug: Annotated[
        str | None,
        typer.Argument(metavar="TASK", help=f"Demo task slug (default: {DEMO_SLUG}).", show_default=False),
    ] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output directory.")] = Path("spu-demo-run"),
    model: Annotated[
        str, typer.Option("--model", help="PROVIDER:MODEL; default: the shipped recording.")
    ] = f"replay:{DEMO_RECORDING}",
    base_url: Annotated[str | None, typer.Option("--base-url")] = None,
    overrides: Annotated[list[str] | None, typer.Option("-c", help="key=value override; repeatable.")] = None,
    force: ForceOpt = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    slug_alias: Annotated[str | None, typer.Option("--task", hidden=True, help="The same as TASK.")] = None,
) -> None:
    """Run the agent on a demo task (by default replaying the shipped recording against the live tools),
    then validate and grade what it wrote against the demo answers."""
    from environment.demo_tasks import DEMO_TASKS, demo_answers_path, demo_task_dir
    from environment.grading import grade
    from scaffold.agent.models import ModelSpec, check_model
    from scaffold.agent.rundir import RUN_KIND
    from scaffold.agent.runner import exit_code, run_agent
    from spu_common.outputs import claim_folder
    from spu_common.submission import validate_submission
    from spu_common.task import TaskError, load_answers, load_task

    if slug and slug_alias:
        raise fail("the task is given twice: as TASK and as --task")
    slug = slug or slug_alias or DEMO_SLUG
    if slug not in DEMO_TASKS:
        raise fail(f"no demo task {slug!r}; choose one of {DEMO_TASKS}")
    try:  # before the run: an installed package holds no answers (docs/harbor.md)
        answers = load_answers(demo_answers_path(slug))
    except TaskError as exc:
        raise fail(str(exc)) from None
    config = _config(None, overrides)
    task = load_task(demo_task_dir(slug))
    try:  # the shipped recording is the aromatic-acidity run: another demo task needs another model
        check_model(
            ModelSpec.parse(model), config.model, base_url=base_url, task_id=task.task_id, task_dir=task.root
        )
    except ValueError as exc:
        raise fail(str(exc)) from None
    with output_rule():
        claim_folder(out, RUN_KIND, force=force)
    outcome = run_agent(task, out, model, config, base_url=base_url)
    report = validate_submission(out / "rankings.json", task, recover=False)
    result = grade(out / "rankings.json", task, answers)
    record = {
        **outcome.result,
        "valid": report.valid,
        "score": result.score,
        "groups": [{"group_id": g.group_id, "rho": g.rho} for g in result.groups],
    }
    if as_json:
        echo_json(record)
    else:
        typer.echo(f"{outcome.exit_status}: {outcome.reason}")
        typer.echo(f"rankings.json valid: {report.valid}; submission: {outcome.submission}")
        typer.echo(
            "score (weighted Spearman): "
            + f"{result.score:.3f}  ("
            + ", ".join(f"{g.group_id} rho={g.rho:.3f}" for g in result.groups)
            + ")"
        )
        typer.echo(f"files: {out}/rankings.json report.md sources.json trajectory.jsonl trajectory.json")
    code = exit_code(outcome) or (0 if report.valid else 1)
    if code:
        raise typer.Exit(code)


#: ``--output``: the earlier spelling of ``-o/--out`` (kept for scripts, not shown in the help)
OutputAlias = Annotated[Path | None, typer.Option("--output", hidden=True)]
FileForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace OUT even if it is not a file of this kind.")
]


def _trajectory_records(trajectory: Path) -> list[dict]:
    """The records of a trajectory.jsonl, or a clear error (exit 2) when it holds none; skipped lines are
    warned."""
    from environment.runs import read_jsonl

    if not trajectory.is_file():
        raise fail(f"{trajectory} does not exist or is not a file")
    read = read_jsonl(trajectory)
    problems = [p.located(trajectory) for p in read.problems]
    if not read.records:
        raise fail(
            f"{trajectory} holds no trajectory records"
            + (f" ({problems[0]})" if problems else "")
            + ": give the trajectory.jsonl of an agent run"
        )
    for problem in problems:
        typer.echo(f"warning: skipped {problem}", err=True)
    return read.records


@agent_app.command("recording")
def recording_command(
    trajectory: Annotated[Path, typer.Argument(help="A trajectory.jsonl of an earlier run.")],
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="Where to write the recording (JSONL).")
    ] = None,
    output: OutputAlias = None,
    force: FileForceOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Extract the model turns of a trajectory as a recording for --model replay:FILE."""
    from spu_common.jsonfiles import atomic_write_text
    from spu_common.outputs import claim_file

    target = out or output
    if target is None:
        raise fail("give the recording's file with -o/--out FILE")
    records = _trajectory_records(trajectory)
    with output_rule():
        claim_file(target, force=force, ours=_is_recording)
    start = next((r for r in records if r.get("type") == "run_start"), {})
    # this run's paths become placeholders, longest first (WORK_DIR lies inside OUT_DIR)
    placeholders = {
        start[key]: "${" + key.upper() + "}" for key in ("work_dir", "task_dir", "out_dir") if start.get(key)
    }
    turns = [r for r in records if r.get("type") == "model_turn"]
    lines = []
    for r in turns:
        message = {k: r["message"][k] for k in ("role", "content", "tool_calls") if k in r["message"]}
        for call in message.get("tool_calls") or []:
            if isinstance(call.get("arguments"), dict):
                call["arguments"] = _placeholders(call["arguments"], placeholders)
                call["arguments_raw"] = json.dumps(call["arguments"], ensure_ascii=False)
        lines.append(json.dumps({"type": "model_turn", "message": message}, ensure_ascii=False) + "\n")
    atomic_write_text(target, "".join(lines))
    if as_json:
        echo_json({"model_turns": len(turns), "out": str(target)})
    else:
        typer.echo(f"{len(turns)} model turns -> {target}")


def _placeholders(value, paths: dict[str, str]):
    if isinstance(value, str):
        for path, name in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            value = value.replace(path, name)
        return value
    if isinstance(value, list):
        return [_placeholders(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: _placeholders(v, paths) for k, v in value.items()}
    return value


@agent_app.command("atif")
def atif_command(
    trajectory: Annotated[Path, typer.Argument(help="A trajectory.jsonl.")],
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="Default: trajectory.json beside it.")
    ] = None,
    output: OutputAlias = None,
    force: FileForceOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Export a trajectory.jsonl as Harbor's ATIF trajectory.json."""
    from scaffold.agent.trajectory import agent_version, write_atif
    from spu_common.outputs import claim_file, json_file_with

    _trajectory_records(trajectory)
    target = out or output or trajectory.with_name("trajectory.json")
    is_atif = json_file_with("schema_version", lambda value: str(value).startswith("ATIF"))
    with output_rule():
        claim_file(target, force=force, ours=is_atif)
    data = write_atif(trajectory, target, agent_version=agent_version())
    if as_json:
        echo_json({"steps": len(data["steps"]), "out": str(target)})
    else:
        typer.echo(f"{len(data['steps'])} ATIF steps -> {target}")


def _is_recording(path: Path) -> bool:
    """Whether ``path`` is a recording (JSON lines of ``model_turn`` records), as ``recording`` writes."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return bool(lines) and all(json.loads(line).get("type") == "model_turn" for line in lines if line)
    except (OSError, ValueError, AttributeError):
        return False
