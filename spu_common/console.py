"""What every ``spu`` command prints on failure and as JSON, and its exit codes: one helper for all parts.

Exit codes: 0 success, 1 the checked thing is wrong (an invalid submission, a failed verification),
2 usage errors (a missing file, a bad option).
"""

from __future__ import annotations

import json
from typing import Any

import typer

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: message`` on stderr and return the ``typer.Exit`` to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def echo_json(data: Any, *, one_line: bool = False) -> None:
    """Print ``data`` as JSON on stdout (every command's ``--json`` output goes through here): indented,
    or with ``one_line`` on a single line, for a line a reader takes as it comes (the address a server
    started listening on)."""
    typer.echo(json.dumps(data, indent=None if one_line else 2, ensure_ascii=False, default=str))
