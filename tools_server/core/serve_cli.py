"""``spu serve``: its options (declared here once), then the server. MCP clients start the server for every
session and wait for its answer to ``initialize``, so this path imports neither Typer nor the MCP SDK up
front: over stdio it takes stdin/stdout and answers ``initialize`` (:mod:`tools_server.core.handshake`)
before it imports the SDK and the server. The Typer command in :mod:`tools_server.core.cli` hands its
arguments here, ``--help`` included.
"""

from __future__ import annotations

import argparse
import os
import sys

from tools_server.core.bind import refusal


def parser() -> argparse.ArgumentParser:
    """The one declaration of ``spu serve``'s options."""
    p = argparse.ArgumentParser(prog="spu serve", description="Run the MCP tool server.")
    p.add_argument(
        "--transport", default="stdio", help="stdio (for Claude Code, Codex) or http (streamable HTTP)."
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="HTTP bind address; anything but loopback needs --token."
    )
    p.add_argument("--port", type=port_number, default=8765, help="HTTP port (0 picks a free one).")
    p.add_argument(
        "--token",
        default=os.environ.get("SPU_SERVER_TOKEN") or None,
        help="Bearer token required on HTTP requests (default: $SPU_SERVER_TOKEN).",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="A host name (optionally host:port) clients use to reach a non-loopback bind; repeatable. "
        "Requests with any other Host header get 421.",
    )
    return p


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
    opts = parser().parse_args(argv)
    if (why := refusal(opts.transport, opts.host, opts.token, opts.allowed_host)) is not None:
        print(why, file=sys.stderr)
        raise SystemExit(2)
    wire = None
    if opts.transport == "stdio":
        from tools_server.core.framing import StdioWire

        wire = StdioWire(answer_initialize=True)  # answers initialize while the imports below run
    from tools_server.core.server import run

    run(opts.transport, opts.host, opts.port, opts.token, opts.allowed_host, wire)
