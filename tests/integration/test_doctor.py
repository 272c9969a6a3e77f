"""`spu doctor`: real engine checks on this machine, and broken engines simulated by stand-in modules on
PYTHONPATH (a segfaulting import, a hanging import, a missing package) that doctor must survive."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tools_server.commands.doctor import run_doctor

REPO = Path(__file__).resolve().parents[2]


def _by_name(summary: dict) -> dict[str, dict]:
    return {c["name"]: c for c in summary["checks"]}


def _shadow(monkeypatch, tmp_path: Path, modules: dict[str, str]) -> None:
    """Put stand-in packages first on PYTHONPATH for the check subprocesses."""
    root = tmp_path / "shadow"
    for name, code in modules.items():
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))


def test_real_engines_compute_reference_values(spu_env):
    summary = run_doctor(only=["rdkit", "pyscf", "tblite", "dirs"], gpus=[])
    checks = _by_name(summary)
    assert summary["ok"] is True
    assert {checks[n]["status"] for n in ("rdkit", "pyscf", "tblite", "dirs")} == {"ok"}
    # H2 RHF/STO-3G at 0.74 Å: -1.11676 Eh (Szabo & Ostlund table 3.6, 1.4 bohr); PySCF gives -1.1167593
    assert checks["pyscf"]["facts"]["energy_hartree"] == pytest.approx(-1.1167593, abs=1e-6)
    # GFN2-xTB water at the experimental geometry: tblite and xtb-python both give -5.0703708 Eh here
    assert checks["tblite"]["facts"]["energy_hartree"] == pytest.approx(-5.0703708, abs=1e-6)
    assert spu_env["SPU_WORKDIR"] in checks["dirs"]["detail"]


def test_segfaulting_and_hanging_engines_are_failures_not_crashes(spu_env, monkeypatch, tmp_path):
    _shadow(
        monkeypatch,
        tmp_path,
        {
            "tblite": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
            "mdtraj": "import time\ntime.sleep(600)\n",
            "pdbfixer": "raise ImportError('libOpenMM.so.8.1: cannot open shared object file')\n",
        },
    )
    summary = run_doctor(only=["tblite", "mdtraj", "pdbfixer", "rdkit"], timeout_s=3, gpus=[])
    checks = _by_name(summary)
    assert summary["ok"] is False
    assert checks["tblite"]["status"] == "fail" and "SIGSEGV" in checks["tblite"]["detail"]
    assert checks["mdtraj"]["status"] == "fail" and "timed out after 3 s" in checks["mdtraj"]["detail"]
    assert checks["mdtraj"]["wall_s"] < 30
    assert checks["pdbfixer"]["status"] == "fail"
    assert "cannot open shared object file" in checks["pdbfixer"]["detail"]
    assert "spu-scaffold[md]" in checks["pdbfixer"]["fix"]
    assert checks["rdkit"]["status"] == "ok"  # the others' failures do not spill over


def test_core_profile_downgrades_engine_failures_to_warnings(spu_env, monkeypatch, tmp_path):
    _shadow(monkeypatch, tmp_path, {"pdbfixer": "raise ImportError('broken')\n"})
    summary = run_doctor(profile="core", only=["pdbfixer", "rdkit"], gpus=[])
    checks = _by_name(summary)
    assert checks["pdbfixer"]["status"] == "warn" and checks["pdbfixer"]["required"] is False
    assert summary["ok"] is True


def test_gpu_checks_skip_without_gpu_and_are_required_with_one_mocked(spu_env):
    # no GPU on this machine: GPU checks are skipped and doctor passes
    summary = run_doctor(only=["gpu", "cupy", "cuda-libs"], gpus=[])
    assert {c["status"] for c in summary["checks"]} == {"skip"} and summary["ok"] is True
    # a GPU reported (mocked nvidia-smi result) but no CUDA stack here: the GPU checks run, fail, and are
    # required
    fake = [{"name": "NVIDIA H20 (mocked)", "memory": "97871 MiB", "driver": "550.54"}]
    summary = run_doctor(only=["gpu", "cupy", "cuda-libs"], gpus=fake)
    checks = _by_name(summary)
    assert checks["gpu"]["status"] == "ok" and "H20" in checks["gpu"]["detail"]
    assert checks["cupy"]["status"] == "fail" and checks["cupy"]["required"] is True
    assert "cupy-cuda12x" in checks["cupy"]["fix"]
    assert checks["cuda-libs"]["status"] == "fail" and "not loadable: " in checks["cuda-libs"]["detail"]
    assert summary["ok"] is False


def test_weights_and_unwritable_workdir(spu_env, monkeypatch, tmp_path):
    weights = tmp_path / "weights"
    (weights / "esm2").mkdir(parents=True)
    (weights / "esm2" / "esm2_t6_8M_UR50D.pt").write_bytes(b"\0" * 2**20)
    monkeypatch.setenv("SPU_WEIGHTS_DIR", str(weights))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SPU_WORKDIR", str(blocker / "work"))
    checks = _by_name(run_doctor(only=["weights", "dirs"], gpus=[]))
    assert checks["weights"]["status"] == "ok"
    assert checks["weights"]["facts"]["files"] == [{"file": "esm2/esm2_t6_8M_UR50D.pt", "mb": 1.0}]
    assert checks["dirs"]["status"] == "fail" and "a-file" in checks["dirs"]["detail"]


def test_cli_json_and_exit_status(spu_env, monkeypatch, tmp_path):
    cmd = [sys.executable, "-m", "spu", "doctor", "--json", "--only", "rdkit", "--only", "gpu"]
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, cwd=REPO, env=dict(os.environ), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    checks = _by_name(json.loads(proc.stdout))
    assert checks["rdkit"]["status"] == "ok"
    _shadow(monkeypatch, tmp_path, {"rdkit": "raise ImportError('no rdkit here')\n"})
    proc = subprocess.run(
        [*cmd[:4], "--only", "rdkit"],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 1
    assert "pip install 'rdkit" in proc.stdout and "required checks failing: rdkit" in proc.stdout
    proc = subprocess.run(
        [*cmd[:-4], "--only", "nonsense"],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ),
        timeout=60,
    )
    assert proc.returncode == 2 and "unknown check" in proc.stderr


def test_missing_ml_potential_weights_are_warnings_that_name_the_folder(spu_env, monkeypatch, tmp_path):
    """On a machine without their weights the mlip tools answer weights_missing; doctor says so."""
    weights = tmp_path / "weights"
    monkeypatch.setenv("SPU_WEIGHTS_DIR", str(weights))
    monkeypatch.delenv("SPU_WEIGHTS_DOWNLOAD", raising=False)
    summary = run_doctor(only=["torchani", "aimnet", "mace"], gpus=[])
    checks = _by_name(summary)
    expected = {
        "torchani": weights / "torchani" / "StateDicts" / "ani2x_state_dict.pt",
        "aimnet": weights / "aimnet2" / "aimnet2_wb97m_d3_0.pt",
        "mace": weights / "mace" / "MACE-OFF23_small.model",
    }
    for name, path in expected.items():
        check = checks[name]
        assert check["status"] == "warn", check
        # it read "weights missing: no <path>"
        assert (
            f"weights not found (looked for {path})" in check["detail"]
            and "weights_missing" in check["detail"]
        )
        assert f"put {path.name} in {path.parent}" in check["fix"] and "SPU_WEIGHTS_DIR" in check["fix"]
        assert check["facts"]["weights_present"] is False
    assert summary["ok"] is True  # a warning, not a failure
    # with the file in place the same check is ok
    path = expected["aimnet"]
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\0")
    check = _by_name(run_doctor(only=["aimnet"], gpus=[]))["aimnet"]
    assert check["status"] == "ok" and check["facts"]["weights_present"] is True and check["fix"] is None


def test_text_output_prints_extras_literally(spu_env, monkeypatch, tmp_path):
    """Rich markup used to eat "[dock]" from "pip install 'spu-scaffold[dock]'"."""
    _shadow(monkeypatch, tmp_path, {"vina": "raise ImportError('no vina here')\n"})
    proc = subprocess.run(
        [sys.executable, "-m", "spu", "doctor", "--only", "vina"],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "300"},
        timeout=120,
    )
    assert proc.returncode == 1
    assert "pip install 'spu-scaffold[dock]'" in proc.stdout, proc.stdout


def _wait_for(path: Path, proc: subprocess.Popen, what: str) -> None:
    """Until ``path`` exists (the stand-in module got that far), or fail when doctor ended first."""
    import time

    deadline = time.monotonic() + 120
    while not path.exists():
        assert proc.poll() is None, f"doctor ended before {what}: {proc.stdout.read() if proc.stdout else ''}"
        assert time.monotonic() < deadline, f"no {what} within 120 s"
        time.sleep(0.05)


def test_each_check_is_printed_as_it_finishes(spu_env, monkeypatch, tmp_path):
    """rdkit's line comes out while mdtraj's check still waits; on 9a09d4a nothing was printed before
    every check had ended (so mdtraj, never released, timed out)."""
    release = tmp_path / "release"
    code = (
        "import pathlib, time\n"
        f"release = pathlib.Path({str(release)!r})\n"
        "while not release.exists():\n"
        "    time.sleep(0.05)\n"
        "raise ImportError('mdtraj stand-in released')\n"
    )
    _shadow(monkeypatch, tmp_path, {"mdtraj": code})
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "doctor", "--only", "rdkit", "--only", "mdtraj", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "300"},
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("ok   rdkit"):
                break
        assert lines and lines[-1].startswith("ok   rdkit"), lines
        assert not any("mdtraj" in line for line in lines)  # still waiting
        release.write_text("go")
        rest = proc.stdout.read()
        assert proc.wait(timeout=120) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "fail mdtraj: not installed or not importable: ImportError: mdtraj stand-in released" in rest
    assert "timed out" not in rest and rest.rstrip().endswith("required checks failing: mdtraj")


def _hang_report(proc: subprocess.Popen) -> str:
    """What a process that ignored SIGINT was doing: its signal masks and this thread's, its children, and
    (after SIGABRT, with PYTHONFAULTHANDLER set) every thread's stack."""
    ps = ["ps", "-o", "pid,pgid,sid,stat,args", "--ppid", str(proc.pid)]
    children = subprocess.run(ps, capture_output=True, text=True, check=False).stdout

    def masks(status: Path, fields: tuple[str, ...]) -> list[str]:
        return [line for line in status.read_text().splitlines() if line.startswith(fields)]

    theirs = masks(Path(f"/proc/{proc.pid}/status"), ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))
    mine = masks(Path("/proc/thread-self/status"), ("SigBlk", "SigIgn"))
    proc.send_signal(signal.SIGABRT)
    try:
        _, stderr = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    return f"its signal masks {theirs}, this thread's {mine}; its threads:\n{stderr[-6000:]}\n{children}"


def test_an_interrupted_doctor_leaves_no_check_running(spu_env, monkeypatch, tmp_path):
    """Ctrl-C stops doctor at once and kills the checks it started (each runs in a session of its own, so
    the terminal's SIGINT does not reach them); on 9a09d4a doctor waited for the check's time limit."""
    pid_file = tmp_path / "check.pid"
    code = (
        "import os, pathlib, time\n"
        f"part = pathlib.Path({str(pid_file)!r} + '.part')\n"
        "part.write_text(str(os.getpid()))\n"
        f"os.replace(part, {str(pid_file)!r})\n"  # whole, as the test reads it once it exists
        "time.sleep(600)\n"
    )
    _shadow(monkeypatch, tmp_path, {"mdtraj": code})
    # doctor as a terminal's foreground command has it: SIGINT at its default. A run started in the
    # background by a script (bash ignores SIGINT in background jobs) or under nohup has it ignored, the
    # doctor inherits that, and Python leaves an ignored SIGINT ignored, rightly.
    foreground = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'spu'; runpy.run_module('spu', run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", foreground, "doctor", "--only", "mdtraj", "--timeout", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT prints every thread's stack
    )
    check_pid = None
    try:
        _wait_for(pid_file, proc, "the check's start")
        check_pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"doctor did not end within 60 s of SIGINT; {_hang_report(proc)}")
        assert proc.returncode == 130
        assert "Traceback" not in proc.stderr.read()
        with pytest.raises(ProcessLookupError):
            os.kill(check_pid, 0)
    finally:
        for pid in filter(None, [proc.pid if proc.poll() is None else None, check_pid]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
