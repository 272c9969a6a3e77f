"""Proteins from a PDB or mmCIF file: repaired with PDBFixer (:func:`load_fixer`, :func:`repair`), and
parameterised with Amber14 for OpenMM (:func:`build_protein`). ``md_run`` simulates them; ``dock`` prepares
its receptors with the same repair, so both live here, below the domains.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from tools_server.plugin import ToolError, read_input


@dataclass
class BuiltSystem:
    """What the simulation needs: OpenMM system, topology, positions (nm) and a description."""

    system: Any
    topology: Any
    positions_nm: Any
    periodic: bool
    description: dict[str, Any]


#: solvent name -> extra force-field file (None: vacuum).
IMPLICIT_MODELS = {"gbn2": "implicit/gbn2.xml", "obc2": "implicit/obc2.xml"}


def load_fixer(pdb_path: str | None, pdb_text: str | None) -> Any:
    from pdbfixer import PDBFixer

    try:
        if pdb_text is not None:
            is_cif = pdb_text.lstrip().startswith("data_")
            return (
                PDBFixer(pdbxfile=io.StringIO(pdb_text))
                if is_cif
                else PDBFixer(pdbfile=io.StringIO(pdb_text))
            )
        read = read_input(pdb_path or "", kind="structure")  # once, from the checked descriptor
        text = read.data.decode("utf-8", errors="replace")
        if read.path.suffix.lower() in (".cif", ".mmcif"):
            return PDBFixer(pdbxfile=io.StringIO(text))
        return PDBFixer(pdbfile=io.StringIO(text))
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError("invalid_input", f"Could not read the structure: {exc}") from exc


def check_input_structure(fixer: Any) -> None:
    """Before PDBFixer builds anything: finite coordinates, no atoms at one point, and a protein at all
    (a file of HETATM waters or a ligand alone would leave OpenMM a system with no particles)."""
    import numpy as np
    from openmm import unit

    from tools_server.molecules import check_coordinates, check_no_coincident_atoms

    xyz = np.asarray(
        [[v.x, v.y, v.z] for v in fixer.positions.value_in_unit(unit.angstrom)], dtype=float
    ).reshape(-1, 3)
    check_coordinates(xyz, "coordinates of the structure")
    check_no_coincident_atoms(xyz)
    residues = [r.name for r in fixer.topology.residues()]
    if not any(name in _STANDARD for name in residues):
        found = ", ".join(sorted(set(residues))[:5]) or "no residues"
        raise ToolError(
            "no_protein",
            f"The structure holds no amino-acid residue ({found}); md_run's protein path needs a protein.",
            hint="Give a PDB or mmCIF file with the protein's ATOM records (e.g. from pdb_lookup); to "
            "simulate a ligand or a solvent on its own, pass components=[{smiles, count}] instead.",
        )


def repair(fixer: Any, ph: float) -> dict[str, Any]:
    """Standard residues, no heterogens, missing heavy atoms and internal loops built, hydrogens at ``ph``.

    Missing residues at chain ends are not built (they would be floppy tails with no template).
    """
    fixer.findMissingResidues()
    chains = list(fixer.topology.chains())
    for key in list(fixer.missingResidues):
        chain_index, res_index = key
        if res_index == 0 or res_index == len(list(chains[chain_index].residues())):
            del fixer.missingResidues[key]
    internal_missing = sum(len(v) for v in fixer.missingResidues.values())
    fixer.findNonstandardResidues()
    replaced = [f"{r.name}{r.id}->{new}" for r, new in fixer.nonstandardResidues]
    fixer.replaceNonstandardResidues()
    heterogens = sorted(
        {r.name for r in fixer.topology.residues() if r.name not in _STANDARD and r.name != "HOH"}
    )
    fixer.removeHeterogens(keepWater=False)
    fixer.findMissingAtoms()
    missing_atoms = sum(len(v) for v in fixer.missingAtoms.values()) + sum(
        len(v) for v in fixer.missingTerminals.values()
    )
    added_oxt = {
        (res.chain.id, res.id, res.insertionCode)
        for res, names in fixer.missingTerminals.items()
        if "OXT" in names
    }
    fixer.addMissingAtoms()
    place_terminal_oxygens(fixer, added_oxt)
    fixer.addMissingHydrogens(ph)
    return {
        "built_missing_residues": internal_missing,
        "built_missing_heavy_atoms": missing_atoms,
        "replaced_nonstandard": replaced,
        "removed_heterogens": heterogens,
        "protonation_ph": ph,
    }


#: C-O bond length of a carboxylate, Å (Engh & Huber 1991).
CARBOXYLATE_CO_ANGSTROM = 1.25


def place_terminal_oxygens(fixer: Any, residues: set[tuple[str, str, str]]) -> None:
    """Put the OXT that PDBFixer added to each of ``residues`` (chain id, residue id, insertion code) where a
    carboxylate has it: in the plane of CA, C and O, 1.25 Å from C, trigonal (the unit vector opposite the
    sum of the unit vectors C->CA and C->O).

    PDBFixer places an added OXT by overlaying a template and minimising with its soft force field; on
    chains whose caps were stripped it comes out at a CA-C-OXT angle of 76-106 degrees, OXT 1.8-2.4 Å from
    CA, where a reader that bonds atoms by distance (Meeko's receptor templates) bonds it to CA too.
    """
    import numpy as np
    from openmm import Vec3, unit

    if not residues:
        return
    pos = np.asarray(fixer.positions.value_in_unit(unit.angstrom), dtype=float)
    for res in fixer.topology.residues():
        if (res.chain.id, res.id, res.insertionCode) not in residues:
            continue
        atoms = {atom.name: atom.index for atom in res.atoms()}
        if not {"CA", "C", "O", "OXT"} <= atoms.keys():
            continue
        c = pos[atoms["C"]]
        to_ca = pos[atoms["CA"]] - c
        to_o = pos[atoms["O"]] - c
        bisector = to_ca / np.linalg.norm(to_ca) + to_o / np.linalg.norm(to_o)
        norm = np.linalg.norm(bisector)
        if norm == 0.0:  # CA, C and O in a straight line: no plane to place OXT in; leave PDBFixer's
            continue
        pos[atoms["OXT"]] = c - CARBOXYLATE_CO_ANGSTROM * bisector / norm
    fixer.positions = unit.Quantity([Vec3(*row) for row in pos.tolist()], unit.angstrom)


_STANDARD = {
    "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS", "MET", "PHE",
    "PRO", "SER", "THR", "TRP", "TYR", "VAL", "ACE", "NME",
}  # fmt: skip


def build_protein(
    *,
    pdb_path: str | None,
    pdb_text: str | None,
    ph: float,
    solvent: str,
    padding_nm: float,
    ionic_strength_molar: float,
    cutoff_nm: float,
) -> BuiltSystem:
    from openmm import app, unit

    fixer = load_fixer(pdb_path, pdb_text)
    check_input_structure(fixer)
    report = repair(fixer, ph)
    if fixer.topology.getNumAtoms() == 0:
        raise ToolError("invalid_input", "The structure has no protein atoms after removing heterogens.")
    files = ["amber14-all.xml"]
    if solvent == "explicit":
        files.append("amber14/tip3p.xml")
    elif solvent in IMPLICIT_MODELS:
        files.append(IMPLICIT_MODELS[solvent])
    forcefield = app.ForceField(*files)
    modeller = app.Modeller(fixer.topology, fixer.positions)
    try:
        if solvent == "explicit":
            modeller.addSolvent(
                forcefield,
                model="tip3p",
                padding=padding_nm * unit.nanometer,
                ionicStrength=ionic_strength_molar * unit.molar,
                neutralize=True,
            )
            system = forcefield.createSystem(
                modeller.topology,
                nonbondedMethod=app.PME,
                nonbondedCutoff=cutoff_nm * unit.nanometer,
                constraints=app.HBonds,
            )
        else:
            system = forcefield.createSystem(
                modeller.topology, nonbondedMethod=app.NoCutoff, constraints=app.HBonds
            )
    except ValueError as exc:
        raise ToolError(
            "invalid_input",
            f"Amber14 could not parameterise the structure: {exc}",
            hint="Check for unusual residues or broken chains; nonstandard residues are replaced and "
            "ligands removed automatically.",
        ) from exc
    import numpy as np

    positions_nm = np.asarray(modeller.positions.value_in_unit(unit.nanometer))
    residues = list(modeller.topology.residues())
    n_water = sum(1 for r in residues if r.name == "HOH")
    n_ions = sum(1 for r in residues if r.name in ("NA", "CL"))
    ff_name = "amber14-all" + (
        " + TIP3P"
        if solvent == "explicit"
        else f" + {solvent.upper()} implicit"
        if solvent in IMPLICIT_MODELS
        else ""
    )
    net_charge = _net_charge(system)
    description = {
        "kind": "protein",
        "net_charge_e": net_charge,
        "force_field": ff_name,
        "solvent": solvent,
        "n_residues_protein": len(residues) - n_water - n_ions,
        "n_waters": n_water,
        "n_ions": n_ions,
        **report,
    }
    return BuiltSystem(system, modeller.topology, positions_nm, solvent == "explicit", description)


def _net_charge(system) -> float:
    """Total charge of the system in e (protein plus ions), from the nonbonded force."""
    import openmm

    for force in system.getForces():
        if isinstance(force, openmm.NonbondedForce):
            total = sum(force.getParticleParameters(i)[0]._value for i in range(force.getNumParticles()))
            return round(total, 3)
    return 0.0
