"""DFT and HF against literature values (NIST CCCBDB, benchmark sets), device choice, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools_server.core.errors import ToolError
from tools_server.qc import tools as Q
from tools_server.qc.device import choose_device, fp64_rate
from tools_server.qc.dft import estimate_cpu_seconds

WATER = "3\n\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n"


def _geometry(xyz_path: str) -> tuple[float, float]:
    lines = Path(xyz_path).read_text().splitlines()[2:5]
    x = np.array([[float(v) for v in ln.split()[1:]] for ln in lines])
    a, b = x[1] - x[0], x[2] - x[0]
    angle = np.degrees(np.arccos(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
    return float(np.linalg.norm(a)), float(angle)


def test_hf_sto3g_water_optimum_matches_cccbdb(ctx):
    out = Q.dft_run(
        Q.DftInput(molecule=WATER, functional="HF", basis="sto-3g", task="optimize", density_fitting=False),
        ctx,
    )
    # NIST CCCBDB, H2O HF/STO-3G optimised: E = -74.965901 Eh, r(OH) = 0.989 Å, HOH = 100.0°
    assert out.energy_hartree == pytest.approx(-74.965901, abs=2e-6)
    r, angle = _geometry(out.geometry_xyz)
    assert r == pytest.approx(0.989, abs=0.002)
    assert angle == pytest.approx(100.0, abs=0.3)
    assert out.scf["converged"] and out.optimization.converged
    assert ctx.engine["engine"] == "pyscf" and ctx.engine["device"] == "cpu"
    assert "no CUDA GPU" in ctx.engine["device_reason"] or "CPU slot" in ctx.engine["device_reason"]


def test_hf_sto3g_water_frequencies_match_cccbdb(ctx):
    out = Q.dft_run(
        Q.DftInput(
            molecule=WATER, functional="HF", basis="sto-3g", task="frequencies", density_fitting=False
        ),
        ctx,
    )
    # NIST CCCBDB, H2O HF/STO-3G unscaled harmonic frequencies: 2170, 4140, 4391 cm-1
    assert out.frequencies.wavenumbers_cm1 == pytest.approx([2170, 4140, 4391], abs=3)
    assert out.frequencies.n_imaginary == 0
    assert out.thermo.zpe_hartree > 0


@pytest.mark.slow
def test_b3lyp_631gs_water_matches_cccbdb(ctx):
    out = Q.dft_run(
        Q.DftInput(
            molecule=WATER, functional="B3LYP", basis="6-31g*", task="optimize", density_fitting=False
        ),
        ctx,
    )
    # NIST CCCBDB, H2O B3LYP/6-31G*: r(OH) = 0.969 Å, HOH = 103.6°, E = -76.408953 Eh. CCCBDB uses
    # Cartesian d functions (6d) and Gaussian's B3LYP (VWN3); PySCF uses spherical d: ~2 mEh apart.
    r, angle = _geometry(out.geometry_xyz)
    assert r == pytest.approx(0.969, abs=0.002)
    assert angle == pytest.approx(103.6, abs=0.5)
    assert out.energy_hartree == pytest.approx(-76.408953, abs=3e-3)


@pytest.mark.slow
def test_tddft_formaldehyde_n_pi_star(ctx):
    out = Q.dft_run(
        Q.DftInput(
            molecule="C=O",
            functional="B3LYP",
            basis="6-31g*",
            task="tddft",
            n_states=2,
            tda=True,
            grid_level=1,
        ),
        ctx,
    )
    s1 = out.excitations["states"][0]
    # Formaldehyde 1A2 n->pi*: theoretical best estimate 3.88 eV (Schreiber et al., J. Chem. Phys. 128,
    # 134110 (2008)); B3LYP gives 3.8-4.1 eV. Symmetry-forbidden: oscillator strength ~0.
    assert 3.5 < s1["energy_ev"] < 4.3
    assert s1["oscillator_strength"] < 1e-3
    assert s1["wavelength_nm"] == pytest.approx(1239.84198 / s1["energy_ev"], rel=1e-4)


def test_dispersion_and_solvent_are_applied(ctx):
    gas = Q.dft_run(Q.DftInput(molecule=WATER, functional="PBE", basis="sto-3g", grid_level=1), ctx)
    d3 = Q.dft_run(
        Q.DftInput(
            molecule=WATER, functional="PBE", basis="sto-3g", grid_level=1, dispersion="d3bj", solvent="water"
        ),
        ctx,
    )
    assert d3.dispersion_energy_hartree < 0
    assert d3.solvation == "PCM(water)"
    # solvation stabilises a polar molecule (a few mEh for water in PCM)
    assert d3.energy_hartree < gas.energy_hartree - 1e-3


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"molecule": "C1CC("}, "invalid_smiles"),
        ({"molecule": "O", "multiplicity": 2}, "charge_multiplicity_mismatch"),
        ({"molecule": "[Rf]"}, "unsupported_element"),
        ({"molecule": "[Xe]", "basis": "6-31g*"}, "unsupported_element"),
        ({"molecule": "O", "basis": "no-such-basis"}, "invalid_input"),
        ({"molecule": "O", "functional": "b3lypp"}, "invalid_input"),
    ],
)
def test_error_codes(ctx, kw, code):
    with pytest.raises(ToolError) as err:
        Q.dft_run(Q.DftInput(**kw), ctx)
    assert err.value.code == code


def test_too_large_for_cpu_is_refused_before_launch(ctx):
    taxol = (
        "CC1=C2C(C(=O)C3(C(CC4C(C3C(C(C2(C)C)(CC1OC(=O)C(C(C5=CC=CC=C5)NC(=O)C6=CC=CC=C6)O)O)"
        "OC(=O)C7=CC=CC=C7)(CO4)OC(=O)C)O)C)OC(=O)C"
    )
    with pytest.raises(ToolError) as err:
        Q.dft_run(Q.DftInput(molecule=taxol, basis="def2-tzvp", task="frequencies"), ctx)
    assert err.value.code == "too_large_for_cpu"
    assert err.value.details["n_basis"] > 1500
    assert "xtb_run" in err.value.hint


def test_cost_estimate_follows_measured_scaling():
    # Measured on a 2-core development machine: B3LYP/def2-SVP with density fitting on 2 cores, benzene 5 s,
    # caffeine 34 s
    assert estimate_cpu_seconds(114, 12, "energy", cores=2, density_fitting=True) == pytest.approx(5, rel=0.1)
    assert estimate_cpu_seconds(246, 24, "energy", cores=2, density_fitting=True) == pytest.approx(
        34, rel=0.25
    )
    assert estimate_cpu_seconds(246, 24, "energy", cores=2, density_fitting=False) > 80


def test_fp64_table_tells_h200_from_h20():
    assert fp64_rate("NVIDIA H200") > 50
    assert fp64_rate("NVIDIA H20") == pytest.approx(1.0)
    assert fp64_rate("NVIDIA H100 80GB HBM3") > 30
    assert fp64_rate("NVIDIA GeForce RTX 4090") < 2
    assert fp64_rate("Some Unknown Accelerator") is None


def test_device_choice_without_gpu_mocked(monkeypatch):
    from tools_server import plugin  # the qc domain asks the facade for the GPUs
    from tools_server.qc import device

    monkeypatch.setattr(plugin, "gpus", list)
    choice = choose_device("auto", 500, gpu_slot=True)
    assert choice.device == "cpu" and "no CUDA GPU" in choice.reason
    with pytest.raises(ToolError) as err:
        choose_device("gpu", 500, gpu_slot=True)
    assert err.value.code == "engine_unavailable"
    # A mocked slow-FP64 card (H20) keeps small jobs on the CPU and takes large ones.
    monkeypatch.setattr(plugin, "gpus", lambda: [{"name": "NVIDIA H20", "memory": "96 GiB", "driver": "x"}])
    monkeypatch.setattr(device, "gpu4pyscf_available", lambda: True)
    assert choose_device("auto", 300, gpu_slot=True).device == "cpu"
    assert choose_device("auto", 3000, gpu_slot=True).device == "gpu"
    monkeypatch.setattr(plugin, "gpus", lambda: [{"name": "NVIDIA H200", "memory": "141 GiB", "driver": "x"}])
    fast = choose_device("auto", 300, gpu_slot=True)
    assert fast.device == "gpu" and "H200" in fast.reason
    assert choose_device("auto", 300, gpu_slot=False).device == "cpu"


@pytest.mark.gpu
def test_gpu4pyscf_matches_cpu(ctx):
    ctx.gpu_available = True
    gpu = Q.dft_run(Q.DftInput(molecule="c1ccccc1", functional="B3LYP", basis="def2-svp", device="gpu"), ctx)
    cpu = Q.dft_run(Q.DftInput(molecule="c1ccccc1", functional="B3LYP", basis="def2-svp", device="cpu"), ctx)
    assert gpu.device.startswith("gpu")
    assert gpu.energy_hartree == pytest.approx(cpu.energy_hartree, abs=1e-5)


def test_smd_solvent_and_open_shell_reference(ctx):
    gas = Q.dft_run(Q.DftInput(molecule="O", functional="PBE", basis="sto-3g", grid_level=1), ctx)
    smd = Q.dft_run(
        Q.DftInput(
            molecule="O", functional="PBE", basis="sto-3g", grid_level=1, solvent="water", solvent_model="smd"
        ),
        ctx,
    )
    assert smd.solvation == "SMD(water)" and smd.energy_hartree < gas.energy_hartree
    methyl = Q.dft_run(Q.DftInput(molecule="[CH3]", functional="PBE", basis="sto-3g", grid_level=1), ctx)
    assert methyl.reference == "UKS" and methyl.multiplicity == 2
    with pytest.raises(ToolError) as err:
        Q.dft_run(Q.DftInput(molecule="[CH3]", basis="sto-3g", task="tddft", triplets=True), ctx)
    assert err.value.code == "invalid_input"
