"""What every energy model does the same way, written once on top of :class:`~tools_server.qc.calculator.
Calculator`: geometry optimisation, harmonic frequencies with thermochemistry, and conformer ensembles
ranked by energy with Boltzmann weights (ETKDG conformers in, one SDF out).

``xtb_run``/``xtb_conformers``, ``dft_run`` and ``mlip_run``/``mlip_conformers`` all call these, so a
change of engine is a change of calculator::

    calc = get_calculator("ani2x", mol)          # was get_calculator("xtb", mol)
    opt = optimize(calc, mol.numbers, mol.coords_angstrom)
    freq = frequencies(calc, mol, opt.coords_angstrom)

Units: coordinates in Å at this interface (Bohr inside the calculators), energies in Hartree, relative
energies in kcal/mol, wavenumbers in cm⁻¹.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools_server.qc.calculator import Calculator
from tools_server.qc.optimizer import OptimizationResult


def bohr_per_angstrom() -> float:
    from scipy.constants import physical_constants

    return 1e-10 / physical_constants["Bohr radius"][0]


def kcal_mol_per_hartree() -> float:
    from scipy.constants import N_A, calorie, physical_constants

    return physical_constants["Hartree energy"][0] * N_A / (1000 * calorie)


# --------------------------------------------------------------------------------------------------
# Optimisation
# --------------------------------------------------------------------------------------------------


def optimize(
    calc: Calculator,
    numbers: Sequence[int],
    coords_angstrom: Any,
    *,
    optimizer: str = "geometric",
    max_steps: int = 200,
    tight: bool = False,
    fmax_ev_a: float = 0.01,
    step_callback: Callable[[int, float], None] | None = None,
) -> OptimizationResult:
    """Minimise ``calc``'s energy from ``coords_angstrom`` (atoms ``numbers``).

    ``optimizer="geometric"``: geomeTRIC in TRIC internal coordinates to its GAU criteria (GAU_TIGHT
    with ``tight``), as xtb_run and dft_run do. ``optimizer="bfgs"``: ASE's BFGS (maximum step 0.2 Å)
    until every force is below ``fmax_ev_a`` eV/Å, as mlip_run does. Never raises for non-convergence
    (see ``converged``)."""
    import numpy as np
    from rdkit.Chem import GetPeriodicTable

    coords = np.asarray(coords_angstrom, dtype=float)
    if optimizer == "bfgs":
        return _optimize_bfgs(calc, numbers, coords, fmax_ev_a, max_steps, step_callback)
    from tools_server.qc import optimizer as geometric_optimizer

    table = GetPeriodicTable()
    return geometric_optimizer.optimize(
        [table.GetElementSymbol(int(z)) for z in numbers],
        coords,
        calc.energy_gradient,
        max_steps=max_steps,
        tight=tight,
        step_callback=step_callback,
    )


def _optimize_bfgs(
    calc: Calculator,
    numbers: Sequence[int],
    coords_angstrom: Any,
    fmax_ev_a: float,
    max_steps: int,
    step_callback: Callable[[int, float], None] | None,
) -> OptimizationResult:
    import numpy as np
    from ase import Atoms
    from ase.optimize import BFGS

    from tools_server.qc.calculator import angstrom_per_bohr, ev_per_hartree

    hartree, bohr = ev_per_hartree(), angstrom_per_bohr()

    atoms = Atoms(numbers=list(numbers), positions=np.asarray(coords_angstrom, dtype=float))
    atoms.calc = calc.to_ase()
    energies: list[float] = []
    opt = BFGS(atoms, logfile=None, maxstep=0.2)
    opt.attach(lambda: energies.append(float(atoms.get_potential_energy()) / hartree), 1)  # cached values
    if step_callback is not None:
        opt.attach(lambda: step_callback(int(opt.nsteps), float(atoms.get_potential_energy()) / hartree), 5)
    converged = bool(opt.run(fmax=fmax_ev_a, steps=max_steps))
    energy_ev = float(atoms.get_potential_energy())
    forces = np.asarray(atoms.get_forces(), dtype=float)
    return OptimizationResult(
        coords_angstrom=atoms.get_positions(),
        energy_hartree=energy_ev / hartree,
        converged=converged,
        n_steps=int(opt.nsteps),
        energies_hartree=energies or [energy_ev / hartree],
        max_gradient_hartree_bohr=float(np.abs(forces).max()) * bohr / hartree if len(forces) else 0.0,
    )


def optimization_report(opt: OptimizationResult) -> dict[str, Any]:
    """The ``optimization`` block of a result."""
    return {
        "converged": opt.converged,
        "n_steps": opt.n_steps,
        "energy_change_hartree": opt.energy_hartree - opt.energies_hartree[0],
        "max_gradient_hartree_bohr": round(opt.max_gradient_hartree_bohr, 7),
    }


# --------------------------------------------------------------------------------------------------
# Frequencies and thermochemistry
# --------------------------------------------------------------------------------------------------


@dataclass
class Frequencies:
    wavenumbers_cm1: list[float]  # rounded to 0.01, imaginary as negative
    n_imaginary: int
    thermo: dict[str, Any]
    hessian_method: str
    energy_hartree: float


def frequencies(
    calc: Calculator,
    mol: Any,
    coords_angstrom: Any = None,
    energy_hartree: float | None = None,
    *,
    temperature_k: float = 298.15,
    pressure_pa: float = 101325.0,
    progress: Callable[[float], None] | None = None,
) -> Frequencies:
    """Harmonic frequencies from ``calc``'s Hessian at ``coords_angstrom`` (default: ``mol``'s), and
    ideal-gas / rigid-rotor / harmonic-oscillator thermochemistry (:mod:`tools_server.qc.thermo`)."""
    import numpy as np

    from tools_server.qc import thermo

    coords = np.asarray(mol.coords_angstrom if coords_angstrom is None else coords_angstrom, dtype=float)
    x_bohr = coords * bohr_per_angstrom()
    if energy_hartree is None:
        energy_hartree = calc.energy(x_bohr)
    hess, how = calc.hessian(x_bohr, progress=progress)
    vib, freqs, th = thermo.frequencies_and_thermo(
        hess,
        energy_hartree,
        coords,
        mol.numbers,
        mol.multiplicity,
        temperature_k=temperature_k,
        pressure_pa=pressure_pa,
    )
    return Frequencies(freqs, vib.n_imaginary, th, how, float(energy_hartree))


# --------------------------------------------------------------------------------------------------
# Conformer ensembles
# --------------------------------------------------------------------------------------------------


def embed_conformers(rdmol_h: Any, n: int, seed: int, *, prune_rms: float, relax: bool) -> list[int]:
    """ETKDGv3 conformers of a hydrogen-complete RDKit Mol (in place); with ``relax``, each relaxed with
    MMFF94 (UFF where MMFF has no parameters). Returns the conformer ids (empty when none embeds)."""
    from tools_server.chem.tools import embed_conformers as etkdg
    from tools_server.molecules import relax_force_field

    ids = etkdg(rdmol_h, n, seed, prune_rms, 1)
    if relax:
        for cid in ids:
            relax_force_field(rdmol_h, "MMFF", conf_id=cid)
    return ids


def boltzmann_weights(energies_hartree: Sequence[float], temperature_k: float) -> list[float]:
    """Normalised Boltzmann weights of electronic energies at ``temperature_k``."""
    import numpy as np
    from scipy.constants import k, physical_constants

    kt = k * temperature_k / physical_constants["Hartree energy"][0]
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
