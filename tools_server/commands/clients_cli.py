"""``spu config claude|codex``: register the tool server with an MCP client, check that it starts, and
install the working method (what is written comes from :mod:`tools_server.commands.clients`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from spu_common.console import EXIT_INVALID, fail
from spu_common.jsonfiles import atomic_write_text

config_app = typer.Typer(help="Register the tool server with an MCP client.", no_args_is_help=True)


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def _read_json_object(path: Path) -> dict:
    if not path.exists():
        return {}
    if not path.is_file():
        raise fail(f"{path} is not a file")
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise fail(f"{path} is not valid JSON ({exc}); fix or remove it first", EXIT_INVALID) from None
    if not isinstance(data, dict):
        raise fail(f"{path} does not hold a JSON object; fix or remove it first", EXIT_INVALID)
    return data


TaskRootOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--task-root",
        help="A folder the tools may read files from (a task folder, or the folder holding task folders), "
        "recorded as SPU_INPUT_ROOTS in the registration; repeatable.",
    ),
]


def _task_roots(task_roots: list[Path] | None) -> list[Path]:
    roots = list(task_roots or [])
    for root in roots:
        if not root.is_dir():  # a container's /app/task may come later: a note, not an error
            typer.echo(f"note: --task-root {root} is not a folder (yet)", err=True)
    return roots


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
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Start the server .mcp.json configures, as Claude Code would, and list its tools; exit 1 "
            "when it cannot start.",
        ),
    ] = False,
    task_root: TaskRootOpt = None,
    project: Annotated[Path, typer.Option(help="The project folder (default: the current one).")] = Path("."),
    path: Annotated[
        Path | None, typer.Option(help="The .mcp.json --write updates (default: PROJECT/.mcp.json).")
    ] = None,
) -> None:
    """Print (or write) the Claude Code setup: the .mcp.json entry, the project settings a headless
    `claude -p` run needs, and (--skill) the working method as a skill. The entry names spu by its absolute
    path, so it starts whatever PATH Claude Code runs with."""
    from prompts.method import SKILL_NAME, render_skill
    from tools_server.commands import clients

    roots = _task_roots(task_root)
    mcp_path = path or project / ".mcp.json"
    settings_path = project / ".claude" / "settings.json"
    if write:
        existing = _read_json_object(mcp_path)
        servers = existing.get("mcpServers")
        if not isinstance(servers, dict):
            servers = existing["mcpServers"] = {}
        entry = clients.claude_mcp_json(roots)["mcpServers"][clients.SERVER_NAME]
        servers[clients.SERVER_NAME] = clients.merge_claude_entry(servers.get(clients.SERVER_NAME), entry)
        _write_json(mcp_path, existing)
        _write_json(settings_path, clients.merge_claude_settings(_read_json_object(settings_path)))
        typer.echo(f"wrote the spu server into {mcp_path}")
        if roots := servers[clients.SERVER_NAME].get("env", {}).get(clients.INPUT_ROOTS):
            typer.echo(f"the tools may read files under {roots} (SPU_INPUT_ROOTS)")
        typer.echo(f"wrote the permissions and headless settings into {settings_path}")
    if skill:
        folder = project / ".claude" / "skills" / SKILL_NAME
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in render_skill(clients.tools_by_domain(), _wait_s()).items():
            (folder / name).write_text(text, encoding="utf-8")
        typer.echo(f"installed the skill {SKILL_NAME} into {folder}")
    if check:
        _check_server(
            "claude",
            mcp_path,
            (_read_json_object(mcp_path).get("mcpServers") or {}).get(clients.SERVER_NAME),
            project,
        )
    if write or skill or check:
        return
    typer.echo(f"# {mcp_path}\n{json.dumps(clients.claude_mcp_json(roots), indent=2)}")
    typer.echo(f"\n# {settings_path}\n{json.dumps(clients.claude_settings(), indent=2)}")
    typer.echo(
        "\n# write both: spu config claude --write; add the method: spu config claude --skill; "
        "check that it starts: spu config claude --check"
        f"\n# headless run:\n{clients.claude_headless_command()}"
    )


def _check_server(client: str, where: Path, entry: object, cwd: Path) -> None:
    """Start the server ``entry`` of ``client``'s configuration as that client would, and list its tools;
    exit 1 naming the cause when it does not start."""
    from tools_server.commands import clients

    if not isinstance(entry, dict):
        raise fail(
            f"{where} has no {clients.SERVER_NAME!r} server: run `spu config {client} --write`", EXIT_INVALID
        )
    argv = " ".join([str(entry.get("command")), *map(str, entry.get("args") or [])])
    env = clients.claude_server_env(entry) if client == "claude" else clients.codex_server_env(entry)
    try:
        names = clients.list_server_tools(entry, cwd=cwd, env=env, client=client)
    except clients.ServerCheckError as exc:
        name = {"claude": "Claude Code", "codex": "Codex"}[client]
        raise fail(
            f"{where}: `{argv}` did not start: {exc}. {name} would run without the spu tools.", EXIT_INVALID
        ) from None
    typer.echo(f"`{argv}` started and lists {len(names)} tools: {', '.join(names)}")
    if roots := env.get(clients.INPUT_ROOTS):
        typer.echo(f"the tools may read files under {roots} (SPU_INPUT_ROOTS) and the start and work folders")


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
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Start the server the Codex config names, as Codex would (with the variables Codex passes "
            "it), and list its tools; exit 1 naming the cause when it cannot start.",
        ),
    ] = False,
    task_root: TaskRootOpt = None,
    model_provider: Annotated[
        str | None,
        typer.Option(
            "--model-provider",
            help="Also write `model_provider = NAME` at the top level (and, with --base-url, its "
            "[model_providers.NAME] table).",
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="The provider's base URL (a local or self-hosted model).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Also write `model = MODEL` at the top level.")
    ] = None,
    env_key: Annotated[
        str | None, typer.Option("--env-key", help="The variable holding the provider's API key.")
    ] = None,
    wire_api: Annotated[str, typer.Option("--wire-api", help="The provider's API.")] = "responses",
    path: Annotated[
        Path | None, typer.Option(help="Codex config file (default: $CODEX_HOME/config.toml or ~/.codex).")
    ] = None,
    agents_path: Annotated[Path, typer.Option(help="The AGENTS.md --agents-md updates.")] = Path("AGENTS.md"),
) -> None:
    """Print (or write) the Codex `[mcp_servers.spu]` block: every tool approved for `codex exec`, a call
    limit above the longest wait, and the server required to start; (--agents-md) the working method.
    spu's tables go last and top-level keys first, so nothing lands in spu's tables by accident; a key that
    had (appended after them) is moved back to the top level."""
    from prompts.method import render_agents_md
    from tools_server.commands import clients

    if (base_url or model or env_key) and not model_provider:
        raise fail("--base-url, --model and --env-key need --model-provider NAME")
    roots = _task_roots(task_root)
    provider = (
        clients.CodexProvider(model_provider, base_url, model, wire_api, env_key) if model_provider else None
    )
    target = path or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"
    if target.is_dir():
        raise fail(f"{target} is a folder: give the Codex config file (config.toml) with --path")
    _, note = clients.server_command()
    if note and (write or not (agents_md or check)):
        typer.echo(f"note: {note}", err=True)
    if write:
        target.parent.mkdir(parents=True, exist_ok=True)
        old = target.read_text(encoding="utf-8") if target.exists() else ""
        try:
            written = clients.write_codex_config(old, task_roots=roots, provider=provider)
        except clients.CodexConfigError as exc:
            raise fail(f"{target}: {exc}", EXIT_INVALID) from None
        atomic_write_text(target, written.text)
        typer.echo(f"wrote [mcp_servers.spu] into {target}")
        if provider is not None:
            typer.echo(f"wrote model_provider = {provider.name!r} at the top of {target}")
        for change in written.replaced:
            typer.echo(f"replaced {change} (the provider options given)")
        if written.moved:
            typer.echo(
                f"moved {', '.join(written.moved)} to the top level of {target}: written after spu's "
                "tables, TOML read them as part of the last one"
            )
        if env_roots := (_codex_entry(written.text) or {}).get("env", {}).get(clients.INPUT_ROOTS):
            typer.echo(f"the tools may read files under {env_roots} (SPU_INPUT_ROOTS)")
    if agents_md:
        section = render_agents_md(clients.tools_by_domain(), _wait_s())
        old = agents_path.read_text(encoding="utf-8") if agents_path.exists() else ""
        new = clients.upsert_marked_section(old, section, clients.AGENTS_MD_START, clients.AGENTS_MD_END)
        atomic_write_text(agents_path, new)
        typer.echo(f"{'updated' if old else 'wrote'} the spu working method in {agents_path}")
    if check:
        if not target.is_file():
            raise fail(f"no Codex config at {target}: run `spu config codex --write`", EXIT_INVALID)
        entry = _codex_entry(target.read_text(encoding="utf-8"), target)
        cwd = Path(entry["cwd"]) if entry and isinstance(entry.get("cwd"), str) else Path.cwd()
        _check_server("codex", target, entry, cwd)
    if not (write or agents_md or check):
        typer.echo(clients.write_codex_config("", task_roots=roots, provider=provider).text, nl=False)


def _codex_entry(text: str, path: Path | None = None) -> dict | None:
    """The ``[mcp_servers.spu]`` table of a Codex config (None when it has none)."""
    import tomllib

    from tools_server.commands.clients import SERVER_NAME

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"{path}: not valid TOML ({exc})", EXIT_INVALID) from None
    entry = (data.get("mcp_servers") or {}).get(SERVER_NAME)
    return entry if isinstance(entry, dict) else None


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
