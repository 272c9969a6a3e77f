"""One conformer search for every engine: a conformer set (ETKDG from a molecule, or the records of a
multi-record SDF), each conformer optimised by :func:`~tools_server.engines.task.run_task` with the
engine's calculator (a process pool, or cluster tasks), duplicates removed (energy within
``energy_threshold_kcal_mol`` and heavy-atom RMSD below ``rmsd_threshold_angstrom``), those above
``energy_window_kcal_mol`` dropped, the rest ranked with Boltzmann weights into one SDF.

Ranks count from 0: rank k is record k of the SDF (``sdf#k`` names it for the next tool). Energies in
Hartree, relative energies in kcal/mol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tools_server.engines.calculator import CalculatorError
from tools_server.engines.task import TaskOptions, error_item, run_task
from tools_server.engines.units import kcal_mol_per_hartree
from tools_server.plugin import ResultModel, ToolResult

#: Conformers listed inline; all are in the SDF.
INLINE_CONFORMERS = 50


@dataclass(frozen=True)
class SearchOptions:
    energy_window_kcal_mol: float = 6.0
    rmsd_threshold_angstrom: float = 0.125
    energy_threshold_kcal_mol: float = 0.1
    temperature_k: float = 298.15

    @classmethod
    def of(cls, args: Any) -> SearchOptions:
        """The options of a conformer tool's input (a :class:`SearchInput` with ``temperature_k``)."""
        return cls(
            args.energy_window_kcal_mol,
            args.rmsd_threshold_angstrom,
            args.energy_threshold_kcal_mol,
            args.temperature_k,
        )


class SearchInput(BaseModel):
    """The input fields every conformer tool shares: the window and the duplicate criteria."""

    energy_window_kcal_mol: float = Field(
        6.0, gt=0, le=100, description="Keep conformers within this window."
    )
    rmsd_threshold_angstrom: float = Field(
        0.125,
        ge=0,
        le=3,
        description="Heavy-atom RMSD under which two conformers of near-equal energy are duplicates (Å).",
    )
    energy_threshold_kcal_mol: float = Field(
        0.1,
        ge=0,
        le=5,
        description="Energy difference under which two conformers may be duplicates (kcal/mol).",
    )


class ConformerRow(ResultModel):
    """One kept conformer; an engine's row type (a subclass) adds properties of its single point
    (``gap_ev`` ...), copied from the optimised conformer's result."""

    rank: int
    input_index: int
    energy_hartree: float
    relative_energy_kcal_mol: float
    boltzmann_weight: float
    converged: bool
    n_steps: int


class ConformerSearchResult(ToolResult):
    smiles: str | None = None
    formula: str
    charge: int
    multiplicity: int
    source: str
    n_conformers: int
    n_optimised: int
    n_failed: int
    n_duplicates: int
    n_outside_window: int
    n_unique: int
    temperature_k: float
    energy_window_kcal_mol: float
    lowest_energy_hartree: float
    boltzmann_average_energy_hartree: float
    conformers: list[ConformerRow]
    sdf: str


# --------------------------------------------------------------------------------------------------
# The conformer set
# --------------------------------------------------------------------------------------------------


def etkdg(rdmol_h: Any, n: int, seed: int, prune_rms: float, threads: int = 1) -> list[int]:
    """ETKDGv3 conformer ids on a hydrogen-complete Mol (in place), fragments side by side; random starting
    coordinates when the default embedding finds none."""
    from rdkit.Chem import AllChem

    from tools_server.molecules import spread_fragments

    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    params.pruneRmsThresh = prune_rms
    params.numThreads = threads
    ids = list(AllChem.EmbedMultipleConfs(rdmol_h, numConfs=n, params=params))
    if not ids:
        params.useRandomCoords = True
        ids = list(AllChem.EmbedMultipleConfs(rdmol_h, numConfs=n, params=params))
    for cid in ids:
        spread_fragments(rdmol_h, cid)
    return ids


def embed_conformers(rdmol_h: Any, n: int, seed: int, *, prune_rms: float, relax: bool) -> list[int]:
    """ETKDGv3 conformers of a hydrogen-complete RDKit Mol (in place); with ``relax``, each relaxed with
    MMFF94 (UFF where MMFF has no parameters). Returns the conformer ids (empty when none embeds)."""
    from tools_server.molecules import relax_force_field

    ids = etkdg(rdmol_h, n, seed, prune_rms, 1)
    if relax:
        for cid in ids:
            relax_force_field(rdmol_h, "MMFF", conf_id=cid)
    return ids


def conformer_set(
    text: str,
    *,
    n_conformers: int,
    seed: int,
    charge: int | None,
    multiplicity: int | None,
    prune_rms: float,
    relax: bool,
) -> tuple[Any, Any, str]:
    """The base :class:`~tools_server.molecules.Molecule`, an RDKit Mol (explicit H) holding the
    conformers, and where they came from: every record of a multi-record ``.sdf`` path (conformers of
    one molecule, each checked), else ``n_conformers`` ETKDG conformers of the molecule (which needs
    bonds; ``prune_rms`` Å apart, MMFF-relaxed with ``relax``)."""
    from rdkit import Chem

    from tools_server.molecules import (
        MoleculeError,
        check_geometry,
        check_structure,
        detect_format,
        load_molecule,
        read_file_text,
    )

    path = Path(text.strip()).expanduser() if "\n" not in text and len(text) < 4096 else None
    if path is not None and path.suffix.lower() == ".sdf" and detect_format(text) == "file":
        supplier = Chem.SDMolSupplier()
        supplier.SetData(read_file_text(text.strip())[0], removeHs=False)  # read once, from its descriptor
        records = [m for m in supplier if m is not None]
        for k, m in enumerate(records):  # each record's coordinates, before anything reads them further
            numbers = [a.GetAtomicNum() for a in m.GetAtoms()]
            check_structure(numbers, m.GetConformer().GetPositions(), f"coordinates of record {k}")
        if len(records) > 1:
            first = (Chem.MolToSmiles(Chem.RemoveHs(records[0])), records[0].GetNumAtoms())
            if any((Chem.MolToSmiles(Chem.RemoveHs(m)), m.GetNumAtoms()) != first for m in records[1:]):
                raise MoleculeError("invalid_input", "The SDF records are not conformers of one molecule.")
            rd = Chem.Mol(records[0])
            rd.RemoveAllConformers()
            for m in records:
                rd.AddConformer(Chem.Conformer(m.GetConformer()), assignId=True)
            base = load_molecule(Chem.MolToMolBlock(records[0]), charge=charge, multiplicity=multiplicity)
            return base, rd, f"{len(records)} records of {path.name}"
    base = load_molecule(text, charge=charge, multiplicity=multiplicity)
    check_geometry(base)
    if base.rdmol is None:
        raise MoleculeError(
            "invalid_input", "Conformer search needs bonds: pass a SMILES, molblock or SDF, not XYZ"
        )
    rd = Chem.Mol(base.rdmol)
    rd.RemoveAllConformers()
    ids = embed_conformers(rd, n_conformers, seed, prune_rms=prune_rms, relax=relax)
    if not ids:
        raise MoleculeError("invalid_input", "ETKDG could not embed any conformer")
    return base, rd, f"{len(ids)} ETKDG conformers (seed {seed})"


# --------------------------------------------------------------------------------------------------
# One conformer (runs in a pool process or a cluster task)
# --------------------------------------------------------------------------------------------------


def optimise_conformer(
    index: int,
    molblock: str,
    engine: str,
    calc_options: dict[str, Any],
    charge: int,
    multiplicity: int,
    options: TaskOptions,
) -> dict[str, Any]:
    """Optimise one conformer with ``engine``'s calculator; its item (``result`` and final ``coords``),
    or its error item. Never raises."""
    from tools_server.engines.calculator import get_calculator
    from tools_server.molecules import load_molecule

    try:
        mol = load_molecule(molblock, charge=charge, multiplicity=multiplicity)
        res = run_task(get_calculator(engine, mol, **calc_options), mol, options, None, f"c{index}")
        return {
            "index": index,
            "ok": True,
            "result": res.as_item(),
            "coords": [[float(x) for x in row] for row in res.coords_angstrom],
        }
    except Exception as exc:
        return error_item(index, exc)


# --------------------------------------------------------------------------------------------------
# Ranking
# --------------------------------------------------------------------------------------------------


def boltzmann_weights(energies_hartree: Sequence[float], temperature_k: float) -> list[float]:
    """Normalised Boltzmann weights of electronic energies at ``temperature_k``."""
    import numpy as np

    from tools_server.engines.units import k_hartree_per_kelvin

    kt = k_hartree_per_kelvin() * temperature_k
    e = np.asarray(energies_hartree, dtype=float)
    w = np.exp(-(e - e.min()) / kt)
    return list(w / w.sum())


@dataclass
class RankedConformer:
    rank: int  # 0 = lowest energy
    energy_hartree: float
    relative_energy_kcal_mol: float
    boltzmann_weight: float
    item: Any  # what the caller ranked (a result dict, a conformer id ...)


def rank_conformers(
    items: Sequence[Any], energies_hartree: Sequence[float], temperature_k: float
) -> list[RankedConformer]:
    """``items`` sorted by energy with relative energies (kcal/mol) and Boltzmann weights."""
    order = sorted(range(len(items)), key=lambda i: energies_hartree[i])
    energies = [float(energies_hartree[i]) for i in order]
    weights = boltzmann_weights(energies, temperature_k) if energies else []
    kcal = kcal_mol_per_hartree()
    return [
        RankedConformer(rank, e, (e - energies[0]) * kcal, float(w), items[i])
        for rank, (i, e, w) in enumerate(zip(order, energies, weights, strict=True))
    ]


def heavy_atom_rmsd(block_a: str, block_b: str) -> float:
    """Symmetry-aware heavy-atom RMSD (Å) after optimal alignment."""
    from rdkit import Chem
    from rdkit.Chem import rdMolAlign

    a = Chem.RemoveHs(Chem.MolFromMolBlock(block_a, removeHs=False))
    b = Chem.RemoveHs(Chem.MolFromMolBlock(block_b, removeHs=False))
    return float(rdMolAlign.GetBestRMS(a, b, maxMatches=2000))


def write_conformer_sdf(path: Path, records: Sequence[tuple[str, str, dict[str, str]]]) -> Path:
    """One SDF of conformers: ``records`` are (molblock, title, properties) in the order to write."""
    with open(path, "w") as fh:
        for block, title, props in records:
            lines = block.split("$$$$")[0].rstrip("\n").split("\n")
            lines[0] = title
            fh.write("\n".join(lines) + "\n")
            for key, value in props.items():
                fh.write(f">  <{key}>\n{value}\n\n")
            fh.write("$$$$\n")
    return path


# --------------------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------------------


def search(
    base: Any,
    rdmol: Any,
    source: str,
    *,
    engine: str,
    calc_options: dict[str, Any],
    task_options: TaskOptions,
    options: SearchOptions,
    out_path: Path,
    processes: int,
    row_type: type[ConformerRow] = ConformerRow,
    progress: Callable[[float, str], None] | None = None,
) -> ConformerSearchResult:
    """Optimise every conformer of ``rdmol`` (from :func:`conformer_set`) with ``engine``, de-duplicate,
    keep the energy window, rank, and write the SDF to ``out_path``. ``row_type``: the engine's row, whose
    own fields are copied from each conformer's single point. Raises the first error when no conformer
    could be optimised."""
    from rdkit import Chem
    from rdkit.Geometry import Point3D

    from tools_server.plugin import map_items

    kcal = kcal_mol_per_hartree()
    conf_ids = [c.GetId() for c in rdmol.GetConformers()]
    jobs = [
        (
            k,
            Chem.MolToMolBlock(rdmol, confId=cid),
            engine,
            calc_options,
            base.charge,
            base.multiplicity,
            task_options,
        )
        for k, cid in enumerate(conf_ids)
    ]
    # the conformers are the items (a process pool here, cluster tasks on Dask); duplicate removal, the
    # window and the ranking couple them: they follow once all are back
    results = map_items(
        optimise_conformer,
        jobs,
        processes,
        (lambda d, n: progress(d / n, f"optimised {d}/{n} conformers")) if progress else None,
    )
    done = sorted((r for r in results if r["ok"]), key=lambda r: r["result"]["energy_hartree"])
    failed = [r["error"] for r in results if not r["ok"]]
    if not done:
        first = failed[0] if failed else {"code": "not_converged", "message": ""}
        raise CalculatorError(first["code"], "No conformer could be optimised: " + first["message"])
    for r in done:  # the optimised geometry, as a molblock for the RMSD and the SDF
        conf = rdmol.GetConformer(conf_ids[r["index"]])
        for atom, xyz in enumerate(r["coords"]):
            conf.SetAtomPosition(atom, Point3D(*xyz))
        r["block"] = Chem.MolToMolBlock(rdmol, confId=conf_ids[r["index"]])
    e_min = done[0]["result"]["energy_hartree"]
    unique: list[dict[str, Any]] = []
    n_duplicates = n_outside = 0
    for r in done:
        energy = r["result"]["energy_hartree"]
        if (energy - e_min) * kcal > options.energy_window_kcal_mol:
            n_outside += 1
            continue
        duplicate = any(
            abs(energy - u["result"]["energy_hartree"]) * kcal < options.energy_threshold_kcal_mol
            and heavy_atom_rmsd(r["block"], u["block"]) < options.rmsd_threshold_angstrom
            for u in unique
        )
        if duplicate:
            n_duplicates += 1
        else:
            unique.append(r)
    ranked = rank_conformers(unique, [u["result"]["energy_hartree"] for u in unique], options.temperature_k)
    title = base.smiles or base.formula()
    write_conformer_sdf(
        out_path,
        [
            (
                c.item["block"],
                f"{title} conformer {c.rank}",
                {
                    "energy_hartree": f"{c.energy_hartree:.10f}",
                    "relative_energy_kcal_mol": f"{c.relative_energy_kcal_mol:.4f}",
                    "boltzmann_weight": f"{c.boltzmann_weight:.6f}",
                },
            )
            for c in ranked
        ],
    )
    row_properties = set(row_type.model_fields) - set(ConformerRow.model_fields)
    rows = []
    for c in ranked:
        res = c.item["result"]
        opt = res.get("optimization") or {}
        rows.append(
            row_type(
                rank=c.rank,
                input_index=c.item["index"],
                energy_hartree=c.energy_hartree,
                relative_energy_kcal_mol=round(c.relative_energy_kcal_mol, 4),
                boltzmann_weight=round(c.boltzmann_weight, 6),
                converged=bool(opt.get("converged", True)),
                n_steps=int(opt.get("n_steps", 0)),
                **{k: res[k] for k in row_properties if res.get(k) is not None},
            )
        )
    warnings = []
    if failed:
        warnings.append(
            f"{len(failed)} conformer(s) failed to optimise and were dropped: {failed[0]['message']}"
        )
    n_unconverged = sum(1 for r in rows if not r.converged)
    if n_unconverged:
        warnings.append(f"{n_unconverged} kept conformer(s) did not reach optimisation convergence")
    return ConformerSearchResult(
        smiles=base.smiles,
        formula=base.formula(),
        charge=base.charge,
        multiplicity=base.multiplicity,
        source=source,
        n_conformers=len(conf_ids),
        n_optimised=len(done),
        n_failed=len(failed),
        n_duplicates=n_duplicates,
        n_outside_window=n_outside,
        n_unique=len(unique),
        temperature_k=options.temperature_k,
        energy_window_kcal_mol=options.energy_window_kcal_mol,
        lowest_energy_hartree=e_min,
        boltzmann_average_energy_hartree=sum(c.boltzmann_weight * c.energy_hartree for c in ranked),
        conformers=rows[:INLINE_CONFORMERS],
        sdf=str(out_path),
        warnings=warnings or None,
    )
