"""The one path rule: every path-typed field of every tool (plugins included) is resolved and confined in
the core before any tool code runs; a str field named like a path that is not path-typed fails the lint."""

from __future__ import annotations

import os
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter

from tools_server.core.errors import ToolError
from tools_server.core.paths import path_fields, path_kind
from tools_server.core.registry import load_registry

#: field names that say "this is a file or folder" (``receptor_text``-style text fields do not match)
PATH_LIKE = re.compile(
    r"(_path|_paths|_file|_files|_dir|_folder)$|^(path|file|dir|folder|pdb|receptor|ligand_file|topology|"
    r"trajectory|structure_file)$|file_?name"
)


@pytest.fixture
def registry(spu_env, monkeypatch):
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_path_plugin")
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return load_registry()


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    """Arguments holding ``value`` at ``dotted`` (``sources.data_file`` -> a list of one object)."""
    head, _, rest = dotted.partition(".")
    return {head: [_nest(rest, value)] if rest else value} if rest else {head: value}


def _field_annotation(model, dotted: str):
    head, _, rest = dotted.partition(".")
    info = model.model_fields[head]
    if not rest:
        return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    nested = next(a for a in _flatten(info.annotation) if isinstance(a, type) and hasattr(a, "model_fields"))
    return _field_annotation(nested, rest)


def _flatten(annotation):
    yield annotation
    for arg in typing.get_args(annotation):
        yield from _flatten(arg)


def _hostile(tmp_path: Path, work: Path, kind: str) -> dict[str, str]:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.pdb"
    secret.write_text("ATOM      1  N   ALA A   1       0.000   0.000   0.000  1.00  0.00           N\n")
    (work / "link_out.pdb").unlink(missing_ok=True)
    (work / "link_out.pdb").symlink_to(secret)
    (work / "dir_link").unlink(missing_ok=True)
    (work / "dir_link").symlink_to(outside, target_is_directory=True)
    fifo = work / "pipe.pdb"
    if not fifo.exists():
        os.mkfifo(fifo)
    cases = {
        "proc_environ": "/proc/self/environ",
        "sys_file": "/sys/kernel/mm/transparent_hugepage/enabled",
        "device": "/dev/zero",
        "outside_file": str(secret),
        "symlink_out": str(work / "link_out.pdb"),
        "dotdot_out": str(work / ".." / "outside" / "secret.pdb"),
        "through_dir_link": str(work / "dir_link" / "secret.pdb"),
        "fifo": str(fifo),
        "missing": str(work / "nothing.pdb"),
        "empty": "",
        "nul": str(work) + "/a\x00b",
    }
    if kind == "file":
        cases["a_directory"] = str(work)
    else:
        cases["a_file"] = str(work / "inside.pdb")
        cases["dir_link_out"] = str(work / "dir_link")
    return cases


def test_every_path_field_of_every_tool_follows_the_rule(registry, tmp_path):
    work = Path(os.environ["SPU_WORKDIR"])
    (work / "inside.pdb").write_text("ATOM\n")
    fields = [
        (name, field, kind)
        for name, spec in sorted(registry.tools.items())
        for field, kind in path_fields(spec.input_model).items()
    ]
    found = {(name, field) for name, field, _ in fields}
    # the tools the issue named, and the plugin's nested field, are all path-typed
    for expected in [
        ("protein_pka", "pdb_path"),
        ("dock", "receptor_path"),
        ("md_run", "pdb_path"),
        ("md_analyze", "trajectory_path"),
        ("md_analyze", "topology_path"),
        ("ranking_check", "task_dir"),
        ("ranking_check", "draft_path"),
        ("plugin_count_bytes", "sources.data_file"),
        ("plugin_count_bytes", "notes_path"),
    ]:
        assert expected in found, expected
    checked = 0
    for name, field, kind in fields:
        model = registry.tools[name].input_model
        for case, value in _hostile(tmp_path, work, kind).items():
            with pytest.raises(ToolError) as err:
                model.model_validate(_nest(field, value))
            assert err.value.code == "invalid_input", (name, field, case)
            assert "ATOM" not in err.value.message  # never the file's content
            checked += 1
        # inside the roots: accepted and handed to the tool resolved
        good = str(work / "inside.pdb") if kind == "file" else str(work)
        via_link = work / f"good_link_{kind}"
        via_link.unlink(missing_ok=True)
        via_link.symlink_to(good)
        adapter = TypeAdapter(_field_annotation(model, field))
        assert adapter.validate_python(str(via_link)) == str(Path(good).resolve())
    assert checked >= 9 * 11


def test_extra_input_roots_are_honoured(registry, tmp_path, monkeypatch):
    extra = tmp_path / "inputs"
    extra.mkdir()
    (extra / "x.pdb").write_text("ATOM\n")
    model = registry.tools["protein_pka"].input_model
    with pytest.raises(ToolError):
        model.model_validate({"pdb_path": str(extra / "x.pdb")})
    monkeypatch.setenv("SPU_INPUT_ROOTS", str(extra))
    assert model.model_validate({"pdb_path": str(extra / "x.pdb")}).pdb_path == str(extra / "x.pdb")


def _is_plain_str(annotation) -> bool:
    if annotation is str:
        return True
    args = typing.get_args(annotation)
    return typing.get_origin(annotation) is not Annotated and any(_is_plain_str(a) for a in args)


def test_no_tool_takes_a_path_as_a_plain_string(registry):
    offenders = []
    for name, spec in sorted(registry.tools.items()):
        for field, info in spec.input_model.model_fields.items():
            annotated = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            if PATH_LIKE.search(field) and _is_plain_str(info.annotation) and path_kind(annotated) is None:
                offenders.append(f"{name}.{field}")
    assert not offenders, f"declare these as InputPath/InputDir (tools_server.core.paths): {offenders}"


def test_the_lint_catches_a_plain_path_field():
    from pydantic import BaseModel

    class Bad(BaseModel):
        receptor: str
        structure_path: str | None = None

    hits = [f for f, i in Bad.model_fields.items() if PATH_LIKE.search(f) and _is_plain_str(i.annotation)]
    assert hits == ["receptor", "structure_path"]
