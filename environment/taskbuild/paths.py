"""The files a spec names: each lies inside the spec folder, as a regular file, with no link leading out.

A spec is shared and rebuilt by others, so ``experiments: /etc/passwd`` or an ``inputs`` folder holding a
link to a file elsewhere must not pull that file into an agent-visible task (or into an error message).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath


def outside_problem(root: Path, item: str) -> str | None:
    """Why the relative path ``item`` may not be used from the spec folder ``root``, or ``None``."""
    rel = PurePosixPath(item)
    if rel.is_absolute() or ".." in rel.parts or "\\" in item:
        return f"{item!r} must be a path inside the spec folder (relative, no '..')"
    try:
        target = (root / item).resolve(strict=False)
        inside = target.is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return f"{item!r} cannot be resolved (a link loop?)"
    if not inside:
        return f"{item!r} leads outside the spec folder (through a link)"
    return None


def files_under(root: Path, item: str) -> tuple[list[Path], list[str]]:
    """The regular files ``item`` names (itself, or every file under a folder) and the problems found:
    links leading outside the spec folder, and things that are not regular files or folders."""
    base = root.resolve()
    source = root / item
    candidates = sorted(source.rglob("*")) if source.is_dir() else [source]
    files: list[Path] = []
    problems: list[str] = []
    for path in candidates:
        rel = path.relative_to(root).as_posix()
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):
            problems.append(f"{rel!r} is a broken link or cannot be resolved")
            continue
        if not resolved.is_relative_to(base):
            problems.append(f"{rel!r} is a link that leads outside the spec folder")
        elif resolved.is_file():
            files.append(path)
        elif not resolved.is_dir():
            problems.append(f"{rel!r} is not a regular file")
    return files, problems
