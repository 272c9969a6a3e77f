"""Quantum-chemistry tools: GFN-xTB (tblite or xtb-python) and DFT (PySCF on the CPU, gpu4pyscf on a GPU).

Molecules are given as in the chemistry tools (SMILES, XYZ text, molblock, or an SDF/MOL/XYZ path such as
an earlier tool's artifact); see ``tools_server.molecules``. Engines are imported inside the tool
functions, which run in worker processes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tools_server.engines.conformers import SearchInput
from tools_server.molecules import MoleculeText
from tools_server.plugin import ToolContext, ToolError, tool
from tools_server.qc.inputs import _MOL_DESC, DftInput
from tools_server.qc.results import DftResult, XtbConformerRow, XtbConformersResult, XtbResult


def _mol_keys(molecules: list[str]) -> list[str]:
    from tools_server.molecules import cache_key

    return [cache_key(m) for m in molecules]


# --------------------------------------------------------------------------------------------------
# xtb_run
# --------------------------------------------------------------------------------------------------


class XtbInput(BaseModel):
    molecules: list[MoleculeText] = Field(..., min_length=1, max_length=10_000, description=_MOL_DESC)
    task: Literal["energy", "optimize", "frequencies"] = Field(
        "energy",
        description="energy: single point; optimize: geomeTRIC minimisation; frequencies: tight "
        "optimisation (unless optimize_first=false), harmonic frequencies and thermochemistry.",
    )
    method: Literal["GFN2-xTB", "GFN1-xTB"] = "GFN2-xTB"
    engine: Literal["tblite", "xtb-python"] = Field(
        "tblite",
        description="tblite (default; ALPB and GBSA) or xtb-python (GBSA only; faster above ~100 atoms).",
    )
    solvent: str | None = Field(
        None,
        description="Implicit solvent by name (water, methanol, dmso, acetonitrile, "
        "chcl3, thf, toluene ...); omit for gas phase.",
    )
    solvent_model: Literal["alpb", "gbsa"] = Field("alpb", description="ALPB (default) or GBSA.")
    charge: int | None = Field(
        None,
        ge=-20,
        le=20,
        description="Total charge; default: formal charge of the "
        "SMILES/molblock, 0 for XYZ. Applies to every molecule.",
    )
    multiplicity: int | None = Field(
        None, ge=1, le=11, description="2S+1; default: from radicals / electron parity."
    )
    temperature_k: float = Field(298.15, gt=0, le=5000, description="Thermochemistry temperature (K).")
    pressure_pa: float = Field(101325.0, gt=0, description="Thermochemistry pressure (Pa).")
    optimize_first: bool = Field(True, description="For task=frequencies: optimise before the Hessian.")
    max_steps: int = Field(300, ge=1, le=2000, description="Maximum optimisation steps.")
    accuracy: float = Field(1.0, gt=0, le=100, description="xTB numerical accuracy (lower = tighter).")
    electronic_temperature_k: float = Field(
        300.0, gt=0, le=20000, description="Fermi smearing temperature (K)."
    )


def _xtb_key(args: XtbInput) -> dict[str, Any]:
    data = args.model_dump()
    data["molecules"] = _mol_keys(args.molecules)
    if args.task == "energy":
        for k in ("temperature_k", "pressure_pa", "optimize_first", "max_steps"):
            data.pop(k)
    if not args.solvent:
        data.pop("solvent_model")
    return data


def _xtb_settings(args: Any) -> Any:
    from tools_server.qc.xtb import XtbSettings, normalise_solvent

    settings = XtbSettings(
        method=args.method,
        engine=args.engine,
        solvent=args.solvent,
        solvent_model=args.solvent_model,
        accuracy=args.accuracy,
        electronic_temperature_k=args.electronic_temperature_k,
    )
    return normalise_solvent(settings)


def _check_engine(engine: str) -> None:
    import importlib.util

    module = "tblite" if engine == "tblite" else "xtb"
    if importlib.util.find_spec(module) is None:
        raise ToolError(
            "engine_unavailable",
            f"The {engine} package is not installed",
            hint="pip install 'spu-scaffold[qc]' (xtb-python has wheels only up to Python 3.11).",
        )


@tool(
    name="xtb_run",
    resource="cpu",
    threads=lambda args: "single" if len(args.molecules) == 1 else "all",
    items="molecules",
    read_only=True,
    idempotent=True,
    engines=("tblite", "xtb"),
    time_limit_s=7200,
    canonicalize=_xtb_key,
    title="GFN-xTB energies, geometries, frequencies",
)
def xtb_run(args: XtbInput, ctx: ToolContext) -> XtbResult:
    """Semi-empirical GFN2-xTB (or GFN1) for 1 to 10,000 molecules; batches run in parallel on the job's CPU
    slots. Tasks: `energy`, `optimize` (geomeTRIC), `frequencies` (harmonic, Hessian by finite differences
    of analytic gradients; ZPE, enthalpy H, entropy S, Gibbs G at temperature_k). Implicit solvent by name
    (ALPB default, GBSA optional); with a solvent each molecule also gets solvation_free_energy_kcal_mol
    (energy in solvent minus gas phase at the same geometry; negative = favourable) and solvation_model.
    Per molecule: energy_hartree, homo_ev, lumo_ev, gap_ev, dipole_debye,
    partial_charges_e (inline for small batches), optimization {converged, n_steps}, geometry_xyz /
    geometry_sdf artifacts, frequencies {n_imaginary, wavenumbers_cm1}, thermo {zpe_hartree,
    enthalpy_hartree, gibbs_free_energy_hartree, entropy_cal_mol_k}, warnings. Errors per item (ok=false,
    error.code: invalid_smiles, charge_multiplicity_mismatch, unsupported_element (xTB: H-Rn), not_converged).
    Energies are total electronic energies in Hartree (1 Eh = 627.5 kcal/mol); compare only between
    molecules with the same atoms, or as reaction energies."""
    from tools_server.engines.task import TaskOptions
    from tools_server.plugin import map_items, table_result
    from tools_server.qc.xtb import engine_version, run_item

    _check_engine(args.engine)
    settings = _xtb_settings(args)
    n = len(args.molecules)
    options = TaskOptions(
        task=args.task,
        optimize_before_frequencies=args.optimize_first,
        max_steps=args.max_steps,
        temperature_k=args.temperature_k,
        pressure_pa=args.pressure_pa,
    )
    ctx.set_engine(
        args.engine,
        engine_version(args.engine),
        device="cpu",
        method=args.method,
        solvation=settings.solvent_label(),
        parallel_processes=min(ctx.threads, n),
    )
    out_dir = str(ctx.artifact_path)  # single points write nothing: run_task creates it if needed
    shared = (settings, options, args.charge, args.multiplicity, out_dir, n <= 20)
    if n == 1:  # one molecule: run here, with progress from the optimiser and the Hessian
        items = [run_item(0, args.molecules[0], *shared, ctx.progress)]
    else:
        jobs = [(i, text, *shared) for i, text in enumerate(args.molecules)]
        items = map_items(
            run_item, jobs, ctx.threads, lambda d, total: ctx.progress(d / total, f"{d}/{total} molecules")
        )
    if n == 1:
        for w in items[0].warnings or []:
            ctx.warn(w)
    if n == 1 and not items[0].ok:
        err = items[0].error
        raise ToolError(err.code, err.message)
    n_ok = sum(1 for it in items if it.ok)
    note = "partial charges are left out of batches above 20 molecules; run small batches for them"
    return XtbResult(
        method=args.method,
        engine=args.engine,
        task=args.task,
        solvation=settings.solvent_label() or "gas phase",
        n_molecules=n,
        n_ok=n_ok,
        n_failed=n - n_ok,
        **({"note": note} if n > 20 else {}),
        **table_result(ctx, "xtb_results", items),
    )


# --------------------------------------------------------------------------------------------------
# xtb_conformers
# --------------------------------------------------------------------------------------------------


class XtbConformerInput(SearchInput):
    molecule: MoleculeText = Field(
        ...,
        description="One molecule with bonds: SMILES, molblock or SDF path (a multi-record SDF of conformers "
        "of one molecule is used as the conformer set).",
    )
    n_conformers: int = Field(
        30, ge=1, le=500, description="ETKDG conformers embedded before xTB optimisation."
    )
    method: Literal["GFN2-xTB", "GFN1-xTB"] = "GFN2-xTB"
    engine: Literal["tblite", "xtb-python"] = "tblite"
    solvent: str | None = Field(None, description="Implicit solvent by name; omit for gas phase.")
    solvent_model: Literal["alpb", "gbsa"] = "alpb"
    charge: int | None = Field(None, ge=-20, le=20)
    multiplicity: int | None = Field(None, ge=1, le=11)
    temperature_k: float = Field(298.15, gt=0, le=5000, description="Temperature for Boltzmann weights (K).")
    seed: int = 42
    max_steps: int = Field(300, ge=1, le=2000)
    accuracy: float = Field(1.0, gt=0, le=100)
    electronic_temperature_k: float = Field(300.0, gt=0, le=20000)


def _conformer_key(args: XtbConformerInput) -> dict[str, Any]:
    return {**args.model_dump(), "molecule": _mol_keys([args.molecule])[0]}


@tool(
    name="xtb_conformers",
    resource="cpu",
    threads="all",
    items="n_conformers",  # the conformers embedded from the one molecule; ranked once all are back
    read_only=True,
    idempotent=True,
    engines=("tblite", "xtb", "rdkit"),
    time_limit_s=7200,
    canonicalize=_conformer_key,
    title="xTB conformer ensemble",
)
def xtb_conformers(args: XtbConformerInput, ctx: ToolContext) -> XtbConformersResult:
    """Conformer ensemble of one molecule: ETKDG conformers (MMFF-relaxed) optimised with GFN2-xTB in
    parallel, duplicates removed (energy within energy_threshold_kcal_mol AND heavy-atom RMSD below
    rmsd_threshold_angstrom), kept within energy_window_kcal_mol, Boltzmann-weighted at temperature_k.
    A multi-record SDF path is taken as the conformer set as it is. Output: n_conformers, n_unique,
    lowest_energy_hartree, boltzmann_average_energy_hartree, conformers [{rank (from 0), input_index,
    energy_hartree, relative_energy_kcal_mol, boltzmann_weight, converged, n_steps, gap_ev, dipole_debye}]
    (first 50), sdf (artifact with all unique conformers in rank order: record k is rank k; pass 'sdf#0'
    to dft_run to refine the lowest). This is a quick ETKDG-based search, not an exhaustive metadynamics
    (CREST) search."""
    from tools_server.engines import conformers
    from tools_server.engines.task import TaskOptions
    from tools_server.qc.xtb import calculator_options, engine_version

    _check_engine(args.engine)
    settings = _xtb_settings(args)
    ctx.set_engine(
        args.engine,
        engine_version(args.engine),
        device="cpu",
        method=args.method,
        solvation=settings.solvent_label(),
        parallel_processes=ctx.threads,
    )
    base, rdmol, source = conformers.conformer_set(
        args.molecule,
        n_conformers=args.n_conformers,
        seed=args.seed,
        charge=args.charge,
        multiplicity=args.multiplicity,
        prune_rms=0.1,
        relax=True,
    )
    found = conformers.search(
        base,
        rdmol,
        source,
        engine="xtb",
        calc_options={**calculator_options(settings), "inline_charges": False},
        task_options=TaskOptions(task="optimize", max_steps=args.max_steps),
        options=conformers.SearchOptions.of(args),
        out_path=ctx.artifact("ensemble_conformers.sdf"),
        processes=ctx.threads,
        row_type=XtbConformerRow,
        progress=ctx.progress,
    )
    return XtbConformersResult(
        method=args.method,
        solvation=settings.solvent_label() or "gas phase",
        **{k: getattr(found, k) for k in found.model_fields_set},
    )


# --------------------------------------------------------------------------------------------------
# dft_run
# --------------------------------------------------------------------------------------------------


def _dft_key(args: DftInput) -> dict[str, Any]:
    data = args.model_dump()
    data["molecule"] = _mol_keys([args.molecule])[0]
    data["functional"] = args.functional.strip().lower()
    data["basis"] = args.basis.strip().lower().replace("_", "-")
    if args.task != "tddft":
        for k in ("n_states", "triplets", "tda"):
            data.pop(k)
    if args.task != "frequencies":
        for k in ("temperature_k", "pressure_pa"):
            data.pop(k)
    return data


@tool(
    name="dft_run",
    resource="gpu",
    threads="all",
    read_only=True,
    idempotent=True,
    engines=("pyscf", "gpu4pyscf", "geometric", "pyscf-dispersion"),
    time_limit_s=7200,
    canonicalize=_dft_key,
    title="DFT with PySCF / gpu4pyscf",
)
def dft_run(args: DftInput, ctx: ToolContext) -> DftResult:
    """Kohn-Sham DFT or Hartree-Fock for one molecule with PySCF (CPU) or gpu4pyscf (GPU, chosen by
    device=auto when CUDA, gpu4pyscf and a card with a useful FP64 rate are present; provenance.device and
    device_reason say which and why). Tasks: energy, optimize (geomeTRIC), tddft (excitations: energy_ev,
    wavelength_nm, oscillator_strength), frequencies (harmonic wavenumbers_cm1, n_imaginary, ZPE, H, S, G).
    Options: libxc functional names, basis sets, density fitting, D3(BJ) dispersion, PCM/SMD solvent.
    Output: energy_hartree, homo_ev, lumo_ev, gap_ev, dipole_debye, mulliken_charges_e, scf {converged,
    cycles, retried}, geometry artifacts, warnings. A cost estimate from the number of basis functions is
    made first: a job that cannot finish on the CPU within the time limit is refused (too_large_for_cpu)
    with advice (xTB, a smaller basis, or a GPU)."""
    from tools_server.qc import dft

    return DftResult(**dft.run(args, ctx))
