"""md_run on structures it cannot simulate answers with a code and a hint (issue 27 item 6): a PDB of only
HETATM waters or a ligand, NaN coordinates and unknown elements ended in internal_error."""

from __future__ import annotations

import pytest

pytest.importorskip("openmm")
pytest.importorskip("pdbfixer")

from tools_server.core.errors import ToolError
from tools_server.md.tools import MdRunInput, md_run

WATERS = "".join(
    f"HETATM{i:5d}  O   HOH A{i:4d}    {3.0 * i:8.3f}   0.000   0.000  1.00  0.00           O\n"
    for i in range(1, 4)
)
LIGAND = (
    "HETATM    1  C1  LIG A   1       0.000   0.000   0.000  1.00  0.00           C\n"
    "HETATM    2  O1  LIG A   1       1.400   0.000   0.000  1.00  0.00           O\n"
)
ALA = "ATOM      1  N   ALA A   1       0.000   0.000   0.000  1.00  0.00           N\n"


def _run(md_ctx, **kw):
    return md_run(MdRunInput(production_ps=1, **kw), md_ctx())


@pytest.mark.parametrize("pdb", [WATERS, LIGAND])
@pytest.mark.parametrize("solvent", ["explicit", "gbn2"])
def test_a_pdb_without_protein_is_no_protein_with_a_hint(md_ctx, pdb, solvent):
    with pytest.raises(ToolError) as err:
        _run(md_ctx, pdb_text=pdb + "END\n", solvent=solvent)
    assert err.value.code == "no_protein"
    assert "components" in err.value.hint  # the way to simulate a ligand or solvent alone


@pytest.mark.parametrize(
    ("pdb", "code"),
    [
        (ALA.replace("   0.000   0.000   0.000", "     nan   0.000   0.000"), "invalid_input"),
        (ALA.replace("   0.000   0.000   0.000", "     inf   0.000   0.000"), "invalid_input"),
        (ALA + ALA.replace("    1  N ", "    2  CA").replace(" N\n", " C\n"), "invalid_structure"),
    ],
)
def test_bad_protein_coordinates_are_refused_before_openmm(md_ctx, pdb, code):
    with pytest.raises(ToolError) as err:
        _run(md_ctx, pdb_text=pdb + "END\n")
    assert err.value.code == code


def test_an_element_openmm_does_not_know_is_unsupported_element(md_ctx):
    with pytest.raises(ToolError) as err:
        _run(md_ctx, components=[{"smiles": "[Og]", "count": 5}])
    assert err.value.code == "unsupported_element" and "Og" in err.value.message


def test_md_analyze_on_files_mdtraj_cannot_parse_is_invalid_input(spu_env, tmp_path):
    """A topology PDB with no atom made mdtraj raise IndexError, an internal_error before (found by the
    racing-links test, tests/core/test_input_races.py)."""
    from pathlib import Path

    from tools_server.core.context import ToolContext
    from tools_server.md.tools import MdAnalyzeInput, md_analyze

    work = Path(spu_env["SPU_WORKDIR"])
    (work / "traj.dcd").write_text("not a trajectory\n")
    (work / "top.pdb").write_text("not a structure\n")
    args = MdAnalyzeInput(trajectory_path=str(work / "traj.dcd"), topology_path=str(work / "top.pdb"))
    with pytest.raises(ToolError) as err:
        md_analyze(args, ToolContext("md_analyze", "t"))
    assert err.value.code == "invalid_input" and "Could not read the trajectory" in err.value.message
