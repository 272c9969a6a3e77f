"""Receptor and ligand preparation (PDBFixer, Meeko) and AutoDock Vina docking; imported inside the tool."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools_server.plugin import ToolError

WATER = {"HOH", "WAT", "DOD", "H2O"}
#: Elements with an AutoDock Vina atom type (H C N O F P S Cl Br I, Si, B, Se and the metals Mg Ca Mn Fe Zn).
VINA_ELEMENTS = frozenset({1, 5, 6, 7, 8, 9, 12, 14, 15, 16, 17, 20, 25, 26, 30, 34, 35, 53})


@dataclass
class Box:
    center: tuple[float, float, float]
    size: tuple[float, float, float]
    source: str

    def contains(self, xyz: Any) -> Any:
        import numpy as np

        c = np.asarray(self.center)
        h = np.asarray(self.size) / 2.0
        return np.all(np.abs(np.asarray(xyz) - c) <= h, axis=1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "center_angstrom": [round(x, 3) for x in self.center],
            "size_angstrom": [round(x, 3) for x in self.size],
            "source": self.source,
        }


# --- reading PDB records ------------------------------------------------------------------------------


def pdb_records(text: str) -> list[dict[str, Any]]:
    """ATOM/HETATM records as dicts (name, resname, chain, resseq, icode, element, xyz, hetatm)."""
    import math

    from tools_server.molecules import MAX_COORDINATE_ANGSTROM

    out = []
    for line in text.splitlines():
        if not line.startswith(("ATOM  ", "HETATM")):
            continue
        try:
            xyz = (float(line[30:38]), float(line[38:46]), float(line[46:54]))
        except ValueError:
            continue
        if not all(math.isfinite(v) and abs(v) <= MAX_COORDINATE_ANGSTROM for v in xyz):
            raise ToolError(
                "invalid_input",
                f"Atom {line[6:11].strip()} ({line[12:16].strip()}) of the receptor has a non-finite or "
                "out-of-range coordinate",
                hint="Fix the receptor's coordinates (finite numbers in Å) or fetch the entry again.",
            )
        element = line[76:78].strip() or line[12:16].strip().lstrip("0123456789")[:1]
        out.append(
            {
                "name": line[12:16].strip(),
                "resname": line[17:20].strip(),
                "chain": line[21:22].strip(),
                "resseq": line[22:26].strip(),
                "icode": line[26:27].strip(),
                "element": element.upper(),
                "xyz": xyz,
                "hetatm": line.startswith("HETATM"),
            }
        )
    return out


def box_from_points(points: Any, padding: float, source: str, min_size: float = 10.0) -> Box:
    import numpy as np

    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    center = (lo + hi) / 2.0
    size = np.maximum(hi - lo + 2.0 * padding, min_size)
    return Box(tuple(float(x) for x in center), tuple(float(x) for x in size), source)


def reference_ligand_coords(spec: str, records: list[dict[str, Any]]) -> tuple[Any, Any]:
    """Heavy-atom coordinates of a reference ligand, and an RDKit Mol of it when read from a file.

    ``spec`` is a residue name in the receptor file (``TMP``, ``TMP:A`` or ``TMP:A:163``) or a path to an
    .sdf/.mol/.mol2/.pdb file.
    """
    import numpy as np

    if Path(spec).suffix.lower() in (".sdf", ".mol", ".mol2", ".pdb"):
        from rdkit import Chem

        from tools_server.plugin import read_input

        read = read_input(spec, kind="molecule")  # the one path rule: read once, from its checked descriptor
        text = read.data.decode("utf-8", errors="replace")
        suffix = read.path.suffix.lower()
        if suffix == ".mol2":
            mol = Chem.MolFromMol2Block(text, removeHs=False)
        elif suffix == ".pdb":
            mol = Chem.MolFromPDBBlock(text, removeHs=False)
        else:
            supplier = Chem.SDMolSupplier()
            supplier.SetData(text, removeHs=False)
            mol = next(iter(supplier), None)
        if mol is None or mol.GetNumConformers() == 0:
            raise ToolError("invalid_input", f"Could not read a 3D reference ligand from {spec!r}.")
        pos = mol.GetConformer().GetPositions()
        heavy = [a.GetIdx() for a in mol.GetAtoms() if a.GetAtomicNum() > 1]
        return np.asarray(pos)[heavy], mol
    parts = spec.split(":")
    resname = parts[0].strip().upper()
    chain = parts[1].strip() if len(parts) > 1 else None
    resseq = parts[2].strip() if len(parts) > 2 else None
    sel = [
        r["xyz"]
        for r in records
        if r["resname"] == resname
        and r["element"] != "H"
        and (chain is None or r["chain"] == chain)
        and (resseq is None or r["resseq"] == resseq)
    ]
    if not sel:
        raise ToolError(
            "invalid_input",
            f"No residue {spec!r} in the receptor file and no such ligand file.",
            hint="Give the ligand's residue name as in the HETATM records (e.g. 'STI' or 'STI:A'), or a path "
            "to an SDF/MOL2/PDB file of the reference ligand.",
        )
    return np.asarray(sel, dtype=float), None


def residue_coords(residues: list[str], records: list[dict[str, Any]]) -> Any:
    """Atoms of residues given as 'A:99', '99' or 'LEU99' / 'A:LEU99'."""
    import re

    import numpy as np

    pts = []
    for spec in residues:
        chain = None
        body = spec.strip()
        if ":" in body:
            chain, body = body.split(":", 1)
        m = re.fullmatch(r"([A-Za-z]{3})?(-?\d+)([A-Za-z]?)", body.strip())
        if not m:
            raise ToolError("invalid_input", f"Residue {spec!r} is not like 'A:99', '99' or 'LEU99'.")
        name, num, icode = m.group(1), m.group(2), m.group(3)
        found = [
            r["xyz"]
            for r in records
            if r["resseq"] == num
            and (chain is None or r["chain"] == chain)
            and (name is None or r["resname"] == name.upper())
            and (not icode or r["icode"] == icode)
            and r["element"] != "H"
        ]
        if not found:
            raise ToolError("invalid_input", f"Residue {spec!r} is not in the receptor.")
        pts.extend(found)
    return np.asarray(pts, dtype=float)


def check_box(box: Box, receptor_xyz: Any) -> int:
    """Receptor heavy atoms inside the box; an empty box is an error (the ligand would dock in vacuum)."""
    n = int(box.contains(receptor_xyz).sum()) if len(receptor_xyz) else 0
    if n == 0:
        raise ToolError(
            "empty_box",
            f"The docking box (centre {box.as_dict()['center_angstrom']}, size "
            f"{box.as_dict()['size_angstrom']} Å) holds no receptor atom.",
        )
    return n


# --- receptor -----------------------------------------------------------------------------------------


def prepare_receptor(
    pdb_path: str | None, pdb_text: str | None, ph: float, work: Path
) -> tuple[Path, Path, dict[str, Any]]:
    """PDBFixer (no heterogens or water, missing atoms, H at ``ph``), then Meeko's receptor PDBQT."""
    from openmm.app import PDBFile

    from tools_server.engines.protein_system import load_fixer, repair

    fixer = load_fixer(pdb_path, pdb_text)
    protein = [r for r in fixer.topology.residues() if r.name not in WATER]
    if not any(res.name in _AMINO for res in protein):
        raise ToolError("no_protein", "The receptor file holds no amino-acid residues.")
    with contextlib.redirect_stdout(io.StringIO()):
        report = repair(fixer, ph)
    cleaned = work / "receptor_clean.pdb"
    with open(cleaned, "w") as fh:
        PDBFile.writeFile(fixer.topology, fixer.positions, fh, keepIds=True)
    pdbqt = work / "receptor.pdbqt"
    deleted = _receptor_pdbqt(cleaned.read_text(), pdbqt)
    report["residues_left_out_of_pdbqt"] = deleted
    return cleaned, pdbqt, report


def _receptor_pdbqt(pdb_string: str, out: Path) -> list[str]:
    from meeko import MoleculePreparation, PDBQTWriterLegacy, Polymer, ResidueChemTemplates

    templates = ResidueChemTemplates.create_from_defaults()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            polymer = Polymer.from_pdb_string(
                pdb_string, templates, MoleculePreparation(), allow_bad_res=True
            )
            rigid, _flex = PDBQTWriterLegacy.write_from_polymer(polymer)
    except (RuntimeError, ValueError, KeyError) as exc:  # Meeko's ways of refusing a residue it cannot type
        raise ToolError(
            "receptor_unpreparable",
            f"Meeko could not type the repaired receptor for Vina: {exc}",
            hint="Look at the residue it names in the receptor_clean.pdb PDBFixer wrote: atoms closer than "
            "a bond would be, a residue that is not an amino acid, or a chain break inside a residue; fix or "
            "remove that residue in the receptor file and dock again.",
        ) from exc
    out.write_text(rigid)
    deleted = []
    for res_id, monomer in getattr(polymer, "monomers", {}).items():
        if getattr(monomer, "rdkit_mol", None) is None:
            deleted.append(str(res_id))
    return deleted


_AMINO = {
    "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS", "MET", "PHE",
    "PRO", "SER", "THR", "TRP", "TYR", "VAL", "HID", "HIE", "HIP", "CYX", "ASH", "GLH", "LYN", "MSE",
}  # fmt: skip


# --- ligand -------------------------------------------------------------------------------------------


def prepare_ligand(text: str, seed: int) -> tuple[Any, str]:
    """RDKit Mol (explicit H as the SMILES gives them, one ETKDG conformer) and Meeko's PDBQT string."""
    from meeko import MoleculePreparation, PDBQTWriterLegacy
    from rdkit import Chem

    from tools_server.molecules import (
        check_geometry,
        embed_3d,
        load_molecule,
        relax_force_field,
    )

    mol = load_molecule(text)
    if mol.rdmol is None:
        raise ToolError("invalid_input", "The ligand needs bonds: give a SMILES, molblock or SDF, not XYZ.")
    untyped = sorted({z for z in mol.numbers if z not in VINA_ELEMENTS})
    if untyped:
        names = ", ".join(Chem.GetPeriodicTable().GetElementSymbol(z) for z in untyped)
        raise ToolError("unsupported_element", f"Vina has no atom type for {names} in the ligand.")
    check_geometry(mol)
    rdmol = Chem.Mol(mol.rdmol)
    if mol.source == "smiles" and seed != 0:
        embed_3d(rdmol, seed=seed)
        relax_force_field(rdmol)
    if rdmol.GetNumHeavyAtoms() > 150:
        raise ToolError("too_large", "Ligands above 150 heavy atoms are not docked here.")
    prep = MoleculePreparation()
    with contextlib.redirect_stdout(io.StringIO()):
        setups = prep.prepare(rdmol)
    if not setups:
        raise ToolError("invalid_input", "Meeko could not prepare the ligand.")
    pdbqt, ok, err = PDBQTWriterLegacy.write_string(setups[0])
    if not ok:
        raise ToolError("invalid_input", f"Meeko could not write the ligand PDBQT: {err}")
    return rdmol, pdbqt


# --- docking ------------------------------------------------------------------------------------------


def dock(
    receptor_pdbqt: Path,
    ligand_pdbqt: str,
    box: Box,
    *,
    exhaustiveness: int,
    n_poses: int,
    seed: int,
    cpus: int,
    energy_range: float,
) -> tuple[str, Any]:
    from vina import Vina

    v = Vina(sf_name="vina", cpu=cpus, seed=seed, verbosity=0)
    v.set_receptor(str(receptor_pdbqt))
    v.set_ligand_from_string(ligand_pdbqt)
    v.compute_vina_maps(center=list(box.center), box_size=list(box.size))
    v.dock(exhaustiveness=exhaustiveness, n_poses=n_poses, min_rmsd=1.0, max_evals=0)
    poses = v.poses(n_poses=n_poses, energy_range=energy_range)
    energies = v.energies(n_poses=n_poses, energy_range=energy_range)
    return poses, energies


def poses_to_mols(poses_pdbqt: str) -> list[Any]:
    """One RDKit Mol (with H) per docked pose, through Meeko's PDBQT reader."""
    from meeko import PDBQTMolecule, RDKitMolCreate
    from rdkit import Chem

    pmol = PDBQTMolecule(poses_pdbqt, skip_typing=True)
    mols = RDKitMolCreate.from_pdbqt_mol(pmol)
    if not mols or mols[0] is None:
        raise ToolError("engine_crashed", "Meeko could not rebuild the docked poses as molecules.")
    mol = mols[0]
    out = []
    for conf in mol.GetConformers():
        one = Chem.Mol(mol)
        one.RemoveAllConformers()
        one.AddConformer(Chem.Conformer(conf), assignId=True)
        out.append(one)
    return out


def heavy_rmsd(probe: Any, ref: Any) -> float | None:
    """Symmetry-aware heavy-atom RMSD without superposition (None when the molecules differ)."""
    from rdkit import Chem
    from rdkit.Chem import rdMolAlign

    a, b = Chem.RemoveHs(probe), Chem.RemoveHs(ref)
    if a.GetNumAtoms() != b.GetNumAtoms():
        return None
    try:
        return float(rdMolAlign.CalcRMS(a, b))
    except RuntimeError:
        return None


def engine_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("vina", "meeko", "pdbfixer"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out
