"""Langevin MD with an ASE calculator (one molecule at a time); single points and optimisations are the
shared task procedure's (:mod:`tools_server.engines.task`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def atoms_from(numbers: list[int], coords: Any) -> Any:
    import numpy as np
    from ase import Atoms

    return Atoms(numbers=list(numbers), positions=np.asarray(coords, dtype=float))


def check_finite(energy_ev: float, forces: Any, what: str) -> None:
    """Raise ``engine_error`` when a model returns NaN or infinity (SevenNet does for some inputs)."""
    from tools_server.molecules import first_non_finite
    from tools_server.plugin import ToolError

    bad = first_non_finite({"energy": energy_ev, "forces": forces})
    if bad is not None:
        raise ToolError("engine_error", f"the model returned a non-finite {bad} ({what})")


def langevin(
    atoms: Any,
    calc: Any,
    *,
    steps: int,
    timestep_fs: float,
    temperature_k: float,
    friction_per_fs: float,
    seed: int,
    report_every: int,
    trajectory: Path,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """NVT Langevin dynamics from Maxwell-Boltzmann velocities; frames appended to an XYZ file."""
    import numpy as np
    from ase import units
    from ase.io import write
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation

    atoms.calc = calc
    rng = np.random.default_rng(seed)
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature_k, rng=rng)
    Stationary(atoms)
    ZeroRotation(atoms)
    dyn = Langevin(
        atoms,
        timestep=timestep_fs * units.fs,
        temperature_K=temperature_k,
        friction=friction_per_fs / units.fs,
        fixcm=False,
        rng=rng,
    )
    series: list[dict[str, float]] = []
    if trajectory.exists():
        trajectory.unlink()

    def record() -> None:
        epot = float(atoms.get_potential_energy())
        ekin = float(atoms.get_kinetic_energy())
        series.append(
            {
                "step": int(dyn.nsteps),
                "time_fs": round(dyn.nsteps * timestep_fs, 3),
                "epot_ev": round(epot, 6),
                "ekin_ev": round(ekin, 6),
                "temperature_k": round(float(atoms.get_temperature()), 2),
            }
        )
        write(
            str(trajectory), atoms, format="xyz", append=True, comment=f"step={dyn.nsteps} epot_ev={epot:.6f}"
        )
        if progress is not None:
            progress(dyn.nsteps)

    dyn.attach(record, interval=report_every)  # ASE also calls it at step 0
    dyn.run(steps)
    temps = np.asarray([s["temperature_k"] for s in series[len(series) // 2 :]], dtype=float)
    epots = np.asarray([s["epot_ev"] for s in series], dtype=float)
    check_finite(float(epots.sum()) + float(temps.sum()), atoms.get_forces(), f"during {steps} MD steps")
    return {
        "md": {
            "steps": steps,
            "timestep_fs": timestep_fs,
            "temperature_target_k": temperature_k,
            "temperature_mean_second_half_k": round(float(temps.mean()), 2) if len(temps) else None,
            "epot_mean_ev": round(float(epots.mean()), 6),
            "epot_std_ev": round(float(epots.std()), 6),
            "n_frames": len(series),
            "series": series if len(series) <= 60 else series[:: max(1, len(series) // 60)],
        },
        "energy_ev": round(float(atoms.get_potential_energy()), 6),
    }
