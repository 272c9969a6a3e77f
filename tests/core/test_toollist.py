"""The tool list shipped with the package and kept between server starts (tools_server/core/toollist.py):
used only while the code it was built from is unchanged; a stored list is checked against the registry once
that has loaded."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def _dumped(tools):
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def test_the_shipped_list_is_the_registry_s_list_for_the_code_here(spu_env, monkeypatch):
    monkeypatch.delenv("SPU_TOOL_MODULES", raising=False)
    from tools_server.core.server import SpuServer

    shipped = toollist.shipped()
    assert shipped is not None, "tool-list.json is stale: run python -m tools_server.commands.ship_tool_list"
    assert shipped == _dumped(SpuServer().tools())


def test_the_list_check_fails_on_a_stale_list_and_writes_nothing(spu_env, monkeypatch, tmp_path, capsys):
    """``ship_tool_list --check`` (before a commit): status 1 on a list that is not the code's, 0 on the
    list it would write; it never writes."""
    monkeypatch.delenv("SPU_TOOL_MODULES", raising=False)
    from tools_server.commands.ship_tool_list import main

    real = toollist.SHIPPED.read_text(encoding="utf-8")
    copy = tmp_path / "tool-list.json"
    monkeypatch.setattr(toollist, "SHIPPED", copy)
    stale = real.replace('"key": "', '"key": "0', 1)
    for text, status in ((real, 0), (stale, 1), (real.replace("Draw molecules", "Draw"), 1)):
        copy.write_text(text, encoding="utf-8")
        assert main(["--check"]) == status
        assert copy.read_text(encoding="utf-8") == text  # nothing written
    copy.unlink()
    assert main(["--check"]) == 1 and not copy.exists()
    assert "is stale" in capsys.readouterr().err
    assert main(["--bogus"]) == 2


def test_a_first_start_serves_the_shipped_list_and_builds_no_list(spu_env, monkeypatch):
    """The shipped list's key is a digest of what it was built from, so a first start on it loads the
    registry for the first call but neither builds the list again nor stores it (about 0.1 s of CPU)."""
    monkeypatch.delenv("SPU_TOOL_MODULES", raising=False)
    from tools_server.core.server import SpuServer

    assert toollist.load() is None  # an empty cache folder: a first start
    built = []
    original = SpuServer._build_tools
    monkeypatch.setattr(SpuServer, "_build_tools", lambda self: built.append(1) or original(self))
    server, finish = _started()
    assert server._tools is not None and server.dispatcher._registry is None  # no domain imported yet
    assert _dumped(server._tools) == toollist.shipped()
    finish()
    assert server.dispatcher._registry is not None  # loaded for the first call
    assert built == [] and toollist.load() is None
    assert _dumped(server.tools()) == toollist.shipped()


def test_no_shipped_list_for_another_set_of_tools(plugin):
    assert toollist.shipped_key() is None and toollist.shipped() is None


def _write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


_names = st.lists(st.sampled_from(["a", "b", "pkg", "sub", "x_1"]), min_size=1, max_size=3).map(
    lambda parts: "/".join(parts) + ".py"
)
_trees = st.dictionaries(_names, st.binary(max_size=40), min_size=1, max_size=6).filter(
    # a name that is both a file and a folder cannot be written
    lambda files: not any(other.startswith(name[:-3] + "/") for name in files for other in files)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=_trees, data=st.data())
def test_the_key_is_of_content_not_of_place_or_time(tmp_path_factory, files, data):
    """The same files in another folder, written at another time, with other files beside them, have the
    same digest; one changed byte, a renamed file or one more ``.py`` file changes it."""
    first = _write_tree(tmp_path_factory.mktemp("one"), files)
    second = _write_tree(tmp_path_factory.mktemp("two"), files)
    (second / "notes.txt").write_text("not a source")
    (second / "__pycache__").mkdir(exist_ok=True)
    (second / "__pycache__" / "stale.py").write_text("")
    key = toollist.tree_digest([first])
    assert toollist.tree_digest([second]) == key

    name = data.draw(st.sampled_from(sorted(files)))
    content = files[name]
    at = data.draw(st.integers(0, len(content)))
    edited = content[:at] + bytes([data.draw(st.integers(0, 255))]) + content[at + 1 :]
    renamed = {**files, name[:-3] + "_moved.py": content}
    del renamed[name]
    changes = [{**files, name: content + b"#"}, renamed, {**files, "added.py": b""}]
    if edited != content:
        changes.append({**files, name: edited})
    for changed in changes:
        third = _write_tree(tmp_path_factory.mktemp("three"), changed)
        assert toollist.tree_digest([third]) != key


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
