"""xTB conformer search: ETKDG conformers, xTB optimisation in a process pool, duplicate removal, then
the ranking and SDF of :mod:`tools_server.qc.pipeline`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from tools_server.molecules import MoleculeError
from tools_server.qc.xtb import TaskOptions, XtbError, XtbSettings, _error, compute_molecule, prepare


def optimise_conformer(
    molblock: str,
    settings: XtbSettings,
    charge: int,
    multiplicity: int,
    max_steps: int,
    out_dir: str,
    stem: str,
) -> dict[str, Any]:
    """xTB-optimise one conformer given as a molblock; runs in a pool process."""
    try:
        mol = prepare(molblock, charge, multiplicity)
        res = compute_molecule(
            mol, settings, TaskOptions(task="optimize", max_steps=max_steps), Path(out_dir), stem
        )
        return {"ok": True, **res}
    except (MoleculeError, XtbError) as exc:
        return {"ok": False, "error": _error(exc.code, exc.message)}
    except Exception as exc:
        return {"ok": False, "error": _error("engine_crashed", f"{type(exc).__name__}: {exc}")}


def heavy_atom_rmsd(block_a: str, block_b: str) -> float:
    """Symmetry-aware heavy-atom RMSD (Å) after optimal alignment."""
    from rdkit import Chem
    from rdkit.Chem import rdMolAlign

    a = Chem.RemoveHs(Chem.MolFromMolBlock(block_a, removeHs=False))
    b = Chem.RemoveHs(Chem.MolFromMolBlock(block_b, removeHs=False))
    return float(rdMolAlign.GetBestRMS(a, b, maxMatches=2000))


def search(
    text: str,
    settings: XtbSettings,
    *,
    n_conformers: int,
    seed: int,
    charge: int | None,
    multiplicity: int | None,
    energy_window_kcal_mol: float,
    rmsd_threshold_angstrom: float,
    energy_threshold_kcal_mol: float,
    temperature_k: float,
    max_steps: int,
    threads: int,
    out_dir: Path,
    stem: str,
    progress: Any = None,
) -> dict[str, Any]:
    from rdkit import Chem

    from tools_server.core.fanout import map_items
    from tools_server.molecules import load_molecule
    from tools_server.qc import pipeline

    kcal_per_hartree = pipeline.kcal_mol_per_hartree()
    base = load_molecule(text, charge=charge, multiplicity=multiplicity)
    if base.rdmol is None:
        raise MoleculeError(
            "invalid_input", "Conformer search needs bonds: pass a SMILES, molblock or SDF, not XYZ"
        )
    rd = Chem.Mol(base.rdmol)
    rd.RemoveAllConformers()
    ids = pipeline.embed_conformers(rd, n_conformers, seed, prune_rms=0.1, relax=True)
    if not ids:
        raise MoleculeError("invalid_input", "ETKDG could not embed any conformer")
    blocks = [Chem.MolToMolBlock(rd, confId=cid) for cid in ids]
    jobs = [
        (b, settings, base.charge, base.multiplicity, max_steps, str(out_dir), f"{stem}_c{k}")
        for k, b in enumerate(blocks)
    ]
    # the conformers are the items (a process pool here; Dask tasks on a cluster, xtb_conformers declaring
    # items="n_conformers"); duplicate removal, the window and the ranking couple them: they follow below
    results = map_items(
        optimise_conformer,
        jobs,
        threads,
        (lambda d, n: progress(d / n, f"optimised {d}/{n} conformers")) if progress else None,
    )
    done = [(r, k) for k, r in enumerate(results) if r["ok"]]
    failed = [r["error"] for r in results if not r["ok"]]
    if not done:
        raise XtbError(
            failed[0]["code"] if failed else "not_converged",
            "No conformer could be optimised: " + (failed[0]["message"] if failed else ""),
        )
    done.sort(key=lambda rk: rk[0]["energy_hartree"])
    e_min = done[0][0]["energy_hartree"]
    unique: list[tuple[dict[str, Any], str]] = []
    n_duplicates = 0
    for r, _ in done:
        rel = (r["energy_hartree"] - e_min) * kcal_per_hartree
        if rel > energy_window_kcal_mol:
            continue
        block = Path(r["geometry_sdf"]).read_text().split("$$$$")[0]
        duplicate = any(
            abs(r["energy_hartree"] - u["energy_hartree"]) * kcal_per_hartree < energy_threshold_kcal_mol
            and heavy_atom_rmsd(block, ub) < rmsd_threshold_angstrom
            for u, ub in unique
        )
        if duplicate:
            n_duplicates += 1
            continue
        unique.append((r, block))
    ranked = pipeline.rank_conformers(unique, [u["energy_hartree"] for u, _ in unique], temperature_k)
    sdf_path = pipeline.write_conformer_sdf(
        out_dir / f"{stem}_conformers.sdf",
        [
            (
                c.item[1],
                f"{base.smiles or stem} conformer {c.rank}",
                {
                    "energy_hartree": f"{c.energy_hartree:.10f}",
                    "boltzmann_weight": f"{c.boltzmann_weight:.6f}",
                },
            )
            for c in ranked
        ],
    )
    for r in results:  # per-conformer files are folded into the one SDF
        for key in ("geometry_xyz", "geometry_sdf"):
            if r.get(key):
                Path(r[key]).unlink(missing_ok=True)
    conformers = [
        {
            "rank": c.rank,
            "energy_hartree": c.energy_hartree,
            "relative_energy_kcal_mol": round((c.energy_hartree - e_min) * kcal_per_hartree, 4),
            "boltzmann_weight": round(c.boltzmann_weight, 6),
            "converged": c.item[0]["optimization"]["converged"],
            "gap_ev": c.item[0]["gap_ev"],
            "dipole_debye": c.item[0]["dipole_debye"],
        }
        for c in ranked
    ]
    avg = sum(c.boltzmann_weight * c.energy_hartree for c in ranked)
    return {
        "smiles": base.smiles,
        "formula": base.formula(),
        "charge": base.charge,
        "multiplicity": base.multiplicity,
        "n_embedded": len(ids),
        "n_optimised": len(done),
        "n_failed": len(failed),
        "n_duplicates": n_duplicates,
        "n_unique": len(unique),
        "temperature_k": temperature_k,
        "lowest_energy_hartree": e_min,
        "boltzmann_average_energy_hartree": avg,
        "conformers": conformers[:50],
        "sdf": str(sdf_path),
        "settings": {k: v for k, v in asdict(settings).items() if k != "engine"},
    }
