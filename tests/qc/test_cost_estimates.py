"""The DFT cost estimate: its scaling law, this machine's calibration, and its error in provenance.

Nothing here depends on how fast the machine is: the law is checked against its own formula and shape, and
the calibration against the file it reads. How close the calibrated estimate comes to the measured time on
the machine at hand is ``bench/cost_estimates.py``'s to print.
"""

from __future__ import annotations

import json

import pytest

from tools_server.core.calibration import CostModel, machine_key
from tools_server.core.context import ToolContext
from tools_server.plugin import ToolError
from tools_server.qc import dft
from tools_server.qc import tools as Q
from tools_server.qc.dft import estimate_cpu_seconds


def test_law_for_a_known_input_is_the_documented_formula():
    # overhead + reference seconds x (N / N_ref)^exponent x Amdahl slowdown, times the task's SCF count
    n_basis, cores = 246, 1

    def amdahl(c):
        return dft._SERIAL_FRACTION + (1 - dft._SERIAL_FRACTION) / c

    scf = dft._OVERHEAD_S + dft._REF_SECONDS * (n_basis / dft._REF_NBASIS) ** dft._EXPONENT * (
        amdahl(cores) / amdahl(dft._REF_CORES)
    )
    assert estimate_cpu_seconds(n_basis, 24, "energy", cores=cores, density_fitting=True) == pytest.approx(
        scf
    )
    assert estimate_cpu_seconds(n_basis, 24, "energy", cores=cores, density_fitting=False) == pytest.approx(
        scf * dft._NO_DF_FACTOR
    )
    assert estimate_cpu_seconds(n_basis, 24, "tddft", cores=cores, density_fitting=True, n_states=5) == (
        pytest.approx(scf * 4.0)
    )
    assert estimate_cpu_seconds(n_basis, 24, "optimize", cores=cores, density_fitting=True) == pytest.approx(
        scf * 72
    )
    assert estimate_cpu_seconds(n_basis, 24, "frequencies", cores=cores, density_fitting=True) == (
        pytest.approx(scf * (72 + 48))
    )
    # the reference job (benzene, 114 basis functions on 2 cores) is the measured 5 s plus the fixed cost
    assert estimate_cpu_seconds(114, 12, "energy", cores=2, density_fitting=True) == pytest.approx(5.3)


def test_law_scales_with_its_exponent_and_is_monotone():
    def law(n_basis, **kw):
        return estimate_cpu_seconds(
            n_basis, 10, kw.pop("task", "energy"), cores=2, density_fitting=True, **kw
        )

    # above the fixed cost, doubling the basis multiplies the time by 2^2.5
    assert (law(400) - dft._OVERHEAD_S) / (law(200) - dft._OVERHEAD_S) == pytest.approx(2**dft._EXPONENT)
    sizes = [24, 48, 96, 246, 500, 1000, 2500]
    times = [law(n) for n in sizes]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert (
        law(246, task="energy")
        < law(246, task="tddft")
        < law(246, task="optimize")
        < law(246, task="frequencies")
    )
    assert law(246, task="tddft", n_states=10) > law(246, task="tddft", n_states=5)
    assert law(246, hf=True) < law(246)
    assert estimate_cpu_seconds(246, 10, "energy", cores=2, density_fitting=False) > law(246)


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


def test_calibration_record_is_a_file_a_second_reader_sees(tmp_path):
    CostModel("dft_cpu", root=tmp_path).record(10.0, 10.0, 30.0)
    path = tmp_path / "calibration" / f"{machine_key()}.json"
    assert json.loads(path.read_text())["dft_cpu"]["ratios"] == [3.0]
    assert CostModel("dft_cpu", root=tmp_path).estimate(2.0) == pytest.approx(6.0)  # a new reader, same file


def _write_factor(cache, kind, factor):
    path = cache / "calibration" / f"{machine_key()}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({kind: {"ratios": [factor]}}))


def test_dft_run_refuses_by_the_calibrated_estimate(tmp_path, monkeypatch):
    # The law says ~10 s for caffeine on one core; a limit of 100 s allows it. This machine's record says
    # runs take 30x the law, so the tool refuses before any SCF, naming the calibrated estimate.
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "cache"))
    caffeine = "Cn1cnc2c1c(=O)n(C)c(=O)n2C"
    law_s = estimate_cpu_seconds(246, 24, "energy", cores=1, density_fitting=True)
    assert law_s < dft.CPU_BUDGET_FRACTION * 100
    _write_factor(tmp_path / "cache", "dft_cpu", 30.0)
    ctx = ToolContext("dft_run", "cost-caffeine", threads=1, time_limit_s=100)
    with pytest.raises(ToolError) as err:
        Q.dft_run(Q.DftInput(molecule=caffeine, functional="B3LYP", basis="def2-SVP", device="cpu"), ctx)
    assert err.value.code == "too_large_for_cpu"
    assert err.value.details["n_basis"] == 246
    assert err.value.details["estimate_s"] == round(30.0 * law_s)


def test_dft_provenance_carries_its_cost(tmp_path, monkeypatch):
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "cache"))
    ctx = ToolContext("dft_run", "cost-water", threads=1)
    out = Q.dft_run(Q.DftInput(molecule="O", functional="B3LYP", basis="def2-SVP", device="cpu"), ctx)
    cost = ctx.engine["cost"]
    assert out.n_basis == 24
    assert cost["estimate_s"] == pytest.approx(
        estimate_cpu_seconds(24, 3, "energy", cores=1, density_fitting=True), abs=1e-3
    )
    assert cost["calibration"]["runs"] == 0 and cost["measured_s"] > 0
    assert cost["estimate_ratio"] == pytest.approx(cost["measured_s"] / cost["estimate_s"], rel=0.01)
    # the run calibrated the record the next estimate reads
    assert CostModel("dft_cpu").ratios() == [pytest.approx(cost["measured_s"] / cost["estimate_s"], rel=0.01)]
