"""A plugin that fails to load stays local: it is skipped whole with its error in ``system_info``,
``spu doctor`` and the server's log, and every other tool works (one module failing to import made
``tools/list`` fail and every tool, ``system_info`` included, answer ``internal_error``; ``spu doctor``
crashed with a traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

BROKEN = 'raise RuntimeError("boom at import")\n'
CLASH = '''
from pydantic import BaseModel
from tools_server.plugin import tool


class In(BaseModel):
    molecules: list[str]


@tool(name="chem_parse", resource="instant")
def chem_parse(args: In) -> dict:
    """A second tool of the same name as an in-tree one."""
    return {}


@tool(name="clash_extra", resource="instant")
def clash_extra(args: In) -> dict:
    """Would be added with the clashing tool: must not be, the module is skipped whole."""
    return {}
'''


@pytest.fixture
def plugin_env(spu_env, tmp_path, monkeypatch):
    (tmp_path / "broken_plugin.py").write_text(BROKEN)
    (tmp_path / "clash_plugin.py").write_text(CLASH)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(HERE), os.environ["PYTHONPATH"]]))
    modules = "broken_plugin,no_such_plugin_module,clash_plugin,spu_testing_tools"
    monkeypatch.setenv("SPU_TOOL_MODULES", modules)
    return dict(os.environ)


def test_every_other_tool_works_and_system_info_names_the_broken_plugins(plugin_env, start_mcp_server):
    server = start_mcp_server(plugin_env)
    names = {t.name for t in server.list_tools()}
    assert {"system_info", "chem_parse", "test_sleep", "xtb_run"} <= names and "clash_extra" not in names
    info = server.call_ok("system_info")
    errors = {e["plugin"]: e for e in info["plugin_errors"]}
    assert set(errors) == {"broken_plugin", "no_such_plugin_module", "clash_plugin"}
    assert errors["broken_plugin"]["error"] == "RuntimeError: boom at import"
    assert errors["no_such_plugin_module"]["error"].startswith("ModuleNotFoundError")
    assert "defined twice" in errors["clash_plugin"]["error"]
    assert all(e["source"] == "SPU_TOOL_MODULES" for e in errors.values())
    parsed = server.call_ok("chem_parse", {"molecules": ["CCO"]})  # the in-tree tool, not the clash
    assert parsed["items"][0]["canonical_smiles"] == "CCO"
    assert (
        server.call_ok("test_sleep", {"seconds": 0.01, "steps": 1, "tag": "ok", "wait_s": 60})["tag"] == "ok"
    )


def test_spu_doctor_reports_the_broken_plugins_without_a_traceback(plugin_env):
    done = subprocess.run(
        [sys.executable, "-m", "spu", "doctor", "--json", "--only", "mcp"],
        env=plugin_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr and done.returncode == 1
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["mcp"]["status"] == "ok"
    assert checks["plugin broken_plugin"]["status"] == "fail"
    assert checks["plugin broken_plugin"]["detail"] == "RuntimeError: boom at import"
    assert checks["plugin no_such_plugin_module"]["status"] == "fail"


BUGGY = '''
from pydantic import BaseModel
from tools_server.plugin import tool


class In(BaseModel):
    n: int


@tool(name="buggy_ratio", resource="instant")
def buggy_ratio(args: In) -> dict:
    """A plugin's instant tool with a bug: divides by its input."""
    return {"ratio": 1 / args.n}
'''


def test_a_bug_in_a_plugins_instant_tool_does_not_ask_for_a_job_id(
    spu_env, tmp_path, monkeypatch, start_mcp_server
):
    """An instant tool runs in the server, without a job: its bug answered internal_error with the hint
    "report it with the job id", an id the model never saw. The hint now names the tool and what to report."""
    (tmp_path / "buggy_plugin.py").write_text(BUGGY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("SPU_TOOL_MODULES", "buggy_plugin")
    server = start_mcp_server(dict(os.environ))
    assert server.call_ok("buggy_ratio", {"n": 4})["ratio"] == 0.25
    error = server.call_error("buggy_ratio", {"n": 0})
    assert error["code"] == "internal_error" and error["message"] == "ZeroDivisionError: division by zero"
    assert "job" in error["hint"] and "job id" not in error["hint"]
    assert error["hint"].startswith(
        "This is a bug in the tool buggy_ratio (module buggy_plugin), which ran in"
    )
