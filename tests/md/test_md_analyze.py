"""md_analyze's estimators on synthetic trajectories whose answers are known exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

mdtraj = pytest.importorskip("mdtraj")

from tools_server.md.tools import MdAnalyzeInput, md_analyze  # noqa: E402 - after the skip


def _argon_like(n_frames: int, n_particles: int, box_nm: float, step_sigma_nm: float, seed: int = 0):
    top = mdtraj.Topology()
    chain = top.add_chain()
    for _ in range(n_particles):
        res = top.add_residue("AR", chain)
        top.add_atom("AR", mdtraj.element.argon, res)
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, box_nm, size=(1, n_particles, 3))
    steps = rng.normal(0, step_sigma_nm, size=(n_frames - 1, n_particles, 3))
    xyz = np.concatenate([start, start + np.cumsum(steps, axis=0)]).astype(np.float32)
    lengths = np.full((n_frames, 3), box_nm, dtype=np.float32)
    angles = np.full((n_frames, 3), 90.0, dtype=np.float32)
    return mdtraj.Trajectory(
        xyz, top, time=np.arange(n_frames) * 2.0, unitcell_lengths=lengths, unitcell_angles=angles
    )


def test_diffusion_and_density_of_a_random_walk(spu_env):
    work = Path(spu_env["SPU_WORKDIR"])  # files tools read lie under the allowed roots
    from tools_server.core.context import ToolContext

    # Random walk with per-axis step variance s^2 per 2 ps frame: MSD = 3 s^2 per frame, so
    # D = 3 s^2 / (6 * 2 ps) = s^2 / 4 nm^2/ps.
    sigma = 0.05
    traj = _argon_like(n_frames=200, n_particles=400, box_nm=3.0, step_sigma_nm=sigma)
    traj[0].save_pdb(str(work / "top.pdb"))
    traj.save_xtc(str(work / "traj.xtc"))

    out = md_analyze(
        MdAnalyzeInput(trajectory_path=str(work / "traj.xtc"), topology_path=str(work / "top.pdb")),
        ToolContext("md_analyze", "j1"),
    )
    expected_nm2_ps = sigma**2 / 4
    assert out.frame_interval_ps == pytest.approx(2.0)
    assert out.diffusion["diffusion_nm2_ps"] == pytest.approx(expected_nm2_ps, rel=0.05)
    assert out.diffusion["diffusion_1e-5_cm2_s"] == pytest.approx(expected_nm2_ps * 1e3, rel=0.05)
    # 400 argon atoms (39.948 g/mol) in 27 nm3: 400*39.948/6.02214076e23/27e-21 = 0.9827 g/cm3.
    assert out.density["density_g_cm3_mean"] == pytest.approx(0.9827, abs=2e-4)


def test_bad_selection_is_invalid_input(spu_env):
    work = Path(spu_env["SPU_WORKDIR"])  # files tools read lie under the allowed roots
    from tools_server.core.context import ToolContext
    from tools_server.core.errors import ToolError

    traj = _argon_like(n_frames=6, n_particles=4, box_nm=2.0, step_sigma_nm=0.01)
    traj[0].save_pdb(str(work / "top.pdb"))
    traj.save_xtc(str(work / "traj.xtc"))
    with pytest.raises(ToolError) as err:
        md_analyze(
            MdAnalyzeInput(
                trajectory_path=str(work / "traj.xtc"),
                topology_path=str(work / "top.pdb"),
                analyses=["rg"],
                selection="resname XYZ",
            ),
            ToolContext("md_analyze", "j2"),
        )
    assert err.value.code == "invalid_input"
