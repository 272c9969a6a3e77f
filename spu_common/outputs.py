"""One rule for what a command writes (its ``-o/--out``): a command writes into a target that is absent or
empty, or that it made itself; any other target only with ``--force``.

How a command knows a target is its own:

* A folder it writes whole (a run, a report, an analysis, a Harbor task, an audit) holds a marker,
  :data:`MARKER`, naming the kind of output (``agent-run``, ``report`` ...). A folder with the same kind's
  marker is replaced: its contents are removed first, so two outputs never mix (two runs in one
  ``trajectory.jsonl``, the plots of an old report beside a new one).
* A file (a page, a recording, a JSON file) cannot hold a marker: the command recognises its own kind of
  file by its content (a caller's ``ours`` check) and replaces it; a file it cannot recognise is refused.
* A command that resumes (``spu batch``) continues in a folder holding its own marker and says so.

``--force`` replaces any other target (a folder's contents are removed). A folder is never cleared when it
holds the current working directory or one of the command's inputs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from spu_common.jsonfiles import atomic_write_json

MARKER = ".spu-output.json"


class OutputRefused(Exception):
    """The target holds something the command did not make (or cannot be cleared); one line with the fix."""


def kind_of(folder: Path) -> str | None:
    """The kind of output a folder's marker names, or None (no marker, or one that does not parse)."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("kind") if isinstance(data, dict) and isinstance(data.get("kind"), str) else None


def _is_empty(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def _refuse_to_clear(folder: Path, inputs: Iterable[Path]) -> None:
    here = folder.resolve()
    for path in (Path.cwd(), *inputs):
        if Path(path).resolve().is_relative_to(here):
            what = "the current folder" if path == Path.cwd() else f"the input {path}"
            raise OutputRefused(
                f"{folder} holds {what}, so it cannot be replaced: choose another output folder"
            )


def claim_folder(
    folder: Path, kind: str | None, *, force: bool = False, resume: bool = False, inputs: Iterable[Path] = ()
) -> bool:
    """Make ``folder`` ready for an output of ``kind`` and mark it; True when it held an earlier one.

    Absent or empty: created. Holding an earlier output of ``kind``: cleared, or kept as it is with
    ``resume``. Anything else (a file, a folder of other things or of another kind): :class:`OutputRefused`
    unless ``force``, which clears it (or, with ``resume``, adopts it). ``inputs``: paths the command reads,
    never cleared. ``kind`` None: a folder that cannot hold a marker (a task folder, which the agent sees
    whole): never recognised as the command's own, so only an empty one is written without ``force``."""
    if folder.is_symlink() and not folder.exists():
        raise OutputRefused(f"{folder} is a broken link: choose another output folder")
    if folder.exists() and not folder.is_dir():
        if not force:
            raise OutputRefused(
                f"{folder} is a file, not a folder: choose another path, or --force to replace it"
            )
        folder.unlink()
    if not folder.exists() or _is_empty(folder):
        folder.mkdir(parents=True, exist_ok=True)
        mark(folder, kind)
        return False
    found = kind_of(folder) if kind is not None else None
    if (kind is None or found != kind) and not force:
        made = f"holds a {found} output" if found else "is not empty and was not made by this command"
        raise OutputRefused(
            f"{folder} {made}: choose another folder, or --force to "
            + ("continue in it" if resume else "replace what it holds")
        )
    if not resume:
        _refuse_to_clear(folder, inputs)
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    mark(folder, kind)
    return kind is not None and found == kind


def mark(folder: Path, kind: str | None) -> None:
    """Write the marker saying ``folder`` holds an output of ``kind`` (nothing for ``kind`` None)."""
    if kind is not None:
        atomic_write_json(folder / MARKER, {"kind": kind, "made_by": "spu"}, fsync=False)


def claim_file(path: Path, *, force: bool = False, ours: Callable[[Path], bool] | None = None) -> None:
    """Refuse to replace ``path`` unless it is absent or empty, ``ours(path)`` recognises it as the kind of
    file the command writes, or ``force``; a folder there is always refused."""
    if path.is_dir():
        raise OutputRefused(f"{path} is a folder: give the file to write")
    if not path.exists() or force:
        return
    if path.is_file() and path.stat().st_size == 0:
        return
    if ours is not None and path.is_file() and ours(path):
        return
    raise OutputRefused(f"{path} exists and was not written by this command: choose another file, or --force")


def json_file_with(key: str, test: Callable[[object], bool]) -> Callable[[Path], bool]:
    """An ``ours`` check for :func:`claim_file`: the file is a JSON object whose ``key`` passes ``test``."""

    def check(path: Path) -> bool:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and test(data.get(key))

    return check
