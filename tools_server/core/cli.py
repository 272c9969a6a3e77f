"""``spu serve``, ``spu cache``, ``spu config`` and ``spu doctor``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

cache_app = typer.Typer(help="The result cache shared by all servers of this machine.", no_args_is_help=True)
config_app = typer.Typer(help="Register the tool server with an MCP client.", no_args_is_help=True)

#: Tools Codex may call without asking in `codex exec` (read-only, no side effects outside the work dir).
CODEX_APPROVED_TOOLS = (
    "system_info",
    "jobs",
    "job_wait",
    "chem_parse",
    "chem_descriptors",
    "ranking_check",
    "ranking_compare",
)


def serve(
    transport: Annotated[
        str, typer.Option(help="stdio (for Claude Code, Codex) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[
        str, typer.Option(help="HTTP bind address; anything but loopback needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8765,
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
def cache_stats(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
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
def cache_clear(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Delete every cached result."""
    from tools_server.core.cache import ResultCache

    removed = ResultCache().clear()
    typer.echo(json.dumps({"removed": removed}) if as_json else f"removed {removed} cached results")


def server_command() -> list[str]:
    """How a client should start the server: the installed `spu` script, else this interpreter."""
    spu = shutil.which("spu")
    if spu:
        return [spu, "serve"]
    return [sys.executable, "-m", "spu", "serve"]


def _server_env() -> dict[str, str]:
    return {
        k: os.environ[k]
        for k in ("SPU_WORKDIR", "SPU_CACHE_DIR", "SPU_WEIGHTS_DIR", "SPU_AUDIT_URL")
        if os.environ.get(k)
    }


def claude_config() -> dict:
    command = server_command()
    entry: dict = {"type": "stdio", "command": command[0], "args": command[1:]}
    if env := _server_env():
        entry["env"] = env
    return {"mcpServers": {"spu": entry}}


def codex_config() -> str:
    command = server_command()
    lines = [
        "[mcp_servers.spu]",
        f"command = {json.dumps(command[0])}",
        f"args = {json.dumps(command[1:])}",
        "startup_timeout_sec = 30",
        "# compute tools answer within wait_s (40 s) and hand back a job id: keep the call budget above it",
        "tool_timeout_sec = 120",
    ]
    env = _server_env()
    if env:
        lines.append("[mcp_servers.spu.env]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    # codex exec cannot ask for approval; pre-approve the read-only tools so it can call them.
    for name in CODEX_APPROVED_TOOLS:
        lines += [f"[mcp_servers.spu.tools.{name}]", 'approval_mode = "approve"']
    return "\n".join(lines) + "\n"


@config_app.command("claude")
def config_claude(
    write: bool = typer.Option(False, "--write", help="Merge the entry into ./.mcp.json (project scope)."),
    path: Path = typer.Option(Path(".mcp.json"), help="The file --write updates."),
) -> None:
    """Print (or write) the Claude Code registration of the spu server."""
    config = claude_config()
    if not write:
        command = server_command()
        typer.echo(json.dumps(config, indent=2))
        typer.echo(
            "\n# or, with the Claude Code CLI:\nclaude mcp add --scope project spu -- "
            + " ".join(shlex.quote(c) for c in command)
        )
        return
    existing = json.loads(path.read_text()) if path.exists() else {}
    existing.setdefault("mcpServers", {}).update(config["mcpServers"])
    path.write_text(json.dumps(existing, indent=2) + "\n")
    typer.echo(f"wrote the spu server into {path}")


@config_app.command("codex")
def config_codex(
    write: bool = typer.Option(False, "--write", help="Append the block to the Codex config file."),
    path: Path = typer.Option(None, help="Codex config file (default: $CODEX_HOME/config.toml or ~/.codex)."),
) -> None:
    """Print (or write) the Codex `[mcp_servers.spu]` block."""
    block = codex_config()
    if not write:
        typer.echo(block, nl=False)
        return
    target = path or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = target.read_text() if target.exists() else ""
    if "[mcp_servers.spu]" in text:
        typer.echo(f"{target} already has [mcp_servers.spu]; edit it by hand or remove it first", err=True)
        raise typer.Exit(1)
    target.write_text(text + ("\n" if text and not text.endswith("\n") else "") + block)
    typer.echo(f"wrote [mcp_servers.spu] into {target}")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(cache_app, name="cache")
    app.add_typer(config_app, name="config")
