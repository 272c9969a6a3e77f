"""The on-disk result cache, shared by every server process of one machine.

Key: SHA-256 over canonical JSON of tool name and version, canonical input and engine versions. One file
per entry, written to a temporary name and renamed into place, so two servers writing the same key at once
both leave a complete entry and a reader never sees half a file.

Each entry is ``{"sha256": ..., "result": {...}}``: the checksum covers the canonical JSON of the result.
On read the checksum is verified and the result checked against the shape every tool result has (an
object whose ``provenance`` names the tool and version asked for); an entry that fails (hand-edited,
truncated, ``{}``) is deleted, reported as a miss with a reason (the dispatcher adds a warning to the
recomputed result), and never served.

A write that fails (a full disk, a read-only folder) is never silent: the result of a job carries a
``storage_error`` warning (the dispatcher adds it), and so does the result of an ``instant`` or ``net`` tool,
whose entry is written just after the reply, when the folder is known to be full or read-only then or the
last write failed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from spu_common.jsonfiles import atomic_write_text, canonical_json
from tools_server.core import settings
from tools_server.core.deferred import DeferredWrites

log = logging.getLogger(__name__)
_LAYOUT = "v2"
#: Below this much free space the cache folder counts as full (an entry takes a few KB).
MIN_FREE_BYTES = 1 << 20


def space_problem(folder: Path) -> str | None:
    """Why a file cannot be written in ``folder`` (or its nearest existing parent) now: a read-only file
    system or folder, or less than :data:`MIN_FREE_BYTES` free; None when nothing is known against it."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return "read-only file system"
    if not os.access(folder, os.W_OK):
        return "permission denied"
    if st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
        return "no space left on device"
    return None


def input_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value, default=str).encode()).hexdigest()


def cache_key(tool: str, tool_version: str, canonical_input: Any, engines: dict[str, str | None]) -> str:
    return input_hash({"tool": tool, "version": tool_version, "input": canonical_input, "engines": engines})


def result_problem(result: Any, tool: str | None, version: str | None) -> str | None:
    """Why ``result`` is not a valid stored result of ``tool`` at ``version``, or None."""
    if not isinstance(result, dict):
        return "the result is not an object"
    if tool is None and version is None:
        return None
    provenance = result.get("provenance")
    if not isinstance(provenance, dict):
        return "the result has no provenance"
    if tool is not None and provenance.get("tool") != tool:
        return f"the entry belongs to {provenance.get('tool')!r}, not {tool!r}"
    if version is not None and str(provenance.get("tool_version")) != str(version):
        return "the entry was written by another tool version"
    if not isinstance(provenance.get("input_hash"), str):
        return "the provenance has no input hash"
    return None


class ResultCache:
    def path_of(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or settings.cache_dir()) / _LAYOUT
        #: key -> why its entry was discarded on the last read (popped by the dispatcher)
        self.discarded: dict[str, str] = {}
        self._staged: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._later = DeferredWrites("spu-cache-writes")
        #: why the last write failed (None after one succeeds)
        self.write_problem: str | None = None

    def stage(self, key: str, result: dict[str, Any]) -> str | None:
        """Store ``result`` under ``key``: this process's reads see it at once, and a background thread
        writes it to disk a moment later (:mod:`tools_server.core.deferred`), off the call's path. Returns
        why the entry will likely not reach the disk when that is known now (:func:`space_problem`, or the
        last write failed), else None."""
        with self._lock:
            self._staged[key] = result

        def write() -> None:
            try:
                self.put(key, result)
            finally:
                with self._lock:
                    if self._staged.get(key) is result:
                        del self._staged[key]

        self._later.add(key, write)
        return self.write_problem or space_problem(self.root)

    def flush(self) -> None:
        """Wait until every staged result is on disk."""
        self._later.flush()

    def get(self, key: str, tool: str | None = None, version: str | None = None) -> dict[str, Any] | None:
        with self._lock:
            staged = self._staged.get(key)
        if staged is not None:  # a copy: the caller marks it as a hit
            return json.loads(json.dumps(staged, default=str))
        path = self.path_of(key)
        try:
            raw = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError):
            return self._discard(key, path, "unreadable")
        try:
            entry = json.loads(raw)
        except ValueError:
            return self._discard(key, path, "not valid JSON")
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            return self._discard(key, path, "no result in the entry")
        result = entry["result"]
        if entry.get("sha256") != input_hash(result):
            return self._discard(key, path, "checksum mismatch (the entry was altered)")
        problem = result_problem(result, tool, version)
        if problem is not None:
            return self._discard(key, path, problem)
        return result

    def _discard(self, key: str, path: Path, why: str) -> None:
        log.warning("discarding cache entry %s: %s", path.name, why)
        self.discarded[key] = why
        path.unlink(missing_ok=True)
        return None

    def put(self, key: str, result: dict[str, Any]) -> None:
        # written as JSON once: the checksum covers exactly what a reader will load (the text read back),
        # and the entry is that text with the checksum beside it
        text = json.dumps(result, ensure_ascii=False, allow_nan=False, default=str)
        entry = f'{{"sha256": "{input_hash(json.loads(text))}", "result": {text}}}'
        try:
            atomic_write_text(self.path_of(key), entry, fsync=False)
        except OSError as exc:
            self.write_problem = exc.strerror or str(exc)
            raise
        self.write_problem = None

    def stats(self) -> dict[str, Any]:
        entries = 0
        size = 0
        per_tool: dict[str, int] = {}
        if self.root.exists():
            for path in self.root.glob("*/*.json"):
                entries += 1
                size += path.stat().st_size
                try:
                    entry = json.loads(path.read_text(encoding="utf-8"))
                    tool = entry["result"]["provenance"]["tool"]
                except (OSError, ValueError, KeyError, TypeError):
                    tool = "?"
                per_tool[tool] = per_tool.get(tool, 0) + 1
        return {"path": str(self.root), "entries": entries, "bytes": size, "per_tool": per_tool}

    def clear(self) -> int:
        removed = sum(1 for _ in self.root.glob("*/*.json")) if self.root.exists() else 0
        shutil.rmtree(self.root, ignore_errors=True)
        return removed
