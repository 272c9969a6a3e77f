"""``spu doctor`` people will run (issue 48): engine checks that share an import fork from one warm process
(and stay isolated: a crash or a hang is that check's failure); a re-run with nothing changed reuses the
results, a changed environment (a package installed, a setting, the weights folder) or ``--fresh`` runs the
checks again; a broken entry-point plugin is fixed in the package that declares it.

The checks here are real ``spu doctor`` checks of a plugin written for the test (``SPU_TOOL_MODULES``); each
records every run in a file, so a test counts what ran, not how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = """
from tools_server.plugin import DoctorCheck, Domain

def _check(name, body, timeout_s=None):
    code = "import os, doctor_probe_heavy\\n" + (
        "open(os.environ['SPU_PROBE_RUNS'], 'a').write(f'NAME {os.getpid()}\\\\n')\\n".replace("NAME", name)
    ) + body
    return DoctorCheck(name, f"probe {name}", code, f"fix {name}", profile="core", timeout_s=timeout_s)

DOMAIN = Domain(
    name="doctor_probe",
    tool_modules=(),
    doctor_checks=(
        _check("probe-a", "report(detail='a ok', imports=doctor_probe_heavy.IMPORTS)"),
        _check("probe-b", "report(detail='b ok', imports=doctor_probe_heavy.IMPORTS)"),
        _check("probe-crash", "import signal\\nos.kill(os.getpid(), signal.SIGSEGV)"),
        _check("probe-exit", "raise SystemExit('the engine said no')"),
        _check("probe-hang", "import time\\ntime.sleep(600)"),
    ),
)
"""

#: imported by every probe check: the zygote preloads it, so it is imported once for all forked checks
HEAVY = """
import os
with open(os.environ["SPU_PROBE_IMPORTS"], "a") as fh:
    fh.write(f"{os.getpid()}\\n")
IMPORTS = sum(1 for _ in open(os.environ["SPU_PROBE_IMPORTS"]))
"""


@pytest.fixture
def probe_env(spu_env, tmp_path) -> dict[str, str]:
    (tmp_path / "doctor_probe_plugin.py").write_text(PLUGIN)
    (tmp_path / "doctor_probe_heavy.py").write_text(HEAVY)
    return {
        **spu_env,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), spu_env["PYTHONPATH"]]),
        "SPU_TOOL_MODULES": "doctor_probe_plugin",
        "SPU_PROBE_RUNS": str(tmp_path / "runs.txt"),
        "SPU_PROBE_IMPORTS": str(tmp_path / "imports.txt"),
    }


def _doctor(env: dict[str, str], *names: str, fresh: bool = False, timeout: int = 60) -> dict:
    args = [a for n in names for a in ("--only", n)] + (["--fresh"] if fresh else [])
    done = subprocess.run(
        [sys.executable, "-m", "spu", "doctor", "--json", "--timeout", str(timeout), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def _runs(env: dict[str, str]) -> list[str]:
    path = Path(env["SPU_PROBE_RUNS"])
    return path.read_text().split()[::2] if path.exists() else []


def _checks(summary: dict) -> dict[str, dict]:
    return {c["name"]: c for c in summary["checks"]}


def test_checks_that_share_an_import_fork_from_one_process_that_made_it(probe_env):
    """Two checks importing the same module: each ran (its own process, its own result), and the module
    was imported once, by the zygote they were forked from."""
    checks = _checks(_doctor(probe_env, "probe-a", "probe-b"))
    assert (checks["probe-a"]["status"], checks["probe-a"]["detail"]) == ("ok", "a ok")
    assert (checks["probe-b"]["status"], checks["probe-b"]["detail"]) == ("ok", "b ok")
    pids = Path(probe_env["SPU_PROBE_RUNS"]).read_text().split()[1::2]
    importers = Path(probe_env["SPU_PROBE_IMPORTS"]).read_text().split()
    assert len(set(pids)) == 2 and len(importers) == 1 and importers[0] not in pids
    assert checks["probe-a"]["facts"]["imports"] == checks["probe-b"]["facts"]["imports"] == 1


def test_a_forked_check_that_crashes_exits_or_hangs_fails_alone(probe_env):
    checks = _checks(_doctor(probe_env, "probe-crash", "probe-exit", "probe-hang", "probe-a", timeout=3))
    assert (
        checks["probe-crash"]["status"] == "fail"
        and "crashed with SIGSEGV" in checks["probe-crash"]["detail"]
    )
    assert checks["probe-exit"]["status"] == "fail" and checks["probe-exit"]["detail"] == "the engine said no"
    assert (
        checks["probe-hang"]["status"] == "fail" and "timed out after 3 s" in checks["probe-hang"]["detail"]
    )
    assert checks["probe-a"]["status"] == "ok"
    lines = Path(probe_env["SPU_PROBE_RUNS"]).read_text().split("\n")
    hung = int(next(line for line in lines if line.startswith("probe-hang")).split()[1])
    with pytest.raises(ProcessLookupError):  # killed with its process group, not left behind
        os.kill(hung, 0)


def test_a_rerun_with_nothing_changed_reuses_the_results(probe_env):
    first = _doctor(probe_env, "probe-a", "probe-exit")
    assert first["cached"] == 0 and sorted(_runs(probe_env)) == ["probe-a", "probe-exit"]
    again = _doctor(probe_env, "probe-a", "probe-exit")
    assert again["cached"] == 2 and sorted(_runs(probe_env)) == ["probe-a", "probe-exit"]  # nothing ran
    checks = _checks(again)
    assert checks["probe-a"]["cached"] and checks["probe-a"]["detail"] == "a ok"
    assert checks["probe-exit"]["status"] == "fail" and checks["probe-exit"]["detail"] == "the engine said no"
    assert again["ok"] is False and again["fingerprint"] == first["fingerprint"]
    fresh = _doctor(probe_env, "probe-a", "probe-exit", fresh=True)
    assert fresh["cached"] == 0 and sorted(_runs(probe_env)) == [
        "probe-a",
        "probe-a",
        "probe-exit",
        "probe-exit",
    ]


def test_a_changed_environment_runs_the_checks_again(probe_env, tmp_path):
    _doctor(probe_env, "probe-a")
    assert _doctor(probe_env, "probe-a")["cached"] == 1
    weights = tmp_path / "weights"
    weights.mkdir()
    moved = {**probe_env, "SPU_WEIGHTS_DIR": str(weights)}  # another weights folder
    assert _doctor(moved, "probe-a")["cached"] == 0
    assert _doctor(moved, "probe-a")["cached"] == 1
    (weights / "model.pt").write_bytes(b"x")  # a file added to it
    assert _doctor(moved, "probe-a")["cached"] == 0
    site = tmp_path / "site"  # a package installed: a distribution appears on the path
    (site / "spu_probe_dist-1.0.dist-info").mkdir(parents=True)
    (site / "spu_probe_dist-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: spu-probe-dist\nVersion: 1.0\n"
    )
    installed = {**moved, "PYTHONPATH": os.pathsep.join([str(site), moved["PYTHONPATH"]])}
    assert _doctor(installed, "probe-a")["cached"] == 0
    (site / "spu_probe_dist-1.0.dist-info").rename(site / "spu_probe_dist-1.1.dist-info")
    (site / "spu_probe_dist-1.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: spu-probe-dist\nVersion: 1.1\n"
    )
    assert _doctor(installed, "probe-a")["cached"] == 0  # upgraded
    assert _runs(installed).count("probe-a") == 5


def test_a_check_that_timed_out_is_run_again(probe_env):
    assert "timed out" in _checks(_doctor(probe_env, "probe-hang", timeout=2))["probe-hang"]["detail"]
    second = _doctor(probe_env, "probe-hang", timeout=2)
    assert second["cached"] == 0 and _runs(probe_env) == ["probe-hang", "probe-hang"]


ENTRY_POINT_PLUGIN = "raise ImportError('a library the plugin needs is missing')\n"


def test_a_broken_entry_point_plugin_is_fixed_in_the_package_that_declares_it(spu_env, tmp_path):
    site = tmp_path / "site"
    info = site / "spu_broken_plugin-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: spu-broken-plugin\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[spu.tools]\nbroken = spu_broken_plugin:DOMAIN\n")
    (site / "spu_broken_plugin.py").write_text(ENTRY_POINT_PLUGIN)
    env = {**spu_env, "PYTHONPATH": os.pathsep.join([str(site), spu_env["PYTHONPATH"]])}
    checks = _checks(_doctor(env, "mcp"))
    broken = checks["plugin spu_broken_plugin:DOMAIN"]
    assert broken["status"] == "fail" and "a library the plugin needs is missing" in broken["detail"]
    assert "pip install --force-reinstall spu-broken-plugin" in broken["fix"]
    assert "pip uninstall spu-broken-plugin" in broken["fix"] and "SPU_TOOL_MODULES" not in broken["fix"]
