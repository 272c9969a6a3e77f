"""geomeTRIC attaches a log file handler in the optimiser's temporary folder; after the run the folder is
gone, and a handler left behind made the process's next log record raise FileNotFoundError (a worker's next
job, or the next test that logged)."""

from __future__ import annotations

import logging

import numpy as np

from tools_server.engines.geometric import optimize


def _harmonic_h2(coords_bohr):
    """A harmonic bond (k = 0.4 Eh/Bohr^2, r0 = 1.4 Bohr): energy (Eh) and gradient (Eh/Bohr)."""
    xyz = np.asarray(coords_bohr, dtype=float).reshape(2, 3)
    d = xyz[0] - xyz[1]
    r = float(np.linalg.norm(d))
    energy = 0.2 * (r - 1.4) ** 2
    g = 0.4 * (r - 1.4) * d / r
    return energy, np.concatenate([g, -g])


def test_no_log_handler_outlives_the_optimisation():
    result = optimize(["H", "H"], [[0, 0, 0], [0, 0, 0.9]], _harmonic_h2)
    assert result.converged and abs(result.energy_hartree) < 1e-6
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    files = [
        h.baseFilename
        for lg in loggers
        if isinstance(lg, logging.Logger)
        for h in lg.handlers
        if hasattr(h, "baseFilename")
    ]
    assert not any("spu-geomopt-" in f for f in files), files
    logging.getLogger("httpx").warning("a log record after the optimisation")  # raised before
