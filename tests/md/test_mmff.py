"""The OpenMM system built from RDKit's MMFF94 parameters reproduces RDKit's own MMFF94 energies and
forces."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openmm")

from rdkit import Chem
from rdkit.Chem import AllChem

from tools_server.md.mmff import build_mmff_system, mmff_properties

# Molecules chosen to touch every MMFF term: linear centre (nitrile), aromatic out-of-plane, amide,
# sulfoxide, ring torsions, ester with CF3, a salt (inter-fragment vdW and charges).
MOLECULES = [
    "CC#N",
    "c1ccccc1O",
    "CC(=O)N(C)C",
    "CS(=O)C",
    "OC1CCOC1",
    "FC(F)(F)C(=O)OCC",
    "C1CC1C(=O)[O-].[Na+]",
]


def _openmm_energy_forces(system, xyz_angstrom):
    import openmm
    from openmm import unit

    ctx = openmm.Context(
        system, openmm.VerletIntegrator(1e-3), openmm.Platform.getPlatformByName("Reference")
    )
    ctx.setPositions(xyz_angstrom / 10.0)
    state = ctx.getState(getEnergy=True, getForces=True)
    energy = state.getPotentialEnergy().value_in_unit(unit.kilocalorie_per_mole)
    forces = state.getForces(asNumpy=True).value_in_unit(unit.kilocalorie_per_mole / unit.angstrom)
    return energy, forces


@pytest.mark.parametrize("smiles", MOLECULES)
def test_mmff_system_matches_rdkit_energy_and_forces(smiles):
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    assert AllChem.EmbedMolecule(mol, randomSeed=11) == 0
    props = mmff_properties(mol)
    ff = AllChem.MMFFGetMoleculeForceField(mol, props, ignoreInterfragInteractions=False)
    ff.Minimize(maxIts=20)  # a strained, non-stationary geometry: every term contributes
    xyz = np.array(ff.Positions()).reshape(-1, 3)
    e_rdkit = ff.CalcEnergy()
    grad_rdkit = np.array(ff.CalcGrad()).reshape(-1, 3)

    e_openmm, f_openmm = _openmm_energy_forces(build_mmff_system(mol, props, rigid_water=False), xyz)

    # Same functional forms and parameters: equal to float rounding (kcal/mol).
    assert e_openmm == pytest.approx(e_rdkit, abs=1e-4, rel=1e-6)
    # Forces agree to 1e-3 kcal/mol/Å (a linear angle's gradient is ill-conditioned at exactly 180°).
    assert np.abs(f_openmm + grad_rdkit).max() < 1e-3


def test_molecule_without_mmff_parameters_is_detected():
    mol = Chem.AddHs(Chem.MolFromSmiles("F[P-](F)(F)(F)(F)F"))
    AllChem.EmbedMolecule(mol, randomSeed=1)
    assert mmff_properties(mol) is None
