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
    "tools_server.core.cli",
    "tools_server.core.clients_cli",
    "tools_server.core.doctor_cli",
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
    "serve": "tools_server.core.cli",
    "cache": "tools_server.core.cli",
    "config": "tools_server.core.clients_cli",
    "doctor": "tools_server.core.doctor_cli",
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
FAST = {"serve": "tools_server.core.serve_cli"}

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
        print(f"refusing to start: {problem}", file=sys.stderr)
        raise SystemExit(2)
    if command in FAST and args[0] == command:
        importlib.import_module(FAST[command]).main(args[1:])
        return
    modules = (PARTS[command],) if command in PARTS else MODULES
    make_app(modules)(args=args, prog_name="spu")


def __getattr__(name: str) -> typer.Typer:
    # ``from spu.cli import app`` gives the full app (tests drive it with typer's CliRunner).
    if name == "app":
        return make_app()
    raise AttributeError(name)


if __name__ == "__main__":
    main()
