"""``spu serve`` without Typer: MCP clients start the server for every session and wait for its answer to
``initialize``, so this path imports nothing the server does not need (Typer and its help renderer cost
about as much as the rest of our start-up). Same options, environment variable and refusals as the Typer
command in :mod:`tools_server.core.cli`, which ``spu serve --help`` still shows.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="spu serve", add_help=False)
    parser.add_argument("--transport", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", default=os.environ.get("SPU_SERVER_TOKEN") or None)
    opts = parser.parse_args(argv)
    from tools_server.core.server import is_loopback, run

    if opts.transport not in ("stdio", "http"):
        print(f"unknown transport {opts.transport!r}: use stdio or http", file=sys.stderr)
        raise SystemExit(2)
    if opts.transport == "http" and not is_loopback(opts.host) and not opts.token:
        print(
            f"refusing to bind {opts.host}: a non-loopback address needs --token (or SPU_SERVER_TOKEN)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    run(opts.transport, opts.host, opts.port, opts.token)
