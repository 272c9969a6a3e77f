"""``spu audit serve``: the audit service, mounted beside the log readers of ``environment.audit_cli``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from environment.audit_cli import audit_app


@audit_app.command("serve")
def serve_cmd(
    log: Annotated[Path, typer.Option("--log", help="Audit log file (created if missing).")],
    policy: Annotated[
        Path | None, typer.Option("--policy", help="Policy file (JSON or YAML); none: record only.")
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Shared token (or SPU_AUDIT_TOKEN).")] = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="0 picks a free port; the URL is printed as JSON.")
    ] = 8765,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Fetch cache directory (default: the log's).")
    ] = None,
) -> None:
    """Run the audit service: performs, records and screens web calls for MCP servers that forward to it."""
    from tools_server.web.service import AUDIT_TOKEN_ENV, serve

    token = token or os.environ.get(AUDIT_TOKEN_ENV)
    if not token:
        typer.echo("a token is required: --token T or SPU_AUDIT_TOKEN", err=True)
        raise typer.Exit(2)
    if policy is not None and not policy.exists():
        typer.echo(f"no policy file at {policy}", err=True)
        raise typer.Exit(2)
    if policy is not None:
        from tools_server.web.policy import Policy

        try:
            Policy.load(policy)
        except (ValueError, OSError) as exc:
            typer.echo(f"invalid policy file: {exc}", err=True)
            raise typer.Exit(2) from None
    serve(log_path=log, token=token, policy_path=policy, host=host, port=port, workdir=workdir)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")


if __name__ == "__main__":  # `python -m tools_server.web.cli serve …` runs without the rest of the CLI
    audit_app()
