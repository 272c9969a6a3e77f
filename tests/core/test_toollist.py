"""The tool list kept between server starts (tools_server/core/toollist.py): used only while the code it was
built from is unchanged, and checked against the registry once that has loaded."""

from __future__ import annotations

import threading
import time

import pytest

from tools_server.core import toollist

PLUGIN = '''
from pydantic import BaseModel

from tools_server.plugin import tool


class In(BaseModel):
    text: str = ""


@tool(name="{name}", resource="instant", cacheable=False)
def {name}(args: In) -> dict:
    """{doc}"""
    return {{"text": args.text}}
'''


@pytest.fixture
def plugin(spu_env, tmp_path, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_toollist_plugin")
    path = folder / "spu_toollist_plugin.py"
    path.write_text(PLUGIN.format(name="tl_echo", doc="Echo the text."))
    yield path
    import sys

    sys.modules.pop("spu_toollist_plugin", None)


def _started():
    """A server after ``preload``, and a function that waits for its background load."""
    from tools_server.core.server import SpuServer

    before = set(threading.enumerate())
    server = SpuServer()
    server.preload()
    loader = next(t for t in threading.enumerate() if t not in before and t.name == "spu-registry")

    def finish():
        loader.join(timeout=60)
        assert not loader.is_alive()

    return server, finish


def _names_and_docs(tools):
    return {t.name: t.description for t in tools}


def test_a_second_start_serves_the_stored_list_before_loading_the_registry(plugin):
    assert toollist.load() is None  # nothing stored yet: the first start builds the list
    first, finish = _started()
    finish()
    built = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in first.tools()]
    assert toollist.load() == built  # stored for the next start
    assert "tl_echo" in _names_and_docs(first.tools())

    second, finish = _started()
    # the list is there before any domain was imported: the registry loads after the first tools/list
    assert second._tools is not None and second.dispatcher._registry is None
    assert [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in second._tools] == built
    finish()
    assert second.dispatcher._registry is not None


def test_a_changed_tool_module_makes_the_stored_list_stale(plugin):
    _, finish = _started()
    finish()
    assert toollist.load() is not None
    time.sleep(0.01)  # a distinct modification time even on coarse clocks
    plugin.write_text(PLUGIN.format(name="tl_echo", doc="Echo the text, changed."))
    assert toollist.load() is None
    import sys

    sys.modules.pop("spu_toollist_plugin", None)
    server, finish = _started()
    finish()
    assert _names_and_docs(server.tools())["tl_echo"] == "Echo the text, changed."


def test_a_stored_list_that_disagrees_with_the_registry_is_replaced(plugin):
    import json

    _, finish = _started()
    finish()
    path = toollist._path()
    record = json.loads(path.read_text())
    for t in record["tools"]:
        if t["name"] == "tl_echo":
            t["description"] = "A description the code does not have."
    path.write_text(json.dumps(record))
    import os

    os.utime(path)  # the stamps are of the sources, not of the stored list: still used
    server, finish = _started()
    assert _names_and_docs(server._tools)["tl_echo"] == "A description the code does not have."
    finish()  # the registry loaded (after a second without a tools/list) and the check replaced both
    assert _names_and_docs(server.tools())["tl_echo"] == "Echo the text."
    assert {t["name"]: t.get("description") for t in toollist.load()}["tl_echo"] == "Echo the text."
