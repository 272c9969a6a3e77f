"""The tool list, kept between server starts.

Building the list imports every domain's tool modules and generates their input schemas: about 60 ms on a
2-core machine, most of what the server adds to the SDK's own start-up before its first ``tools/list``. A
server started again on the same code answers that first ``tools/list`` from the list the last one built
(``$SPU_CACHE_DIR/tool-lists/``), and only then loads the registry in the background and checks the list
against it: a difference replaces the list it serves and the stored copy (see
:meth:`tools_server.core.server.SpuServer.preload`).

A stored list is used only while nothing it was built from has changed: the same interpreter, package
version, ``SPU_TOOL_MODULES`` and import path (one file per combination), and the same size and
modification time of every source file and folder of the packages the tools came from and of every
folder on the import path (installing or removing a package changes its folder's time).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spu_common.jsonfiles import atomic_write_json
from tools_server import __version__
from tools_server.core import settings

log = logging.getLogger(__name__)

SCHEMA = "spu.tool-list/1"


def _path() -> Path:
    context = [
        SCHEMA,
        __version__,
        sys.version,
        sys.executable,
        os.environ.get("SPU_TOOL_MODULES", ""),
        sys.path,
    ]
    digest = hashlib.sha256(json.dumps(context).encode()).hexdigest()[:20]
    return settings.cache_dir() / "tool-lists" / f"{digest}.json"


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _source_paths(modules: Iterable[str]) -> list[str]:
    """Every folder and ``.py`` file of the top-level packages of ``modules``, and the import path's
    folders."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    for top in sorted({m.split(".", 1)[0] for m in modules}):
        module = sys.modules.get(top)
        folders = list(getattr(module, "__path__", None) or [])
        if not folders and getattr(module, "__file__", None):
            paths.append(module.__file__)
        for folder in folders:
            for root, dirs, files in os.walk(folder):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
                paths.append(root)
                paths.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))
    return paths


def load() -> list[dict[str, Any]] | None:
    """The stored tool list, if one was built from exactly the code on disk now; else None."""
    try:
        record = json.loads(_path().read_bytes())
        stamps = record["sources"]
        if record.get("schema") != SCHEMA or not isinstance(stamps, dict):
            return None
        if any(_stamp(path) != stamp for path, stamp in stamps.items()):
            return None
        tools = record["tools"]
        return tools if isinstance(tools, list) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(tools: list[dict[str, Any]], modules: Iterable[str]) -> None:
    """Keep ``tools`` (built from the tool modules ``modules``) for the next server start."""
    sources = {path: _stamp(path) for path in _source_paths(modules)}
    record = {"schema": SCHEMA, "sources": sources, "tools": tools}
    try:
        atomic_write_json(_path(), record, indent=None, fsync=False)
    except OSError:
        log.debug("could not store the tool list", exc_info=True)
