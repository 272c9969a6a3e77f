"""The user's own files that ``spu config`` edits (``.mcp.json``, ``.claude/settings.json``, Codex's
``config.toml``, ``AGENTS.md``, the skill): read as strict UTF-8, edited only when they parse (the caller
parses), written atomically beside a backup of what they held.

A file that is a link is edited where it points (a config kept in a dotfiles repository stays linked); the
new file keeps the old one's permissions (a config holding a key stays private).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from spu_common.filekinds import not_regular
from spu_common.jsonfiles import atomic_write_bytes

#: the previous version of a replaced file: ``config.toml`` -> ``config.toml.bak``
BACKUP_SUFFIX = ".bak"


class UserFileError(ValueError):
    """A user's file that cannot be read as text (a folder, not UTF-8, unreadable): nothing was written."""


@dataclass(frozen=True)
class Written:
    """A file written: where, and where its previous version went (None when it was new or unchanged)."""

    path: Path
    backup: Path | None
    changed: bool


def read_text(path: Path) -> str | None:
    """The text of ``path`` (UTF-8, strictly), or None when it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UserFileError(f"{path} is a folder, not a file") from None
    except OSError as exc:
        raise UserFileError(f"{path} cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserFileError(
            f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); convert it to "
            "UTF-8 (or move it away) and rerun"
        ) from None


def replace(path: Path, text: str) -> Written:
    """Write ``text`` to ``path`` atomically; when the file held something else, its previous bytes go to
    ``path`` + :data:`BACKUP_SUFFIX` first. Nothing is written when the content is unchanged."""
    target = Path(os.path.realpath(path))
    data = text.encode("utf-8")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and (kind := not_regular(info.st_mode)) is not None:
        raise UserFileError(f"{path} is {kind}, not a file")
    mode = stat.S_IMODE(info.st_mode) if info is not None else None
    old = target.read_bytes() if info is not None else None
    if old == data:
        return Written(Path(path), None, False)
    backup = None
    if old:
        backup = target.with_name(target.name + BACKUP_SUFFIX)
        atomic_write_bytes(backup, old, mode=mode)
    atomic_write_bytes(target, data, mode=mode)
    return Written(Path(path), backup, True)
