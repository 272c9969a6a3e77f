"""The MD cost estimate against measured runs: calibrated per machine, its error in provenance."""

from __future__ import annotations

import pytest

from tools_server.md.tools import MdRunInput, md_run


def _run(md_ctx, waters: int) -> dict:
    ctx = md_ctx(job_id=f"cost-{waters}")
    args = MdRunInput(
        components=[{"smiles": "O", "count": waters}],
        cutoff_nm=0.7,
        minimize_max_iterations=100,
        equilibration_ps=0.5,
        production_ps=2,
        report_interval_ps=0.5,
        nve_check_ps=0.2,
    )
    out = md_run(args, ctx)
    return {**ctx.engine["cost"], "atoms": out["system"].get("n_atoms")}


@pytest.mark.slow
def test_estimate_within_2x_of_measured_for_three_sizes(md_ctx):
    # spu_env gives a fresh cache: the first run calibrates this machine, then three sizes are estimated.
    first = _run(md_ctx, 150)
    assert first["calibration"]["runs"] == 0
    rows = [_run(md_ctx, n) for n in (150, 300, 600)]
    assert all(r["calibration"]["runs"] >= 1 for r in rows)
    for row in rows:
        assert 0.5 <= row["estimate_ratio"] <= 2.0, rows
