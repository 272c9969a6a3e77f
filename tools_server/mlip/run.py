"""Single points, optimisations and Langevin MD with an ASE calculator (one molecule at a time)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

EV_PER_HARTREE = 27.211386245988
KCAL_PER_EV = 23.060547830619026


def atoms_from(numbers: list[int], coords: Any) -> Any:
    import numpy as np
    from ase import Atoms

    return Atoms(numbers=list(numbers), positions=np.asarray(coords, dtype=float))


def _forces_summary(forces: Any, inline: bool) -> dict[str, Any]:
    import numpy as np

    f = np.asarray(forces, dtype=float)
    norms = np.linalg.norm(f, axis=1) if len(f) else np.zeros(0)
    out: dict[str, Any] = {
        "max_force_ev_a": round(float(norms.max()) if len(norms) else 0.0, 6),
        "rms_force_ev_a": round(float(np.sqrt((f**2).sum(axis=1).mean())) if len(f) else 0.0, 6),
    }
    if inline:
        out["forces_ev_a"] = [[round(float(x), 6) for x in row] for row in f]
    return out


def check_finite(energy_ev: float, forces: Any, what: str) -> None:
    """Raise ``engine_error`` when a model returns NaN or infinity (SevenNet does for some inputs)."""
    from tools_server.core.errors import ToolError
    from tools_server.molecules import first_non_finite

    bad = first_non_finite({"energy": energy_ev, "forces": forces})
    if bad is not None:
        raise ToolError("engine_error", f"the model returned a non-finite {bad} ({what})")


def energy(atoms: Any, calc: Any, inline_forces: bool) -> dict[str, Any]:
    atoms.calc = calc
    e = float(atoms.get_potential_energy())
    forces = atoms.get_forces()
    check_finite(e, forces, "single point")
    return {
        "energy_ev": round(e, 6),
        "energy_hartree": round(e / EV_PER_HARTREE, 8),
        **_forces_summary(forces, inline_forces),
    }


def optimize(
    atoms: Any, calc: Any, fmax: float, max_steps: int, progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """BFGS to ``fmax`` eV/Å through the shared pipeline (:func:`tools_server.qc.pipeline.optimize`);
    ``atoms`` end at the optimised geometry."""
    from tools_server.core.errors import ToolError
    from tools_server.qc import pipeline
    from tools_server.qc.calculator import AseCalculator, CalculatorError

    numbers = list(atoms.get_atomic_numbers())
    try:
        opt = pipeline.optimize(
            AseCalculator(calc, numbers),
            numbers,
            atoms.get_positions(),
            optimizer="bfgs",
            fmax_ev_a=fmax,
            max_steps=max_steps,
            step_callback=(lambda k, e: progress(k)) if progress is not None else None,
        )
    except CalculatorError as exc:
        raise ToolError(exc.code, exc.message) from None
    atoms.positions = opt.coords_angstrom
    atoms.calc = calc
    e = float(atoms.get_potential_energy())
    check_finite(e, atoms.get_forces(), f"after {opt.n_steps} optimisation steps")
    return {
        "energy_ev": round(e, 6),
        "energy_hartree": round(e / EV_PER_HARTREE, 8),
        "optimization": {"converged": opt.converged, "n_steps": opt.n_steps, "fmax_ev_a": fmax},
        **_forces_summary(atoms.get_forces(), False),
    }


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
