"""The files a spec names: each lies inside the spec folder, as a regular file reached with no link at all,
and is read once, from the descriptor that was checked (:mod:`spu_common.confined`).

A spec is shared and rebuilt by others, so ``experiments: /etc/passwd`` or an ``inputs`` folder holding a
link to a file elsewhere must not pull that file into an agent-visible task (or into an error message); and
a file checked by name, then opened again by name, could be a link swapped in between. So a spec's files
are never checked and opened apart: every read goes through :func:`read_bytes`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from spu_common import confined

#: The largest file a spec may name (the experiments CSV, each input file): bytes.
MAX_FILE_BYTES = 256 * 2**20


def outside_problem(root: Path, item: str) -> str | None:
    """Why the relative path ``item`` may not be used from the spec folder ``root``, or ``None`` (a link in
    any part of it, whether it leads out or not, or a file that is not a regular file, is a problem)."""
    rel = PurePosixPath(item)
    if rel.is_absolute() or ".." in rel.parts or "\\" in item:
        return f"{item!r} must be a path inside the spec folder (relative, no '..')"
    try:
        confined.check_dir(root / item, [root])
        return None
    except confined.Refused as exc:
        if exc.reason == "missing":
            return None  # the caller says it does not exist
        if exc.reason != "not_regular":
            return _problem(item, exc)
    try:
        with confined.open_file(root / item, [root], max_bytes=MAX_FILE_BYTES, allow_hard_links=True):
            return None
    except confined.Refused as exc:
        return _problem(item, exc)


def _problem(item: str, exc: confined.Refused) -> str:
    if exc.reason == "link":
        return f"{item!r} goes through a link (links are not followed: copy the file into the spec folder)"
    if exc.reason == "too_large":
        return f"{item!r} has more than the limit of {MAX_FILE_BYTES:,} bytes"
    if exc.reason == "not_regular":
        return f"{item!r} is not a regular file"
    return f"{item!r} cannot be read ({exc.reason.replace('_', ' ')})"


def read_bytes(root: Path, item: str) -> bytes:
    """The bytes of the spec file ``item`` (relative to ``root``), read from its checked descriptor;
    :class:`ValueError` with the problem (:func:`outside_problem`'s words) otherwise."""
    try:
        return confined.read_file(root / item, [root], max_bytes=MAX_FILE_BYTES, allow_hard_links=True).data
    except confined.Refused as exc:
        raise ValueError(_problem(item, exc)) from None


def files_under(root: Path, item: str) -> tuple[list[Path], list[str]]:
    """The regular files ``item`` names (itself, or every file under a folder) and the problems found:
    links (never followed, whether they lead out or not), and things that are not regular files."""
    source = root / item
    try:
        entries = confined.walk(source, [root])
    except confined.Refused as exc:
        if exc.reason != "not_regular":
            return [], [_problem(item, exc)]
        problem = outside_problem(root, item)
        return ([], [problem]) if problem else ([source], [])
    files: list[Path] = []
    problems: list[str] = []
    for entry in entries:
        rel = f"{PurePosixPath(item).as_posix()}/{entry.relative}"
        if entry.kind == "file":
            files.append(source / entry.relative)
        elif entry.kind == "link":
            problems.append(f"{rel!r} is a link (links are not followed: copy the file into the spec folder)")
        else:
            problems.append(f"{rel!r} is not a regular file")
    return files, problems
