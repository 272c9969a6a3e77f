"""What a distributed artifact (the wheel, the sdist, an image layer) may hold of a task folder, and the
content scanner every such check uses (docs/harbor.md): shared by tests/integration/test_packaging.py and
tests/container/test_images.py."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

from environment.leakscan import Scanner, marks_under

REPO = Path(__file__).resolve().parents[1]
#: a path inside a task folder of the suite or of the demo tasks, wherever the artifact puts the package
_TASK_FOLDERS = re.compile(r"(?:^|/)environment/(?P<kind>tasks|demo_tasks)/(?P<rest>.+)$")


def outside_task_folders(names: Iterable[str]) -> list[str]:
    """The names of files of a task folder outside its ``task/`` (the allow-list: a suite task ships only
    ``task/``, the demo tasks their ``task/`` and the package's own ``__init__.py``)."""
    bad = []
    for name in names:
        match = _TASK_FOLDERS.search(name)
        if match is None:
            continue
        parts = match["rest"].split("/")
        package_module = match["kind"] == "demo_tasks" and (
            parts == ["__init__.py"] or (parts[0] == "__pycache__" and parts[-1].startswith("__init__."))
        )
        if not package_module and (len(parts) < 3 or parts[1] != "task"):
            bad.append(name)
    return bad


def shipped_task_files() -> list[str]:
    """The files the allow-list ships: every tracked file under a task folder's ``task/``."""
    return sorted(
        p.relative_to(REPO).as_posix()
        for pattern in ("environment/tasks/*/task/**/*", "environment/demo_tasks/*/task/**/*")
        for p in REPO.glob(pattern)
        if p.is_file()
    )


@functools.cache
def every_task_scanner() -> Scanner:
    """The scanner with the marks of every task in the repository (suite and demo)."""
    return Scanner(marks_under(REPO / "environment"))
