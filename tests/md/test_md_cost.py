"""The MD cost law and this machine's calibration, checked against the law's formula and the calibration file.

Nothing here depends on how fast the machine is. How close the calibrated estimate comes to the measured time
on the machine at hand is ``bench/cost_estimates.py``'s to print: a fresh machine once failed a timed version
of this test (estimate 11.4 s, measured 5.1 s at 600 waters) because the law had no fixed term and the
calibrating run's set-up cost became a per-atom-step rate.
"""

from __future__ import annotations

import json

import pytest

from tools_server.core.calibration import CostModel, first_in_process, machine_key
from tools_server.core.context import ToolContext
from tools_server.md import simulation
from tools_server.md.simulation import Protocol, estimate_seconds
from tools_server.md.tools import MdRunInput, md_run
from tools_server.plugin import ToolError

# The protocol of bench/cost_estimates.py: 0.5 ps equilibration, 2 ps production, 0.2 ps NVE at 2 fs, 100
# minimisation iterations (1,350 steps).
PROTOCOL = Protocol(
    temperature_k=300,
    pressure_bar=1.0,
    timestep_fs=2.0,
    hydrogen_mass_repartitioning=False,
    friction_per_ps=1.0,
    minimize_max_iterations=100,
    equilibration_ps=0.5,
    production_ps=2.0,
    report_interval_ps=0.5,
    nve_check_ps=0.2,
    seed=0,
)


def test_law_has_a_fixed_term_and_counts_minimisation():
    assert PROTOCOL.total_steps == 1350
    small = estimate_seconds(450, PROTOCOL, "cpu", threads=1)
    large = estimate_seconds(1800, PROTOCOL, "cpu", threads=1)
    # 4x the atoms is less than 4x the time: the set-up does not grow with the box
    assert 3.0 < large / small < 4.0
    fewer_iterations = Protocol(**{**PROTOCOL.__dict__, "minimize_max_iterations": 0})
    assert estimate_seconds(450, fewer_iterations, "cpu", threads=1) < small
    assert estimate_seconds(450, PROTOCOL, "cpu", threads=2) < small


def test_law_for_a_known_input_is_the_documented_formula():
    # set-up + atoms x (steps + 5 per minimisation iteration) / (atom-steps per second per thread x threads)
    steps = 1350 + simulation.MINIMIZE_ITERATION_STEPS * 100
    rate = simulation.CPU_ATOM_STEPS_PER_S_PER_THREAD
    assert estimate_seconds(1800, PROTOCOL, "cpu", threads=1) == pytest.approx(
        simulation.CPU_SETUP_S + 1800 * steps / rate
    )
    assert estimate_seconds(1800, PROTOCOL, "cpu", threads=2) == pytest.approx(
        simulation.CPU_SETUP_S + 1800 * steps / (2 * rate)
    )
    assert estimate_seconds(1800, PROTOCOL, "cuda", threads=2) == pytest.approx(
        simulation.GPU_SETUP_S + 1800 * steps / simulation.GPU_ATOM_STEPS_PER_S
    )


def test_law_is_linear_in_atoms_and_steps_above_its_fixed_term():
    def law(n_atoms, **changes):
        return estimate_seconds(n_atoms, Protocol(**{**PROTOCOL.__dict__, **changes}), "cpu", threads=1)

    setup = simulation.CPU_SETUP_S
    assert (law(3000) - setup) / (law(1500) - setup) == pytest.approx(2.0)
    # twice the production (1,000 more steps of 1,350 + 500 minimisation steps)
    assert (law(1500, production_ps=4.0) - setup) / (law(1500) - setup) == pytest.approx(2850 / 1850)
    sizes = [30, 450, 1800, 9000, 45000]
    times = [law(n) for n in sizes]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert law(1500, timestep_fs=1.0) > law(1500)  # the same picoseconds in twice the steps


def _write_factor(cache, kind, factor):
    path = cache / "calibration" / f"{machine_key()}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({kind: {"ratios": [factor]}}))


def test_md_run_refuses_by_the_calibrated_estimate(tmp_path, monkeypatch):
    # 150 waters under the law take ~2 s, well below max_wall_s=60; this machine's record says runs take 50x
    # the law, so the tool refuses before the simulation starts, naming the calibrated estimate.
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "cache"))
    args = MdRunInput(
        components=[{"smiles": "O", "count": 150}],
        cutoff_nm=0.7,
        minimize_max_iterations=100,
        equilibration_ps=0.5,
        production_ps=2,
        report_interval_ps=0.5,
        nve_check_ps=0.2,
        max_wall_s=60,
    )
    law_s = estimate_seconds(450, PROTOCOL, "cpu", threads=1)
    assert law_s < 60 / 10
    _write_factor(tmp_path / "cache", "md_cpu", 50.0)
    with pytest.raises(ToolError) as err:
        md_run(args, ToolContext("md_run", "cost-md", threads=1))
    assert err.value.code == "too_large_for_cpu"
    assert err.value.details["estimate_s"] == round(50.0 * law_s)


def test_a_process_first_run_is_flagged_once_per_kind():
    kind = "md_test_first_in_process"
    assert first_in_process(kind) is True
    assert first_in_process(kind) is False
    assert first_in_process(kind + "_other") is True


def test_a_run_that_does_not_calibrate_still_reports_its_cost(tmp_path):
    model = CostModel("md_cpu", root=tmp_path)
    out = model.record(2.0, 2.0, 5.0, calibrate=False)
    assert out["estimate_ratio"] == pytest.approx(2.5)
    assert out["calibration"]["recorded"] is False and model.ratios() == []
