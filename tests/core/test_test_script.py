"""The README's test command (scripts/test.sh) without arguments: the container tests run beside the rest of
the suite, not after it, their output is printed, and the exit status is the worse of the two parts, a part
that collects no tests (pytest's exit status 5) counting as a failure.

The suite itself cannot run inside a test: the script runs in a copy of the repository's scripts whose
``.venv/bin/python`` is a stand-in for pytest (it records its arguments, waits until the other part has
started too, and exits with the status the test chose), and whose setup step does nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: pytest, as the script starts it: the part is the container tests when the arguments name their folder;
#: each part waits (at most 60 s) for the other to have started, so a run one after the other fails (99)
STAND_IN = r"""#!/usr/bin/env bash
root=$(cd "$(dirname "$0")/../.." && pwd)
case " $* " in *" tests/container "*) part=container; other=rest ;; *) part=rest; other=container ;; esac
printf "%s\n" "$@" > "$root/$part.args"
touch "$root/$part.started"
for _ in $(seq 600); do [ -e "$root/$other.started" ] && break; sleep 0.1; done
[ -e "$root/$other.started" ] || { echo "$part ran alone"; exit 99; }
echo "the $part part's output"
exit "$(cat "$root/$part.status")"
"""


def _script(tmp_path: Path, python: str, steps: dict[str, str], env: dict[str, str | None], *args: str):
    """scripts/test.sh copied into ``tmp_path`` beside stand-in set-up steps (``steps``: name -> script)
    and a stand-in ``.venv/bin/python``, run with ``env`` over this environment (None: unset); its
    temporary files go to ``tmp_path/tmp``, which the script must leave empty."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "test.sh", tmp_path / "scripts" / "test.sh")
    for name, text in steps.items():
        step = tmp_path / "scripts" / f"{name}.sh"
        step.write_text(text)
        step.chmod(0o755)
    stand_in = tmp_path / ".venv" / "bin" / "python"
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text(python)
    stand_in.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    full = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), **env}
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "test.sh"), *args],
        capture_output=True,
        text=True,
        env={name: value for name, value in full.items() if value is not None},
        timeout=300,
        check=False,
    )


def _run(tmp_path: Path, rest: int, container: int, jobs: str | None = "2") -> subprocess.CompletedProcess:
    (tmp_path / "rest.status").write_text(str(rest))
    (tmp_path / "container.status").write_text(str(container))
    env = {"SPU_TEST_SETUP": "venv", "SPU_TEST_JOBS": jobs}
    return _script(tmp_path, STAND_IN, {"setup": "exit 0\n"}, env)


@pytest.mark.parametrize(
    ("rest", "container", "status"),
    [(0, 0, 0), (1, 0, 1), (0, 1, 1), (5, 0, 1), (0, 5, 1), (2, 1, 2), (1, 2, 2)],
)
def test_the_container_tests_run_beside_the_rest_and_both_statuses_count(tmp_path, rest, container, status):
    proc = _run(tmp_path, rest, container)
    assert "ran alone" not in proc.stdout + proc.stderr
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert (tmp_path / "rest.args").read_text().splitlines() == [
        "-m",
        "pytest",
        "-n",
        "2",
        "--dist",
        "loadfile",
        "-m",
        "not container",
    ]
    assert (tmp_path / "container.args").read_text().splitlines() == [
        "-m",
        "pytest",
        "-m",
        "container",
        "tests/container",
    ]
    # the container part's output comes after the rest's, whole, under a line that says what it is
    said = proc.stdout.index("run beside the rest")
    assert (
        proc.stdout.index("the rest part's output") < said < proc.stdout.index("the container part's output")
    )
    if 5 in (rest, container):
        assert "pytest collected no tests; that is a failure here" in proc.stdout + proc.stderr
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize(("cores", "processes"), [(1, 1), (2, 3)])
def test_part_one_runs_in_one_process_more_than_the_cores(tmp_path, cores, processes, monkeypatch):
    """Without SPU_TEST_JOBS: one process more than the cores the script may use (``nproc``, which reads
    the affinity the test sets), one on one core, whatever OMP_NUM_THREADS says (``nproc`` obeys it; a
    test before this one may have set it, as a user's shell may)."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < cores:
        pytest.skip(f"this machine has {len(available)} cores")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, available[:cores])  # the child inherits it
    try:
        proc = _run(tmp_path, 0, 0, jobs=None)
    finally:
        os.sched_setaffinity(0, previous)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    args = (tmp_path / "rest.args").read_text().splitlines()
    assert (args[args.index("-n") + 1] if "-n" in args else "1") == str(processes)


#: a set-up step: it says it started, waits (at most 60 s) until the other two side-by-side steps have
#: started too (so steps run one after the other fail, 98), prints a line and exits with its chosen status
SETUP_STAND_IN = r"""#!/usr/bin/env bash
root=$(cd "$(dirname "$0")/.." && pwd)
me=$(basename "$0" .sh)
touch "$root/$me.started"
for _ in $(seq 600); do
  [ -e "$root/setup.started" ] && [ -e "$root/setup-harbor.started" ] \
    && [ -e "$root/install-npm-clients.started" ] && break
  sleep 0.1
done
[ -e "$root/setup.started" ] && [ -e "$root/setup-harbor.started" ] \
  && [ -e "$root/install-npm-clients.started" ] || { echo "$me ran alone"; exit 98; }
echo "$me says done"
exit "$(cat "$root/$me.status" 2>/dev/null || echo 0)"
"""


@pytest.mark.parametrize("failing", [None, "setup", "setup-harbor", "install-npm-clients"])
def test_the_set_up_steps_run_side_by_side_and_a_failed_one_stops_the_run(tmp_path, failing):
    """The venvs and the npm clients install side by side (the stand-ins wait for each other), every step's
    output is printed, and a step that fails stops the run before any test, naming the step."""
    if failing:
        (tmp_path / f"{failing}.status").write_text("3")
    steps = dict.fromkeys(("setup", "setup-harbor", "install-npm-clients"), SETUP_STAND_IN)
    steps["setup-browser"] = "echo browser says done\n"
    pytest_stand_in = "#!/usr/bin/env bash\necho pytest ran\nexit 0\n"
    env = {"SPU_TEST_SETUP": "all", "SPU_TEST_DOCKER": "0"}
    proc = _script(tmp_path, pytest_stand_in, steps, env, "tests/core")
    out = proc.stdout + proc.stderr
    assert "ran alone" not in out
    for step in ("setup", "setup-harbor", "install-npm-clients", "browser"):
        assert f"{step} says done" in out
    if failing:
        assert proc.returncode == 1, out
        assert f"test: scripts/{failing}.sh failed (exit 3)" in out
        assert "pytest ran" not in out
    else:
        assert proc.returncode == 0, out
        assert "pytest ran" in out
    assert list((tmp_path / "tmp").iterdir()) == []


def _compiled(venv: Path, *args: str, lazy: bool) -> None:
    env = {**os.environ, "SPU_COMPILE_BYTECODE": "lazy" if lazy else ""}
    script = REPO / "scripts" / "venv-install.sh"
    command = f'set -euo pipefail; source "{script}"; venv_compiled "{venv}" {" ".join(args)}'  # as setup.sh
    subprocess.run(["bash", "-c", command], env=env, check=True, timeout=120)


def test_a_venv_set_up_lazily_is_compiled_in_full_by_the_next_plain_set_up(tmp_path):
    """The test command sets the venvs up without compiling every installed module (each compiles when
    first imported); the next set-up outside it compiles the rest, once; an install that compiled already
    is only marked."""
    import importlib.util
    import sysconfig
    import venv

    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    purelib = Path(sysconfig.get_paths(vars={"base": str(target), "platbase": str(target)})["purelib"])
    module = purelib / "spu_probe_module.py"
    module.write_text("VALUE = 1\n")
    # packages ship some files no Python 3 compiles (test data)
    (purelib / "spu_probe_python2.py").write_text("print 'a Python 2 statement'\n")
    cached = Path(importlib.util.cache_from_source(str(module)))
    mark = target / ".spu-compiled"

    _compiled(target, lazy=True)  # scripts/test.sh: nothing compiled, no mark
    assert not cached.exists() and not mark.exists()
    _compiled(target, lazy=False)  # the next plain scripts/setup.sh
    assert cached.exists() and mark.exists()
    cached.unlink()
    _compiled(target, lazy=False)  # marked: not compiled again
    assert not cached.exists()
    mark.unlink()
    _compiled(target, "installed", lazy=False)  # uv compiled the install: only the mark
    assert mark.exists() and not cached.exists()
    _compiled(target, lazy=True)  # a lazy install takes the mark away
    assert not mark.exists()
