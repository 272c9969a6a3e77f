"""One molecule, one task, any engine: single point, optimisation, or harmonic frequencies with
thermochemistry, with the same caps, files and warnings whatever the calculator.

``xtb_run``, ``dft_run``, ``mlip_run`` and both conformer searches call :func:`run_task`; an engine
differs only in its :class:`~tools_server.engines.calculator.Calculator` (what its single point reports
beside the energy) and in the optimiser it asks for (geomeTRIC, or BFGS to a force threshold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from tools_server.engines.calculator import Calculator, CalculatorError
from tools_server.engines.optimize import OptimizationReport, Optimizer, describe, optimize
from tools_server.engines.units import bohr_per_angstrom
from tools_server.plugin import Item, ResultModel

#: A finite-difference Hessian takes 6N gradients (~10 min at 300 atoms for xTB on one core).
MAX_FREQUENCY_ATOMS = 300
#: Wavenumbers inline up to this many modes; above it the lowest INLINE_LOW_MODES, all in the file.
INLINE_MODES = 60
INLINE_LOW_MODES = 10
#: Largest gradient (Eh/Bohr) at which frequencies are taken as computed at a stationary point.
STATIONARY_GRADIENT = 1e-3
#: Real modes below this wavenumber (cm⁻¹) get the harmonic-entropy warning.
LOW_MODE_CM1 = 50

Task = Literal["energy", "optimize", "frequencies"]


@dataclass(frozen=True)
class TaskOptions:
    task: Task = "energy"
    optimize_before_frequencies: bool = True
    optimizer: Optimizer = "geometric"
    max_steps: int = 200
    fmax_ev_a: float = 0.01  # the BFGS criterion
    temperature_k: float = 298.15
    pressure_pa: float = 101325.0


class FrequencyReport(ResultModel):
    n_imaginary: int
    wavenumbers_cm1: list[float]
    wavenumbers_file: str | None = None
    method: str
    note: str | None = None


class EntropyTerms(ResultModel):
    translational: float
    rotational: float
    vibrational: float
    electronic: float


class Thermo(ResultModel):
    """Ideal-gas, rigid-rotor, harmonic-oscillator thermochemistry at ``temperature_k`` and ``pressure_pa``
    (:func:`tools_server.engines.thermo.thermochemistry`)."""

    temperature_k: float
    pressure_pa: float
    symmetry_number: int
    zpe_hartree: float
    thermal_energy_correction_hartree: float
    enthalpy_correction_hartree: float
    gibbs_correction_hartree: float
    entropy_cal_mol_k: float
    entropy_terms_cal_mol_k: EntropyTerms
    enthalpy_hartree: float
    gibbs_free_energy_hartree: float
    n_low_modes_below_50_cm1: int


class TaskItem(Item):
    """One molecule's item in a batch of :func:`run_task` (``xtb_run``, ``mlip_run``); each engine's item
    type adds the properties its single point reports (``homo_ev``, ``max_force_ev_a`` ...)."""

    smiles: str | None = None
    formula: str | None = None
    n_atoms: int | None = None
    charge: int | None = None
    multiplicity: int | None = None
    energy_hartree: float | None = None
    optimization: OptimizationReport | None = None
    geometry_xyz: str | None = None
    geometry_sdf: str | None = None
    frequencies: FrequencyReport | None = None
    thermo: Thermo | None = None


class TaskResult(BaseModel):
    """What every engine reports for one molecule, as :func:`run_task` hands it to the tool (which builds
    its item or result type from :meth:`as_item`); the engine's own properties (``homo_ev``, ``scf``,
    ``max_force_ev_a`` ...) are extra keys, their units in their names."""

    model_config = ConfigDict(extra="allow")

    smiles: str | None = None
    formula: str
    n_atoms: int
    charge: int
    multiplicity: int
    energy_hartree: float
    optimization: OptimizationReport | None = None
    geometry_xyz: str | None = None
    geometry_sdf: str | None = None
    frequencies: FrequencyReport | None = None
    thermo: Thermo | None = None
    warnings: list[str] | None = None
    _coords_angstrom: Any = PrivateAttr(default=None)

    @property
    def coords_angstrom(self) -> Any:
        """The final geometry (Å): optimised, or the input's."""
        return self._coords_angstrom

    def as_item(self) -> dict[str, Any]:
        """The JSON form of a result item (absent fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def check_task_size(mol: Any, task: str) -> None:
    """The cap every engine shares: frequencies up to :data:`MAX_FREQUENCY_ATOMS` atoms."""
    if task == "frequencies" and mol.n_atoms > MAX_FREQUENCY_ATOMS:
        raise CalculatorError(
            "too_large",
            f"{mol.n_atoms} atoms: a Hessian by finite differences needs {6 * mol.n_atoms} gradients; "
            f"frequencies are limited to {MAX_FREQUENCY_ATOMS} atoms",
        )


def run_task(
    calc: Calculator,
    mol: Any,
    options: TaskOptions,
    out_dir: Path | None,
    stem: str,
    progress: Callable[[float, str], None] | None = None,
) -> TaskResult:
    """Run ``options.task`` on ``mol`` (a :class:`tools_server.molecules.Molecule`) with ``calc``.

    Optimised geometries go to ``out_dir/<stem>_opt.xyz`` and ``.sdf``, all wavenumbers of a frequency
    job to ``out_dir/<stem>_frequencies.txt`` (``out_dir=None``: nothing is written; the final geometry
    is :attr:`TaskResult.coords_angstrom`). ``progress(fraction, message)`` is called during long steps.
    Raises :class:`CalculatorError` (or the engine's error with a ``code``) when the task cannot run."""
    import numpy as np

    check_task_size(mol, options.task)
    b = bohr_per_angstrom()
    warnings: list[str] = list(getattr(mol, "notes", []))
    coords = np.asarray(mol.coords_angstrom, dtype=float)
    frequencies_task = options.task == "frequencies"
    do_opt = options.task == "optimize" or (frequencies_task and options.optimize_before_frequencies)
    report = None
    if do_opt:
        steps = options.max_steps
        opt = optimize(
            calc,
            mol.numbers,
            coords,
            optimizer=options.optimizer,
            max_steps=steps,
            tight=frequencies_task,
            fmax_ev_a=options.fmax_ev_a,
            step_callback=(
                (lambda k, e: progress(min(0.6, k / steps), f"optimisation step {k}, E = {e:.8f} Eh"))
                if progress
                else None
            ),
        )
        coords = np.asarray(opt.coords_angstrom, dtype=float)
        criterion = describe(options.optimizer, tight=frequencies_task, fmax_ev_a=options.fmax_ev_a)
        report = OptimizationReport.of(opt, criterion)
        if not opt.converged:
            kept = "lowest-energy" if options.optimizer == "geometric" else "last"
            warnings.append(
                f"geometry optimisation not converged in {steps} steps ({criterion}); "
                f"{kept} geometry returned"
            )
    sp = calc.single_point(coords * b, with_gradient=frequencies_task)
    warnings.extend(sp.warnings)
    result = TaskResult(
        smiles=mol.smiles,
        formula=mol.formula(),
        n_atoms=mol.n_atoms,
        charge=mol.charge,
        multiplicity=mol.multiplicity,
        energy_hartree=float(sp.energy_hartree),
        optimization=report,
        **sp.properties,
    )
    result._coords_angstrom = coords
    if out_dir is not None and (do_opt or frequencies_task):
        out_dir.mkdir(parents=True, exist_ok=True)  # made only when something is written (not single points)
    if do_opt and out_dir is not None:
        final = mol.with_coords(coords)
        comment = f"{calc.name} E={sp.energy_hartree:.10f} Eh"
        xyz_path = out_dir / f"{stem}_opt.xyz"
        xyz_path.write_text(final.to_xyz(comment))
        result.geometry_xyz = str(xyz_path)
        block = final.to_molblock(comment)
        if block:
            sdf_path = out_dir / f"{stem}_opt.sdf"
            sdf_path.write_text(block + "$$$$\n")
            result.geometry_sdf = str(sdf_path)
    if frequencies_task:
        _frequencies(calc, mol, coords, sp, options, result, warnings, out_dir, stem, progress)
    result.warnings = warnings or None
    return result


def _frequencies(
    calc: Calculator,
    mol: Any,
    coords: Any,
    sp: Any,
    options: TaskOptions,
    result: TaskResult,
    warnings: list[str],
    out_dir: Path | None,
    stem: str,
    progress: Callable[[float, str], None] | None,
) -> None:
    import numpy as np

    from tools_server.engines.thermo import frequencies

    gmax = float(np.abs(sp.gradient).max()) if sp.gradient is not None and np.size(sp.gradient) else 0.0
    if gmax > STATIONARY_GRADIENT:
        warnings.append(
            f"frequencies at a non-stationary geometry (max gradient {gmax:.1e} Eh/Bohr): "
            "thermochemistry is unreliable; optimise first"
        )
    freq = frequencies(
        calc,
        mol,
        coords,
        sp.energy_hartree,
        temperature_k=options.temperature_k,
        pressure_pa=options.pressure_pa,
        progress=(lambda f: progress(0.6 + 0.4 * f, "Hessian")) if progress else None,
    )
    modes = freq.wavenumbers_cm1
    report = FrequencyReport(
        n_imaginary=int(freq.n_imaginary),
        wavenumbers_cm1=[
            float(w) for w in (modes if len(modes) <= INLINE_MODES else modes[:INLINE_LOW_MODES])
        ],
        method=f"harmonic, unscaled; Hessian by {freq.hessian_method}",
    )
    if out_dir is not None:
        path = out_dir / f"{stem}_frequencies.txt"
        path.write_text(
            "# harmonic wavenumbers (cm-1); imaginary as negative\n" + "\n".join(map(str, modes)) + "\n"
        )
        report.wavenumbers_file = str(path)
    if len(modes) > INLINE_MODES:
        report.note = f"lowest {INLINE_LOW_MODES} of {len(modes)} modes inline; all in wavenumbers_file"
    result.frequencies = report
    result.thermo = Thermo(**freq.thermo)
    if freq.n_imaginary:
        warnings.append(f"{freq.n_imaginary} imaginary mode(s) (lowest {modes[0]} cm-1): not a minimum")
    n_low = freq.thermo["n_low_modes_below_50_cm1"]
    if n_low:
        warnings.append(
            f"{n_low} mode(s) below {LOW_MODE_CM1} cm-1: harmonic entropy of such modes is overestimated"
        )


def error_item(index: int, exc: BaseException) -> dict[str, Any]:
    """The item of a molecule that failed: the :class:`~tools_server.plugin.ToolError`'s code, message and
    hint (``engine_crashed`` for any other exception)."""
    from tools_server.plugin import ItemError

    return {"index": index, "ok": False, "error": ItemError.of(exc).model_dump(exclude_none=True)}
