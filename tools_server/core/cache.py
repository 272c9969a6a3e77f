"""The on-disk result cache, shared by every server process of one machine.

Key: SHA-256 over canonical JSON of tool name and version, canonical input and engine versions. One file
per entry, written to a temporary name and renamed into place, so two servers writing the same key at once
both leave a complete entry and a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from environment.jsonfiles import atomic_write_json, canonical_json
from tools_server.core import settings

_LAYOUT = "v1"


def input_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value, default=str).encode()).hexdigest()


def cache_key(tool: str, tool_version: str, canonical_input: Any, engines: dict[str, str | None]) -> str:
    return input_hash({"tool": tool, "version": tool_version, "input": canonical_input, "engines": engines})


class ResultCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or settings.cache_dir()) / _LAYOUT

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                return json.load(fh)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, result: dict[str, Any]) -> None:
        atomic_write_json(self._path(key), result, indent=None, fsync=False, default=str)

    def stats(self) -> dict[str, Any]:
        entries = 0
        size = 0
        per_tool: dict[str, int] = {}
        if self.root.exists():
            for path in self.root.glob("*/*.json"):
                entries += 1
                size += path.stat().st_size
                try:
                    tool = json.loads(path.read_text(encoding="utf-8")).get("provenance", {}).get("tool", "?")
                except (OSError, json.JSONDecodeError):
                    tool = "?"
                per_tool[tool] = per_tool.get(tool, 0) + 1
        return {"path": str(self.root), "entries": entries, "bytes": size, "per_tool": per_tool}

    def clear(self) -> int:
        removed = sum(1 for _ in self.root.glob("*/*.json")) if self.root.exists() else 0
        shutil.rmtree(self.root, ignore_errors=True)
        return removed
