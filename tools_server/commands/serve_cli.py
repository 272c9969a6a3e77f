"""``spu serve``: its options (declared here once), then the server. MCP clients start the server for every
session and wait for its answer to ``initialize``, so this path imports neither Typer nor the MCP SDK up
front: over stdio it takes stdin/stdout and answers ``initialize`` (:mod:`tools_server.core.handshake`)
before it imports the SDK and the server. The Typer command in :mod:`tools_server.commands.cli` hands its
arguments here, ``--help`` included.

The options are parsed with argparse (fast to import); ``--help`` and usage errors are written in the style
of every other ``spu`` command (click's help layout, ``error:`` lines, exit status 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from tools_server.core.bind import refusal

PROG = "spu serve"
DESCRIPTION = "Run the MCP tool server."
EXIT_USAGE = 2


def port_number(text: str) -> int:
    """A TCP port (0 to 65535; 0 picks a free one), or argparse's usage error (exit 2)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return port


@dataclass(frozen=True)
class Option:
    """One option of ``spu serve``: the one declaration argparse and the help text are built from."""

    flag: str
    help: str
    metavar: str = "<str>"
    default: Any = None
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    repeatable: bool = False


def options() -> tuple[Option, ...]:
    """The options (``--token``'s default is read from the environment when this is called)."""
    return (
        Option(
            "--transport",
            "stdio (for Claude Code, Codex) or http (streamable HTTP).",
            "[stdio|http]",
            "stdio",
            choices=("stdio", "http"),
        ),
        Option("--host", "HTTP bind address; anything but loopback needs --token.", default="127.0.0.1"),
        Option("--port", "HTTP port (0 picks a free one).", "<int>", 8765, port_number),
        Option(
            "--token",
            "Bearer token required on HTTP requests (default: $SPU_SERVER_TOKEN).",
            default=os.environ.get("SPU_SERVER_TOKEN") or None,
        ),
        Option(
            "--allowed-host",
            "A host name (optionally host:port) clients use to reach a non-loopback bind; repeatable. "
            "Requests with any other Host header get 421.",
            "<name>",
            repeatable=True,
        ),
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        usage_error(message)


def usage_error(message: str) -> NoReturn:
    """What every ``spu`` command prints on a usage error, and exit status 2."""
    print(f"error: {message} (`{PROG} --help` shows the usage)", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    """The parser of ``spu serve``'s options (built from :func:`options`; ``--help`` is :func:`help_text`)."""
    p = _Parser(prog=PROG, add_help=False, allow_abbrev=False)
    for o in options():
        if o.repeatable:
            p.add_argument(o.flag, action="append", default=[], type=o.type)
        else:
            p.add_argument(o.flag, default=o.default, type=o.type, choices=o.choices)
    return p


def help_text() -> str:
    """``spu serve --help``, laid out as click lays out every other command's help."""
    from click import HelpFormatter

    rows = []
    for o in options():
        shown = "" if o.default is None or o.flag == "--token" else f"  [default: {o.default}]"
        rows.append((f"{o.flag} {o.metavar}", o.help + shown))
    rows.append(("--help", "Show this message and exit."))
    formatter = HelpFormatter()
    formatter.write_usage(PROG, "[OPTIONS]")
    formatter.write_paragraph()
    with formatter.indentation():
        formatter.write_text(DESCRIPTION)
    with formatter.section("Options"):
        formatter.write_dl(rows)
    return formatter.getvalue()


def main(argv: list[str]) -> None:
    if "--help" in argv:
        print(help_text(), end="")
        return
    opts = parser().parse_args(argv)
    if (why := refusal(opts.transport, opts.host, opts.token, opts.allowed_host)) is not None:
        print(f"error: {why}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    from tools_server.core.settings import FolderError, prepare_folders

    try:  # before initialize is answered: a server that cannot keep its files refuses now, not later
        note = prepare_folders()
    except FolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    if note is not None:
        print(f"spu serve: {note}", file=sys.stderr)
    wire = None
    if opts.transport == "stdio":
        from tools_server.core.framing import StdioWire

        wire = StdioWire(answer_initialize=True)  # answers initialize while the imports below run
    from tools_server.core.bind import CannotListen
    from tools_server.core.server import run

    try:
        run(opts.transport, opts.host, opts.port, opts.token, opts.allowed_host, wire)
    except CannotListen as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
