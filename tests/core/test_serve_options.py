"""``spu serve``'s options are declared once (serve_cli.options): the Typer command declares none and hands
its arguments on, so both entry paths show the same help and give the same usage errors, in the style of
every other spu command."""

from __future__ import annotations

import socket
import subprocess
import sys

import typer
from typer.testing import CliRunner

from spu.cli import make_app
from tools_server.commands.serve_cli import options

APP = make_app(("tools_server.commands.cli",))


def test_the_typer_command_declares_no_option_of_its_own():
    command = typer.main.get_command(APP).commands["serve"]
    assert [p.name for p in command.params] == []
    assert {"--transport", "--host", "--port", "--token", "--allowed-host"} <= {o.flag for o in options()}


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
    assert "--allowed-host <name>" in fast.stdout and "SPU_SERVER_TOKEN" in fast.stdout
    assert typer_help.output == fast.stdout
    # the layout of every other command's help (it was argparse's "usage: ... options:")
    doctor = CliRunner().invoke(make_app(("tools_server.commands.doctor_cli",)), ["doctor", "--help"]).output
    for style in ("Usage: spu {} [OPTIONS]\n", "\nOptions:\n", "  --help "):
        assert style.format("serve") in fast.stdout and style.format("doctor") in doctor


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
        assert out.stderr.startswith("error: argument --port: ") and out.stderr.count("\n") == 1
        assert "`spu serve --help` shows the usage" in out.stderr


def test_a_port_in_use_is_one_error_line_and_exit_2(spu_env):
    """On 39e2847 uvicorn's own log line and exit status 3, where docs/server.md promises `error:` and 2;
    the port is now bound before the server starts."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "spu", "serve", "--transport", "http", "--port", str(port)],
            capture_output=True,
            text=True,
            env=spu_env,
            timeout=120,
        )
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use; choose another --port "
        "(0 picks a free one)\n"
    )
