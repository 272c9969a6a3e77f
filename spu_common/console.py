"""What every ``spu`` command prints on failure and as JSON, and its exit codes: one helper for all parts.

Exit codes: 0 success, 1 a negative verdict of a command that judges its input (an invalid submission, a
log that does not verify, a ``--check`` that fails), 2 usage errors and inputs that are missing or cannot
be read as their kind (a missing file, a folder where a file is expected, a file that is not UTF-8 or does
not parse, a bad option), and outputs the command may not replace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

T = TypeVar("T")

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


def one_line(message: str) -> str:
    """``message`` on one line: its lines joined by ``; `` (a failure is one ``error:`` line on stderr)."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: message`` (on one line) on stderr and return the ``typer.Exit`` to raise."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(code)


@contextmanager
def output_rule() -> Iterator[None]:
    """Where a command claims its output (:mod:`spu_common.outputs`): a target it may not replace becomes
    its ``error:`` line and exit status 2."""
    from spu_common.outputs import OutputRefused

    try:
        yield
    except OutputRefused as exc:
        raise fail(str(exc)) from None


def echo_json(data: Any, *, one_line: bool = False) -> None:
    """Print ``data`` as JSON on stdout (every command's ``--json`` output goes through here): indented,
    or with ``one_line`` on a single line, for a line a reader takes as it comes (the address a server
    started listening on)."""
    typer.echo(json.dumps(data, indent=None if one_line else 2, ensure_ascii=False, default=str))


#: The task folder, positional in every command (``TASK``); ``--task`` is kept as a hidden alias.
TaskArg = Annotated[
    Path | None,
    typer.Argument(
        metavar="TASK",
        help="Task directory (contract.json, instruction.md, targets.csv).",
        show_default=False,
    ),
]
TaskAlias = Annotated[Path | None, typer.Option("--task", hidden=True, help="The same as TASK.")]


def task_argument(
    task: T | None, alias: T | None, others: list[Any] | None = None, *, variadic: bool = False
) -> tuple[T, list[Any]]:
    """The task given as ``TASK`` or ``--task``, and the command's other positional arguments.

    With ``--task``, what stood in TASK's place is the first of the others: ``spu validate SUB --task T``
    reads as ``spu validate T SUB``. ``others``: the values of the other positional slots (one optional
    slot each), or with ``variadic`` the values of the one repeatable argument."""
    others = list(others or [])
    if alias is None:
        if task is None:
            raise fail("missing argument TASK (the task folder)")
        return task, others
    if task is None:
        return alias, others
    if variadic:
        return alias, [task, *others]
    if others and others[0] is None:
        return alias, [task, *others[1:]]
    raise fail("the task is given twice: as TASK and as --task")
