"""Bad coordinates, unknown elements and non-finite model output (issue 27 item 6): ANI-2x gave ok:true
energies for NaN coordinates and SevenNet NaN energies for atoms at one point."""

from __future__ import annotations

import pytest

from tools_server.core.errors import ToolError
from tools_server.mlip.tools import MlipConformersInput, MlipInput, mlip_conformers, mlip_run

WATER = "3\n\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n"


@pytest.mark.parametrize(
    ("xyz", "code"),
    [
        (WATER.replace("0.1173", "nan"), "invalid_input"),
        (WATER.replace("0.1173", "-inf"), "invalid_input"),
        (WATER.replace("0.1173", "1e300"), "invalid_input"),
        ("3\n\nO 0 0 0\nH 0 0 0\nH 0 0 0\n", "invalid_structure"),
    ],
)
def test_ani2x_refuses_bad_coordinates(tiny_ani2x, ctx, xyz, code):
    with pytest.raises(ToolError) as err:
        mlip_run(MlipInput(molecules=[xyz], engine="ani2x"), ctx)
    assert err.value.code == code


def test_ani2x_batch_item_with_nan_is_an_item_error(tiny_ani2x, ctx):
    out = mlip_run(MlipInput(molecules=[WATER, WATER.replace("0.1173", "nan")], engine="ani2x"), ctx)
    assert [it.ok for it in out.items] == [True, False]
    assert out.items[1].error.code == "invalid_input"


def test_sevennet_refuses_an_element_outside_its_type_map(spu_env, ctx):
    pytest.importorskip("sevenn")
    with pytest.raises(ToolError) as err:
        mlip_run(MlipInput(molecules=["2\n\nOg 0 0 0\nOg 0 0 3.0\n"], engine="sevennet"), ctx)
    assert err.value.code == "unsupported_element" and "Og" in err.value.message


def test_conformers_from_an_sdf_with_atoms_at_one_point_are_refused(tiny_mace, ctx, spu_env):
    from pathlib import Path

    from rdkit import Chem
    from rdkit.Chem import AllChem
    from rdkit.Geometry import Point3D

    mol = Chem.AddHs(Chem.MolFromSmiles("CO"))
    AllChem.EmbedMolecule(mol, randomSeed=1)
    for k in (0, 1, 2):  # RDKit itself refuses NaN in a molfile; coincident atoms it reads
        mol.GetConformer().SetAtomPosition(k, Point3D(1.0, 2.0, 3.0))
    path = Path(spu_env["SPU_WORKDIR"]) / "bad.sdf"  # a file tools may read: under the work directory
    with Chem.SDWriter(str(path)) as writer:
        writer.write(mol)
    with pytest.raises(ToolError) as err:
        mlip_conformers(MlipConformersInput(molecule=str(path), engine="mace_off", model=tiny_mace), ctx)
    assert err.value.code == "invalid_structure"


def test_a_non_finite_energy_from_a_real_ase_calculator_is_an_engine_error():
    """ASE's own Lennard-Jones calculator at zero separation (a model of no physical use here) returns
    infinity/NaN, as SevenNet did for coincident atoms: the single point refuses to report it."""
    from ase.calculators.lj import LennardJones

    from tools_server.engines.calculator import AseCalculator, CalculatorError

    with pytest.raises(CalculatorError) as err:
        AseCalculator(LennardJones(), [18, 18]).single_point([[0, 0, 0], [0, 0, 0]])
    assert err.value.code == "engine_error"
