"""``spu doctor``: engines, GPU, CUDA libraries and directories, with a fix for each failure."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from spu_common.console import fail

_STYLE = {"ok": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    profile: Annotated[
        str,
        typer.Option(help="Which engines are required: 'all' (every engine of spu-scaffold[all]) or 'core'."),
    ] = "all",
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only these checks (repeatable), e.g. --only rdkit --only pyscf."),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds each engine check may take (GPU checks: at least 300).")
    ] = 120.0,
    jobs: Annotated[
        int | None, typer.Option("-j", "--jobs", help="Checks run at once (default: up to 4).")
    ] = None,
) -> None:
    """What works on this machine: every engine does a tiny real computation in its own process (a crash
    or hang cannot take doctor down), plus the GPU, CUDA libraries, work/cache/weights directories.
    Exit 1 when a required check fails."""
    from tools_server.core.doctor import run_doctor

    try:
        summary = run_doctor(profile=profile, only=only, timeout_s=timeout, jobs=jobs)
    except ValueError as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        _print_table(summary)
    if not summary["ok"]:
        raise typer.Exit(1)


def _print_table(summary: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title=f"spu doctor (Python {summary['python']}, profile {summary['profile']}, "
        f"GPU {'yes' if summary['gpu'] else 'no'})"
    )
    for column in ("check", "status", "version", "detail"):
        table.add_column(column, overflow="fold")
    for c in summary["checks"]:
        status = c["status"] + ("" if c["required"] or c["status"] in ("ok", "skip") else " (optional)")
        # checks' texts are printed literally: "pip install 'spu-scaffold[dock]'" is not Rich markup
        table.add_row(
            escape(c["name"]),
            f"[{_STYLE[c['status']]}]{status}[/]",
            escape(c["version"] or ""),
            escape(c["detail"]),
        )
    console = Console()
    console.print(table)
    fixes = [c for c in summary["checks"] if c["status"] in ("fail", "warn") and c["fix"]]
    if fixes:
        console.print("[bold]How to fix:[/]")
    for c in fixes:
        console.print(f"  [{_STYLE[c['status']]}]{escape(c['name'])}[/]: {escape(c['fix'])}")
    failed = [c["name"] for c in summary["checks"] if c["status"] == "fail" and c["required"]]
    console.print(
        "[green]all required checks pass[/]"
        if not failed
        else f"[bold red]required checks failing: {escape(', '.join(failed))}[/]"
    )


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
