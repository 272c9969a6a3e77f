"""The root ``spu`` command. It belongs to no part: it mounts each part's commands.

Each command module exposes ``register(app)``. Only the module that owns the command being run is imported,
so ``spu serve`` starts without importing the agent or the benchmark's statistics; ``spu --help`` (or a
command not listed in :data:`PARTS`) loads them all.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

#: The command modules, in help order: the server, the benchmark side, the reference agent.
MODULES = (
    "tools_server.commands.cli",
    "tools_server.commands.clients_cli",
    "tools_server.commands.doctor_cli",
    "tools_server.web.cli",
    "environment.cli",
    "environment.analysis.cli",
    "environment.contamination.cli",
    "environment.view.cli",
    "scaffold.agent.cli",
    "scaffold.harbor_cli",
)

#: Top-level command -> the module that registers it (for start-up speed; unlisted commands still work).
PARTS = {
    "serve": "tools_server.commands.cli",
    "cache": "tools_server.commands.cli",
    "config": "tools_server.commands.clients_cli",
    "doctor": "tools_server.commands.doctor_cli",
    "audit": "tools_server.web.cli",
    "baselines": "environment.analysis.cli",
    "analyze": "environment.analysis.cli",
    "contamination": "environment.contamination.cli",
    "view": "environment.view.cli",
    "agent": "scaffold.agent.cli",
    "harbor": "scaffold.harbor_cli",
    "batch": "scaffold.harbor_cli",
}


#: Commands with a path that skips Typer (start-up time matters): command -> module with ``main(argv)``.
FAST = {"serve": "tools_server.commands.serve_cli"}

#: Settings a command must find valid before it starts, checked by the part that owns them: command ->
#: (environment variable, "module:function" returning why the command must not start, or None). The check
#: runs, on both the fast and the Typer path, only when the variable is set.
PRESTART = {"serve": [("SPU_POLICY", "tools_server.web.policy:env_policy_problem")]}


def _prestart_problem(command: str | None) -> str | None:
    for variable, target in PRESTART.get(command or "", []):
        if os.environ.get(variable):
            module, _, name = target.partition(":")
            problem = getattr(importlib.import_module(module), name)()
            if problem is not None:
                return problem
    return None


def make_app(modules: Iterable[str] = MODULES) -> typer.Typer:
    """A ``spu`` app with the commands of ``modules``; a part whose dependencies are missing is left out."""
    import typer

    app = typer.Typer(
        name="spu",
        help="Science Prediction Universe scaffold: tool server, reference agent and benchmark environment.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def _root() -> None:
        """Science Prediction Universe scaffold: tool server, reference agent and benchmark environment."""

    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise
            continue
        module.register(app)
    return app


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if not a.startswith("-")), None)
    if not {"--help", "-h"} & set(args) and (problem := _prestart_problem(command)) is not None:
        print(f"error: refusing to start: {problem}", file=sys.stderr)
        raise SystemExit(2)
    if command in FAST and args[0] == command:
        importlib.import_module(FAST[command]).main(args[1:])
        return
    modules = (PARTS[command],) if command in PARTS else MODULES
    raise SystemExit(run(make_app(modules), args))


def run(app: typer.Typer, args: list[str]) -> int:
    """Run ``app`` on ``args`` and return the exit status. Every failure is one ``error: ...`` line on
    stderr, never a traceback: 2 for usage errors, for inputs that are missing or cannot be read, and for an
    output the command may not replace (:mod:`spu_common.outputs`); the command's own status otherwise
    (1: what it judged is wrong)."""
    import typer

    from spu_common.console import EXIT_USAGE, one_line
    from spu_common.outputs import OutputRefused

    try:
        status = app(args=args, prog_name="spu", standalone_mode=False)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        return 1
    except OutputRefused as exc:
        typer.echo(f"error: {one_line(str(exc))}", err=True)
        return EXIT_USAGE
    except OSError as exc:  # a path given on the command line that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"error: {where}{exc.strerror or exc}", err=True)
        return EXIT_USAGE
    except Exception as exc:
        # click's errors (typer vendors click and keeps its exception classes private): a message and
        # an exit status; a usage error also carries the command's context
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group without its command: its help
            typer.echo(exc.format_message(), err=True)
        elif ctx is not None:
            usage = f"`{ctx.command_path} --help` shows the usage"
            typer.echo(f"error: {one_line(exc.format_message())} ({usage})", err=True)
        else:
            typer.echo(f"error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    return status if isinstance(status, int) else 0


def __getattr__(name: str) -> typer.Typer:
    # ``from spu.cli import app`` gives the full app (tests drive it with typer's CliRunner).
    if name == "app":
        return make_app()
    raise AttributeError(name)


if __name__ == "__main__":
    main()
