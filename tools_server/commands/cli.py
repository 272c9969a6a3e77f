"""``spu serve`` and ``spu cache`` (``spu config``: clients_cli.py; ``spu doctor``: doctor_cli.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from spu_common.console import echo_json

cache_app = typer.Typer(help="The result cache shared by all servers of this machine.", no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def serve(ctx: typer.Context) -> None:
    """Run the MCP tool server (options: spu serve --help)."""
    from tools_server.commands.serve_cli import main

    main(list(ctx.args))


@cache_app.command("stats")
def cache_stats(as_json: JsonOpt = False) -> None:
    """Entries and size of the result cache, per tool."""
    from tools_server.core.cache import ResultCache

    stats = ResultCache().stats()
    if as_json:
        echo_json(stats)
        return
    typer.echo(f"cache: {stats['path']}\nentries: {stats['entries']}\nsize: {stats['bytes'] / 2**20:.2f} MiB")
    for tool, count in sorted(stats["per_tool"].items()):
        typer.echo(f"  {tool}: {count}")


@cache_app.command("clear")
def cache_clear(as_json: JsonOpt = False) -> None:
    """Delete every cached result."""
    from tools_server.core.cache import ResultCache

    removed = ResultCache().clear()
    if as_json:
        echo_json({"removed": removed})
    else:
        typer.echo(f"removed {removed} cached results")


def register(app: typer.Typer) -> None:
    # the options are declared once, in serve_cli; Typer hands every argument (--help too) to it
    app.command(
        "serve",
        add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(serve)
    app.add_typer(cache_app, name="cache")
