"""The one finder of tasks and answers, for ``spu batch``, ``spu report``, ``spu analyze``, ``spu baselines``
and ``spu view``.

The rules, the same for every command:

* a path given is a task directory (it holds ``contract.json``), or a folder searched for task directories
  at any depth; an answers path is an ``answers.json`` file, or a folder searched for ``answers.json``;
* below the path given, folders whose names start with ``_`` or ``.`` are skipped (``RUNS_DIR/_tasks`` of
  ``spu batch``, ``.git``); the path itself may have any name;
* each task and each answers file is loaded once, and the loaded object is what the command uses;
* two task directories with one task id, or two answers files for one task id, are refused
  (``duplicate_task_id``, ``duplicate_answers``); a path that does not exist, or a folder that holds no task
  directory, is refused (``no_tasks``, ``no_answers``).

Every refusal is a :class:`FinderError`, a :class:`~spu_common.task.TaskError` with a stable ``code`` and a
hint; so is a task or answers file that does not load.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from spu_common.task import Answers, Task, TaskError, load_answers, load_task

#: Folders below a searched path whose names start with these are never searched.
SKIPPED_PREFIXES = ("_", ".")

_SKIPPED_HINT = "A folder whose name starts with _ or . is not searched."


class FinderError(TaskError):
    """Tasks or answers that cannot be found as given: a stable ``code``, the message, a hint."""

    def __init__(self, code: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint

    def __str__(self) -> str:
        return f"[{self.code}] {self.message} Hint: {self.hint}"


class FoundAnswers(NamedTuple):
    """An answers file and what it holds."""

    path: Path
    answers: Answers


def _below(root: Path, name: str) -> list[Path]:
    """Every file called ``name`` at or below ``root``, none inside a ``_``- or ``.``-folder below it."""
    return sorted(
        p
        for p in root.rglob(name)
        if p.is_file()
        and not any(part.startswith(SKIPPED_PREFIXES) for part in p.relative_to(root).parts[:-1])
    )


def task_dirs(root: Path) -> list[Path]:
    """The task directories at or below ``root`` under the rules above (none loaded)."""
    root = Path(root)
    if (root / "contract.json").is_file():
        return [root]
    if not root.is_dir():
        raise FinderError(
            "no_tasks",
            f"{root} does not exist" if not root.exists() else f"{root} is not a task directory",
            "Give a task directory (it holds contract.json) or a folder of them.",
        )
    found = [p.parent for p in _below(root, "contract.json")]
    if not found:
        raise FinderError(
            "no_tasks",
            f"no task directory in or below {root}",
            f"Give a task directory (it holds contract.json) or a folder of them. {_SKIPPED_HINT}",
        )
    return found


def find_tasks(roots: Path | Iterable[Path]) -> dict[str, Task]:
    """Every task at or below each of ``roots``, loaded once, by task id, in the order found.

    A directory reached twice (named twice, or below two roots) counts once; a task id used by two
    directories is refused."""
    tasks: dict[str, Task] = {}
    seen: set[Path] = set()
    for root in [roots] if isinstance(roots, Path) else list(roots):
        for directory in task_dirs(root):
            if directory.resolve() in seen:
                continue
            seen.add(directory.resolve())
            task = load_task(directory)
            if task.task_id in tasks:
                raise FinderError(
                    "duplicate_task_id",
                    f"task id {task.task_id!r} is used by two task directories: {tasks[task.task_id].root} "
                    f"and {task.root}",
                    f"Give each task its own task_id in contract.json, or leave one out. {_SKIPPED_HINT}",
                )
            tasks[task.task_id] = task
    return tasks


def find_answers(path: Path) -> dict[str, FoundAnswers]:
    """The answers file ``path``, or every ``answers.json`` below the folder ``path``, loaded once, by task
    id; two files for one task id are refused."""
    path = Path(path)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = _below(path, "answers.json")
    else:
        raise FinderError(
            "no_answers", f"{path} does not exist", "Give an answers.json file or a folder searched for them."
        )
    found: dict[str, FoundAnswers] = {}
    for file in files:
        answers = load_answers(file)
        if answers.task_id in found:
            raise FinderError(
                "duplicate_answers",
                f"two answers files are for task {answers.task_id!r}: {found[answers.task_id].path} and "
                f"{file}",
                f"Keep one answers.json per task in the folder, or give the file itself. {_SKIPPED_HINT}",
            )
        found[answers.task_id] = FoundAnswers(file, answers)
    return found
