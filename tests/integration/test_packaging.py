"""The distributed artifacts hold nothing of a task folder but its ``task/``, and no mark of any task: the
wheel and the sdist built from the repository's tracked files (pyproject.toml's package-data is an
allow-list; MANIFEST.in drops what a stale manifest would add), read whole by the content scanner
(environment/leakscan). The grader reads answers from the repository or a path given (docs/harbor.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from shipped_files import REPO, every_task_scanner, outside_task_folders, shipped_task_files

from environment.leakscan import scan_path


def _tracked_copy(into: Path) -> Path:
    """The repository's tracked files, as a release builds from them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (REPO / name).is_file() and not (REPO / name).is_symlink():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, into / name)
    return into


def _build(source: Path, out: Path) -> tuple[Path, Path]:
    for command in (
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            ".",
        ],
        [sys.executable, "-c", f"from setuptools import build_meta as b; b.build_sdist({str(out)!r})"],
    ):
        proc = subprocess.run(command, cwd=source, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


@pytest.mark.slow
def test_wheel_and_sdist_ship_only_task_folders_and_no_marks(tmp_path):
    source = _tracked_copy(tmp_path / "src")
    # a manifest an earlier build left (the sdist reads it back): the task folders' other files are dropped
    stale = source / "spu_scaffold.egg-info"
    stale.mkdir()
    (stale / "SOURCES.txt").write_text(
        "environment/tasks/chem-fragment-pka-logp/card.json\nenvironment/tasks/chem-fragment-pka-logp/answers.json\n"
    )
    wheel, sdist = _build(source, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
    with tarfile.open(sdist) as tf:
        sdist_names = [m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile()]
    assert outside_task_folders(wheel_names) == []
    assert outside_task_folders(sdist_names) == []
    # all of each task/ ships, the suite's protein and site files included; and the package itself
    shipped = shipped_task_files()
    assert (
        len(shipped) > 5 * 44
        and "environment/tasks/bio-kinase-inhibitor-potency/task/proteins/p38.pdb" in shipped
    )
    assert sorted(set(shipped) - set(wheel_names)) == []
    assert sorted(set(shipped) - set(sdist_names)) == []
    assert "spu/cli.py" in wheel_names and "pyproject.toml" in sdist_names
    # the shipped tool list is in the wheel, and its content key matches the code installed from it
    assert "tools_server/core/tool-list.json" in wheel_names
    installed = tmp_path / "installed"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(installed)
    probe = "from tools_server.core import toollist; print(toollist.SHIPPED, toollist.shipped() is not None)"
    env = {k: v for k, v in os.environ.items() if k not in ("SPU_TOOL_MODULES", "PYTHONPATH")}
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert proc.stdout.split() == [str(installed / "tools_server/core/tool-list.json"), "True"], proc.stdout
    # read whole, whatever the names: no author key, source identifier or value of any task
    assert scan_path(wheel, every_task_scanner()) == []
    assert scan_path(sdist, every_task_scanner()) == []


def test_the_allow_list_rule():
    """The rule the artifact tests apply to names, on the paths a wheel, an sdist and an image give."""
    assert (
        outside_task_folders(
            [
                "environment/tasks/t/task/targets.csv",
                "environment/tasks/t/task/proteins/a.pdb",
                "spu_scaffold-0.1.0/environment/demo_tasks/__init__.py",
                "img!/layer.tar!/opt/venv/lib/python3.11/site-packages/environment/demo_tasks/__pycache__/__init__.cpython-311.pyc",
                "environment/taskbuild/card.py",
            ]
        )
        == []
    )
    bad = [
        "environment/tasks/t/card.json",
        "environment/tasks/README.md",
        "environment/tasks/t/spec/experiments.csv",
        "environment/demo_tasks/d/answers.json",
        "img!/layer.tar!/opt/venv/lib/python3.11/site-packages/environment/tasks/t/baselines.json",
    ]
    assert outside_task_folders(bad) == bad


def test_demo_answers_missing_from_an_install_say_where_to_get_them(tmp_path, monkeypatch):
    """An installed package has the demo tasks but not their answers: a clear error, not a traceback."""
    import environment.demo_tasks as demo
    from spu_common.task import TaskError

    shutil.copytree(demo.demo_task_dir("enzyme-kinetics"), tmp_path / "enzyme-kinetics" / "task")
    monkeypatch.setattr(demo, "_ROOT", tmp_path)
    assert (demo.demo_task_dir("enzyme-kinetics") / "targets.csv").is_file()
    with pytest.raises(TaskError, match=r"not part of an installed package.*--answers"):
        demo.demo_answers_path("enzyme-kinetics")
