"""``dock``: AutoDock Vina docking of small molecules into a protein, ligands prepared with Meeko."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from tools_server.molecules import MoleculeText
from tools_server.plugin import (
    Item,
    ResultModel,
    StructurePath,
    ToolContext,
    ToolError,
    ToolResult,
    file_key,
    file_reference,
    read_input,
    tool,
)

_LIGAND_DESC = (
    "SMILES (protonated as written: give the charge state you want, e.g. 'CC(=O)[O-]'), a molblock, or an "
    ".sdf/.mol path ('file.sdf#k' = record k)"
)

#: ``box_ligand``: a residue name, or a path to a molecule file of the reference ligand
ReferenceLigand = file_reference("molecule")


class Pose(ResultModel):
    rank: int
    vina_score_kcal_mol: float
    inter_kcal_mol: float
    intra_kcal_mol: float
    rmsd_to_reference_angstrom: float | None = None


class LigandItem(Item):
    """One ligand of ``dock``: its poses, best first, and their SDF."""

    ligand: str | None = None
    smiles: str | None = None
    formal_charge: int | None = None
    best_score_kcal_mol: float | None = None
    poses: list[Pose] | None = None
    poses_sdf: str | None = None


class DockResult(ToolResult):
    scoring_function: str
    seed: int
    exhaustiveness: int
    box: dict[str, Any]
    receptor: dict[str, Any]
    n_ligands: int
    n_ok: int
    ligands: list[LigandItem]


class DockInput(BaseModel):
    ligands: list[MoleculeText] = Field(..., min_length=1, max_length=50, description=_LIGAND_DESC)
    receptor_path: StructurePath | None = Field(
        None, max_length=4096, description="PDB or mmCIF file of the protein (e.g. a pdb_lookup artifact)"
    )
    receptor_text: str | None = Field(None, max_length=5_000_000, description="PDB text instead of a file")
    ph: float = Field(7.4, ge=0, le=14, description="pH for the receptor hydrogens (PDBFixer)")
    box_ligand: ReferenceLigand | None = Field(
        None,
        max_length=4096,
        description="box around a reference ligand: its residue name in the receptor file ('STI', 'STI:A', "
        "'STI:A:201') or a path to an SDF/MOL2/PDB file of it; poses get an RMSD to it when it is a file "
        "or a residue of the same molecule",
    )
    box_residues: list[str] | None = Field(
        None, max_length=100, description="box around these residues: 'A:99', '99' or 'LEU99'"
    )
    center: tuple[float, float, float] | None = Field(None, description="box centre (Å), with size")
    size: tuple[float, float, float] | None = Field(None, description="box edge lengths (Å), with center")
    padding: float = Field(
        5.0, ge=0, le=20, description="Å added on each side around box_ligand / box_residues atoms"
    )
    exhaustiveness: int = Field(8, ge=1, le=64, description="Vina search effort (8 is Vina's default)")
    n_poses: int = Field(5, ge=1, le=20)
    energy_range: float = Field(3.0, gt=0, le=10, description="kcal/mol above the best pose to keep")
    seed: int = Field(42, ge=1, le=2**31 - 1, description="Vina and conformer seed (recorded)")

    @model_validator(mode="after")
    def _check(self) -> DockInput:
        if (self.receptor_path is None) == (self.receptor_text is None):
            raise ValueError("give exactly one of receptor_path or receptor_text")
        ways = [self.box_ligand is not None, self.box_residues is not None, self.center is not None]
        if sum(ways) != 1:
            raise ValueError("give exactly one box: box_ligand, box_residues, or center with size")
        if (self.center is None) != (self.size is None):
            raise ValueError("center and size go together")
        if self.center is not None and not all(math.isfinite(v) and abs(v) <= 1e5 for v in self.center):
            raise ValueError("center must be finite coordinates in Å (|x| <= 1e5)")
        if self.size is not None and not all(math.isfinite(v) for v in self.size):
            raise ValueError("box edges must be finite numbers (Å)")
        if self.size is not None and (min(self.size) <= 0 or max(self.size) > 126):
            raise ValueError("box edges must lie in (0, 126] Å")
        return self


def _key(args: DockInput) -> dict[str, Any]:
    from tools_server.molecules import cache_key

    data = args.model_dump()
    data["ligands"] = [cache_key(text) for text in args.ligands]
    data["receptor_path"] = file_key(args.receptor_path, kind="structure")
    if args.box_ligand and Path(args.box_ligand).suffix:
        data["box_ligand"] = file_key(args.box_ligand, kind="molecule")
    return data


def _check_engines() -> None:
    import importlib.util

    missing = [m for m in ("vina", "meeko", "pdbfixer") if importlib.util.find_spec(m) is None]
    if missing:
        raise ToolError(
            "engine_unavailable",
            f"Not installed: {', '.join(missing)}.",
            hint="pip install 'spu-scaffold[dock]' (vina, meeko; pdbfixer comes with [md]).",
        )


@tool(
    name="dock",
    resource="cpu",
    items="ligands",
    read_only=True,
    idempotent=True,
    version="2",  # 2: added C-terminal oxygens placed as in a carboxylate (the prepared receptor changed)
    engines=("vina", "meeko", "pdbfixer"),
    time_limit_s=7200,
    canonicalize=_key,
    title="AutoDock Vina docking",
)
def dock(args: DockInput, ctx: ToolContext) -> DockResult:
    """Dock 1-50 small molecules into a protein with AutoDock Vina (Vina scoring function).

    Receptor: PDB/mmCIF file or text (a pdb_lookup artifact works), cleaned with PDBFixer (heterogens and
    water removed, missing heavy atoms built, hydrogens at `ph`), typed with Meeko. Ligands: protonated
    as the SMILES is written, one ETKDG conformer (seeded), Meeko PDBQT. Box: around a reference ligand
    (`box_ligand`: residue name in the receptor file or a file), around residues, or explicit centre and
    size. Returns per ligand: poses [{rank, vina_score_kcal_mol, inter, intra, rmsd_to_reference}] and an
    SDF artifact of the poses (score in each record), plus box, seed, exhaustiveness and receptor
    preparation facts. A Vina score is an empirical estimate tuned to binding affinities; it is not a
    binding free energy: use it to rank poses of one ligand and, roughly, similar ligands in one pocket.
    Errors: empty_box (no receptor atom in the box), no_protein, receptor_unpreparable (a residue Meeko
    cannot type, named in the message), invalid_smiles, invalid_input."""
    import numpy as np

    from tools_server.dock import engine
    from tools_server.plugin import map_items

    _check_engines()
    versions = engine.engine_versions()
    ctx.set_engine(
        "vina", versions["vina"], device="cpu", meeko=versions["meeko"], pdbfixer=versions["pdbfixer"]
    )
    work = ctx.artifact_dir

    if args.receptor_path is not None:  # read once, from the checked descriptor; prepared from that text
        raw_text = read_input(args.receptor_path, kind="structure").data.decode("utf-8", errors="replace")
    else:
        raw_text = args.receptor_text or ""
    records = engine.pdb_records(raw_text) if not raw_text.lstrip().startswith("data_") else []

    protein_xyz = np.asarray(
        [r["xyz"] for r in records if not r["hetatm"] and r["element"] != "H"], dtype=float
    )
    ref_mol = None
    ref_xyz = None
    if args.box_ligand is not None:
        ref_xyz, ref_mol = engine.reference_ligand_coords(args.box_ligand, records)
        box = engine.box_from_points(ref_xyz, args.padding, f"ligand {args.box_ligand}")
    elif args.box_residues is not None:
        box = None  # from the residues once the file is read (mmCIF input is read by PDBFixer only)
        if records:
            box = engine.box_from_points(
                engine.residue_coords(args.box_residues, records),
                args.padding,
                f"residues {', '.join(args.box_residues)}",
            )
    else:
        assert args.center is not None and args.size is not None
        box = engine.Box(tuple(args.center), tuple(args.size), "explicit")
    if box is not None and len(protein_xyz):  # fail fast, before the receptor is prepared
        engine.check_box(box, protein_xyz)

    ctx.progress(0.02, "preparing the receptor")
    cleaned, receptor_pdbqt, report = engine.prepare_receptor(None, raw_text, args.ph, work)
    clean_records = engine.pdb_records(cleaned.read_text())
    receptor_heavy = np.asarray([r["xyz"] for r in clean_records if r["element"] != "H"], dtype=float)
    if box is None:
        box = engine.box_from_points(
            engine.residue_coords(args.box_residues or [], clean_records),
            args.padding,
            f"residues {', '.join(args.box_residues or [])}",
        )
    n_in_box = engine.check_box(box, receptor_heavy)

    n = len(args.ligands)
    ctx.progress(0.1, f"docking {n} ligand(s)")
    # The ligands are the items: they share the receptor and the box, prepared once above, and nothing
    # couples their results. The receptor PDBQT and the RMSD reference travel as shared arguments (to each
    # Dask worker once on a cluster); the ligands run one after the other here, Vina using the job's cores.
    shared = (
        receptor_pdbqt.read_text(),
        box,
        _rmsd_reference(ref_mol, args.box_ligand, raw_text),
        {
            "exhaustiveness": args.exhaustiveness,
            "n_poses": args.n_poses,
            "seed": args.seed,
            "energy_range": args.energy_range,
            "cpus": max(1, ctx.threads),
        },
    )
    jobs = [(i, text, n, str(work)) for i, text in enumerate(args.ligands)]
    results = map_items(
        dock_ligand,
        jobs,
        1,
        lambda d, total: ctx.progress(0.1 + 0.85 * d / total, f"docked {d}/{total} ligands"),
        shared=shared,
    )
    return DockResult(
        scoring_function="vina",
        seed=args.seed,
        exhaustiveness=args.exhaustiveness,
        box={**box.as_dict(), "receptor_heavy_atoms_inside": n_in_box},
        receptor={**report, "cleaned_pdb": str(cleaned), "pdbqt": str(receptor_pdbqt)},
        n_ligands=n,
        n_ok=sum(1 for r in results if r.ok),
        ligands=results,
        note="Vina scores (kcal/mol) rank poses; they are not binding free energies and their error "
        "against measured affinities is typically 2-3 kcal/mol.",
    )


_RECEPTORS: dict[str, Path] = {}  # receptor PDBQT files this process wrote, by content hash
_RECEPTORS_LOCK = threading.Lock()  # a Dask worker runs several item tasks at once


def _receptor_file(pdbqt: str) -> Path:
    """The receptor PDBQT as a file (Vina reads a path), written once per process and receptor."""
    import atexit
    import hashlib
    import shutil
    import tempfile

    key = hashlib.sha256(pdbqt.encode()).hexdigest()
    with _RECEPTORS_LOCK:
        path = _RECEPTORS.get(key)
        if path is None or not path.is_file():
            folder = Path(tempfile.mkdtemp(prefix="spu-receptor-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "receptor.pdbqt"
            path.write_text(pdbqt)
            while len(_RECEPTORS) >= 8:  # a few receptors at a time
                shutil.rmtree(_RECEPTORS.pop(next(iter(_RECEPTORS))).parent, ignore_errors=True)
            _RECEPTORS[key] = path
    return path


def dock_ligand(
    receptor_pdbqt: str,
    box: Any,
    reference: tuple[str, Any] | None,
    opts: dict[str, Any],
    i: int,
    text: str,
    n: int,
    out_dir: str,
) -> LigandItem:
    """One ligand of ``dock``: its item (poses, SDF artifact in ``out_dir``) or, in a batch, its error
    item; the error of a lone ligand fails the call."""
    from rdkit import Chem

    from tools_server.dock import engine

    try:
        rdmol, lig_pdbqt = engine.prepare_ligand(text, opts["seed"])
        poses_pdbqt, energies = engine.dock(
            _receptor_file(receptor_pdbqt),
            lig_pdbqt,
            box,
            exhaustiveness=opts["exhaustiveness"],
            n_poses=opts["n_poses"],
            seed=opts["seed"],
            cpus=opts["cpus"],
            energy_range=opts["energy_range"],
        )
        mols = engine.poses_to_mols(poses_pdbqt)
    except ToolError as err:
        if n == 1:
            raise
        return LigandItem.failed(i, err, ligand=text)
    ref_for_rmsd = _reference_for_pose(reference, mols[0])
    poses = []
    sdf_path = Path(out_dir) / f"poses_{i}.sdf"
    writer = Chem.SDWriter(str(sdf_path))
    for rank, (mol, e) in enumerate(zip(mols, energies, strict=False), start=1):
        rmsd = engine.heavy_rmsd(mol, ref_for_rmsd) if ref_for_rmsd is not None else None
        pose = Pose(
            rank=rank,
            vina_score_kcal_mol=round(float(e[0]), 3),
            inter_kcal_mol=round(float(e[1]), 3),
            intra_kcal_mol=round(float(e[2]), 3),
            **({"rmsd_to_reference_angstrom": round(float(rmsd), 3)} if rmsd is not None else {}),
        )
        poses.append(pose)
        mol.SetProp("_Name", f"ligand {i} pose {rank}")
        mol.SetProp("vina_score_kcal_mol", f"{float(e[0]):.3f}")
        mol.SetProp("seed", str(opts["seed"]))
        mol.SetProp("exhaustiveness", str(opts["exhaustiveness"]))
        writer.write(mol)
    writer.close()
    return LigandItem(
        index=i,
        ligand=text,
        ok=True,
        smiles=Chem.MolToSmiles(Chem.RemoveHs(rdmol)),
        formal_charge=Chem.GetFormalCharge(rdmol),
        best_score_kcal_mol=poses[0].vina_score_kcal_mol if poses else None,
        poses=poses,
        poses_sdf=str(sdf_path),
    )


def _rmsd_reference(ref_mol: Any, spec: str | None, raw_text: str) -> tuple[str, Any] | None:
    """What each ligand's poses are compared with: ``("mol", reference)`` for a reference read from a file,
    ``("template", residue)`` for a residue of the receptor file (its bond orders are taken from each
    ligand's pose), or None."""
    from rdkit import Chem

    if spec is None:
        return None
    if ref_mol is not None:
        return ("mol", ref_mol)
    # A residue of the receptor file: rebuild it from its records; the bond orders come from the pose.
    parts = spec.split(":")
    lines = [
        ln
        for ln in raw_text.splitlines()
        if ln.startswith(("HETATM", "ATOM  "))
        and ln[17:20].strip() == parts[0].strip().upper()
        and (len(parts) < 2 or ln[21:22].strip() == parts[1].strip())
        and (len(parts) < 3 or ln[22:26].strip() == parts[2].strip())
    ]
    block = Chem.MolFromPDBBlock("\n".join(lines) + "\nEND\n", removeHs=True, proximityBonding=True)
    return None if block is None else ("template", block)


def _reference_for_pose(reference: tuple[str, Any] | None, probe: Any) -> Any:
    """The reference ligand as an RDKit Mol comparable with ``probe`` (same heavy-atom graph), or None."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    if reference is None:
        return None
    kind, mol = reference
    if kind == "mol":
        return mol
    try:
        return AllChem.AssignBondOrdersFromTemplate(Chem.RemoveHs(probe), mol)
    except (ValueError, RuntimeError):
        return None
