"""Boxes of small molecules from SMILES: packing and force-field assignment.

Pure water uses TIP3P (amber14/tip3p.xml, rigid). Every other liquid or mixture uses MMFF94 through
:mod:`tools_server.md.mmff` (water inside a mixture is then MMFF94 water made rigid). See docs/md.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tools_server.engines.protein_system import BuiltSystem
from tools_server.plugin import ToolError

#: amu -> g, for densities.
AMU_G = 1.66053906660e-24
NM3_CM3 = 1e-21
#: Packing fraction of van der Waals volume in a molecular liquid, for the starting density guess.
LIQUID_PACKING_FRACTION = 0.5
MIN_CONTACT_A = 2.0


@dataclass
class Component:
    smiles: str
    count: int
    mol: Any  # RDKit Mol with explicit hydrogens and one conformer
    is_water: bool


def _openmm_knows(symbol: str) -> bool:
    from openmm.app.element import Element

    try:
        Element.getBySymbol(symbol)
    except KeyError:
        return False
    return True


def parse_components(specs: list[tuple[str, int]], seed: int) -> list[Component]:
    from rdkit import Chem
    from rdkit.Chem import AllChem

    out = []
    for index, (smiles, count) in enumerate(specs):
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            raise ToolError("invalid_smiles", f"Component {index} has an invalid SMILES: {smiles!r}.")
        if len(Chem.GetMolFrags(mol)) != 1:
            raise ToolError(
                "invalid_input",
                f"Component {index} ({smiles}) has several fragments; give each ion or molecule as its own "
                "component with its own count.",
            )
        unknown = sorted({a.GetSymbol() for a in mol.GetAtoms() if not _openmm_knows(a.GetSymbol())})
        if unknown:
            raise ToolError(
                "unsupported_element",
                f"Component {index} ({smiles}) holds {', '.join(unknown)}, which OpenMM has no element for.",
            )
        mol = Chem.AddHs(mol)
        if AllChem.EmbedMolecule(mol, randomSeed=seed) != 0:
            raise ToolError("invalid_smiles", f"Could not build 3D coordinates for {smiles!r}.")
        if AllChem.MMFFHasAllMoleculeParams(mol):
            AllChem.MMFFOptimizeMolecule(mol, maxIters=500)
        is_water = Chem.MolToSmiles(Chem.RemoveHs(mol)) == "O"
        out.append(Component(smiles=smiles, count=count, mol=mol, is_water=is_water))
    return out


def guess_density_g_cm3(components: list[Component]) -> float:
    """A starting density from van der Waals volumes at a typical liquid packing fraction."""
    from rdkit.Chem import AllChem, Descriptors

    mass = sum(c.count * Descriptors.MolWt(c.mol) for c in components)
    vdw_a3 = sum(c.count * AllChem.ComputeMolVolume(c.mol) for c in components)
    return mass * AMU_G / (vdw_a3 / LIQUID_PACKING_FRACTION * 1e-24)


def pack_box(components: list[Component], density_g_cm3: float, seed: int) -> tuple[list, float]:
    """Place every molecule at random position and orientation in a cubic box without close contacts.

    Returns (list of (component index, coordinates Å)), box edge Å). The box grows 5 % after a failed pass.
    """
    import numpy as np
    from rdkit.Chem import Descriptors
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(seed)
    mass_g = sum(c.count * Descriptors.MolWt(c.mol) for c in components) * AMU_G
    edge_a = (mass_g / density_g_cm3 * 1e24) ** (1 / 3)
    order = [i for i, c in enumerate(components) for _ in range(c.count)]
    templates = []
    for c in components:
        xyz = c.mol.GetConformer().GetPositions()
        templates.append(xyz - xyz.mean(axis=0))
    for _ in range(12):
        rng.shuffle(order)
        placed = _try_pack(order, templates, edge_a, rng, Rotation)
        if placed is not None:
            return placed, edge_a
        edge_a *= 1.05
    raise ToolError("invalid_input", "Could not pack the molecules into a box; lower the initial density.")


def _try_pack(order, templates, edge_a, rng, rotation_cls):
    import numpy as np

    coords = np.empty((0, 3))
    placed = []
    for comp in order:
        for _attempt in range(300):
            rot = rotation_cls.random(random_state=rng.integers(2**31)).as_matrix()
            xyz = templates[comp] @ rot.T + rng.uniform(0, edge_a, size=3)
            if len(coords):
                delta = xyz[:, None, :] - coords[None, :, :]
                delta -= edge_a * np.round(delta / edge_a)
                if (np.einsum("ijk,ijk->ij", delta, delta) < MIN_CONTACT_A**2).any():
                    continue
            coords = np.vstack([coords, xyz])
            placed.append((comp, xyz))
            break
        else:
            return None
    return placed


def build_liquid(
    specs: list[tuple[str, int]],
    *,
    seed: int,
    density_g_cm3: float | None,
    cutoff_nm: float,
) -> BuiltSystem:
    """Pack the box and assign TIP3P (pure water) or MMFF94 (anything else)."""
    import numpy as np
    import openmm
    from openmm import app, unit
    from rdkit import Chem

    components = parse_components(specs, seed)
    pure_water = all(c.is_water for c in components)
    if pure_water and density_g_cm3 is None:
        return build_water_box(sum(c.count for c in components), specs[0][0], cutoff_nm)
    if density_g_cm3 is None:
        density_g_cm3 = 0.9 if pure_water else 0.85 * guess_density_g_cm3(components)
    placed, edge_a = pack_box(components, density_g_cm3, seed)
    placed.sort(key=lambda item: item[0])
    box_nm = edge_a / 10.0

    topology = app.Topology()
    chain = topology.addChain()
    positions = []
    for comp_index, xyz in placed:
        comp = components[comp_index]
        resname = "HOH" if comp.is_water else f"L{comp_index:02d}"
        residue = topology.addResidue(resname, chain)
        atoms = []
        counts: dict[str, int] = {}
        for atom in comp.mol.GetAtoms():
            symbol = atom.GetSymbol()
            counts[symbol] = counts.get(symbol, 0) + 1
            name = symbol if comp.is_water and symbol == "O" else f"{symbol}{counts[symbol]}"
            atoms.append(topology.addAtom(name, app.Element.getBySymbol(symbol), residue))
        for bond in comp.mol.GetBonds():
            topology.addBond(atoms[bond.GetBeginAtomIdx()], atoms[bond.GetEndAtomIdx()])
        positions.extend((xyz / 10.0).tolist())
    topology.setPeriodicBoxVectors(
        (openmm.Vec3(box_nm, 0, 0), openmm.Vec3(0, box_nm, 0), openmm.Vec3(0, 0, box_nm)) * unit.nanometer
    )
    positions_nm = np.asarray(positions)

    if pure_water:
        forcefield = app.ForceField("amber14/tip3p.xml")
        system = forcefield.createSystem(
            topology,
            nonbondedMethod=app.PME,
            nonbondedCutoff=cutoff_nm * unit.nanometer,
            constraints=app.HBonds,
            rigidWater=True,
        )
        _tip3p_geometry(positions_nm, topology)
        force_field = "TIP3P (amber14/tip3p.xml, rigid, PME, long-range dispersion correction)"
    else:
        from tools_server.md.mmff import build_mmff_system, hbond_constraints, mmff_properties

        combined = Chem.Mol(components[placed[0][0]].mol)
        for comp_index, _ in placed[1:]:
            combined = Chem.CombineMols(combined, components[comp_index].mol)
        combined.RemoveAllConformers()
        conf = Chem.Conformer(combined.GetNumAtoms())
        for i, xyz in enumerate(positions_nm * 10.0):
            conf.SetAtomPosition(i, xyz.tolist())
        combined.AddConformer(conf, assignId=True)
        combined.UpdatePropertyCache(strict=False)
        Chem.GetSymmSSSR(combined)  # CombineMols leaves ring information uninitialised; MMFF typing needs it
        unsupported = [c.smiles for c in components if mmff_properties(c.mol) is None]
        if unsupported:
            raise ToolError(
                "unsupported_element",
                f"MMFF94 has no parameters for: {', '.join(unsupported)}.",
                hint="MMFF94 covers common organic molecules and simple ions (Li+, Na+, K+, Mg2+, Ca2+, Cl-, "
                "Br-); use a supported molecule or run xTB/DFT instead.",
            )
        props = mmff_properties(combined)
        system = build_mmff_system(
            combined, props, periodic=True, box_nm=(box_nm, box_nm, box_nm), cutoff_nm=cutoff_nm
        )
        hbond_constraints(system, combined, props)
        system.addForce(openmm.CMMotionRemover())
        force_field = "MMFF94 (RDKit parameters in OpenMM; PME electrostatics, switched 14-7 vdW with LRC)"
    # packed at 85 % of the expected density: under NPT the edge shrinks by about 0.85^(1/3)
    check_box_fits_cutoff(box_nm * 0.85 ** (1 / 3), cutoff_nm, sum(c.count for c in components))
    description = {
        "kind": "liquid",
        "force_field": force_field,
        "components": [{"smiles": c.smiles, "count": c.count} for c in components],
        "initial_box_nm": round(box_nm, 4),
        "initial_density_g_cm3": round(density_g_cm3, 4),
    }
    return BuiltSystem(system, topology, positions_nm, True, description)


#: the box edge must stay above 2 x cutoff (OpenMM refuses otherwise)
BOX_MARGIN = 1.0


def check_box_fits_cutoff(edge_nm: float, cutoff_nm: float, n_molecules: int) -> None:
    """``invalid_input`` (with the molecule count that would fit) when the periodic box is too small for the
    nonbonded cutoff, instead of OpenMM's exception in the middle of the run."""
    need_nm = 2 * cutoff_nm * BOX_MARGIN
    if edge_nm >= need_nm:
        return
    n_needed = math.ceil(n_molecules * (need_nm / edge_nm) ** 3)
    smallest_cutoff = 0.7
    raise ToolError(
        "invalid_input",
        f"{n_molecules} molecules make a box of about {edge_nm:.2f} nm at liquid density, smaller than twice "
        f"the nonbonded cutoff ({cutoff_nm:g} nm); OpenMM cannot simulate it.",
        hint=f"Use at least {n_needed} molecules for cutoff_nm={cutoff_nm:g}"
        + (
            f", or a smaller cutoff_nm (>= {smallest_cutoff}) with fewer"
            if cutoff_nm > smallest_cutoff
            else ""
        )
        + ".",
        box_edge_nm=round(edge_nm, 3),
        cutoff_nm=cutoff_nm,
        min_molecules=n_needed,
    )


def build_water_box(n_waters: int, smiles: str, cutoff_nm: float) -> BuiltSystem:
    """TIP3P water from OpenMM's pre-equilibrated box (Modeller.addSolvent), so NPT settles within ps."""
    import numpy as np
    from openmm import app, unit

    forcefield = app.ForceField("amber14/tip3p.xml")
    modeller = app.Modeller(app.Topology(), [])
    modeller.addSolvent(forcefield, model="tip3p", numAdded=n_waters, neutralize=False)
    system = forcefield.createSystem(
        modeller.topology,
        nonbondedMethod=app.PME,
        nonbondedCutoff=cutoff_nm * unit.nanometer,
        constraints=app.HBonds,
        rigidWater=True,
    )
    box_nm = modeller.topology.getPeriodicBoxVectors()[0][0].value_in_unit(unit.nanometer)
    n_added = modeller.topology.getNumResidues()
    check_box_fits_cutoff(box_nm, cutoff_nm, n_added)
    description = {
        "kind": "liquid",
        "force_field": "TIP3P (amber14/tip3p.xml, rigid, PME, long-range dispersion correction)",
        "components": [{"smiles": smiles, "count": n_added}],
        "initial_box_nm": round(box_nm, 4),
        "start": "OpenMM pre-equilibrated water box",
    }
    positions_nm = np.asarray(modeller.positions.value_in_unit(unit.nanometer))
    return BuiltSystem(system, modeller.topology, positions_nm, True, description)


def _tip3p_geometry(positions_nm, topology) -> None:
    """Put each water's hydrogens at TIP3P's rigid geometry (0.9572 Å, 104.52°) around its oxygen."""
    import numpy as np

    r_oh = 0.09572
    half = math.radians(104.52) / 2
    for residue in topology.residues():
        o, h1, h2 = (atom.index for atom in residue.atoms())
        bis = (positions_nm[h1] + positions_nm[h2]) / 2 - positions_nm[o]
        bis /= np.linalg.norm(bis)
        perp = positions_nm[h1] - positions_nm[h2]
        perp -= bis * perp.dot(bis)
        perp /= np.linalg.norm(perp)
        positions_nm[h1] = positions_nm[o] + r_oh * (math.cos(half) * bis + math.sin(half) * perp)
        positions_nm[h2] = positions_nm[o] + r_oh * (math.cos(half) * bis - math.sin(half) * perp)
