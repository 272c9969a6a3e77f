"""The DFT cost estimate: its scaling law, this machine's calibration, and its error in provenance."""

from __future__ import annotations

import pytest

from tools_server.core.calibration import CostModel
from tools_server.core.context import ToolContext
from tools_server.qc import tools as Q
from tools_server.qc.dft import estimate_cpu_seconds


def test_more_cores_barely_help_as_measured():
    # Caffeine B3LYP/def2-SVP (246 basis functions, density fitting): 34 s on 2 cores, 33 s on a 16-core
    # machine. The old law divided by the cores and estimated 4.3 s on 16 (8x off); this one stays within 2x.
    two = estimate_cpu_seconds(246, 24, "energy", cores=2, density_fitting=True)
    sixteen = estimate_cpu_seconds(246, 24, "energy", cores=16, density_fitting=True)
    assert two == pytest.approx(34, rel=0.25)
    assert 33 / 2 < sixteen < 33 * 2
    assert sixteen < two


def test_machine_factor_is_the_median_of_recent_runs(tmp_path):
    model = CostModel("dft_cpu", root=tmp_path)
    assert model.factor() == 1.0 and model.estimate(10.0) == 10.0
    for measured in (20.0, 30.0, 25.0):
        out = model.record(10.0, 10.0, measured)
    assert out["estimate_ratio"] == 2.5 and out["measured_s"] == 25.0
    assert model.factor() == pytest.approx(2.5)
    assert model.estimate(4.0) == pytest.approx(10.0)
    model.record(10.0, 25.0, 5000.0)  # a suspended machine: ignored
    assert model.ratios() == [2.0, 3.0, 2.5]
    assert CostModel("md_cpu", root=tmp_path).factor() == 1.0  # each kind of job has its own record


# dft_run (B3LYP/def2-SVP, density fitting, one thread) as bench/cost_estimates.py measured it on the 2-core
# development machine on 2026-12-01, in order: (molecule, basis functions, atoms, measured seconds).
RECORDED = [
    ("water", 24, 3, 1.30),
    ("methanol", 48, 6, 4.20),
    ("ethanol", 72, 9, 9.23),
    ("isopropanol", 96, 12, 24.05),
]


def test_estimate_within_2x_of_recorded_runs_for_three_sizes(tmp_path):
    # A fresh machine record: the first run (water) calibrates, then three sizes are estimated from it. The
    # accuracy on the machine at hand is bench/cost_estimates.py's to measure, not this test's.
    model = CostModel("dft_cpu", root=tmp_path)
    ratios = []
    for _name, n_basis, n_atoms, measured_s in RECORDED:
        law_s = estimate_cpu_seconds(n_basis, n_atoms, "energy", cores=1, density_fitting=True)
        calibrated = bool(model.ratios())
        out = model.record(law_s, model.estimate(law_s), measured_s)
        if calibrated:
            ratios.append(out["estimate_ratio"])
    assert len(ratios) == 3
    for ratio in ratios:
        assert 0.5 <= ratio <= 2.0, ratios


def test_dft_provenance_carries_its_cost(tmp_path, monkeypatch):
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "cache"))
    ctx = ToolContext("dft_run", "cost-water", threads=1)
    out = Q.dft_run(Q.DftInput(molecule="O", functional="B3LYP", basis="def2-SVP", device="cpu"), ctx)
    cost = ctx.engine["cost"]
    assert out["n_basis"] == 24
    assert cost["calibration"]["runs"] == 0 and cost["measured_s"] > 0
    assert cost["estimate_ratio"] == pytest.approx(cost["measured_s"] / cost["estimate_s"], rel=0.01)
