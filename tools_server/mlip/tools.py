"""``mlip_run`` and ``mlip_conformers``: machine-learned interatomic potentials (ANI-2x, AIMNet2, MACE-OFF,
SevenNet) through ASE calculators: energies, forces, optimisations, Langevin MD, conformer ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools_server.engines.conformers import ConformerSearchResult, SearchInput
from tools_server.engines.task import TaskItem
from tools_server.molecules import MoleculeText
from tools_server.plugin import BatchResult, ResultModel, ToolContext, ToolError, tool

Engine = Literal["ani2x", "aimnet2", "mace_off", "sevennet"]

_MOL_DESC = (
    "SMILES (3D from ETKDG + MMFF), XYZ text (Å), molblock with 3D coordinates and explicit H, or an "
    ".sdf/.mol/.xyz path ('file.sdf#k' = record k)"
)
_ENGINE_DESC = (
    "ani2x: ANI-2x (H C N O F S Cl, neutral); aimnet2: AIMNet2 (H B C N O F Si P S Cl As Se Br I, charged "
    "allowed); mace_off: MACE-OFF23 (H C N O F P S Cl Br I, neutral); sevennet: SevenNet-0 (materials "
    "model trained on PBE crystals, weights ship with the package; a cross-check for molecules)"
)


class MdFrame(ResultModel):
    step: int
    time_fs: float
    epot_ev: float
    ekin_ev: float
    temperature_k: float


class MdSummary(ResultModel):
    """Langevin NVT dynamics of one molecule (``task="md"``)."""

    steps: int
    timestep_fs: float
    temperature_target_k: float
    temperature_mean_second_half_k: float | None = None
    epot_mean_ev: float
    epot_std_ev: float
    n_frames: int
    #: at most about 60 frames, evenly spaced; every frame is in trajectory_xyz
    series: list[MdFrame]


class MlipItem(TaskItem):
    """One molecule of ``mlip_run``: the task's fields, the model's energy in eV and forces (eV/Å), or the
    dynamics."""

    energy_ev: float | None = None
    max_force_ev_a: float | None = None
    rms_force_ev_a: float | None = None
    forces_ev_a: list[list[float]] | None = None
    md: MdSummary | None = None
    trajectory_xyz: str | None = None


class MlipResult(BatchResult):
    engine: str
    model: str
    reference_method: str
    device: str
    task: str
    items: list[MlipItem]


class MlipConformersResult(ConformerSearchResult):
    engine: str
    model: str
    reference_method: str


class MlipInput(BaseModel):
    molecules: list[MoleculeText] = Field(..., min_length=1, max_length=1000, description=_MOL_DESC)
    engine: Engine = Field("aimnet2", description=_ENGINE_DESC)
    model: str | None = Field(
        None,
        max_length=120,
        description="weights file name in SPU_WEIGHTS_DIR (default per engine: ani2x, aimnet2_wb97m_d3_0, "
        "MACE-OFF23_small, 7net-0)",
    )
    task: Literal["energy", "optimize", "frequencies", "md"] = Field(
        "energy",
        description="energy: single point with forces; optimize: BFGS to fmax; frequencies: BFGS to fmax, "
        "then harmonic frequencies and thermochemistry at temperature_k; md: Langevin NVT",
    )
    charge: int | None = Field(None, ge=-10, le=10, description="total charge; default from the SMILES")
    fmax_ev_a: float = Field(0.01, gt=0, le=1, description="optimisation: max force at convergence (eV/Å)")
    max_steps: int = Field(500, ge=1, le=10000, description="optimisation steps")
    md_steps: int = Field(1000, ge=1, le=200_000, description="MD steps")
    timestep_fs: float = Field(0.5, gt=0, le=2.0, description="MD timestep (fs); 0.5 fs with hydrogens")
    temperature_k: float = Field(
        300.0, gt=0, le=3000, description="MD thermostat, and the thermochemistry of task=frequencies (K)"
    )
    friction_per_fs: float = Field(0.01, gt=0, le=1, description="Langevin friction (1/fs)")
    report_every: int = Field(10, ge=1, le=10000, description="MD frame interval (steps)")
    seed: int = Field(1, ge=0, le=2**31 - 1, description="MD velocity and thermostat seed")


def _mol_key(molecules: list[str]) -> list[str]:
    from tools_server.molecules import cache_key

    return [cache_key(m) for m in molecules]


def _weights_stamp(engine: str, model: str | None) -> str | None:
    from tools_server.mlip import models

    try:
        path = models.model_path(engine, model or models.DEFAULT_MODEL[engine])
    except ToolError:
        return None
    if path is None or not path.is_file():
        return None
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _run_key(args: MlipInput) -> dict[str, Any]:
    data = args.model_dump()
    data["molecules"] = _mol_key(args.molecules)
    data["weights"] = _weights_stamp(args.engine, args.model)
    if args.task != "md":
        for k in ("md_steps", "timestep_fs", "friction_per_fs", "report_every", "seed"):
            data.pop(k)
    if args.task not in ("md", "frequencies"):
        data.pop("temperature_k")
    if args.task not in ("optimize", "frequencies"):
        data.pop("fmax_ev_a")
        data.pop("max_steps")
    return data


def _load(text: str, charge: int | None) -> Any:
    from tools_server.molecules import load_molecule

    return load_molecule(text, charge=charge)


def _check_structure(numbers: list[int], coords: Any, what: str) -> None:
    from tools_server.molecules import check_structure

    check_structure(numbers, coords, what)


def _device(ctx: ToolContext) -> str:
    if not ctx.gpu_available:
        return "cpu"
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def _prepare(args: Any, ctx: ToolContext) -> tuple[Any, str, str]:
    from tools_server.mlip import models

    models.check_engine(args.engine)
    name = args.model or models.DEFAULT_MODEL[args.engine]
    models.check_name(name)
    device = _device(ctx)
    try:
        import torch

        torch.set_num_threads(max(1, ctx.threads))
    except ImportError:
        pass
    ctx.set_engine(
        models.INFO[args.engine].dist,
        models.engine_version(args.engine),
        device=device,
        model=name,
        reference_method=models.INFO[args.engine].level,
    )
    return models, name, device


def mlip_item(
    i: int, text: str, opts: dict[str, Any], out_dir: str, n: int, progress: Any = None
) -> MlipItem:
    """One molecule of ``mlip_run`` (``opts``: its arguments with the model's ``name`` and ``device``):
    its item, or its error item; artifacts go to ``out_dir``. ``weights_missing`` and
    ``engine_unavailable`` are raised (the whole call fails), as is any error of a single molecule."""
    from tools_server.engines.calculator import AseCalculator
    from tools_server.engines.task import TaskOptions, run_task
    from tools_server.mlip import models, run

    engine, name, device = opts["engine"], opts["name"], opts["device"]
    try:
        mol = _load(text, opts["charge"])
        models.check_molecule(engine, mol.numbers, mol.charge, mol.multiplicity)
        _check_structure(mol.numbers, mol.coords_angstrom, "coordinates")
        calc = models.load_calculator(engine, name, device, charge=mol.charge)  # cached per process
        models.check_model_species(engine, calc, mol.numbers)

        def tick(fraction: float, message: str) -> None:
            if progress is not None:
                progress(fraction, f"molecule {i + 1}/{n}: {message}")

        if opts["task"] != "md":
            label = f"{models.INFO[engine].label} ({name})"
            model = AseCalculator(calc, mol.numbers, label, inline_forces=mol.n_atoms <= 50 and n <= 20)
            options = TaskOptions(
                task=opts["task"],
                optimizer="bfgs",
                max_steps=opts["max_steps"],
                fmax_ev_a=opts["fmax_ev_a"],
                temperature_k=opts["temperature_k"],
            )
            done = run_task(model, mol, options, Path(out_dir), f"mol{i}", tick)
            return MlipItem(index=i, ok=True, **done.as_item())
        traj = Path(out_dir) / f"md_{i}.xyz"
        dynamics = run.langevin(
            run.atoms_from(mol.numbers, mol.coords_angstrom),
            calc,
            steps=opts["md_steps"],
            timestep_fs=opts["timestep_fs"],
            temperature_k=opts["temperature_k"],
            friction_per_fs=opts["friction_per_fs"],
            seed=opts["seed"],
            report_every=opts["report_every"],
            trajectory=traj,
            progress=lambda s: tick(min(1.0, s / max(1, opts["md_steps"])), f"step {s}"),
        )
        return MlipItem(
            index=i,
            ok=True,
            formula=mol.formula(),
            n_atoms=mol.n_atoms,
            **({"smiles": mol.smiles} if mol.smiles else {}),
            **dynamics,
            trajectory_xyz=str(traj),
        )
    except ToolError as err:
        if n == 1 or err.code in ("weights_missing", "engine_unavailable"):
            raise
        return MlipItem.failed(i, err)


@tool(
    name="mlip_run",
    resource="gpu",
    items="molecules",
    read_only=True,
    idempotent=True,
    engines=("torchani", "aimnet", "mace", "sevenn", "ase"),
    time_limit_s=7200,
    canonicalize=_run_key,
    title="Machine-learned potentials: energies, optimisation, MD",
)
def mlip_run(args: MlipInput, ctx: ToolContext) -> MlipResult:
    """Energies and forces, BFGS geometry optimisation, harmonic frequencies with thermochemistry, or short
    Langevin NVT dynamics of 1-1000 molecules with a machine-learned interatomic potential (ASE
    calculators): ANI-2x, AIMNet2, MACE-OFF23 or SevenNet-0. Elements and charge are checked against the
    model before anything runs (ANI-2x: H C N O F S Cl, neutral only). Per molecule: energy_hartree and
    energy_ev (total energies on the model's own scale: compare only between molecules with the same atoms,
    e.g. conformers or isomers, and only within one model), max/rms force (eV/Å; forces inline up to 50
    atoms), optimization {converged, n_steps}, geometry_xyz / geometry_sdf artifacts, frequencies
    {n_imaginary, wavenumbers_cm1} and thermo (as xtb_run), md {temperature_mean_second_half_k,
    epot_mean_ev, series} and a trajectory_xyz artifact. Weights come from SPU_WEIGHTS_DIR
    (docs/weights.md); a missing model is weights_missing. Errors: unsupported_element, unsupported_charge,
    weights_missing, engine_unavailable."""

    from tools_server.plugin import map_items

    models, name, device = _prepare(args, ctx)
    n = len(args.molecules)
    opts = {**args.model_dump(exclude={"molecules", "model"}), "name": name, "device": device}
    out_dir = str(ctx.artifact_dir)
    if n == 1:  # one molecule: run here, with progress from the optimiser or the dynamics
        items = [mlip_item(0, args.molecules[0], opts, out_dir, 1, ctx.progress)]
    else:  # one process (the model loaded once); on a Dask cluster the molecules become tasks
        jobs = [(i, text, opts, out_dir, n) for i, text in enumerate(args.molecules)]
        items = map_items(
            mlip_item, jobs, 1, lambda d, total: ctx.progress(d / total, f"{d}/{total} molecules")
        )
    for item in items:
        for w in item.warnings or []:
            ctx.warn(f"molecule {item.index}: {w}")
    from tools_server.plugin import table_result

    n_ok = sum(1 for it in items if it.ok)
    return MlipResult(
        engine=args.engine,
        model=name,
        reference_method=models.INFO[args.engine].level,
        device=device,
        task=args.task,
        n_molecules=n,
        n_ok=n_ok,
        n_failed=n - n_ok,
        **table_result(ctx, "mlip_results", items),
    )


# --------------------------------------------------------------------------------------------------
# mlip_conformers: optimise every conformer of a set and rank them
# --------------------------------------------------------------------------------------------------


class MlipConformersInput(SearchInput):
    molecule: MoleculeText = Field(
        ...,
        description="SMILES or molblock (conformers embedded with RDKit ETKDG), or a multi-record .sdf path "
        "of conformers of one molecule (e.g. the sdf artifact of xtb_conformers; every record is used)",
    )
    n_conformers: int = Field(20, ge=1, le=300, description="conformers embedded from a SMILES")
    engine: Engine = Field("aimnet2", description=_ENGINE_DESC)
    model: str | None = Field(None, max_length=120, description="weights file name (default per engine)")
    charge: int | None = Field(None, ge=-10, le=10)
    fmax_ev_a: float = Field(0.02, gt=0, le=1, description="convergence: max force (eV/Å)")
    max_steps: int = Field(300, ge=1, le=5000)
    temperature_k: float = Field(298.15, gt=0, le=3000, description="for the Boltzmann weights")
    seed: int = Field(42, ge=0, le=2**31 - 1, description="ETKDG seed")


def _conformers_key(args: MlipConformersInput) -> dict[str, Any]:
    data = args.model_dump()
    data["molecule"] = _mol_key([args.molecule])[0]  # a file by the SHA-256 of its bytes
    data["weights"] = _weights_stamp(args.engine, args.model)
    return data


@tool(
    name="mlip_conformers",
    resource="gpu",
    items="n_conformers",
    read_only=True,
    idempotent=True,
    engines=("torchani", "aimnet", "mace", "sevenn", "ase", "rdkit"),
    time_limit_s=7200,
    canonicalize=_conformers_key,
    title="Rank conformers with a machine-learned potential",
)
def mlip_conformers(args: MlipConformersInput, ctx: ToolContext) -> MlipConformersResult:
    """Conformer ensemble of one molecule ranked with a machine-learned potential: the same search as
    xtb_conformers with the model's energies. Conformers come from a SMILES (RDKit ETKDG, pruned at 0.3 Å
    RMSD) or from a multi-record SDF such as xtb_conformers' artifact; each is optimised (BFGS to
    fmax_ev_a), duplicates removed (energy within energy_threshold_kcal_mol AND heavy-atom RMSD below
    rmsd_threshold_angstrom), kept within energy_window_kcal_mol, Boltzmann-weighted at temperature_k.
    Output: n_conformers, n_unique, lowest_energy_hartree, boltzmann_average_energy_hartree, conformers
    [{rank (from 0), input_index, energy_hartree, relative_energy_kcal_mol, boltzmann_weight, converged,
    n_steps}] (first 50) and sdf (artifact, ranked order: record k is rank k). Relative energies are
    electronic energies at 0 K of optimised structures (no zero-point, thermal or entropy terms, gas
    phase); differences below ~0.5 kcal/mol are within the models' error."""
    from tools_server.engines import conformers
    from tools_server.engines.task import TaskOptions

    models, name, device = _prepare(args, ctx)
    base, rdmol, source = conformers.conformer_set(
        args.molecule,
        n_conformers=args.n_conformers,
        seed=args.seed,
        charge=args.charge,
        multiplicity=None,
        prune_rms=0.3,
        relax=False,
    )
    # the model's element, charge and species checks (and weights_missing) before anything is fanned out
    models.check_molecule(args.engine, base.numbers, base.charge, base.multiplicity)
    calc = models.load_calculator(args.engine, name, device, charge=base.charge)
    models.check_model_species(args.engine, calc, base.numbers)
    # one process (the model loaded once); on a Dask cluster the conformers become tasks
    found = conformers.search(
        base,
        rdmol,
        source,
        engine=args.engine,
        calc_options={"model": name, "device": device},
        task_options=TaskOptions(
            task="optimize", optimizer="bfgs", fmax_ev_a=args.fmax_ev_a, max_steps=args.max_steps
        ),
        options=conformers.SearchOptions.of(args),
        out_path=ctx.artifact("conformers_ranked.sdf"),
        processes=1,
        progress=ctx.progress,
    )
    return MlipConformersResult(
        engine=args.engine,
        model=name,
        reference_method=models.INFO[args.engine].level,
        **{k: getattr(found, k) for k in found.model_fields_set},
    )
