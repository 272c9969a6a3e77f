"""Writing a build (``OUT/task/``, ``OUT/answers.json`` and ``OUT/card.json``), and comparing a task with a
fresh build (the task and its answers; the card is a report about them)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from environment.taskbuild.card import CARD_FILE, assess, dump_card, make_card, presented_order_problem
from environment.taskbuild.checks import author_checks, notes
from environment.taskbuild.problems import SPEC_FILE, AuthorWarning, SpecError, spec_error
from environment.taskbuild.render import Rendered, render
from environment.taskbuild.screening import design_screen as screen_design
from environment.taskbuild.spec import Spec, load_spec
from spu_common.task import TaskError, check_answers, load_answers, load_task


@dataclass
class BuildResult:
    task_id: str
    task_version: str
    task_dir: str
    answers: str
    experiments: int
    groups: int
    warnings: list[AuthorWarning]
    notes: list[str]
    card: str
    prior_verdict: str
    design_screen: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["warnings"] = [{**asdict(w), "text": str(w)} for w in self.warnings]
        return data


def _out_problem(out: Path, message: str, hint: str = "") -> SpecError:
    return spec_error("bad-output", str(out), message, hint=hint)


def build_task(
    spec_dir: str | Path,
    out_dir: str | Path,
    *,
    force: bool = False,
    allow_presented_order: bool = False,
    design_screen: int = 0,
    progress=None,
) -> BuildResult:
    """Build ``OUT_DIR/task/``, ``OUT_DIR/answers.json`` and ``OUT_DIR/card.json`` from a spec, check them,
    return the warnings.

    A task whose presented order, or its reverse, is above the chance threshold is refused (a
    ``presented-order`` problem) unless ``allow_presented_order``, which the card records. With
    ``design_screen`` N the spec's design is re-drawn N times for its prior rate (``progress(done, N)``
    after each draw). An existing ``OUT_DIR/task`` is replaced only when it is a built task of the same
    task id (or with ``force``); the new files are written beside it first, so a failed build leaves the
    old one intact.
    """
    spec = load_spec(spec_dir)
    rendered = render(spec)
    assessment = assess(rendered)
    refusal = presented_order_problem(assessment)
    if refusal is not None and not allow_presented_order:
        raise SpecError([refusal])
    if design_screen and spec.design is None:
        raise spec_error(
            "no-design",
            SPEC_FILE,
            "--design-screen re-draws the spec's design, and it has none",
            field="design",
        )
    screened = screen_design(spec, design_screen, progress=progress) if design_screen else None
    out = Path(out_dir)
    task_dir = out / "task"
    answers_path = out / "answers.json"
    try:
        _check_output(spec, out, task_dir, force)
        card = make_card(
            spec,
            rendered,
            assessment,
            allow_presented_order=allow_presented_order,
            out_dir=out,
            design_screen=screened,
        )
        _write_build(rendered, out, task_dir, answers_path, dump_card(card))
    except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop on the way to OUT_DIR
        raise _out_problem(
            out, f"cannot write the build there: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    except SpecError:
        raise
    except TaskError as exc:
        # the builder's own output failed the task checks: a spec the checks above let through
        raise spec_error("task-check", str(out), f"the built task fails the task checks: {exc}") from None
    return BuildResult(
        task_id=spec.task_id,
        task_version=spec.task_version,
        task_dir=str(task_dir),
        answers=str(answers_path),
        experiments=len(rendered.id_map),
        groups=len(spec.groups),
        warnings=author_checks(spec, rendered, assessment),
        notes=notes(spec),
        card=str(out / CARD_FILE),
        prior_verdict=assessment.screen["prior_verdict"],
        design_screen=card["design_screen"],
    )


def _check_output(spec: Spec, out: Path, task_dir: Path, force: bool) -> None:
    if out.is_symlink() and not out.exists():
        raise _out_problem(out, "is a broken link or a link loop", "choose another OUT_DIR")
    if out.exists() and not out.is_dir():
        raise _out_problem(out, "is a file, not a directory")
    if spec.root.resolve().is_relative_to(task_dir.resolve()):
        raise _out_problem(out, "the task directory would replace the spec", "build into another directory")
    for folder in (out.resolve(), *out.resolve().parents):
        if (folder / "contract.json").is_file():
            # a task folder is what the agent sees: answers.json written there would be handed to it
            raise _out_problem(
                out,
                f"is inside the task folder {folder}, which the agent sees: answers.json would land there",
                f"build into the folder that holds the task folder ({folder.parent}), or another one",
            )
    if task_dir.exists() and not force:
        try:
            existing = json.loads((task_dir / "contract.json").read_text(encoding="utf-8")).get("task_id")
        except (OSError, ValueError, AttributeError):
            existing = None
        if existing != spec.task_id:
            raise _out_problem(
                out,
                f"{task_dir} exists and is not a built task of {spec.task_id!r}",
                "choose another OUT_DIR, or pass --force to replace it",
            )


def _write_build(rendered: Rendered, out: Path, task_dir: Path, answers_path: Path, card: bytes) -> None:
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".task-build-", dir=out))
    try:
        new_task = staging / "task"
        for rel, data in rendered.files.items():
            target = new_task / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (staging / "answers.json").write_bytes(rendered.answers)
        (staging / CARD_FILE).write_bytes(card)
        check_answers(load_task(new_task), load_answers(staging / "answers.json"))
        if task_dir.is_symlink() or task_dir.is_file():
            task_dir.unlink()
        elif task_dir.exists():
            shutil.rmtree(task_dir)
        os.replace(new_task, task_dir)
        os.replace(staging / "answers.json", answers_path)
        os.replace(staging / CARD_FILE, out / CARD_FILE)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def compare_with_build(spec_dir: str | Path, out_dir: str | Path) -> list[str]:
    """Files under ``out_dir`` (``task/`` and ``answers.json``) that differ from a fresh build of the spec."""
    rendered = render(load_spec(spec_dir))
    out = Path(out_dir)
    expected = {f"task/{rel}": data for rel, data in rendered.files.items()}
    expected["answers.json"] = rendered.answers
    task_dir = out / "task"
    present = (
        {f"task/{p.relative_to(task_dir).as_posix()}" for p in task_dir.rglob("*") if p.is_file()}
        if task_dir.is_dir()
        else set()
    )
    if (out / "answers.json").is_file():
        present.add("answers.json")
    differ = []
    for rel in sorted(set(expected) | present):
        path = out / rel
        if rel not in expected or not path.is_file() or path.read_bytes() != expected[rel]:
            differ.append(rel)
    return differ


def spec_of_task(task_dir: str | Path) -> Path | None:
    """The spec a built task came from, when it lies in the suite layout (``<dir>/spec/spec.yaml``)."""
    candidate = Path(task_dir).resolve().parent / "spec"
    return candidate if (candidate / SPEC_FILE).is_file() else None


def check_built_task(task_dir: str | Path, spec_dir: str | Path) -> dict[str, Any]:
    """Author warnings of a built task from its spec, and whether the task matches a fresh build."""
    spec = load_spec(spec_dir)
    rendered = render(spec)
    return {
        "spec": str(spec_dir),
        "warnings": author_checks(spec, rendered, assess(rendered)),
        "notes": notes(spec),
        "differs_from_build": compare_with_build(spec_dir, Path(task_dir).resolve().parent),
    }
