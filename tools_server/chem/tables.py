"""Per-item result tables: inline when small, CSV artifact (plus a preview) when large."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

#: Inline items while their JSON stays under this many characters (results target < 20,000).
INLINE_CHARS = 12_000
PREVIEW_ITEMS = 20


def flatten(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts become dotted columns; lists become JSON text."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, list):
            out[name] = json.dumps(value, separators=(",", ":"))
        else:
            out[name] = value
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    flat = [flatten(r) for r in rows]
    columns: list[str] = []
    for r in flat:
        for k in r:
            if k not in columns:
                columns.append(k)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(flat)
    return path


def table_result(
    ctx: Any, name: str, items: list[dict[str, Any]], *, always_csv: bool = False
) -> dict[str, Any]:
    """``{"items": [...]}`` when small; else a CSV artifact, ``items`` cut to a preview, and a flag."""
    size = len(json.dumps(items, separators=(",", ":"), default=str))
    if size <= INLINE_CHARS and not always_csv:
        return {"items": items}
    path = write_csv(ctx.artifact(f"{name}.csv"), items)
    out: dict[str, Any] = {"table_csv": str(path)}
    if size <= INLINE_CHARS:
        out["items"] = items
    else:
        preview: list[dict[str, Any]] = []
        used = 0
        for item in items[:PREVIEW_ITEMS]:
            used += len(json.dumps(item, default=str))
            if used > INLINE_CHARS:
                break
            preview.append(item)
        out["items"] = preview
        out["items_truncated"] = f"{len(preview)} of {len(items)} items shown; all rows are in table_csv"
    return out
