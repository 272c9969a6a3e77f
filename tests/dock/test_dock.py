"""dock: AutoDock Vina redocking of p-xylene into its own T4 lysozyme L99A complex (data/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vina")
pytest.importorskip("meeko")
pytest.importorskip("pdbfixer")

from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.dock.tools import DockInput, dock

DATA = Path(__file__).parent / "data"
COMPLEX = str(DATA / "t4l99a_pxylene.pdb")
CRYSTAL = str(DATA / "pxylene_crystal.sdf")


def _ctx() -> ToolContext:
    return ToolContext("dock", "t", threads=2)


def test_redocking_recovers_the_crystal_pose(spu_env):
    out = dock(
        DockInput(
            ligands=["Cc1ccc(C)cc1"], receptor_path=COMPLEX, box_ligand=CRYSTAL, exhaustiveness=4, seed=7
        ),
        _ctx(),
    )
    lig = out.ligands[0]
    assert lig.ok and out.seed == 7 and out.exhaustiveness == 4
    best = lig.poses[0]
    assert best.rmsd_to_reference_angstrom < 2.0
    assert best.vina_score_kcal_mol < -2.5  # a buried aromatic in a hydrophobic cavity scores favourably
    scores = [p.vina_score_kcal_mol for p in lig.poses]
    assert scores == sorted(scores)
    # The receptor was cleaned: the bound ligand removed, hydrogens added.
    assert "TMP" in out.receptor["removed_heterogens"]
    sdf = Path(lig.poses_sdf).read_text()
    assert sdf.count("$$$$") == len(lig.poses)
    assert f"{best.vina_score_kcal_mol:.3f}" in sdf and ">  <seed>" in sdf
    assert out.box["receptor_heavy_atoms_inside"] > 50


def test_box_from_residue_name_in_the_receptor_and_rmsd_against_it(spu_env):
    out = dock(
        DockInput(
            ligands=["Cc1ccc(C)cc1"], receptor_path=COMPLEX, box_ligand="TMP", exhaustiveness=2, n_poses=2
        ),
        _ctx(),
    )
    pose = out.ligands[0].poses[0]
    assert pose.rmsd_to_reference_angstrom is not None
    center = out.box["center_angstrom"]
    assert center == pytest.approx([42.32, 45.43, 18.17], abs=0.01)  # middle of the TMP atoms' extent


def test_box_with_no_atoms_is_empty_box(spu_env):
    with pytest.raises(ToolError) as err:
        dock(
            DockInput(
                ligands=["CCO"], receptor_path=COMPLEX, center=(200.0, 200.0, 200.0), size=(10, 10, 10)
            ),
            _ctx(),
        )
    assert err.value.code == "empty_box"


def test_pdb_without_protein_is_no_protein(spu_env):
    water = "HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\nEND\n"
    with pytest.raises(ToolError) as err:
        dock(DockInput(ligands=["CCO"], receptor_text=water, center=(0, 0, 0), size=(10, 10, 10)), _ctx())
    assert err.value.code == "no_protein"


def test_bad_smiles_among_several_is_a_per_item_error(spu_env):
    out = dock(
        DockInput(
            ligands=["Cc1ccc(C)cc1", "C1CC"], receptor_path=COMPLEX, box_residues=["A:99", "A:111"],
            exhaustiveness=1, n_poses=1,
        ),
        _ctx(),
    )  # fmt: skip
    assert out.ligands[0].ok and not out.ligands[1].ok
    assert out.ligands[1].error.code == "invalid_smiles"


def test_two_boxes_are_refused():
    with pytest.raises(ValueError):
        DockInput(ligands=["C"], receptor_path=COMPLEX, box_ligand="TMP", center=(0, 0, 0), size=(9, 9, 9))


def test_a_receptor_is_written_once_per_process_for_its_ligands():
    """dock_ligand gets the receptor PDBQT as text (it may run on another machine): one file per receptor."""
    from tools_server.dock.tools import _receptor_file

    first, again = _receptor_file("REMARK a\n"), _receptor_file("REMARK a\n")
    other = _receptor_file("REMARK b\n")
    assert first == again and first.read_text() == "REMARK a\n"
    assert other != first and other.read_text() == "REMARK b\n"
