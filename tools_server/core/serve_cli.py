"""``spu serve`` without Typer or the MCP SDK up front: MCP clients start the server for every session and
wait for its answer to ``initialize``, so this path takes stdin/stdout and answers ``initialize``
(:mod:`tools_server.core.handshake`) before it imports the SDK and the server. Same options, environment
variable and refusals as the Typer command in :mod:`tools_server.core.cli`, which ``spu serve --help``
still shows. The bind rules (loopback, wildcard) live here, where both paths read them; the
token-strength rule is :mod:`tools_server.core.http_guard`'s, shared with ``spu audit serve``.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from tools_server.core.http_guard import TOKEN_ADVICE, token_problem

__all__ = ["is_loopback", "is_wildcard", "main", "port_number", "refusal", "token_problem"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("0.0.0.0", "::", "")


def refusal(transport: str, host: str, token: str | None, allowed_hosts: list[str]) -> str | None:
    """Why ``spu serve`` with these options must not start, or None. Shared by both entry paths."""
    if transport not in ("stdio", "http"):
        return f"unknown transport {transport!r}: use stdio or http"
    if transport == "http" and not is_loopback(host):
        if (problem := token_problem(token)) is not None:
            return (
                f"refusing to bind {host}: a non-loopback address needs --token (or SPU_SERVER_TOKEN) "
                f"of at least 32 random characters: {problem}. {TOKEN_ADVICE}"
            )
        if is_wildcard(host) and not allowed_hosts:
            return (
                f"refusing to bind {host}: name the host names clients use with --allowed-host "
                "(e.g. --allowed-host spu.example.org)"
            )
    return None


def port_number(text: str) -> int:
    """A TCP port (0 to 65535; 0 picks a free one), or argparse's usage error (exit 2)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return port


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="spu serve", add_help=False)
    parser.add_argument("--transport", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=8765)
    parser.add_argument("--token", default=os.environ.get("SPU_SERVER_TOKEN") or None)
    parser.add_argument("--allowed-host", action="append", default=[])
    opts = parser.parse_args(argv)
    if (why := refusal(opts.transport, opts.host, opts.token, opts.allowed_host)) is not None:
        print(why, file=sys.stderr)
        raise SystemExit(2)
    wire = None
    if opts.transport == "stdio":
        from tools_server.core.framing import StdioWire

        wire = StdioWire(answer_initialize=True)  # answers initialize while the imports below run
    from tools_server.core.server import run

    run(opts.transport, opts.host, opts.port, opts.token, opts.allowed_host, wire)
