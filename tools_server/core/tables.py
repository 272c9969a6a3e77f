"""A batch's items in its result: inline when small, else a CSV artifact (plus a preview).

Every batch tool puts its items through :func:`table_result` (``tools_server.plugin`` exports it), so a
10,000-molecule batch answers with a preview and a table a script reads, not 10,000 items inline.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

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


def table_result(ctx: Any, name: str, items: list[BaseModel], *, always_csv: bool = False) -> dict[str, Any]:
    """The item fields of an :class:`~tools_server.core.results.ItemsResult` (``items``: the batch's item
    models): ``{"items": items}`` when small; else a CSV artifact ``<name>.csv`` of every item
    (``table_csv``), ``items`` cut to a preview, and ``items_truncated`` saying so. Pass them on as keywords:
    ``MyResult(n_molecules=n, **table_result(ctx, "name", items))``."""
    rows = [item.model_dump(mode="json", exclude_unset=True) for item in items]
    size = len(json.dumps(rows, separators=(",", ":"), default=str))
    if size <= INLINE_CHARS and not always_csv:
        return {"items": items}
    path = write_csv(ctx.artifact(f"{name}.csv"), rows)
    out: dict[str, Any] = {"table_csv": str(path)}
    if size <= INLINE_CHARS:
        out["items"] = items
    else:
        preview: list[Any] = []
        used = 0
        for item, row in zip(items[:PREVIEW_ITEMS], rows, strict=False):
            used += len(json.dumps(row, default=str))
            if used > INLINE_CHARS:
                break
            preview.append(item)
        out["items"] = preview
        out["items_truncated"] = f"{len(preview)} of {len(items)} items shown; all rows are in table_csv"
    return out
