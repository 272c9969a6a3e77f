"""Which files tools may read: regular files under the allowed roots.

Roots: the server's work directory (artifacts included), the directory the server was started in, and
the directories named in ``SPU_INPUT_ROOTS`` (``os.pathsep``-separated). A path is resolved (symlinks
followed) before the check, so a link that leaves the roots is refused; devices, FIFOs and directories are
refused too. Errors name the path, never the file's contents.
"""

from __future__ import annotations

import os
from pathlib import Path

from tools_server.core import settings
from tools_server.core.errors import ToolError


def allowed_roots() -> list[Path]:
    roots = [settings.workdir(), Path.cwd()]
    roots += [Path(p) for p in os.environ.get("SPU_INPUT_ROOTS", "").split(os.pathsep) if p.strip()]
    return [r.expanduser().resolve() for r in roots]


def readable_file(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> Path:
    """The resolved path of a regular file under an allowed root, or :class:`ToolError` ``invalid_input``."""
    given = Path(path).expanduser()
    try:
        resolved = given.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ToolError("invalid_input", f"No such file: {given}") from None
    if not any(resolved == root or resolved.is_relative_to(root) for root in allowed_roots()):
        raise ToolError(
            "invalid_input",
            f"{given} is outside the directories tools may read",
            hint="Use a file under the server's work directory or the directory it was started in, "
            "or add its directory to SPU_INPUT_ROOTS.",
        )
    if not resolved.is_file():
        raise ToolError("invalid_input", f"{given} is not a regular file")
    if max_bytes is not None and resolved.stat().st_size > max_bytes:
        raise ToolError("too_large", f"{given} is larger than {max_bytes // 2**20} MiB")
    return resolved
