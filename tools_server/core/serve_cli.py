"""``spu serve`` without Typer: MCP clients start the server for every session and wait for its answer to
``initialize``, so this path imports nothing the server does not need (Typer and its help renderer cost
about as much as the rest of our start-up). Same options, environment variable and refusals as the Typer
command in :mod:`tools_server.core.cli`, which ``spu serve --help`` still shows.
"""

from __future__ import annotations

import argparse
import os
import sys


def refusal(transport: str, host: str, token: str | None, allowed_hosts: list[str]) -> str | None:
    """Why ``spu serve`` with these options must not start, or None. Shared by both entry paths."""
    from tools_server.core.server import is_loopback, is_wildcard, token_problem

    if transport not in ("stdio", "http"):
        return f"unknown transport {transport!r}: use stdio or http"
    if transport == "http" and not is_loopback(host):
        if (problem := token_problem(token)) is not None:
            return (
                f"refusing to bind {host}: a non-loopback address needs --token (or SPU_SERVER_TOKEN) "
                f"of at least 32 random characters: {problem}. "
                'Make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        if is_wildcard(host) and not allowed_hosts:
            return (
                f"refusing to bind {host}: name the host names clients use with --allowed-host "
                "(e.g. --allowed-host spu.example.org)"
            )
    return None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="spu serve", add_help=False)
    parser.add_argument("--transport", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", default=os.environ.get("SPU_SERVER_TOKEN") or None)
    parser.add_argument("--allowed-host", action="append", default=[])
    opts = parser.parse_args(argv)
    if (why := refusal(opts.transport, opts.host, opts.token, opts.allowed_host)) is not None:
        print(why, file=sys.stderr)
        raise SystemExit(2)
    from tools_server.core.server import run

    run(opts.transport, opts.host, opts.port, opts.token, opts.allowed_host)
