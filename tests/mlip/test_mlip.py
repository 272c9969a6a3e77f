"""mlip_run and mlip_conformers with ANI-2x, AIMNet2 and MACE models of random weights loaded through each
package's real loader, and SevenNet-0 (weights shipped in its wheel) as the physical reference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.mlip.tools import MlipConformersInput, MlipInput, mlip_conformers, mlip_run

EV_PER_HARTREE = 27.211386245988


def _run(ctx, **kw):
    return mlip_run(MlipInput(**kw), ctx)


# --- ANI-2x (TorchANI) -------------------------------------------------------------------------------


def test_ani2x_energy_matches_torchani_with_the_same_weights(tiny_ani2x, ctx):
    torch = pytest.importorskip("torch")
    from tools_server.mlip.models import random_ani2x

    out = _run(ctx, molecules=["C"], engine="ani2x")
    item = out.items[0]
    assert item.ok and out.model == "ani2x" and out.reference_method == "wB97X/6-31G(d)"
    # The same state dict evaluated directly by TorchANI (Hartree) at the tool's own geometry.
    model = random_ani2x()
    model.load_state_dict(torch.load(tiny_ani2x, weights_only=True))
    model = model.double()
    from tools_server.molecules import load_molecule

    mol = load_molecule("C")
    species = torch.tensor([mol.numbers])
    coords = torch.tensor([mol.coords_angstrom.tolist()], dtype=torch.float64)
    e_ref = float(model((species, coords)).energies[0])
    assert item.energy_hartree == pytest.approx(e_ref, abs=1e-6)
    assert item.energy_ev == pytest.approx(e_ref * EV_PER_HARTREE, abs=1e-4)
    assert len(item.forces_ev_a) == 5


def test_ani2x_refuses_bromine_and_ions_before_loading_any_weights(weights_dir, ctx):
    pytest.importorskip("torchani")
    # No weights are present: the element and charge checks must answer first.
    with pytest.raises(ToolError) as err:
        _run(ctx, molecules=["CBr"], engine="ani2x")
    assert err.value.code == "unsupported_element" and "Br" in err.value.message
    with pytest.raises(ToolError) as err:
        _run(ctx, molecules=["C[NH3+]"], engine="ani2x")
    assert err.value.code == "unsupported_charge"
    with pytest.raises(ToolError) as err:
        _run(ctx, molecules=["C"], engine="ani2x")
    assert err.value.code == "weights_missing"
    assert err.value.details["expected_path"].endswith("torchani/StateDicts/ani2x_state_dict.pt")


def test_batch_keeps_going_past_a_bad_molecule(tiny_ani2x, ctx):
    out = _run(ctx, molecules=["O", "[Na+].[Cl-]", "N"], engine="ani2x")
    assert [it.ok for it in out.items] == [True, False, True]
    assert out.items[1].error.code == "unsupported_element"


# --- AIMNet2 -----------------------------------------------------------------------------------------


def test_aimnet2_tiny_model_energy_charge_and_its_own_element_list(tiny_aimnet2, aimnet2_file, ctx):
    from aimnet.calculators import AIMNet2ASE, AIMNet2Calculator
    from ase import Atoms

    from tools_server.molecules import load_molecule

    out = _run(ctx, molecules=["C"], engine="aimnet2", model=tiny_aimnet2)
    item = out.items[0]
    mol = load_molecule("C")
    direct = Atoms(numbers=mol.numbers, positions=mol.coords_angstrom)
    direct.calc = AIMNet2ASE(AIMNet2Calculator(model=str(aimnet2_file), device="cpu"), charge=0)
    assert item.energy_ev == pytest.approx(float(direct.get_potential_energy()), abs=1e-4)
    # AIMNet2 takes charged molecules.
    ion = _run(ctx, molecules=["C[NH3+]"], engine="aimnet2", model=tiny_aimnet2).items[0]
    assert ion.ok
    # Bromine is in the AIMNet2 family but not in this model's file: the model's own list decides.
    with pytest.raises(ToolError) as err:
        _run(ctx, molecules=["CBr"], engine="aimnet2", model=tiny_aimnet2)
    assert err.value.code == "unsupported_element" and "covers H C N O" in err.value.message


# --- MACE-OFF ----------------------------------------------------------------------------------------


def test_mace_tiny_model_energy_and_force_balance(tiny_mace, ctx):
    out = _run(ctx, molecules=["CO"], engine="mace_off", model=tiny_mace)
    item = out.items[0]
    assert item.ok and out.engine == "mace_off"
    # Atomic reference energies dominate a random model: 4 H + C + O = -3125.4 eV, plus a small remainder.
    assert item.energy_ev == pytest.approx(4 * -13.6 - 1029.0 - 2042.0, abs=20.0)
    import numpy as np

    forces = np.asarray(item.forces_ev_a)
    assert np.abs(forces.sum(axis=0)).max() < 1e-5  # any translation-invariant potential (6 decimals)
    with pytest.raises(ToolError) as err:
        _run(ctx, molecules=["C[O-]"], engine="mace_off", model=tiny_mace)
    assert err.value.code == "unsupported_charge"


# --- SevenNet-0 (shipped weights): physical reference ------------------------------------------------


@pytest.fixture
def sevennet_ready(spu_env):
    pytest.importorskip("sevenn")


def test_sevennet_optimises_water_to_the_experimental_geometry(sevennet_ready, ctx):
    """Gas-phase water: r(OH) 0.9578 Å, angle 104.48° (NIST CCCBDB experimental). SevenNet-0 was trained on
    PBE crystals, where PBE itself gives 0.970 Å and 104.2°; 0.03 Å and 3° cover both."""
    from ase.io import read

    out = _run(ctx, molecules=["O"], engine="sevennet", task="optimize", fmax_ev_a=0.01)
    item = out.items[0]
    assert item.optimization.converged
    atoms = read(item.geometry_xyz)
    o = next(i for i, z in enumerate(atoms.numbers) if z == 8)
    h = [i for i, z in enumerate(atoms.numbers) if z == 1]
    assert atoms.get_distance(o, h[0]) == pytest.approx(0.9578, abs=0.03)
    assert atoms.get_angle(h[0], o, h[1]) == pytest.approx(104.48, abs=3.0)
    assert Path(item.geometry_sdf).read_text().count("$$$$") == 1


def test_langevin_md_writes_frames(tiny_mace, ctx):
    out = _run(
        ctx, molecules=["O"], engine="mace_off", model=tiny_mace, task="md", md_steps=20, report_every=5,
        temperature_k=300, timestep_fs=0.25, seed=3,
    )  # fmt: skip
    item = out.items[0]
    md = item.md
    assert md.n_frames == 5 and md.temperature_target_k == 300
    assert [s.step for s in md.series] == [0, 5, 10, 15, 20]
    frames = Path(item.trajectory_xyz).read_text().count("step=")
    assert frames == 5
    assert all(s.temperature_k > 0 for s in md.series)


def test_conformers_from_an_sdf_are_optimised_and_ranked(tiny_mace):
    """Ranking plumbing on a multi-record SDF like xtb_conformers' artifact (the model is random, so only the
    bookkeeping is checked: order, relative energies, Boltzmann weights, the SDF in ranked order)."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles("CCCO"))
    ids = AllChem.EmbedMultipleConfs(mol, numConfs=3, randomSeed=5)
    src = Path(os.environ["SPU_WORKDIR"]) / "confs.sdf"  # a file tools may read
    writer = Chem.SDWriter(str(src))
    for cid in ids:
        writer.write(mol, confId=cid)
    writer.close()
    out = mlip_conformers(
        MlipConformersInput(
            molecule=str(src), engine="mace_off", model=tiny_mace, fmax_ev_a=0.05, max_steps=4
        ),
        ToolContext("mlip_conformers", "c", threads=2),
    )
    confs = out.conformers
    assert out.n_conformers == len(ids) and "3 records of confs.sdf" in out.source
    rel = [c.relative_energy_kcal_mol for c in confs]
    assert rel[0] == 0.0 and rel == sorted(rel)
    assert out.n_unique + out.n_duplicates + out.n_outside_window == len(ids)
    assert len({c.input_index for c in confs}) == len(confs) <= len(ids)
    assert abs(sum(c.boltzmann_weight for c in confs) - 1.0) < 1e-3
    assert [c.rank for c in confs] == list(range(len(confs)))  # from 0: rank k is record k of the SDF
    records = list(Chem.SDMolSupplier(out.sdf, removeHs=False))
    assert [float(r.GetProp("relative_energy_kcal_mol")) for r in records] == pytest.approx(rel, abs=1e-3)


def test_conformers_of_other_molecules_are_refused(tiny_mace):
    from rdkit import Chem
    from rdkit.Chem import AllChem

    src = Path(os.environ["SPU_WORKDIR"]) / "mixed.sdf"  # a file tools may read
    writer = Chem.SDWriter(str(src))
    for smi in ("CCO", "CCN"):
        m = Chem.AddHs(Chem.MolFromSmiles(smi))
        AllChem.EmbedMolecule(m, randomSeed=1)
        writer.write(m)
    writer.close()
    with pytest.raises(ToolError) as err:
        mlip_conformers(
            MlipConformersInput(molecule=str(src), engine="mace_off", model=tiny_mace), ToolContext("c", "c")
        )
    assert err.value.code == "invalid_input" and "not conformers of one molecule" in err.value.message
