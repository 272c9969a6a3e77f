"""``spu audit serve``: the audit service, mounted beside the log readers of ``spu_common.audit_cli``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from spu_common.audit_cli import audit_app
from spu_common.console import EXIT_INVALID, echo_json, fail


@audit_app.command("serve")
def serve_cmd(
    log: Annotated[Path, typer.Option("--log", help="Audit log file (created if missing).")],
    policy: Annotated[
        Path | None, typer.Option("--policy", help="Policy file (JSON or YAML); none: record only.")
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Shared token (or SPU_AUDIT_TOKEN).")] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Address to listen on (default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=0, max=65535, help="Default 8765; 0 picks a free port; the URL is printed as JSON."
        ),
    ] = None,
    socket_path: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Listen on this Unix socket instead of --host/--port (mode 660: owner and group connect).",
        ),
    ] = None,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Fetch cache directory (default: the log's).")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key", help="HMAC key file of the log (default: LOG.key beside it, created if missing)."
        ),
    ] = None,
) -> None:
    """Run the audit service: performs, records and screens web calls for MCP servers that forward to it."""
    from tools_server.plugin import TOKEN_ADVICE, is_loopback, token_problem
    from tools_server.web.service import AUDIT_TOKEN_ENV, CannotListen, serve

    token = token or os.environ.get(AUDIT_TOKEN_ENV)
    if not token:
        raise fail("a token is required: --token T or SPU_AUDIT_TOKEN")
    if socket_path is not None and (host is not None or port is not None):
        raise fail("--socket listens on a Unix socket instead of --host/--port: give one or the other")
    host = host or "127.0.0.1"
    if socket_path is None and not is_loopback(host) and (problem := token_problem(token)) is not None:
        raise fail(
            f"refusing to bind {host}: a non-loopback address needs a token of at least 32 random "
            f"characters: {problem}. {TOKEN_ADVICE}"
        )
    if policy is not None:
        from tools_server.web.policy import Policy, PolicyError

        try:
            Policy.load(policy)
        except PolicyError as exc:
            raise fail(f"refusing to start: {exc}") from None
    try:
        serve(
            log_path=log,
            token=token,
            policy_path=policy,
            host=host,
            port=8765 if port is None else port,
            socket_path=socket_path,
            workdir=workdir,
            key_file=key,
        )
    except CannotListen as exc:
        raise fail(str(exc)) from None


policy_app = typer.Typer(help="Information policy files.", no_args_is_help=True)
audit_app.add_typer(policy_app, name="policy")


@policy_app.command("check")
def policy_check_cmd(
    file: Annotated[Path, typer.Argument(help="Policy file (JSON or YAML).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check a policy file against the schema; exit 1 with ``file: key: problem`` when it is wrong.

    Prints the mode and how many identifiers of each kind the policy holds, never the identifiers."""

    from tools_server.web.policy import Policy, PolicyError

    try:
        policy = Policy.load(file)
    except PolicyError as exc:
        if as_json:
            echo_json({"ok": False, "file": exc.source, "key": exc.key, "problem": exc.problem})
            raise typer.Exit(EXIT_INVALID) from None
        raise fail(str(exc), EXIT_INVALID) from None
    counts = {
        kind: len(getattr(policy, kind))
        for kind in ("dois", "pmids", "pmcids", "titles", "preprint_dois", "preprint_titles")
    }
    if as_json:
        echo_json({"ok": True, "file": str(file), "mode": policy.mode, "identifiers": counts})
    else:
        shown = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        typer.echo(f"{file}: OK ({policy.mode} mode; {shown})")


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")


if __name__ == "__main__":  # `python -m tools_server.web.cli serve …` runs without the rest of the CLI
    audit_app()
