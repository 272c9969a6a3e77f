"""Geometry optimisation with geomeTRIC (TRIC internal coordinates) for any energy-and-gradient function.

Every calculator reaches it through :func:`tools_server.engines.optimize.optimize`, so xTB, DFT and the
ML potentials share convergence criteria and reports. Units: the
callable receives coordinates in Bohr and returns (energy in Hartree, gradient in Hartree/Bohr).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools_server.engines.units import angstrom_per_bohr

EnergyGradient = Callable[[Any], tuple[float, Any]]

#: geomeTRIC's default ("GAU") thresholds: energy change Eh, gradient RMS/max Eh/Bohr, step RMS/max Å.
CONVERGENCE = {
    "convergence_energy": 1e-6,
    "convergence_grms": 3e-4,
    "convergence_gmax": 4.5e-4,
    "convergence_drms": 1.2e-3,
    "convergence_dmax": 1.8e-3,
}
#: geomeTRIC's "GAU_TIGHT" thresholds, used before frequencies so soft modes (methyl rotors) are relaxed.
CONVERGENCE_TIGHT = {
    "convergence_energy": 1e-6,
    "convergence_grms": 1e-5,
    "convergence_gmax": 1.5e-5,
    "convergence_drms": 4e-5,
    "convergence_dmax": 6e-5,
}


@dataclass
class OptimizationResult:
    coords_angstrom: Any
    energy_hartree: float
    converged: bool
    n_steps: int
    energies_hartree: list[float]
    max_gradient_hartree_bohr: float


def optimize(
    symbols: list[str],
    coords_angstrom: Any,
    energy_gradient: EnergyGradient,
    *,
    max_steps: int = 200,
    tight: bool = False,
    step_callback: Callable[[int, float], None] | None = None,
) -> OptimizationResult:
    """Minimise the energy from ``coords_angstrom``; never raises for non-convergence (see ``converged``)."""
    import geometric.engine
    import geometric.molecule
    import geometric.optimize
    import numpy as np
    from geometric.errors import GeomOptNotConvergedError

    bohr_to_angstrom = angstrom_per_bohr()
    history: list[tuple[Any, float, float]] = []

    class _Engine(geometric.engine.Engine):
        def calc_new(self, coords: Any, dirname: str) -> dict[str, Any]:
            xyz_bohr = np.asarray(coords, dtype=float).reshape(-1, 3)
            energy, gradient = energy_gradient(xyz_bohr)
            gradient = np.asarray(gradient, dtype=float).reshape(-1, 3)
            history.append((xyz_bohr * bohr_to_angstrom, float(energy), float(np.abs(gradient).max())))
            if step_callback is not None:
                step_callback(len(history), float(energy))
            return {"energy": float(energy), "gradient": gradient.ravel()}

    molecule = geometric.molecule.Molecule()
    molecule.elem = list(symbols)
    molecule.xyzs = [np.asarray(coords_angstrom, dtype=float).reshape(-1, 3)]
    engine = _Engine(molecule)
    converged = True
    with tempfile.TemporaryDirectory(prefix="spu-geomopt-") as tmp, _quiet():
        try:
            geometric.optimize.run_optimizer(
                customengine=engine,
                input=os.path.join(tmp, "job"),
                maxiter=max_steps,
                **(CONVERGENCE_TIGHT if tight else CONVERGENCE),
            )
        except GeomOptNotConvergedError:
            converged = False
        finally:
            _drop_file_handlers(tmp)
    if not history:
        raise RuntimeError("geomeTRIC made no energy call")
    best = min(range(len(history)), key=lambda i: history[i][1]) if not converged else len(history) - 1
    coords, energy, gmax = history[best]
    return OptimizationResult(
        coords_angstrom=coords,
        energy_hartree=energy,
        converged=converged,
        n_steps=len(history),
        energies_hartree=[h[1] for h in history],
        max_gradient_hartree_bohr=gmax,
    )


def _drop_file_handlers(folder: str) -> None:
    """Close and remove the log handlers geomeTRIC attached for files in ``folder``: the folder is deleted
    next, and a handler left behind raised FileNotFoundError on the process's next log record."""
    loggers = [
        logging.getLogger(),
        *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    for logger in loggers:
        for handler in list(logger.handlers):
            if str(getattr(handler, "baseFilename", "")).startswith(folder):
                logger.removeHandler(handler)
                handler.close()


@contextlib.contextmanager
def _quiet() -> Any:
    """geomeTRIC logs every step at INFO and prints; keep the worker's output clean."""
    logger = logging.getLogger("geometric")
    level = logger.level
    logger.setLevel(logging.WARNING)
    for name in ("geometric.nifty", "geometric.optimize"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)
