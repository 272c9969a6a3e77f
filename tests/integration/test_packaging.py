"""The distributed artifacts hold no answers: the wheel and the sdist built from the repository carry no
answers.json, no task spec (spec/ holds the measured values and their sources) and no measured value of a
suite task. The grader reads answers from the repository or a path given (docs/harbor.md)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSWERS = sorted((REPO / "environment").rglob("answers.json"))


def _fingerprints() -> list[bytes]:
    """Each measured value beside its experiment id (JSON and CSV) and each value's source citation."""
    found = set()
    for path in ANSWERS:
        for group in json.loads(path.read_text(encoding="utf-8"))["groups"]:
            for eid, value in group["values"].items():
                found |= {f'"{eid}": {json.dumps(value)}'.encode(), f"{eid},{value}".encode()}
            found |= {s.encode() for s in (group.get("sources") or {}).values() if len(s) >= 24}
        # the source study's DOIs: the agent must not be able to tell which study a task comes from
        data = json.loads(path.read_text(encoding="utf-8"))
        found |= {
            d.rstrip(".),;").encode()
            for d in re.findall(r"10\.\d{4,9}/[^\s\"',;]+", json.dumps(data.get("citation")))
        }
    return sorted(found)


def _offences(members: dict[str, bytes]) -> list[str]:
    patterns = _fingerprints()
    bad = []
    for name, data in members.items():
        parts = name.split("/")
        suite_notes = "environment/tasks/" in name and parts[-1] in ("README.md", "baselines.json")
        if parts[-1] == "answers.json" or "spec" in parts[:-1] or suite_notes:
            bad.append(name)
        elif any(p in data for p in patterns):
            bad.append(f"{name} (holds an answer)")
    return bad


@pytest.mark.slow
def test_wheel_and_sdist_hold_no_answers(tmp_path):
    assert len(ANSWERS) >= 3  # the repository keeps them (demo and suite tasks)
    wheel_dir, sdist_dir = tmp_path / "wheel", tmp_path / "sdist"
    # setuptools packs what an earlier build left in build/lib too: start clean
    shutil.rmtree(REPO / "build", ignore_errors=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheel_dir),
            ".",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sdist_dir.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta as b; b.build_sdist({str(sdist_dir)!r})"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = wheel_dir.glob("*.whl")
    (sdist,) = sdist_dir.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        wheel_members = {n: zf.read(n) for n in zf.namelist()}
    with tarfile.open(sdist) as tf:
        sdist_members = {
            m.name.split("/", 1)[1]: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()
        }
    # what the package needs is there: the demo tasks (without answers) and the suite's built tasks
    for members in (wheel_members, sdist_members):
        assert "environment/demo_tasks/aromatic-acidity/task/targets.csv" in members
        assert "environment/tasks/chem-fragment-pka-logp/task/targets.csv" in members
    assert "spu/cli.py" in wheel_members and "pyproject.toml" in sdist_members
    assert _offences(wheel_members) == []
    assert _offences(sdist_members) == []


def test_the_check_finds_an_answer():
    """The offence check itself: a spec file, an answers file and a copied value are each found."""
    path = ANSWERS[0]
    group = json.loads(path.read_text(encoding="utf-8"))["groups"][0]
    eid, value = next(iter(group["values"].items()))
    members = {
        "environment/tasks/x/spec/spec.yaml": b"",
        "environment/demo_tasks/x/answers.json": b"{}",
        "pkg/data.json": f'{{"{eid}": {json.dumps(value)}}}'.encode(),
        "pkg/ok.json": b"{}",
    }
    assert _offences(members) == [
        "environment/tasks/x/spec/spec.yaml",
        "environment/demo_tasks/x/answers.json",
        "pkg/data.json (holds an answer)",
    ]


def test_demo_answers_missing_from_an_install_say_where_to_get_them(tmp_path, monkeypatch):
    """An installed package has the demo tasks but not their answers: a clear error, not a traceback."""
    import environment.demo_tasks as demo
    from spu_common.task import TaskError

    shutil.copytree(demo.demo_task_dir("enzyme-kinetics"), tmp_path / "enzyme-kinetics" / "task")
    monkeypatch.setattr(demo, "_ROOT", tmp_path)
    assert (demo.demo_task_dir("enzyme-kinetics") / "targets.csv").is_file()
    with pytest.raises(TaskError, match=r"not part of an installed package.*--answers"):
        demo.demo_answers_path("enzyme-kinetics")
