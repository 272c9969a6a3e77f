"""``spu config claude|codex``: register the tool server with an MCP client, check that it starts, and
install the working method (what is written comes from :mod:`tools_server.commands.clients`).

The user's files are edited with :mod:`tools_server.commands.userfiles`: read as UTF-8, changed only when
they parse, written atomically beside a backup. A file that cannot be edited is left as it was, with one
``error:`` line and exit status 2; ``--check`` exits 1 when the server it names would not start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from spu_common.console import EXIT_INVALID, echo_json, fail

config_app = typer.Typer(help="Register the tool server with an MCP client.", no_args_is_help=True)


def _read_user_text(path: Path, code: int = 2) -> str | None:
    """The text of a user's file (None when absent); an unreadable one exits with ``code``."""
    from tools_server.commands.userfiles import UserFileError, read_text

    try:
        return read_text(path)
    except UserFileError as exc:
        raise fail(str(exc), code) from None


def _write_user_text(path: Path, text: str, written: list[dict[str, Any]]) -> None:
    from tools_server.commands.userfiles import UserFileError, replace

    try:
        result = replace(path, text)
    except UserFileError as exc:
        raise fail(str(exc)) from None
    backup = str(result.backup) if result.backup else None
    written.append({"path": str(path), "changed": result.changed, "backup": backup})


def _read_json_object(path: Path, code: int = 2) -> dict:
    """A user's JSON file holding an object ({} when absent); anything else exits with ``code``."""
    from spu_common.jsonfiles import loads_strict

    text = _read_user_text(path, code)
    if text is None:
        return {}
    try:
        data = loads_strict(text or "{}")
    except (ValueError, RecursionError) as exc:
        raise fail(f"{path} is not valid JSON ({exc}); fix or remove it first", code) from None
    if not isinstance(data, dict):
        raise fail(f"{path} does not hold a JSON object; fix or remove it first", code)
    return data


def _json_text(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


TaskRootOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--task-root",
        help="A folder the tools may read files from (a task folder, or the folder holding task folders), "
        "recorded as SPU_INPUT_ROOTS in the registration; repeatable.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _task_roots(task_roots: list[Path] | None, as_json: bool) -> list[Path]:
    roots = list(task_roots or [])
    for root in roots:
        if not root.is_dir() and not as_json:  # a container's /app/task may come later: not an error
            typer.echo(f"note: --task-root {root} is not a folder (yet)", err=True)
    return roots


def _wait_s() -> tuple[float, float]:
    from tools_server.core.waits import WAIT_S_DEFAULT, WAIT_S_MAX

    return WAIT_S_DEFAULT, WAIT_S_MAX


def _echo_written(written: list[dict[str, Any]], what: str) -> None:
    for item in written:
        if not item["changed"]:
            typer.echo(f"{item['path']} already holds {what}")
        elif item["backup"]:
            typer.echo(f"wrote {what} into {item['path']} (the previous version: {item['backup']})")
        else:
            typer.echo(f"wrote {what} into {item['path']}")


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
    as_json: JsonOpt = False,
) -> None:
    """Print (or write) the Claude Code setup: the .mcp.json entry, the project settings a headless
    `claude -p` run needs, and (--skill) the working method as a skill. The entry names spu by its absolute
    path, so it starts whatever PATH Claude Code runs with. A file that is not UTF-8 or not a JSON object is
    left as it was (exit 2); a replaced file's previous version is kept as FILE.bak."""
    from prompts.method import SKILL_NAME, render_skill
    from tools_server.commands import clients

    if not project.is_dir():
        raise fail(f"--project {project} is not a folder")
    roots = _task_roots(task_root, as_json)
    mcp_path = path or project / ".mcp.json"
    settings_path = project / ".claude" / "settings.json"
    report: dict[str, Any] = {}
    if write:
        existing = _read_json_object(mcp_path)
        settings = _read_json_object(settings_path)  # both read before either is written
        servers = existing.get("mcpServers")
        if not isinstance(servers, dict):
            servers = existing["mcpServers"] = {}
        entry = clients.claude_mcp_json(roots)["mcpServers"][clients.SERVER_NAME]
        servers[clients.SERVER_NAME] = clients.merge_claude_entry(servers.get(clients.SERVER_NAME), entry)
        written: list[dict[str, Any]] = []
        _write_user_text(mcp_path, _json_text(existing), written)
        _write_user_text(settings_path, _json_text(clients.merge_claude_settings(settings)), written)
        report["written"] = written
        report["input_roots"] = servers[clients.SERVER_NAME].get("env", {}).get(clients.INPUT_ROOTS)
        if not as_json:
            _echo_written(written[:1], "the spu server")
            if report["input_roots"]:
                typer.echo(f"the tools may read files under {report['input_roots']} (SPU_INPUT_ROOTS)")
            _echo_written(written[1:], "the permissions and headless settings")
    if skill:
        folder = project / ".claude" / "skills" / SKILL_NAME
        written = []
        for name, text in render_skill(clients.tools_by_domain(), _wait_s()).items():
            _read_user_text(folder / name)  # a file there that is not text is reported, not replaced
            _write_user_text(folder / name, text, written)
        report["skill"] = written
        if not as_json:
            typer.echo(f"installed the skill {SKILL_NAME} into {folder}")
    if check:
        entry = (_read_json_object(mcp_path, EXIT_INVALID).get("mcpServers") or {}).get(clients.SERVER_NAME)
        report["check"] = _check_server("claude", mcp_path, entry, project, as_json)
    if write or skill or check:
        if as_json:
            echo_json(report)
        return
    printed = {
        "mcp_json_path": str(mcp_path),
        "mcp_json": clients.claude_mcp_json(roots),
        "settings_path": str(settings_path),
        "settings": clients.claude_settings(),
        "headless_command": clients.claude_headless_command(),
    }
    if as_json:
        echo_json(printed)
        return
    typer.echo(f"# {mcp_path}\n{json.dumps(printed['mcp_json'], indent=2)}")
    typer.echo(f"\n# {settings_path}\n{json.dumps(printed['settings'], indent=2)}")
    typer.echo(
        "\n# write both: spu config claude --write; add the method: spu config claude --skill; "
        "check that it starts: spu config claude --check"
        f"\n# headless run:\n{printed['headless_command']}"
    )


def _check_server(client: str, where: Path, entry: object, cwd: Path, as_json: bool) -> dict[str, Any]:
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
    roots = env.get(clients.INPUT_ROOTS)
    if not as_json:
        typer.echo(f"`{argv}` started and lists {len(names)} tools: {', '.join(names)}")
        if roots:
            typer.echo(
                f"the tools may read files under {roots} (SPU_INPUT_ROOTS) and the start and work folders"
            )
    return {"ok": True, "command": argv, "tools": names, "input_roots": roots}


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
    as_json: JsonOpt = False,
) -> None:
    """Print (or write) the Codex `[mcp_servers.spu]` table: every tool approved for `codex exec`, a call
    limit above the longest wait, and the server required to start; (--agents-md) the working method.
    --write edits the file with a TOML library: spu's table is replaced where it stands, in whichever
    spelling the file uses, and every other key and comment is kept; a file that does not parse or is not
    UTF-8 is left as it was (exit 2); the previous version is kept as FILE.bak."""
    from prompts.method import render_agents_md
    from tools_server.commands import clients

    if (base_url or model or env_key) and not model_provider:
        raise fail("--base-url, --model and --env-key need --model-provider NAME")
    if base_url is not None:
        from spu_common.endpoints import base_url_problem

        if (problem := base_url_problem(base_url)) is not None:
            raise fail(f"--base-url {base_url!r}: {problem}")
    roots = _task_roots(task_root, as_json)
    provider = (
        clients.CodexProvider(model_provider, base_url, model, wire_api, env_key) if model_provider else None
    )
    target = path or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"
    if target.is_dir():
        raise fail(f"{target} is a folder: give the Codex config file (config.toml) with --path")
    report: dict[str, Any] = {}
    if write:
        old = _read_user_text(target) or ""
        try:
            result = clients.write_codex_config(old, task_roots=roots, provider=provider)
        except clients.CodexConfigError as exc:
            raise fail(f"{target}: {exc}") from None
        written: list[dict[str, Any]] = []
        _write_user_text(target, result.text, written)
        env_roots = _codex_entry(result.text, target).get("env", {}).get(clients.INPUT_ROOTS)
        report |= {"written": written, "moved": result.moved, "replaced": result.replaced}
        report["input_roots"] = env_roots
        if not as_json:
            _echo_written(written, "[mcp_servers.spu]")
            if provider is not None:
                typer.echo(f"wrote model_provider = {provider.name!r} at the top of {target}")
            for change in result.replaced:
                typer.echo(f"replaced {change} (the provider options given)")
            if result.moved:
                typer.echo(
                    f"moved {', '.join(result.moved)} to the top level of {target}: written after spu's "
                    "tables, TOML read them as part of the last one"
                )
            if env_roots:
                typer.echo(f"the tools may read files under {env_roots} (SPU_INPUT_ROOTS)")
    if agents_md:
        section = render_agents_md(clients.tools_by_domain(), _wait_s())
        old = _read_user_text(agents_path) or ""
        try:
            new = clients.upsert_marked_section(old, section, clients.AGENTS_MD_START, clients.AGENTS_MD_END)
        except clients.MarkedSectionError as exc:
            raise fail(f"{agents_path}: {exc}") from None
        written = []
        _write_user_text(agents_path, new, written)
        report["agents_md"] = written
        if not as_json:
            typer.echo(f"{'updated' if old else 'wrote'} the spu working method in {agents_path}")
    if check:
        text = _read_user_text(target, EXIT_INVALID)
        if text is None:
            raise fail(f"no Codex config at {target}: run `spu config codex --write`")
        entry = _codex_entry(text, target, EXIT_INVALID)
        cwd = Path(entry["cwd"]) if isinstance(entry.get("cwd"), str) else Path.cwd()
        report["check"] = _check_server("codex", target, entry or None, cwd, as_json)
    _, note = clients.server_command()
    if write or agents_md or check:
        if as_json:
            echo_json(report)
        elif note and write:
            typer.echo(f"note: {note}", err=True)
        return
    text = clients.write_codex_config("", task_roots=roots, provider=provider).text
    if as_json:
        echo_json({"path": str(target), "toml": text})
    else:
        typer.echo(text, nl=False)
        if note:
            typer.echo(f"note: {note}", err=True)


def _codex_entry(text: str, path: Path, code: int = 2) -> dict:
    """The ``[mcp_servers.spu]`` table of a Codex config ({} when it has none); a file that is not TOML
    exits with ``code``."""
    from tools_server.commands.clients import SERVER_NAME, CodexConfigError, parse_toml

    try:
        data = parse_toml(text)
    except CodexConfigError as exc:
        raise fail(f"{path}: {exc}", code) from None
    servers = data.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else {}


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
