"""Every suite task under environment/tasks/<task_id>/ is rebuilt from its spec and compared with the
committed `task/`, `answers.json` and `card.json` byte for byte; each is a valid task with a cited value per
experiment.

Each spec is built once per test session (:func:`built`); the byte-for-byte check and the author-warnings
check read the same build here, in one file, so that ``--dist loadfile`` keeps them in one process (a build
runs the family-wise screen: about 20 s of CPU for the suite)."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest

from environment.taskbuild import build_task, load_spec
from environment.taskbuild.build import BuildResult
from spu_common.task import check_answers, load_answers, load_task

TASKS = Path(__file__).resolve().parents[2] / "environment" / "tasks"
SPECS = sorted(p.parent for p in TASKS.glob("*/spec/spec.yaml"))
PARAMS = [pytest.param(s, id=s.parent.name) for s in SPECS] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no suite task under environment/tasks/ yet"))
]


_BUILDS = Path(tempfile.mkdtemp(prefix="suite-builds-"))
atexit.register(shutil.rmtree, _BUILDS, ignore_errors=True)


@cache
def built(spec_dir: Path) -> tuple[Path, BuildResult]:
    """The spec built into a fresh folder (once per session), with the committed card and proxy declaration
    copied in first: the card keeps what a rebuild does not measure again (the design screen, the proxies'
    scores) from the card it replaces, and the presented-order override it records."""
    committed = spec_dir.parent
    out = _BUILDS / committed.name
    out.mkdir()
    for name in ("card.json", "baselines.json"):
        if (committed / name).is_file():
            shutil.copy(committed / name, out / name)
    card = json.loads((committed / "card.json").read_text())
    return out, build_task(spec_dir, out, allow_presented_order=card["presented_order"]["allowed"])


def _files(root: Path) -> dict[str, bytes]:
    out = {name: (root / name).read_bytes() for name in ("answers.json", "card.json")}
    for path in sorted((root / "task").rglob("*")):
        if path.is_file():
            out[f"task/{path.relative_to(root / 'task').as_posix()}"] = path.read_bytes()
    return out


@pytest.mark.parametrize("spec_dir", PARAMS)
def test_suite_task_rebuilds_byte_for_byte(spec_dir):
    committed = spec_dir.parent
    assert (committed / "task").is_dir() and (committed / "answers.json").is_file(), (
        f"build it: spu task build {spec_dir} -o {committed}"
    )
    fresh, stored = _files(built(spec_dir)[0]), _files(committed)
    assert sorted(fresh) == sorted(stored)
    differ = [name for name in fresh if fresh[name] != stored[name]]
    assert differ == [], f"rebuild with: spu task build {spec_dir} -o {committed}"


@pytest.mark.parametrize("spec_dir", PARAMS)
def test_suite_task_builds_without_author_warnings(spec_dir):
    found = json.loads((spec_dir.parent / "card.json").read_text(encoding="utf-8"))
    result = built(spec_dir)[1]
    # the flags the generated README table shows (from the card) are the only reasons to keep a warning
    flagged = {
        "prior-solvable": found["screen"]["verdict"] == "prior-solvable",
        "prior-undecided": found["screen"]["verdict"] == "undecided",
        "presented-order": found["presented_order"]["allowed"],
    }
    assert [str(w) for w in result.warnings if not flagged.get(w.code)] == []
    assert flagged["prior-solvable"] == any(w.code == "prior-solvable" for w in result.warnings)


@pytest.mark.parametrize("spec_dir", PARAMS)
def test_suite_task_is_valid_and_cites_every_value(spec_dir):
    spec = load_spec(spec_dir)
    committed = spec_dir.parent
    assert committed.name == spec.task_id
    task = load_task(committed / "task")
    answers = load_answers(committed / "answers.json")
    check_answers(task, answers)
    for group in answers.groups:
        assert set(group.sources) == set(group.values)
        assert all(s.strip() for s in group.sources.values())
    data = json.loads((committed / "answers.json").read_text())
    assert data["citation"] and data["data_source"] and data["license"]
