"""The MD protocol: minimise, equilibrate, produce, then check energy conservation in a short NVE window."""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass
from typing import Any

from tools_server.engines.protein_system import BuiltSystem
from tools_server.md.liquid import AMU_G, NM3_CM3
from tools_server.plugin import ToolContext, ToolError

#: Atom-steps per second per CPU thread, measured here: ~29 ns/day for 4,000 atoms in water on 2 cores
#: at 2 fs (measured on a 2-core development machine). A GPU does roughly 100x more.
CPU_ATOM_STEPS_PER_S_PER_THREAD = 3.4e5
GPU_ATOM_STEPS_PER_S = 4.0e7
#: One L-BFGS minimisation iteration (line search included) costs about five MD steps: 100 iterations on
#: 150 TIP3P waters took 0.48-0.79 s against 0.10-0.12 s for 100 steps (one thread, measured here).
MINIMIZE_ITERATION_STEPS = 5
#: Fixed cost of a run whatever its size (two contexts, reporters, output files), in seconds; on a GPU it
#: includes compiling the CUDA kernels (an assumption of a few seconds: not measured on this machine kind).
CPU_SETUP_S = 0.5
GPU_SETUP_S = 3.0
#: Hydrogen mass after repartitioning, for a 4 fs step (3x the hydrogen mass, heavy atoms pay the difference).
HMR_HYDROGEN_MASS_AMU = 3.024
#: NVE drift above this (kT per degree of freedom per ns) is reported as a warning.
DRIFT_WARN_KT_PER_DOF_NS = 0.05


@dataclass
class Protocol:
    temperature_k: float
    pressure_bar: float | None
    timestep_fs: float
    hydrogen_mass_repartitioning: bool
    friction_per_ps: float
    minimize_max_iterations: int
    equilibration_ps: float
    production_ps: float
    report_interval_ps: float
    nve_check_ps: float
    seed: int

    def steps(self, ps: float) -> int:
        return round(ps * 1000.0 / self.timestep_fs)

    @property
    def total_steps(self) -> int:
        return (
            self.steps(self.equilibration_ps) + self.steps(self.production_ps) + self.steps(self.nve_check_ps)
        )


def estimate_seconds(n_atoms: int, protocol: Protocol, device: str, threads: int) -> float:
    """The scaling law: seconds for ``protocol`` on ``n_atoms`` on the reference machine.

    A fixed set-up (contexts, reporters) plus atom-steps, where each minimisation iteration costs
    :data:`MINIMIZE_ITERATION_STEPS` steps. Without these two terms a small box's calibration folded its
    fixed cost into the per-atom-step rate, and 600 waters were estimated at 2.2x their measured time."""
    if device == "cuda":
        setup_s, rate = GPU_SETUP_S, GPU_ATOM_STEPS_PER_S
    else:
        setup_s, rate = CPU_SETUP_S, CPU_ATOM_STEPS_PER_S_PER_THREAD * max(1, threads)
    steps = protocol.total_steps + MINIMIZE_ITERATION_STEPS * protocol.minimize_max_iterations
    return setup_s + n_atoms * steps / rate


def choose_platform(ctx: ToolContext) -> tuple[Any, dict[str, str], str]:
    """CUDA when the worker has a GPU and OpenMM's CUDA platform loads, else CPU with ``ctx.threads``."""
    import openmm

    if ctx.gpu_available:
        try:
            return openmm.Platform.getPlatformByName("CUDA"), {"Precision": "mixed"}, "cuda"
        except Exception:
            ctx.warn("A GPU is present but OpenMM's CUDA platform did not load; ran on the CPU.")
    return openmm.Platform.getPlatformByName("CPU"), {"Threads": str(max(1, ctx.threads))}, "cpu"


def repartition_hydrogen_mass(system: Any, topology: Any, hydrogen_mass_amu: float) -> int:
    """Move mass from heavy atoms to their bonded hydrogens (water excluded); returns how many hydrogens."""
    from openmm import app

    count = 0
    for a, b in topology.bonds():
        if a.residue.name == "HOH":
            continue
        for h, heavy in ((a, b), (b, a)):
            if h.element is app.element.hydrogen and heavy.element is not app.element.hydrogen:
                extra = hydrogen_mass_amu - system.getParticleMass(h.index)._value
                if extra <= 0:
                    continue
                system.setParticleMass(h.index, hydrogen_mass_amu)
                system.setParticleMass(heavy.index, system.getParticleMass(heavy.index)._value - extra)
                count += 1
    return count


def degrees_of_freedom(system: Any) -> int:
    import openmm

    dof = sum(3 for i in range(system.getNumParticles()) if system.getParticleMass(i)._value > 0)
    dof -= system.getNumConstraints()
    if any(isinstance(system.getForce(i), openmm.CMMotionRemover) for i in range(system.getNumForces())):
        dof -= 3
    return dof


def run_protocol(built: BuiltSystem, protocol: Protocol, ctx: ToolContext) -> dict[str, Any]:
    """Run the protocol on ``built``; write trajectory.xtc, topology.pdb, final.pdb, thermo.csv artifacts."""
    import numpy as np
    import openmm
    from openmm import app, unit

    system = built.system
    if protocol.hydrogen_mass_repartitioning:
        repartition_hydrogen_mass(system, built.topology, HMR_HYDROGEN_MASS_AMU)
    total_mass_amu = sum(system.getParticleMass(i)._value for i in range(system.getNumParticles()))
    barostat_index = None
    if protocol.pressure_bar is not None:
        if not built.periodic:
            raise ToolError(
                "invalid_input", "pressure_bar needs a periodic box (explicit solvent or a liquid)."
            )
        barostat_index = system.addForce(
            openmm.MonteCarloBarostat(
                protocol.pressure_bar * unit.bar, protocol.temperature_k * unit.kelvin, 25
            )
        )
    platform, properties, device = choose_platform(ctx)
    ctx.set_engine("openmm", openmm.__version__, device=device)
    integrator = openmm.LangevinMiddleIntegrator(
        protocol.temperature_k * unit.kelvin,
        protocol.friction_per_ps / unit.picosecond,
        protocol.timestep_fs * unit.femtosecond,
    )
    integrator.setRandomNumberSeed(protocol.seed)
    simulation = app.Simulation(built.topology, system, integrator, platform, properties)
    simulation.context.setPositions(built.positions_nm * unit.nanometer)
    dof = degrees_of_freedom(system)
    kt_kj = (
        unit.MOLAR_GAS_CONSTANT_R.value_in_unit(unit.kilojoule_per_mole / unit.kelvin)
        * protocol.temperature_k
    )

    ctx.progress(0.01, "minimising")
    e0 = _potential(simulation)
    _guard(lambda: simulation.minimizeEnergy(maxIterations=protocol.minimize_max_iterations), "minimisation")
    e_min = _potential(simulation)
    max_force = _max_force(simulation)
    if not math.isfinite(e_min):
        raise ToolError("not_converged", "The energy is not finite after minimisation: atoms overlap.")
    with open(ctx.artifact("topology.pdb"), "w") as fh:
        app.PDBFile.writeFile(simulation.topology, _positions(simulation), fh, keepIds=True)

    simulation.context.setVelocitiesToTemperature(protocol.temperature_k * unit.kelvin, protocol.seed)
    interval = max(1, protocol.steps(protocol.report_interval_ps))
    total = max(1, protocol.total_steps)
    t_start = time.perf_counter()
    done = 0

    def advance(n_steps: int, label: str, rows: list | None) -> None:
        nonlocal done
        remaining = n_steps
        while remaining > 0:
            chunk = min(interval, remaining)
            _guard(lambda chunk=chunk: simulation.step(chunk), label)
            remaining -= chunk
            done += chunk
            if rows is not None:
                rows.append(_sample(simulation, dof, total_mass_amu))
            ctx.progress(0.02 + 0.97 * done / total, f"{label}: {done}/{total} steps")

    equil_rows: list = []
    # Minimisation leaves the system far from equipartition; couple strongly to the bath for the first
    # half of equilibration so short runs reach the target temperature, then use the production friction.
    equil_steps = protocol.steps(protocol.equilibration_ps)
    integrator = simulation.integrator
    if hasattr(integrator, "setFriction") and equil_steps > 1:
        integrator.setFriction(max(10.0, protocol.friction_per_ps) / unit.picosecond)
        advance(equil_steps // 2, "equilibration", equil_rows)
        integrator.setFriction(protocol.friction_per_ps / unit.picosecond)
        equil_steps -= equil_steps // 2
    advance(equil_steps, "equilibration", equil_rows)
    traj_path = ctx.artifact("trajectory.xtc")
    simulation.reporters.append(app.XTCReporter(str(traj_path), interval, enforcePeriodicBox=False))
    prod_rows: list = []
    t_prod = time.perf_counter()
    advance(protocol.steps(protocol.production_ps), "production", prod_rows)
    prod_wall = time.perf_counter() - t_prod
    simulation.reporters.clear()
    with open(ctx.artifact("final.pdb"), "w") as fh:
        app.PDBFile.writeFile(simulation.topology, _positions(simulation), fh, keepIds=True)
    _write_thermo(ctx.artifact("thermo.csv"), equil_rows, prod_rows, protocol)

    drift = None
    if protocol.nve_check_ps > 0:
        state = simulation.context.getState(getPositions=True, getVelocities=True, enforcePeriodicBox=False)
        if barostat_index is not None:
            system.removeForce(barostat_index)
        nve = openmm.VerletIntegrator(protocol.timestep_fs * unit.femtosecond)
        nve.setConstraintTolerance(1e-6)
        context = openmm.Context(system, nve, platform, properties)
        context.setPeriodicBoxVectors(*state.getPeriodicBoxVectors())
        context.setPositions(state.getPositions())
        context.setVelocities(state.getVelocities())
        drift = _nve_drift(context, nve, protocol, interval, dof, kt_kj, lambda n: None)
        done = total
    ctx.progress(1.0, "done")

    rows = prod_rows or equil_rows
    temps = np.array([r["temperature_k"] for r in rows])
    result: dict[str, Any] = {
        "n_atoms": system.getNumParticles(),
        "degrees_of_freedom": dof,
        "device": device,
        "minimization": {
            "initial_potential_kj_mol": round(e0, 2) if math.isfinite(e0) else None,
            "final_potential_kj_mol": round(e_min, 2),
            "max_force_kj_mol_nm": round(max_force, 1),
        },
        "production": {
            "time_ns": round(protocol.production_ps / 1000.0, 6),
            "frames": len(prod_rows),
            "temperature_k_mean": round(float(temps.mean()), 2),
            "temperature_k_std": round(float(temps.std()), 2),
            "potential_kj_mol_mean": round(float(np.mean([r["potential_kj_mol"] for r in rows])), 2),
        },
        "ns_per_day": round(protocol.production_ps / 1000.0 / prod_wall * 86400.0, 2)
        if prod_wall > 0
        else None,
        "wall_s": round(time.perf_counter() - t_start, 2),
    }
    if built.periodic:
        dens = np.array([r["density_g_cm3"] for r in rows])
        vol = np.array([r["volume_nm3"] for r in rows])
        result["production"].update(
            {
                "density_g_cm3_mean": round(float(dens.mean()), 4),
                "density_g_cm3_std": round(float(dens.std()), 4),
                "volume_nm3_mean": round(float(vol.mean()), 3),
                "box_edge_nm_final": round(float(rows[-1]["box_nm"]), 4),
            }
        )
        _check_density(ctx, dens, protocol)
    if drift is not None:
        result["nve_check"] = drift
        significant = abs(drift["drift_kj_mol_per_ns"]) > 3 * drift["drift_stderr_kj_mol_per_ns"]
        if significant and abs(drift["drift_kt_per_dof_per_ns"]) > DRIFT_WARN_KT_PER_DOF_NS:
            ctx.warn(
                f"Energy drift in the NVE check is {drift['drift_kt_per_dof_per_ns']:.3g} kT per degree of "
                "freedom "
                f"per ns (threshold {DRIFT_WARN_KT_PER_DOF_NS}): use a smaller timestep or check the system."
            )
    if abs(temps.mean() - protocol.temperature_k) > 0.03 * protocol.temperature_k:
        ctx.warn(
            f"Mean production temperature {temps.mean():.1f} K is more than 3% from the target "
            f"{protocol.temperature_k} K: the system may be unstable or too short to average."
        )
    if max_force > 1e4:
        ctx.warn(f"Largest force after minimisation is {max_force:.3g} kJ/mol/nm: bad contacts may remain.")
    result["artifacts"] = {
        "trajectory_xtc": str(traj_path),
        "topology_pdb": str(ctx.artifact("topology.pdb")),
        "final_pdb": str(ctx.artifact("final.pdb")),
        "thermo_csv": str(ctx.artifact("thermo.csv")),
    }
    return result


def _guard(fn, label: str) -> None:
    try:
        fn()
    except Exception as exc:
        if "nan" in str(exc).lower() or "infinit" in str(exc).lower():
            raise ToolError(
                "not_converged",
                f"The simulation became unstable during {label} ({exc}).",
                hint="Use a smaller timestep (1 fs), longer minimisation, or check the structure for "
                "clashes.",
            ) from exc
        raise


def _potential(simulation) -> float:
    from openmm import unit

    return (
        simulation.context.getState(getEnergy=True)
        .getPotentialEnergy()
        .value_in_unit(unit.kilojoule_per_mole)
    )


def _max_force(simulation) -> float:
    import numpy as np
    from openmm import unit

    forces = simulation.context.getState(getForces=True).getForces(asNumpy=True)
    return float(np.linalg.norm(forces.value_in_unit(unit.kilojoule_per_mole / unit.nanometer), axis=1).max())


def _positions(simulation):
    return simulation.context.getState(getPositions=True, enforcePeriodicBox=False).getPositions()


def _sample(simulation, dof: int, total_mass_amu: float) -> dict[str, float]:
    from openmm import unit

    state = simulation.context.getState(getEnergy=True)
    ke = state.getKineticEnergy().value_in_unit(unit.kilojoule_per_mole)
    r_kj = unit.MOLAR_GAS_CONSTANT_R.value_in_unit(unit.kilojoule_per_mole / unit.kelvin)
    box = state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    volume = float(box[0][0] * box[1][1] * box[2][2])
    return {
        "time_ps": state.getTime().value_in_unit(unit.picosecond),
        "potential_kj_mol": state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole),
        "kinetic_kj_mol": ke,
        "temperature_k": 2 * ke / (dof * r_kj),
        "volume_nm3": volume,
        "box_nm": float(box[0][0]),
        "density_g_cm3": total_mass_amu * AMU_G / (volume * NM3_CM3),
    }


def _write_thermo(path, equil_rows: list, prod_rows: list, protocol: Protocol) -> None:
    fields = [
        "phase",
        "time_ps",
        "potential_kj_mol",
        "kinetic_kj_mol",
        "temperature_k",
        "volume_nm3",
        "density_g_cm3",
    ]
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(fields)
        for phase, rows in (("equilibration", equil_rows), ("production", prod_rows)):
            for r in rows:
                writer.writerow([phase] + [f"{r[f]:.6g}" for f in fields[1:]])


def _nve_drift(context, integrator, protocol: Protocol, interval: int, dof: int, kt_kj: float, _tick) -> dict:
    """Total-energy slope over a short NVE window, in kJ/mol/ns and in kT per degree of freedom per ns."""
    import numpy as np
    from openmm import unit

    n = protocol.steps(protocol.nve_check_ps)
    every = max(1, min(interval, n // 20 or 1))
    times, energies = [], []
    for _ in range(max(2, n // every)):
        _guard(lambda: integrator.step(every), "the NVE check")
        st = context.getState(getEnergy=True)
        times.append(st.getTime().value_in_unit(unit.nanosecond))
        energies.append(
            (st.getPotentialEnergy() + st.getKineticEnergy()).value_in_unit(unit.kilojoule_per_mole)
        )
    t = np.asarray(times) - times[0]
    e = np.asarray(energies)
    slope, intercept = np.polyfit(t, e, 1)
    resid = e - (slope * t + intercept)
    stderr = float(
        np.sqrt(resid.var() * len(t) / max(1, len(t) - 2) / max(1e-30, ((t - t.mean()) ** 2).sum()))
    )
    return {
        "time_ps": round(protocol.nve_check_ps, 4),
        "drift_kj_mol_per_ns": round(float(slope), 3),
        "drift_kt_per_dof_per_ns": round(slope / (kt_kj * dof), 5),
        "drift_stderr_kj_mol_per_ns": round(stderr, 3),
        "total_energy_std_kj_mol": round(float(np.std(energies)), 3),
    }


def _check_density(ctx: ToolContext, dens, protocol: Protocol) -> None:
    if protocol.pressure_bar is None or len(dens) < 4:
        return
    half = len(dens) // 2
    first, second = float(dens[:half].mean()), float(dens[half:].mean())
    if abs(second - first) > 0.02 * second:
        ctx.warn(
            f"Density still changing between halves of production ({first:.4f} -> {second:.4f} g/cm3): "
            "equilibrate longer before trusting averages."
        )
