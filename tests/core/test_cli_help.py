"""Every `spu` command's --help renders, with square brackets shown literally (not read as Rich markup)."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from spu.cli import make_app


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    if hasattr(command, "commands"):  # a group (typer vendors its own click)
        for name, sub in command.commands.items():
            out += _paths(sub, (*prefix, name))
    return out


def test_every_help_renders():
    app = make_app()
    root = typer.main.get_command(app)
    paths = _paths(root)
    assert ("report",) in paths and ("config", "claude") in paths and len(paths) > 20
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output, result.exception)
    # the help string that crashed `spu report --help` ("[/<run>]" read as a closing markup tag)
    report = runner.invoke(app, ["report", "--help"])
    assert "<task_id>[/<run>]/rankings.json" in " ".join(report.output.split()).replace(" ", "")
