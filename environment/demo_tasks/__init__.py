"""Three small demo tasks built from published measurements (handbook and review tables): smoke tests.

They check that the tools, the agent and the grading run end to end (``"smoke_test": true`` in their
``contract.json`` and ``protocol.json``); their textbook values are not a measure of prediction skill.

Each slug has ``<slug>/task/`` (what an agent sees) and ``<slug>/answers.json`` (kept outside the task,
with a citation for every value and the mapping from the anonymized ids back to readable ones). The answers
are in the repository only: no distributed artifact (wheel, sdist, image) holds them, so grading a demo
task needs a checkout (an editable install) or ``--answers``.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent

#: The demo tasks: chemistry (pKa), materials (electrolyte solvents), biology (enzyme kinetics).
DEMO_TASKS: list[str] = ["aromatic-acidity", "electrolyte-solvents", "enzyme-kinetics"]


def _check(slug: str) -> Path:
    if slug not in DEMO_TASKS:
        raise KeyError(f"no demo task {slug!r}; choose one of {DEMO_TASKS}")
    return _ROOT / slug


def demo_task_dir(slug: str) -> Path:
    """The task directory of a demo task."""
    return _check(slug) / "task"


def demo_answers_path(slug: str) -> Path:
    """The answers file of a demo task (outside its task directory); a :class:`TaskError` saying where to
    find it when this installation has none (answers are never packaged)."""
    path = _check(slug) / "answers.json"
    if not path.is_file():
        from spu_common.task import TaskError

        raise TaskError(
            f"the demo answers ({slug}/answers.json) are not part of an installed package: no distributed "
            "artifact holds answers. Run from a checkout of the repository (pip install -e .), or pass the "
            "answers file with --answers"
        )
    return path
