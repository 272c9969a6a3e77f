"""The project's one way to write files atomically, read JSON strictly and write canonical JSON.

Every part uses these (the server, the agent and the benchmark side), so a reader never sees a half-written
file, a duplicated key is never silently resolved, and a hash over JSON means the same thing everywhere.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object holds the same key twice."""


def canonical_json(value: Any, *, default: Any = None) -> str:
    """Sorted keys, no spaces, UTF-8 characters kept, NaN refused: the form hashes are taken over."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=default
    )


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def loads_strict(text: str) -> Any:
    """Parse JSON refusing duplicate keys and NaN/Infinity. Raises ``ValueError`` (incl.
    ``DuplicateKeyError``, ``json.JSONDecodeError``) or ``RecursionError`` for nesting too deep."""
    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)


def load_json_strict(path: str | os.PathLike[str]) -> Any:
    """Read a UTF-8 JSON file under :func:`loads_strict`'s rules. Raises ``OSError``, ``UnicodeDecodeError``
    or ``ValueError``; callers turn these into their own error with the file's name."""
    return loads_strict(Path(path).read_text(encoding="utf-8"))


_temporaries = itertools.count()


def _new_temporary(target: Path) -> tuple[int, str]:
    """A new file beside ``target`` with the mode an ordinary write gives (0666 less the umask), named for
    this process, thread and write, so no two writers share one (a name left by a dead process is taken
    over)."""
    name = f"{target.parent}/.{target.name}.{os.getpid()}-{threading.get_ident()}-{next(_temporaries)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(name, flags, 0o666), name
    except FileExistsError:
        os.unlink(name)
        return os.open(name, flags, 0o666), name


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, fsync: bool = True, mode: int | None = None
) -> Path:
    """Write ``data`` so a reader sees the old file or the new one, never a part: a temporary file in the same
    directory, flushed (and fsynced), renamed over ``path``; with ``fsync`` the directory is synced too.
    ``mode``: the new file's permission bits (default: what an ordinary write gives)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = _new_temporary(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    if fsync:
        try:
            dir_fd = os.open(target.parent, os.O_RDONLY)
        except OSError:
            return target
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = True) -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)


def atomic_write_json(
    path: str | os.PathLike[str],
    value: Any,
    *,
    indent: int | None = 2,
    fsync: bool = True,
    default: Any = None,
) -> Path:
    """Write ``value`` as UTF-8 JSON (a trailing newline when indented) atomically."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False, default=default)
    return atomic_write_text(path, text + ("\n" if indent is not None else ""), fsync=fsync)
