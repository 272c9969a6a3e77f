"""MCP tools for molecular dynamics: ``md_run`` (OpenMM) and ``md_analyze`` (mdtraj)."""

from __future__ import annotations

import csv
import time
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from tools_server.plugin import (
    StructurePath,
    ToolContext,
    ToolError,
    ToolResult,
    TrajectoryPath,
    file_key,
    tool,
)

MAX_ATOMS = 300_000


class MdResult(ToolResult):
    n_atoms: int
    degrees_of_freedom: int
    device: str
    minimization: dict[str, Any]
    production: dict[str, Any]
    ns_per_day: float | None
    wall_s: float
    nve_check: dict[str, Any] | None = None
    artifacts: dict[str, str]
    system: str | dict[str, Any]
    protocol: dict[str, Any]
    estimated_s: float


class MdAnalysis(ToolResult):
    n_frames: int
    n_atoms: int
    selection: str
    frame_interval_ps: float | None = None
    rmsd: dict[str, Any] | None = None
    rmsf: dict[str, Any] | None = None
    rg: dict[str, Any] | None = None
    sasa: dict[str, Any] | None = None
    hbonds: dict[str, Any] | None = None
    density: dict[str, Any] | None = None
    diffusion: dict[str, Any] | None = None
    series_csv: str | None = None


class LiquidComponent(BaseModel):
    smiles: str = Field(..., min_length=1, max_length=500, description="SMILES of one molecule or ion")
    count: int = Field(..., ge=1, le=5000, description="number of copies in the box")


class MdRunInput(BaseModel):
    pdb_path: StructurePath | None = Field(
        None, max_length=4096, description="PDB or mmCIF file of a protein (e.g. a pdb_lookup artifact path)"
    )
    pdb_text: str | None = Field(
        None, max_length=5_000_000, description="PDB or mmCIF text instead of a file"
    )
    components: list[LiquidComponent] | None = Field(
        None,
        max_length=10,
        description="a liquid or solution from SMILES, e.g. [{smiles:'CCO', count:200}]; pure water 'O' "
        "uses TIP3P, everything else MMFF94",
    )
    solvent: Literal["explicit", "gbn2", "obc2", "vacuum"] = Field(
        "explicit", description="proteins: TIP3P explicit water, GBn2/OBC2 implicit solvent, or vacuum"
    )
    ph: float = Field(7.0, ge=0, le=14, description="pH for protonation states (proteins)")
    padding_nm: float = Field(1.0, ge=0.5, le=3.0, description="water padding around the protein, nm")
    ionic_strength_molar: float = Field(
        0.15, ge=0, le=2.0, description="NaCl added with neutralisation, mol/L"
    )
    ensemble: Literal["auto", "npt", "nvt"] = Field(
        "auto", description="auto: NPT for periodic boxes, else NVT"
    )
    temperature_k: float = Field(300.0, ge=50, le=1000)
    pressure_bar: float = Field(1.0, ge=0.001, le=10000, description="used in NPT")
    timestep_fs: float = Field(
        2.0, ge=0.5, le=4.0, description="above 2.5 fs needs hydrogen_mass_repartitioning"
    )
    hydrogen_mass_repartitioning: bool = Field(
        False, description="hydrogens to 3.024 amu, allows a 4 fs step"
    )
    minimize_max_iterations: int = Field(2000, ge=0, le=100000)
    equilibration_ps: float = Field(20.0, ge=0, le=100000)
    production_ps: float = Field(100.0, gt=0, le=1_000_000)
    report_interval_ps: float = Field(
        1.0, gt=0, le=10000, description="frame and thermodynamics interval, ps"
    )
    nve_check_ps: float = Field(
        2.0, ge=0, le=1000, description="NVE window after production for energy drift; 0 skips"
    )
    density_g_cm3: float | None = Field(None, gt=0.05, le=5.0, description="liquids: initial packing density")
    cutoff_nm: float = Field(1.0, ge=0.7, le=1.6)
    seed: int = Field(1, ge=0, le=2**31 - 1)
    max_wall_s: float = Field(
        7200.0, gt=0, le=86400, description="refuse before starting if the estimate exceeds it"
    )

    @model_validator(mode="after")
    def _one_source(self) -> MdRunInput:
        given = [x is not None for x in (self.pdb_path, self.pdb_text, self.components)]
        if sum(given) != 1:
            raise ValueError("give exactly one of pdb_path, pdb_text or components")
        if self.timestep_fs > 2.5 and not self.hydrogen_mass_repartitioning:
            raise ValueError("a timestep above 2.5 fs needs hydrogen_mass_repartitioning=true")
        return self


def _md_run_cache_key(args: MdRunInput) -> dict[str, Any]:
    data = args.model_dump()
    data["pdb_path"] = file_key(args.pdb_path, kind="structure")
    return data


def _md_analyze_cache_key(args: MdAnalyzeInput) -> dict[str, Any]:
    data = args.model_dump()
    data["trajectory_path"] = file_key(args.trajectory_path, kind="trajectory")
    data["topology_path"] = file_key(args.topology_path, kind="structure")
    return data


@tool(
    name="md_run",
    resource="gpu",
    threads="all",
    read_only=True,
    idempotent=True,
    version="2",  # 2: added C-terminal oxygens of proteins placed as in a carboxylate
    time_limit_s=6 * 3600,
    engines=("openmm", "pdbfixer", "rdkit"),
    canonicalize=lambda args: _md_run_cache_key(args),
)
def md_run(args: MdRunInput, ctx: ToolContext) -> MdResult:
    """Molecular dynamics with OpenMM: a protein (PDB/mmCIF file or text) or a liquid/solution from SMILES.

    Proteins are repaired with PDBFixer (missing atoms, internal loops, hydrogens at `ph`; ligands and
    waters removed) and run with Amber14 in TIP3P water (periodic, NaCl to `ionic_strength_molar`) or
    GBn2/OBC2 implicit solvent. Liquids are packed at random into a cubic box: pure water ('O') is TIP3P,
    anything else MMFF94 from RDKit (validated against RDKit energies). Protocol: minimisation,
    equilibration (Langevin, NPT with a Monte Carlo barostat for periodic boxes unless ensemble='nvt'),
    production with frames every `report_interval_ps`, then a short NVE window to measure energy drift.
    Runs on CUDA when a GPU is present, else on the CPU. A run whose estimated time exceeds
    `max_wall_s` is refused before it starts.
    Returns temperatures (K), potential energy (kJ/mol), density (g/cm3) and box (nm) means, ns/day,
    NVE drift (kJ/mol/ns and kT per degree of freedom per ns), warnings, and artifact paths:
    trajectory.xtc (unwrapped coordinates), topology.pdb (minimised), final.pdb, thermo.csv.
    Feed trajectory_xtc and topology_pdb to md_analyze.
    """
    from tools_server.md.simulation import Protocol, estimate_seconds, run_protocol

    ctx.progress(0.0, "building the system")
    if args.components is not None:
        from tools_server.md.liquid import build_liquid

        n_atoms_guess = sum(c.count * 30 for c in args.components)
        if n_atoms_guess > 10 * MAX_ATOMS:
            raise ToolError("too_large", "Too many molecules for one box.")
        built = build_liquid(
            [(c.smiles, c.count) for c in args.components],
            seed=args.seed,
            density_g_cm3=args.density_g_cm3,
            cutoff_nm=args.cutoff_nm,
        )
    else:
        from tools_server.engines.protein_system import build_protein

        built = build_protein(
            pdb_path=args.pdb_path,
            pdb_text=args.pdb_text,
            ph=args.ph,
            solvent=args.solvent,
            padding_nm=args.padding_nm,
            ionic_strength_molar=args.ionic_strength_molar,
            cutoff_nm=args.cutoff_nm,
        )
    n_atoms = built.system.getNumParticles()
    if n_atoms > MAX_ATOMS:
        raise ToolError("too_large", f"{n_atoms} atoms exceed the limit of {MAX_ATOMS}.")
    pressure = None
    if built.periodic and args.ensemble in ("auto", "npt"):
        pressure = args.pressure_bar
    elif args.ensemble == "npt":
        raise ToolError("invalid_input", "NPT needs a periodic box: use solvent='explicit' or a liquid.")
    protocol = Protocol(
        temperature_k=args.temperature_k,
        pressure_bar=pressure,
        timestep_fs=args.timestep_fs,
        hydrogen_mass_repartitioning=args.hydrogen_mass_repartitioning,
        friction_per_ps=1.0,
        minimize_max_iterations=args.minimize_max_iterations,
        equilibration_ps=args.equilibration_ps,
        production_ps=args.production_ps,
        report_interval_ps=args.report_interval_ps,
        nve_check_ps=args.nve_check_ps,
        seed=args.seed,
    )
    from tools_server.plugin import CostModel, first_in_process

    device = "cuda" if ctx.gpu_available else "cpu"
    law_s = estimate_seconds(n_atoms, protocol, device, ctx.threads)
    model = CostModel(f"md_{device}")  # the law corrected by what this machine's recent runs took
    estimate = model.estimate(law_s)
    if estimate > args.max_wall_s:
        code = "too_large_for_cpu" if device == "cpu" else "too_large"
        raise ToolError(
            code,
            f"Estimated {estimate:.0f} s for {n_atoms} atoms x {protocol.total_steps} steps on {device} "
            f"({ctx.threads} threads), above max_wall_s={args.max_wall_s:.0f}.",
            hint="Shorten production_ps, use implicit solvent (gbn2), a 4 fs step with "
            "hydrogen_mass_repartitioning, a GPU, or raise max_wall_s.",
            estimate_s=round(estimate),
        )
    started = time.perf_counter()
    result = run_protocol(built, protocol, ctx)
    ran_on = ctx.engine.get("device", device)
    if ran_on != device:  # CUDA did not load: the run calibrates the CPU's record, not the GPU's
        law_s = estimate_seconds(n_atoms, protocol, ran_on, ctx.threads)
        model = CostModel(f"md_{ran_on}")
    # the estimate against what this run took, in provenance; calibrates the next, unless it was this
    # worker's first run, which pays one-time costs (OpenMM's first contexts) that later runs do not
    ctx.engine["cost"] = model.record(
        law_s, estimate, time.perf_counter() - started, calibrate=not first_in_process(model.kind)
    )
    result["system"] = built.description
    result["protocol"] = {
        "ensemble": "NPT" if pressure is not None else "NVT",
        "integrator": "LangevinMiddle, friction 1/ps",
        "barostat": "MonteCarlo every 25 steps" if pressure is not None else None,
        "timestep_fs": args.timestep_fs,
        "constraints": "bonds to hydrogen (rigid water)",
    }
    result["estimated_s"] = round(estimate, 1)
    result["warnings"] = list(ctx.warnings)
    return MdResult(**result)


AnalysisName = Literal["rmsd", "rmsf", "rg", "sasa", "hbonds", "density", "diffusion"]


class MdAnalyzeInput(BaseModel):
    trajectory_path: TrajectoryPath = Field(
        ..., max_length=4096, description="DCD/XTC/PDB trajectory (md_run's trajectory_xtc)"
    )
    topology_path: StructurePath = Field(
        ..., max_length=4096, description="PDB topology (md_run's topology_pdb)"
    )
    analyses: list[AnalysisName] | None = Field(
        None, description="default: rmsd, rmsf, rg, sasa, hbonds for proteins; density, diffusion for liquids"
    )
    selection: str | None = Field(
        None, max_length=500, description="mdtraj selection, default 'protein' if present else 'all'"
    )
    diffusion_selection: str | None = Field(
        None, max_length=500, description="molecules for diffusion, default: the most common residue name"
    )
    frame_interval_ps: float | None = Field(
        None, gt=0, description="time between frames; default from the file"
    )
    stride: int = Field(1, ge=1, le=10000)
    sasa_max_frames: int = Field(50, ge=1, le=5000)
    hbond_min_occupancy: float = Field(0.1, ge=0, le=1)
    diffusion_fit_window: tuple[float, float] = Field(
        (0.1, 0.5), description="lag-time window for the MSD fit, as fractions of the trajectory length"
    )


@tool(
    name="md_analyze",
    resource="cpu",
    read_only=True,
    idempotent=True,
    version="1",
    time_limit_s=3600,
    engines=("mdtraj",),
    canonicalize=lambda args: _md_analyze_cache_key(args),
)
def md_analyze(args: MdAnalyzeInput, ctx: ToolContext) -> MdAnalysis:
    """Analyse an MD trajectory with mdtraj.

    rmsd: backbone RMSD to the first frame (nm; heavy atoms when there is no protein); rmsf: per-residue
    RMSF of C-alpha (or heavy) atoms after superposition (nm; the 10 most flexible inline, all in a CSV);
    rg: mass-weighted radius of gyration (nm); sasa: Shrake-Rupley solvent-accessible surface (nm2);
    hbonds: Baker-Hubbard hydrogen bonds present in at least `hbond_min_occupancy` of frames; density:
    from box volumes (g/cm3); diffusion: self-diffusion coefficient from the centre-of-mass mean-square
    displacement (1e-5 cm2/s, no finite-size correction). Series go to CSV artifacts.
    """
    import numpy as np

    from tools_server.md import analysis

    traj = analysis.load_trajectory(args.trajectory_path, args.topology_path, args.stride)
    top = traj.topology
    has_protein = len(top.select("protein")) > 0
    selection = args.selection or ("protein" if has_protein else "all")
    atoms = analysis.select(traj, selection)
    wanted = args.analyses or (
        ["rmsd", "rmsf", "rg", "sasa", "hbonds"] if has_protein else ["density", "diffusion"]
    )
    dt_ps = args.frame_interval_ps or (float(traj.timestep) if traj.n_frames > 1 else None)
    out: dict[str, Any] = {
        "n_frames": int(traj.n_frames),
        "n_atoms": int(traj.n_atoms),
        "selection": selection,
    }
    if dt_ps:
        out["frame_interval_ps"] = round(dt_ps, 6)
    series: dict[str, Any] = {}
    fit_atoms = _fit_atoms(traj, atoms, has_protein)
    for name in wanted:
        ctx.progress(len(out) / (len(wanted) + 4), name)
        if name == "rmsd":
            res = analysis.rmsd(traj, fit_atoms)
            series["rmsd_nm"] = res.pop("series_nm")
        elif name == "rmsf":
            res = analysis.rmsf_per_residue(traj, _ca_atoms(traj, atoms) if has_protein else fit_atoms)
            rows = res.pop("rows")
            path = ctx.artifact("rmsf_per_residue.csv")
            _write_rows(path, rows)
            res["csv"] = str(path)
            if len(rows) <= analysis.MAX_INLINE_RESIDUES:
                res["rmsf_nm"] = [r["rmsf_nm"] for r in rows]
                res["residues"] = [r["residue"] for r in rows]
        elif name == "rg":
            res = analysis.radius_of_gyration(traj, atoms)
            series["rg_nm"] = res.pop("series_nm")
        elif name == "sasa":
            res = analysis.sasa(traj, atoms, args.sasa_max_frames)
        elif name == "hbonds":
            res = analysis.hydrogen_bonds(traj, atoms, args.hbond_min_occupancy)
        elif name == "density":
            res = analysis.density(traj)
        else:
            if not dt_ps:
                raise ToolError("invalid_input", "Diffusion needs frame_interval_ps (the file does not say).")
            sel = args.diffusion_selection or _most_common_residue(traj)
            res = analysis.diffusion(traj, analysis.select(traj, sel), dt_ps, args.diffusion_fit_window)
            res["selection"] = sel
            path = ctx.artifact("msd.csv")
            _write_rows(
                path,
                [
                    {"lag_ps": a, "msd_nm2": b}
                    for a, b in zip(res.pop("lag_ps"), res.pop("msd_nm2"), strict=True)
                ],
            )
            res["csv"] = str(path)
        out[name] = res
    if series:
        path = ctx.artifact("series.csv")
        frames = np.arange(traj.n_frames)
        rows = [
            {"frame": int(f), **{k: float(v[i]) for k, v in series.items()}} for i, f in enumerate(frames)
        ]
        _write_rows(path, rows)
        out["series_csv"] = str(path)
    ctx.set_engine("mdtraj", _version("mdtraj"), device="cpu")
    return MdAnalysis(**out)


def _fit_atoms(traj, atoms, has_protein: bool):
    import numpy as np

    top = traj.topology
    if has_protein:
        backbone = np.intersect1d(atoms, top.select("backbone"))
        if len(backbone):
            return backbone
    heavy = np.intersect1d(atoms, top.select("not element H"))
    return heavy if len(heavy) else atoms


def _ca_atoms(traj, atoms):
    import numpy as np

    ca = np.intersect1d(atoms, traj.topology.select("name CA"))
    return ca if len(ca) else atoms


def _most_common_residue(traj) -> str:
    from collections import Counter

    name, _ = Counter(r.name for r in traj.topology.residues).most_common(1)[0]
    return f"resname {name}"


def _write_rows(path, rows: list[dict]) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _version(dist: str) -> str | None:
    from tools_server.plugin import distribution_version

    return distribution_version(dist)
