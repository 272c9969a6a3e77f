"""What a file is, from its ``lstat`` mode, in words for an error message: the one check the grader and the
Harbor boundary make before they read an agent's file (only a regular file is read)."""

from __future__ import annotations

import stat

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def not_regular(mode: int) -> str | None:
    """``"a symbolic link"``, ``"a named pipe"`` ... for a mode not of a regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")
