"""``spu harbor export`` (Harbor task packaging) and ``spu batch`` (the reference agent over many tasks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spu_common.console import TaskAlias, TaskArg, echo_json, fail, output_rule, task_argument

#: the kind of output folder an export is (spu_common.outputs)
HARBOR_TASK_KIND = "harbor-task"

harbor_app = typer.Typer(
    help="Harbor packaging: export tasks for `harbor run` (docs/harbor.md).", no_args_is_help=True
)


# the output folder was once a second argument: it is still taken (``ctx.args``), not shown in the help
@harbor_app.command("export", context_settings={"allow_extra_args": True})
def export_command(
    ctx: typer.Context,
    task_dir: TaskArg = None,
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="The Harbor task directory to write.")
    ] = None,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers",
            help="answers.json of the task, or a folder searched for it (default: answers.json beside "
            "TASK_DIR).",
        ),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            help="Base image (default: spu-scaffold:gpu with a GPU in the resources, else spu-scaffold:cpu; "
            "docs/docker.md); pin by digest for shared runs (name@sha256:...)."
        ),
    ] = None,
    org: Annotated[
        str, typer.Option(help="Organization part of the Harbor task name (org/task_id).")
    ] = "spu",
    network: Annotated[
        str,
        typer.Option(
            help="Agent network: public, providers (allowlist of the search and database hosts), audited "
            "(only an audit service: one beside the agent on an internal network, or --audit-url), "
            "none (network_mode: none; loopback only)."
        ),
    ] = "public",
    audit_url: Annotated[
        str | None,
        typer.Option(
            help="`spu audit serve` URL for --network audited (default: a service beside the agent)."
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Extra allowed host for providers/audited; repeatable."),
    ] = None,
    gpu_type: Annotated[
        list[str] | None,
        typer.Option("--gpu-type", help="Acceptable GPU type, e.g. H20, H100; repeatable (default: any)."),
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            help="Resources: local (what this machine has, up to the benchmark's) or benchmark (8 CPUs, "
            "16384 MB, 1 GPU: the SPU setting)."
        ),
    ] = "local",
    cpus: Annotated[int | None, typer.Option(min=1, help="Override the profile's CPUs.")] = None,
    memory_mb: Annotated[int | None, typer.Option(min=512, help="Override the profile's memory.")] = None,
    gpus: Annotated[int | None, typer.Option(min=0, help="Override the profile's GPUs.")] = None,
    agent_timeout_s: Annotated[int, typer.Option(min=60, help="Agent time limit (SPU: 8 h).")] = 8 * 3600,
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle",
            help="Also write solution/solve.sh with the measured order (for `harbor run -a oracle`).",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT even if it is not a Harbor task this command wrote.")
    ] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", hidden=True)] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    task_alias: TaskAlias = None,
) -> None:
    """Write a task (TASK) as a Harbor task in OUT: task.toml, instruction.md, environment/Dockerfile on our
    image, and a verifier (tests/) that grades with the hidden answers in its own container. An earlier
    export in OUT is replaced; a folder holding anything else only with --force."""
    from environment.harbor.export import ExportError, export_task
    from spu_common.outputs import claim_folder, mark
    from spu_common.task import TaskError

    task_dir, _ = task_argument(task_dir, task_alias)

    # OUT as a second argument and --overwrite: the spellings before -o/--out and --force
    if len(ctx.args) > 1 or (out is not None and ctx.args):
        raise fail(f"unexpected argument(s) {' '.join(ctx.args)}: the output folder is -o/--out OUT")
    out = out or (Path(ctx.args[0]) if ctx.args else None)
    if out is None:
        raise fail("give the Harbor task folder to write with -o/--out OUT")
    if answers is not None and not answers.is_file():
        raise fail(f"--answers {answers} is not a file")
    with output_rule():
        claim_folder(out, HARBOR_TASK_KIND, force=force or overwrite, inputs=[task_dir])
    try:
        result = export_task(
            task_dir,
            out,
            answers=answers,
            image=image,
            org=org,
            network=network,
            audit_url=audit_url,
            allow_hosts=allow_host,
            gpu_types=gpu_type,
            profile=profile,
            cpus=cpus,
            memory_mb=memory_mb,
            gpus=gpus,
            agent_timeout_s=agent_timeout_s,
            oracle=oracle,
            overwrite=True,  # claimed above: empty, an earlier export, or --force
        )
    except (ExportError, TaskError) as exc:
        raise fail(str(exc)) from None
    mark(Path(out), HARBOR_TASK_KIND)
    if as_json:
        echo_json(result)
        return
    typer.echo(
        f"Harbor task {org}/{result['task_id']} written to {result['out']} "
        f"({len(result['files'])} files, network {result['network_mode']}, image {result['image']}, "
        f"{result['cpus']} CPUs, {result['memory_mb']} MB, {result['gpus']} GPUs)"
    )
    # the log folders mounted from the host: the collect hook checks them before the host keeps anything
    typer.echo(
        f"run it: harbor run -p {result['out']} --ek auto_mounting=true "
        "--agent scaffold.harbor_agent:SpuAgent -m PROVIDER/MODEL"
    )
    typer.echo("then:   spu harbor results jobs/")


@harbor_app.command("results")
def results_command(
    jobs_dir: Annotated[Path, typer.Argument(help="Harbor's jobs folder (`harbor run -o`, default jobs/).")],
    min_reward: Annotated[
        float | None,
        typer.Option("--min-reward", help="Also count a trial whose reward is below this as failed."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """One line on the trials under JOBS_DIR: their rewards, and which failed (raised, or left no reward).
    Exit status 1 when a trial failed or none was found (`harbor run` itself exits 0 either way)."""
    from environment.harbor.results import ResultsError, read_trials, summarize, summary_line

    try:
        trials = read_trials(jobs_dir)
    except ResultsError as exc:
        raise fail(str(exc)) from None
    summary = summarize(trials, min_reward=min_reward)
    if as_json:
        echo_json(summary)
    else:
        typer.echo(summary_line(summary))
    if summary["failed"] or not trials:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(harbor_app, name="harbor")
    from scaffold.batch import batch_command

    app.command("batch")(batch_command)
