"""The ``spu`` command. Each part adds its own commands through a ``register(app)`` function."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="spu",
    help="Science Prediction Universe scaffold: tool server, reference agent and benchmark environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Modules that define commands; each exposes register(app). Heavy imports happen inside the commands.
_COMMAND_MODULES = (
    "tools_server.cli",
    "tools_server.doctor_cli",
    "tools_server.web.cli",
    "environment.cli",
    "environment.contamination.cli",
    "scaffold.agent.cli",
    "scaffold.harbor_cli",
)

for _name in _COMMAND_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as _exc:
        if _exc.name is None or not _name.startswith(_exc.name):
            raise
        continue
    _module.register(app)

if __name__ == "__main__":
    app()
