"""The dispatcher's own decisions (tools_server/core/dispatch.py)."""

from __future__ import annotations


def test_the_cache_key_is_computed_on_the_event_loop_only_when_no_argument_names_a_file(tmp_path):
    """A canonicalizer may read a molecule file of up to 50 MiB: off the event loop when an argument names
    one; inline (no thread hand-off) for content such as SMILES or an XYZ block."""
    from tools_server.core.dispatch import NAME_CHECK_STRINGS, _names_files

    sdf = tmp_path / "ligands.sdf"
    sdf.write_text("x\n")
    assert not _names_files(
        {"molecules": ["CC#N", "3\nwater\nO 0 0 0\nH 0 0 1\nH 0 1 0\n"], "task": "energy"}
    )
    assert _names_files({"molecules": ["CCO", str(sdf)]})
    assert _names_files({"ligands": [{"path": f"{sdf}#2"}]})  # a record of a file, nested
    assert _names_files({"molecules": ["C"] * (NAME_CHECK_STRINGS + 1)})  # too many to check inline
    assert not _names_files({"molecules": ["bad\x00name"]})
