"""``spu serve``, ``spu cache``, ``spu config`` and ``spu doctor``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

cache_app = typer.Typer(help="The result cache shared by all servers of this machine.", no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

config_app = typer.Typer(help="Register the tool server with an MCP client.", no_args_is_help=True)


def serve(ctx: typer.Context) -> None:
    """Run the MCP tool server (options: spu serve --help)."""
    from tools_server.core.serve_cli import main

    main(list(ctx.args))


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


def _write_json(path: Path, data: dict) -> None:
    from environment.jsonfiles import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def _read_json_object(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        typer.echo(f"{path} is not valid JSON ({exc}); fix or remove it first", err=True)
        raise typer.Exit(1) from None
    if not isinstance(data, dict):
        typer.echo(f"{path} does not hold a JSON object; fix or remove it first", err=True)
        raise typer.Exit(1)
    return data


def _wait_s() -> tuple[float, float]:
    from tools_server.core.waits import WAIT_S_DEFAULT, WAIT_S_MAX

    return WAIT_S_DEFAULT, WAIT_S_MAX


@config_app.command("claude")
def config_claude(
    write: Annotated[
        bool,
        typer.Option(
            "--write", help="Merge the server into .mcp.json and the permissions into .claude/settings.json."
        ),
    ] = False,
    skill: Annotated[
        bool,
        typer.Option("--skill", help="Install the working method as a skill in .claude/skills/spu-method/."),
    ] = False,
    project: Annotated[Path, typer.Option(help="The project folder (default: the current one).")] = Path("."),
    path: Annotated[
        Path | None, typer.Option(help="The .mcp.json --write updates (default: PROJECT/.mcp.json).")
    ] = None,
) -> None:
    """Print (or write) the Claude Code setup: the .mcp.json entry, the project settings a headless
    `claude -p` run needs, and (--skill) the working method as a skill."""
    from prompts.method import SKILL_NAME, render_skill
    from tools_server.core import clients

    mcp_path = path or project / ".mcp.json"
    settings_path = project / ".claude" / "settings.json"
    _, note = clients.server_command(project)
    if note:
        typer.echo(f"note: {note}", err=True)
    if write:
        existing = _read_json_object(mcp_path)
        existing.setdefault("mcpServers", {}).update(clients.claude_mcp_json(project)["mcpServers"])
        _write_json(mcp_path, existing)
        _write_json(settings_path, clients.merge_claude_settings(_read_json_object(settings_path)))
        typer.echo(f"wrote the spu server into {mcp_path}")
        typer.echo(f"wrote the permissions and headless settings into {settings_path}")
    if skill:
        folder = project / ".claude" / "skills" / SKILL_NAME
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in render_skill(clients.tools_by_domain(), _wait_s()).items():
            (folder / name).write_text(text, encoding="utf-8")
        typer.echo(f"installed the skill {SKILL_NAME} into {folder}")
    if write or skill:
        return
    typer.echo(f"# {mcp_path}\n{json.dumps(clients.claude_mcp_json(project), indent=2)}")
    typer.echo(f"\n# {settings_path}\n{json.dumps(clients.claude_settings(), indent=2)}")
    typer.echo(
        "\n# write both: spu config claude --write; add the method: spu config claude --skill"
        f"\n# headless run:\n{clients.claude_headless_command()}"
    )


def _without_spu_tables(text: str) -> str:
    """``text`` without the ``[mcp_servers.spu]`` tables (and their sub-tables) a previous --write added."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            name = stripped.strip("[]").strip()
            skipping = name == "mcp_servers.spu" or name.startswith("mcp_servers.spu.")
        if not skipping:
            out.append(line)
    return "".join(out).rstrip("\n") + ("\n" if out else "")


@config_app.command("codex")
def config_codex(
    write: Annotated[
        bool,
        typer.Option(
            "--write", help="Write the block into the Codex config file (replacing an earlier one)."
        ),
    ] = False,
    agents_md: Annotated[
        bool, typer.Option("--agents-md", help="Write or update the working-method section of ./AGENTS.md.")
    ] = False,
    path: Annotated[
        Path | None, typer.Option(help="Codex config file (default: $CODEX_HOME/config.toml or ~/.codex).")
    ] = None,
    agents_path: Annotated[Path, typer.Option(help="The AGENTS.md --agents-md updates.")] = Path("AGENTS.md"),
) -> None:
    """Print (or write) the Codex `[mcp_servers.spu]` block: every tool approved for `codex exec`, a call
    limit above the longest wait, and the server required to start; (--agents-md) the working method."""
    from prompts.method import render_agents_md
    from tools_server.core import clients

    block = clients.codex_toml()
    _, note = clients.server_command()
    if note:
        typer.echo(f"note: {note}", err=True)
    if write:
        target = path or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = _without_spu_tables(target.read_text(encoding="utf-8") if target.exists() else "")
        target.write_text(text + ("\n" if text else "") + block, encoding="utf-8")
        typer.echo(f"wrote [mcp_servers.spu] into {target}")
    if agents_md:
        section = render_agents_md(clients.tools_by_domain(), _wait_s())
        old = agents_path.read_text(encoding="utf-8") if agents_path.exists() else ""
        new = clients.upsert_marked_section(old, section, clients.AGENTS_MD_START, clients.AGENTS_MD_END)
        agents_path.write_text(new, encoding="utf-8")
        typer.echo(f"{'updated' if old else 'wrote'} the spu working method in {agents_path}")
    if not (write or agents_md):
        typer.echo(block, nl=False)


def register(app: typer.Typer) -> None:
    # the options are declared once, in serve_cli; Typer hands every argument (--help too) to it
    app.command(
        "serve",
        add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(serve)
    app.add_typer(cache_app, name="cache")
    app.add_typer(config_app, name="config")
