"""Keys by content: every tool that reads a file keys its cache on the SHA-256 of the bytes it read, so an
edited file gives the new answer, from this server and from a second one sharing the cache; a file edited
between the key's read and the tool's read leaves the result uncached, with a warning."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from test_input_races import CALLS, FIELDS, _path_tools, _task_files

from tools_server.core import dispatch
from tools_server.core.cache import cache_key
from tools_server.core.registry import load_registry

pytestmark = pytest.mark.slow  # servers and jobs
WATER = (
    "water\n  RDKit          3D\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
    "    0.0000    0.0000    0.0000 O   0  0\nM  END\n$$$$\n"
)
METHANE = WATER.replace("water", "methane").replace(" O   0", " C   0")
AMMONIA = WATER.replace("water", "ammonia").replace(" O   0", " N   0")


def _key(spec, arguments: dict) -> str:
    args = spec.input_model.model_validate(arguments)
    canonical, reads = dispatch._canonical_input(spec, args, args.model_dump(mode="json"))
    assert not reads.refused
    return cache_key(spec.name, spec.version, canonical, {})


def test_every_cached_tool_keys_its_files_by_their_bytes(spu_env):
    """For every cacheable tool with a path-typed field (found in the registry): editing one file's bytes
    changes the key; a second path to the same bytes (another spelling) does not change what it reads."""
    registry = load_registry()
    work = Path(os.environ["SPU_WORKDIR"])
    checked = []
    for tool, fields in _path_tools().items():
        spec = registry.get(tool)
        if not spec.cacheable:
            continue
        for edited in fields:
            paths = {}
            for field, kind in fields.items():
                leaf = FIELDS.get((tool, field), "input.sdf" if kind == "reference" else "input.bin")
                folder = work / tool / field
                folder.mkdir(parents=True, exist_ok=True)
                if leaf == "task":
                    for name, data in _task_files().items():
                        (folder / leaf).mkdir(exist_ok=True)
                        (folder / leaf / name).write_bytes(data)
                else:
                    (folder / leaf).write_text(f"{tool} {field} first\n")
                paths[field] = str(folder / leaf)
            before = _key(spec, CALLS[tool](paths))
            Path(paths[edited]).write_text(f"{tool} {edited} edited\n")
            after = _key(spec, CALLS[tool](paths))
            assert before != after, f"{tool}: an edit of {edited} left the cache key as it was"
            checked.append((tool, edited))
    assert ("chem_parse", "molecules") in checked and ("md_analyze", "trajectory_path") in checked
    assert ("dock", "ligands") in checked and ("dock", "box_ligand") in checked


def _formula(server, tool: str, path: Path) -> tuple[str, str]:
    out = server.call_ok(tool, {"molecules": [str(path)], "wait_s": 120})
    item = out["items"][0]
    return item.get("formula") or item["descriptors"]["mol_weight_g_mol"], out["provenance"]["cache"]


def test_an_edited_file_gives_the_new_answer_here_and_from_a_second_server(spu_env, start_mcp_server):
    molecule = Path(spu_env["SPU_WORKDIR"]) / "molecule.sdf"
    first = start_mcp_server(spu_env)
    seen = []
    for text in (WATER, METHANE, AMMONIA):
        molecule.write_text(text)
        seen.append(_formula(first, "chem_parse", molecule))
    assert seen == [("H2O", "miss"), ("CH4", "miss"), ("H3N", "miss")]  # H2O three times before
    weights = []
    for text in (WATER, METHANE):
        molecule.write_text(text)
        weights.append(_formula(first, "chem_descriptors", molecule)[0])
    assert weights[0] == pytest.approx(18.015, abs=0.01) and weights[1] == pytest.approx(16.043, abs=0.01)
    second = start_mcp_server(spu_env)  # the same cache folder
    for text, formula in ((AMMONIA, "H3N"), (WATER, "H2O")):
        molecule.write_text(text)
        assert _formula(second, "chem_parse", molecule) == (formula, "hit")
    spelled = Path(spu_env["SPU_WORKDIR"]) / "." / "molecule.sdf"  # another spelling, the same bytes: a hit
    assert _formula(second, "chem_parse", spelled) == ("H2O", "hit")


def test_a_file_edited_between_the_key_and_the_tool_is_not_cached(spu_env, monkeypatch):
    molecule = Path(spu_env["SPU_WORKDIR"]) / "molecule.sdf"
    molecule.write_text(WATER)
    keyed = dispatch._canonical_input

    def edit_after_keying(spec, args, params):
        found = keyed(spec, args, params)
        molecule.write_text(METHANE)  # the tool's own read comes after this
        return found

    monkeypatch.setattr(dispatch, "_canonical_input", edit_after_keying)
    dispatcher = dispatch.Dispatcher()
    try:
        result = asyncio.run(dispatcher.call("chem_parse", {"molecules": [str(molecule)], "wait_s": 120}))
        assert result["items"][0]["formula"] == "CH4"  # what the tool read
        assert dispatch.UNKEYED_WARNING in result["warnings"]
        monkeypatch.setattr(dispatch, "_canonical_input", keyed)
        molecule.write_text(WATER)
        again = asyncio.run(dispatcher.call("chem_parse", {"molecules": [str(molecule)], "wait_s": 120}))
        assert again["items"][0]["formula"] == "H2O" and again["provenance"]["cache"] == "miss"
    finally:
        dispatcher.jobs.shutdown()
