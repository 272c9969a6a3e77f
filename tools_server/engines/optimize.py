"""Geometry optimisation of any :class:`~tools_server.engines.calculator.Calculator`: geomeTRIC in TRIC
internal coordinates (xTB and DFT) or ASE's BFGS to a force threshold (the ML potentials), one report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from tools_server.engines.calculator import Calculator
from tools_server.engines.geometric import OptimizationResult
from tools_server.engines.units import angstrom_per_bohr, ev_per_hartree
from tools_server.plugin import ResultModel

Optimizer = Literal["geometric", "bfgs"]


class OptimizationReport(ResultModel):
    """The ``optimization`` block of every engine's result."""

    converged: bool
    n_steps: int
    energy_change_hartree: float
    max_gradient_hartree_bohr: float
    optimizer: str

    @classmethod
    def of(cls, opt: OptimizationResult, optimizer: str) -> OptimizationReport:
        return cls(
            converged=bool(opt.converged),
            n_steps=int(opt.n_steps),
            energy_change_hartree=float(opt.energy_hartree - opt.energies_hartree[0]),
            max_gradient_hartree_bohr=round(float(opt.max_gradient_hartree_bohr), 7),
            optimizer=optimizer,
        )


def describe(optimizer: Optimizer, *, tight: bool, fmax_ev_a: float) -> str:
    """The criterion in words, for reports and warnings."""
    if optimizer == "bfgs":
        return f"ASE BFGS to fmax {fmax_ev_a} eV/Å"
    return f"geomeTRIC (TRIC), {'GAU_TIGHT' if tight else 'GAU'} criteria"


def optimize(
    calc: Calculator,
    numbers: Sequence[int],
    coords_angstrom: Any,
    *,
    optimizer: Optimizer = "geometric",
    max_steps: int = 200,
    tight: bool = False,
    fmax_ev_a: float = 0.01,
    step_callback: Callable[[int, float], None] | None = None,
) -> OptimizationResult:
    """Minimise ``calc``'s energy from ``coords_angstrom`` (atoms ``numbers``).

    ``optimizer="geometric"``: geomeTRIC in TRIC internal coordinates to its GAU criteria (GAU_TIGHT
    with ``tight``). ``optimizer="bfgs"``: ASE's BFGS (maximum step 0.2 Å) until every force is below
    ``fmax_ev_a`` eV/Å. Never raises for non-convergence (see ``converged``)."""
    import numpy as np
    from rdkit.Chem import GetPeriodicTable

    coords = np.asarray(coords_angstrom, dtype=float)
    if optimizer == "bfgs":
        return _optimize_bfgs(calc, numbers, coords, fmax_ev_a, max_steps, step_callback)
    from tools_server.engines import geometric

    table = GetPeriodicTable()
    return geometric.optimize(
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
