"""Trajectory analyses with mdtraj; every number carries its unit in its name."""

from __future__ import annotations

from typing import Any

from tools_server.plugin import ToolError, private_copy

#: Per-residue lists longer than this go to a CSV artifact only.
MAX_INLINE_RESIDUES = 300
#: 1 nm^2/ps in units of 1e-5 cm^2/s.
NM2_PS_TO_1E5_CM2_S = 1e3


def load_trajectory(trajectory_path: str, topology_path: str, stride: int) -> Any:
    """The trajectory, read by mdtraj from private copies of both files (mdtraj opens files by name)."""
    import mdtraj

    with (
        private_copy(trajectory_path, kind="trajectory") as trajectory,
        private_copy(topology_path, kind="structure") as topology,
    ):
        try:
            return mdtraj.load(str(trajectory), top=str(topology), stride=stride)
        except MemoryError:
            raise
        except Exception as exc:  # mdtraj's parsers raise anything on a malformed file (IndexError, KeyError)
            raise ToolError(
                "invalid_input", f"Could not read the trajectory: {type(exc).__name__}: {exc}"
            ) from exc


def select(traj: Any, selection: str) -> Any:
    import numpy as np

    try:
        idx = traj.topology.select(selection)
    except Exception as exc:
        raise ToolError("invalid_input", f"Bad atom selection {selection!r}: {exc}") from exc
    if len(idx) == 0:
        raise ToolError("invalid_input", f"The selection {selection!r} matches no atoms.")
    return np.asarray(idx)


def rmsd(traj: Any, atoms: Any) -> dict[str, Any]:
    import mdtraj

    values = mdtraj.rmsd(traj, traj, 0, atom_indices=atoms)
    return {
        "reference": "first frame, after superposition",
        "n_atoms": len(atoms),
        "rmsd_nm_mean": round(float(values.mean()), 4),
        "rmsd_nm_max": round(float(values.max()), 4),
        "rmsd_nm_final": round(float(values[-1]), 4),
        "series_nm": values,
    }


def rmsf_per_residue(traj: Any, atoms: Any) -> dict[str, Any]:
    """RMSF of each residue's atoms in ``atoms`` (mean over them) after superposing on those atoms."""
    import mdtraj
    import numpy as np

    fitted = traj.superpose(traj, 0, atom_indices=atoms)
    per_atom = mdtraj.rmsf(fitted, None, atom_indices=atoms)
    by_residue: dict[Any, list[float]] = {}
    for value, index in zip(per_atom, atoms, strict=True):
        by_residue.setdefault(traj.topology.atom(int(index)).residue, []).append(float(value))
    rows = [
        {
            "residue": f"{res.name}{res.resSeq}",
            "chain": res.chain.index,
            "rmsf_nm": round(float(np.mean(v)), 4),
        }
        for res, v in by_residue.items()
    ]
    top = sorted(rows, key=lambda r: -r["rmsf_nm"])[:10]
    return {"n_residues": len(rows), "most_flexible": top, "rows": rows}


def radius_of_gyration(traj: Any, atoms: Any) -> dict[str, Any]:
    import mdtraj
    import numpy as np

    sub = traj.atom_slice(atoms)
    masses = np.array([a.element.mass for a in sub.topology.atoms])
    rg = mdtraj.compute_rg(sub, masses=masses)
    return {"rg_nm_mean": round(float(rg.mean()), 4), "rg_nm_std": round(float(rg.std()), 4), "series_nm": rg}


def sasa(traj: Any, atoms: Any, max_frames: int) -> dict[str, Any]:
    import mdtraj
    import numpy as np

    sub = traj.atom_slice(atoms)
    stride = max(1, int(np.ceil(sub.n_frames / max_frames)))
    sub = sub[::stride]
    total = mdtraj.shrake_rupley(sub, mode="residue").sum(axis=1)
    return {
        "method": "Shrake-Rupley, probe 0.14 nm, on the selection alone",
        "frames_used": int(sub.n_frames),
        "sasa_nm2_mean": round(float(total.mean()), 2),
        "sasa_nm2_std": round(float(total.std()), 2),
    }


def hydrogen_bonds(traj: Any, atoms: Any, min_occupancy: float) -> dict[str, Any]:
    import mdtraj

    sub = traj.atom_slice(atoms)
    triplets = mdtraj.baker_hubbard(sub, freq=min_occupancy, periodic=False)
    labels = [f"{sub.topology.atom(int(d))} -- {sub.topology.atom(int(a))}" for d, _h, a in triplets[:20]]
    per_frame = mdtraj.baker_hubbard(sub, freq=0.0, periodic=False)
    return {
        "method": "Baker-Hubbard (D-H...A angle > 120 deg, H...A < 0.25 nm)",
        "min_occupancy": min_occupancy,
        "n_persistent": len(triplets),
        "n_distinct_any_frame": len(per_frame),
        "persistent_examples": labels,
    }


def density(traj: Any) -> dict[str, Any]:
    import numpy as np

    from tools_server.md.liquid import AMU_G, NM3_CM3

    if traj.unitcell_volumes is None:
        raise ToolError("invalid_input", "Density needs a periodic box; this trajectory has none.")
    mass_amu = sum(a.element.mass for a in traj.topology.atoms)
    rho = mass_amu * AMU_G / (np.asarray(traj.unitcell_volumes) * NM3_CM3)
    return {
        "density_g_cm3_mean": round(float(rho.mean()), 4),
        "density_g_cm3_std": round(float(rho.std()), 4),
    }


def diffusion(
    traj: Any, atoms: Any, frame_interval_ps: float, fit_window: tuple[float, float]
) -> dict[str, Any]:
    """Self-diffusion coefficient of the residues (molecules) in ``atoms`` from the centre-of-mass MSD.

    Einstein relation in 3D, MSD = 6 D t, fitted over the lag-time window given as fractions of the
    trajectory. Coordinates must be unwrapped (md_run writes them so). No finite-size correction.
    """
    import numpy as np

    residues: dict[int, list[int]] = {}
    for index in atoms:
        residues.setdefault(traj.topology.atom(int(index)).residue.index, []).append(int(index))
    if traj.n_frames < 5:
        raise ToolError("invalid_input", "Diffusion needs at least 5 frames.")
    masses = np.array([a.element.mass for a in traj.topology.atoms])
    coms = []
    for idx in residues.values():
        w = masses[idx] / masses[idx].sum()
        coms.append(np.einsum("fai,a->fi", traj.xyz[:, idx, :], w))
    com = np.stack(coms, axis=1)  # frames, molecules, 3
    com -= com.mean(axis=1, keepdims=True)  # remove net drift of the whole selection
    n = traj.n_frames
    lags = np.arange(1, n // 2 + 1)
    msd = np.array([np.mean(np.sum((com[lag:] - com[:-lag]) ** 2, axis=2)) for lag in lags])
    lag_ps = lags * frame_interval_ps
    lo = max(0, int(fit_window[0] * len(lags)))
    hi = max(lo + 2, int(fit_window[1] * len(lags)))
    slope = np.polyfit(lag_ps[lo:hi], msd[lo:hi], 1)[0]
    d = slope / 6.0
    return {
        "n_molecules": len(residues),
        "fit_lag_ps": [round(float(lag_ps[lo]), 3), round(float(lag_ps[min(hi, len(lag_ps)) - 1]), 3)],
        "diffusion_1e-5_cm2_s": round(float(d * NM2_PS_TO_1E5_CM2_S), 4),
        "diffusion_nm2_ps": round(float(d), 6),
        "note": "no finite-size (Yeh-Hummer) correction; short runs give noisy values",
        "msd_nm2": msd,
        "lag_ps": lag_ps,
    }
