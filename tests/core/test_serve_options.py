"""``spu serve``'s options are declared once (serve_cli.parser): the Typer command declares none and hands
its arguments on, so both entry paths show the same help and give the same usage errors."""

from __future__ import annotations

import subprocess
import sys

import typer
from typer.testing import CliRunner

from spu.cli import make_app
from tools_server.core.serve_cli import parser

APP = make_app(("tools_server.core.cli",))


def test_the_typer_command_declares_no_option_of_its_own():
    command = typer.main.get_command(APP).commands["serve"]
    assert [p.name for p in command.params] == []
    options = {o for action in parser()._actions for o in action.option_strings}
    assert {"--transport", "--host", "--port", "--token", "--allowed-host"} <= options


def test_both_paths_show_the_one_help(spu_env):
    typer_help = CliRunner().invoke(APP, ["serve", "--help"])
    fast = subprocess.run(
        [sys.executable, "-m", "spu", "serve", "--help"],
        capture_output=True,
        text=True,
        env=spu_env,
        timeout=60,
    )
    assert typer_help.exit_code == 0 and fast.returncode == 0
    assert "--allowed-host NAME" in fast.stdout and "SPU_SERVER_TOKEN" in fast.stdout
    assert typer_help.output == fast.stdout


def test_a_bad_port_is_a_usage_error(spu_env):
    for port in ("99999", "-1", "http"):
        out = subprocess.run(
            [sys.executable, "-m", "spu", "serve", "--transport", "http", "--port", port],
            capture_output=True,
            text=True,
            env=spu_env,
            timeout=60,
        )
        assert out.returncode == 2 and "--port" in out.stderr and "Traceback" not in out.stderr, out.stderr
