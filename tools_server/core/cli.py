"""``spu serve`` and ``spu cache`` (``spu config``: clients_cli.py; ``spu doctor``: doctor_cli.py)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

cache_app = typer.Typer(help="The result cache shared by all servers of this machine.", no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def serve(
    transport: Annotated[
        str, typer.Option(help="stdio (for Claude Code, Codex) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[
        str, typer.Option(help="HTTP bind address; anything but loopback needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.", min=0, max=65535)] = 8765,
    token: Annotated[
        str | None, typer.Option(envvar="SPU_SERVER_TOKEN", help="Bearer token required on HTTP requests.")
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A host name (optionally host:port) clients use to reach a non-loopback bind; repeatable. "
            "Requests with any other Host header get 421.",
        ),
    ] = None,
) -> None:
    """Run the MCP tool server."""
    from tools_server.core.serve_cli import refusal
    from tools_server.core.server import run

    if (why := refusal(transport, host, token, list(allowed_host or []))) is not None:
        typer.echo(why, err=True)
        raise typer.Exit(2)
    run(transport, host, port, token, list(allowed_host or []))


@cache_app.command("stats")
def cache_stats(as_json: JsonOpt = False) -> None:
    """Entries and size of the result cache, per tool."""
    from tools_server.core.cache import ResultCache

    stats = ResultCache().stats()
    if as_json:
        typer.echo(json.dumps(stats))
        return
    typer.echo(f"cache: {stats['path']}\nentries: {stats['entries']}\nsize: {stats['bytes'] / 2**20:.2f} MiB")
    for tool, count in sorted(stats["per_tool"].items()):
        typer.echo(f"  {tool}: {count}")


@cache_app.command("clear")
def cache_clear(as_json: JsonOpt = False) -> None:
    """Delete every cached result."""
    from tools_server.core.cache import ResultCache

    removed = ResultCache().clear()
    typer.echo(json.dumps({"removed": removed}) if as_json else f"removed {removed} cached results")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(cache_app, name="cache")
