"""``spu doctor``: engines, GPU, CUDA libraries and directories, with a fix for each failure."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from spu_common.console import echo_json, fail

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
        float, typer.Option(min=1, help="Seconds each engine check may take (GPU checks: at least 300).")
    ] = 120.0,
    jobs: Annotated[
        int | None,
        typer.Option("-j", "--jobs", min=1, help="Checks run at once (default: one more than the cores)."),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option("--fresh", help="Run every engine check again, even where nothing changed since."),
    ] = False,
) -> None:
    """What works on this machine: every engine does a tiny real computation in its own process (a crash
    or hang cannot take doctor down), plus the GPU, CUDA libraries, work/cache/weights directories. Each
    check is printed as it finishes. An engine's result is reused from the last run while nothing it
    depends on changed (installed packages, GPU and driver, weights folder, settings): --fresh runs them
    all. Exit 1 when a required check fails."""
    if not as_json:  # before any import that takes time: the user sees doctor start at once
        typer.echo("spu doctor: checking the engines, GPU and folders of this machine ...")
    from rich.console import Console

    from tools_server.commands.doctor import run_doctor

    console = Console(highlight=False)
    try:
        summary = run_doctor(
            profile=profile,
            only=only,
            timeout_s=timeout,
            jobs=jobs,
            fresh=fresh,
            on_result=None if as_json else lambda r: _print_check(console, asdict(r)),
        )
    except ValueError as exc:
        raise fail(str(exc)) from None
    if as_json:
        echo_json(summary)
    else:
        _print_summary(console, summary)
    if not summary["ok"]:
        raise typer.Exit(1)


def _print_check(console, check: dict) -> None:
    """One finished check: status, name (and whether it is optional), version, what it found. Texts are
    printed literally: "pip install 'spu-scaffold[dock]'" is not Rich markup."""
    from rich.markup import escape

    optional = " (optional)" if not check["required"] and check["status"] not in ("ok", "skip") else ""
    version = f" {check['version']}" if check["version"] else ""
    seconds = f" ({check['wall_s']:.1f} s)" if check["wall_s"] >= 0.1 else ""
    if check["cached"]:
        seconds = " (unchanged since the last run)"
    console.print(
        f"[{_STYLE[check['status']]}]{check['status']:<4}[/] [bold]{escape(check['name'])}[/]{optional}"
        f"{escape(version)}: {escape(check['detail'])}{seconds}"
    )


def _print_summary(console, summary: dict) -> None:
    from rich.markup import escape

    console.print(
        f"Python {summary['python']}, profile {summary['profile']}, GPU {'yes' if summary['gpu'] else 'no'}"
    )
    if summary["cached"]:
        console.print(
            f"{summary['cached']} engine result(s) reused: nothing they depend on changed since the last run "
            "(spu doctor --fresh runs them again)"
        )
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
