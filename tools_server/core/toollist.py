"""The tool list, shipped with the package and kept between server starts.

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

A first start (nothing stored yet) answers from the list shipped in the package (``tool-list.json`` beside
this module, written by ``python -m tools_server.commands.ship_tool_list``) when its key still matches: a
digest of the content of every ``.py`` file of ``tools_server`` and ``spu_common``, the ``spu.tools`` entry
points, an empty ``SPU_TOOL_MODULES``, and the versions of Python, the MCP SDK and pydantic that shape the
schemas. The key is of content, not of times or paths, so an installed wheel, a clean clone and a checkout
all match it; a plugin, an edited tool or another pydantic does not, and the registry builds the list as
before. A shipped list that matches is served without building the list again to check it, and is not
stored: the next start finds it the same way (a digest of about 200 files: 11 ms).
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
#: the list shipped with the package, for a first start
SHIPPED = Path(__file__).with_name("tool-list.json")
#: the packages whose sources the shipped list's key covers
KEYED_PACKAGES = ("tools_server", "spu_common")


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


def tree_digest(folders: Iterable[Path]) -> str:
    """A digest of the ``.py`` files under ``folders``: their paths relative to their folder and their
    bytes, in a fixed order; file times and the folders' own locations do not enter it."""
    digest = hashlib.sha256()
    for index, folder in enumerate(folders):
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(f for f in files if f.endswith(".py")):
                path = Path(root, name)
                relative = f"{index}/{path.relative_to(folder).as_posix()}".encode()
                content = path.read_bytes()
                digest.update(b"%d:%s%d:" % (len(relative), relative, len(content)))
                digest.update(content)
    return digest.hexdigest()


def shipped_key() -> str | None:
    """The key a shipped list must carry to be served here (see the module's docstring); None where no
    shipped list can apply (modules named in ``SPU_TOOL_MODULES``)."""
    if os.environ.get("SPU_TOOL_MODULES", "").strip():
        return None
    import importlib.util
    from importlib import metadata

    import pydantic
    import pydantic_core

    folders = []
    for name in KEYED_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return None
        folders.extend(Path(p) for p in spec.submodule_search_locations)
    entry_points = sorted(f"{ep.name}={ep.value}" for ep in metadata.entry_points(group="spu.tools"))
    context = [
        SCHEMA,
        __version__,
        list(sys.version_info[:2]),
        metadata.version("mcp"),
        pydantic.VERSION,
        pydantic_core.__version__,
        entry_points,
        tree_digest(folders),
    ]
    return hashlib.sha256(json.dumps(context).encode()).hexdigest()


def shipped() -> list[dict[str, Any]] | None:
    """The tool list shipped with the package, if its key matches the code and environment here."""
    try:
        record = json.loads(SHIPPED.read_bytes())
        if record.get("schema") != SCHEMA or record.get("key") != shipped_key():
            return None
        tools = record["tools"]
        return tools if isinstance(tools, list) else None
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        return None


def shipped_text(tools: list[dict[str, Any]]) -> str:
    """The shipped list's file content for ``tools`` (the in-tree list), keyed to the code here."""
    key = shipped_key()
    if key is None:
        raise RuntimeError("unset SPU_TOOL_MODULES: the shipped list holds the in-tree tools only")
    return json.dumps({"schema": SCHEMA, "key": key, "tools": tools}) + "\n"


def write_shipped(tools: list[dict[str, Any]]) -> Path:
    """Write ``tools`` (the in-tree list) as the shipped list, keyed to the code here."""
    SHIPPED.write_text(shipped_text(tools), encoding="utf-8")
    return SHIPPED
