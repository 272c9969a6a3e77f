"""The ``spu doctor`` checks of this domain: a tiny real computation per engine, compared with a known value.

OpenMM: the platforms, and one harmonic bond stretched by 0.1 nm with k = 1000 kJ/mol/nm², whose energy is
5 kJ/mol exactly (and the same on the CUDA platform when a GPU is present); mdtraj: one distance (0.3 nm);
PDBFixer imports.
"""

from tools_server.plugin import DoctorCheck

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        "openmm",
        "OpenMM (molecular dynamics)",
        """
            import openmm as mm, openmm.unit as u
            names = [mm.Platform.getPlatform(i).getName() for i in range(mm.Platform.getNumPlatforms())]
            system = mm.System(); system.addParticle(1.0); system.addParticle(1.0)
            bond = mm.HarmonicBondForce(); bond.addBond(0, 1, 0.1, 1000.0); system.addForce(bond)
            platform = "CPU" if "CPU" in names else "Reference"
            ctx = mm.Context(system, mm.VerletIntegrator(0.001), mm.Platform.getPlatformByName(platform))
            ctx.setPositions([[0, 0, 0], [0.2, 0, 0]])
            e = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            assert abs(e - 5.0) < 1e-4, f"bond energy {e} kJ/mol, expected 5"
            failures = [f.splitlines()[0] for f in mm.Platform.getPluginLoadFailures()]
            report(version=mm.__version__, detail=f"platforms {', '.join(names)}; bond energy {e:.3f} kJ/mol",
                   platforms=names, plugin_failures=failures)
            """,
        "pip install 'spu-scaffold[md]'",
    ),
    DoctorCheck(
        "openmm-cuda",
        "OpenMM CUDA platform",
        """
            import openmm as mm, openmm.unit as u
            names = [mm.Platform.getPlatform(i).getName() for i in range(mm.Platform.getNumPlatforms())]
            if "CUDA" not in names:
                failures = "; ".join(f.splitlines()[0] for f in mm.Platform.getPluginLoadFailures())
                platforms, failed = ", ".join(names), failures or "none"
                raise SystemExit(f"no CUDA platform (platforms: {platforms}; plugin failures: {failed})")
            system = mm.System(); system.addParticle(1.0); system.addParticle(1.0)
            bond = mm.HarmonicBondForce(); bond.addBond(0, 1, 0.1, 1000.0); system.addForce(bond)
            ctx = mm.Context(system, mm.VerletIntegrator(0.001), mm.Platform.getPlatformByName("CUDA"))
            ctx.setPositions([[0, 0, 0], [0.2, 0, 0]])
            e = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            assert abs(e - 5.0) < 1e-3, f"bond energy {e} kJ/mol on CUDA, expected 5"
            report(version=mm.__version__, detail=f"CUDA platform: bond energy {e:.3f} kJ/mol")
            """,
        "pip install 'openmm[cuda12]' (the OpenMM-CUDA-12 plugin; the plain openmm wheel has no CUDA "
        "platform)",
        gpu_only=True,
        timeout_s=300,
    ),
    DoctorCheck(
        "mdtraj",
        "mdtraj (trajectory analysis)",
        """
            import numpy as np, mdtraj as md
            top = md.Topology()
            res = top.add_residue("ARG", top.add_chain())
            top.add_atom("A", md.element.carbon, res); top.add_atom("B", md.element.carbon, res)
            traj = md.Trajectory(np.array([[[0, 0, 0], [0.3, 0, 0]]], dtype=np.float32), top)
            d = float(md.compute_distances(traj, [[0, 1]])[0, 0])
            assert abs(d - 0.3) < 1e-6, f"distance {d} nm, expected 0.3"
            report(version=md.__version__, detail=f"distance {d:.3f} nm")
            """,
        "pip install 'spu-scaffold[md]' (mdtraj)",
    ),
    DoctorCheck(
        "pdbfixer",
        "PDBFixer",
        """
            import importlib.metadata as md
            import pdbfixer
            report(version=md.version("pdbfixer"), detail="imports")
            """,
        "pip install 'spu-scaffold[md]' (pdbfixer)",
    ),
)
