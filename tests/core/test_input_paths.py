"""The one path rule: every path-typed field of every tool (plugins included) is confined in the core before
any tool code runs (no link followed in any component); a str field named like a path that is not
path-typed fails the lint."""

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
    (work / "hard_out.pdb").unlink(missing_ok=True)
    os.link(secret, work / "hard_out.pdb")  # resolving it shows nothing: the link count is the sign
    cases = {
        "proc_environ": "/proc/self/environ",
        "sys_file": "/sys/kernel/mm/transparent_hugepage/enabled",
        "device": "/dev/zero",
        "outside_file": str(secret),
        "symlink_out": str(work / "link_out.pdb"),
        "dotdot_out": str(work / ".." / "outside" / "secret.pdb"),
        "through_dir_link": str(work / "dir_link" / "secret.pdb"),
        "fifo": str(fifo),
        "hard_link_out": str(work / "hard_out.pdb"),
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
        if kind in ("file", "dir")  # a text that may name a file is checked when the tool reads it
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
        # inside the roots: accepted as written (below its root); a link is refused even when it points in
        good = str(work / "inside.pdb") if kind == "file" else str(work)
        adapter = TypeAdapter(_field_annotation(model, field))
        assert adapter.validate_python(str(Path(work) / "." / Path(good).relative_to(work))) == good
        via_link = work / f"good_link_{kind}"
        via_link.unlink(missing_ok=True)
        via_link.symlink_to(good)
        with pytest.raises(ToolError) as err:
            adapter.validate_python(str(via_link))
        assert err.value.code == "invalid_input" and "symbolic link" in err.value.message
    assert checked >= 9 * 12


def test_every_file_is_sized_before_it_is_read(registry, tmp_path):
    """A sparse file larger than every cap (the issue's 10 GB PDB kept protein_pka reading for 211 s, up to
    19 GiB of memory): each file field refuses it as too_large, having read none of it."""
    from tools_server.core.paths import MAX_BYTES

    work = Path(os.environ["SPU_WORKDIR"])
    huge = work / "huge.pdb"
    with open(huge, "wb") as fh:
        fh.truncate(max(MAX_BYTES.values()) + 2**30)
    fields = [
        (name, field)
        for name, spec in sorted(registry.tools.items())
        for field, kind in path_fields(spec.input_model).items()
        if kind == "file"
    ]
    assert ("protein_pka", "pdb_path") in fields and ("md_analyze", "trajectory_path") in fields
    read_before = _bytes_read()
    for name, field in fields:
        with pytest.raises(ToolError) as err:
            registry.tools[name].input_model.model_validate(_nest(field, str(huge)))
        assert err.value.code == "too_large" and str(huge.stat().st_size) in err.value.message, (name, field)
    assert _bytes_read() - read_before < 2**20  # sized by stat, never read


def test_each_kind_has_its_cap(spu_env):
    from tools_server.core.paths import MAX_BYTES, readable_file

    work = Path(os.environ["SPU_WORKDIR"])
    for kind, cap in MAX_BYTES.items():
        path = work / f"{kind}.bin"
        with open(path, "wb") as fh:
            fh.truncate(cap)
        assert readable_file(path, kind=kind) == path.resolve()  # the cap itself is allowed
        with open(path, "wb") as fh:
            fh.truncate(cap + 1)
        with pytest.raises(ToolError) as err:
            readable_file(path, kind=kind)
        assert err.value.code == "too_large", kind


def test_a_hard_link_to_an_outside_file_is_refused_unless_the_operator_allows_it(
    spu_env, tmp_path, monkeypatch
):
    from tools_server.molecules import MoleculeError, read_file_text

    work = Path(os.environ["SPU_WORKDIR"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.sdf").write_text(
        "secret\n  RDKit\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n"
    )
    os.link(outside / "secret.sdf", work / "linked.sdf")
    with pytest.raises(MoleculeError) as err:  # how chem_parse reads a molecule file
        read_file_text(str(work / "linked.sdf"))
    assert err.value.code == "invalid_input" and "hard links" in err.value.message
    assert "secret" not in err.value.message.replace(str(outside), "")
    monkeypatch.setenv("SPU_ALLOW_HARD_LINKS", "1")
    assert read_file_text(str(work / "linked.sdf"))[0].startswith("secret")


def _bytes_read() -> int:
    """Bytes this process has read through read syscalls (/proc/self/io ``rchar``)."""
    line = next(x for x in Path("/proc/self/io").read_text().splitlines() if x.startswith("rchar:"))
    return int(line.split()[1])


def test_extra_input_roots_are_honoured(registry, tmp_path, monkeypatch):
    extra = tmp_path / "inputs"
    extra.mkdir()
    (extra / "x.pdb").write_text("ATOM\n")
    model = registry.tools["protein_pka"].input_model
    with pytest.raises(ToolError):
        model.model_validate({"pdb_path": str(extra / "x.pdb")})
    monkeypatch.setenv("SPU_INPUT_ROOTS", str(extra))
    assert model.model_validate({"pdb_path": str(extra / "x.pdb")}).pdb_path == str(extra / "x.pdb")
    # a root may itself be reached through a link, and spelled either way: the links below it are the rule's
    alias = tmp_path / "alias"
    alias.symlink_to(extra, target_is_directory=True)
    monkeypatch.setenv("SPU_INPUT_ROOTS", str(alias))
    for spelled in (alias / "x.pdb", extra / "x.pdb"):
        assert model.model_validate({"pdb_path": str(spelled)}).pdb_path == str(extra / "x.pdb")


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
