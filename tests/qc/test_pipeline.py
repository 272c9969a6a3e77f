"""The shared procedure layer on a DFT calculator: the same optimisation and frequency calls xtb_run and
mlip_run use reproduce NIST CCCBDB's HF/STO-3G water (tests/mlip/test_pipeline_switch.py switches the
same calls between xTB and an ML potential)."""

from __future__ import annotations

import math

import pytest

from tools_server.engines.calculator import get_calculator
from tools_server.engines.conformers import rank_conformers
from tools_server.engines.optimize import optimize
from tools_server.engines.thermo import frequencies
from tools_server.engines.units import kcal_mol_per_hartree
from tools_server.molecules import load_molecule


def test_dft_calculator_through_the_pipeline_matches_cccbdb():
    mol = load_molecule("O")
    calc = get_calculator("dft", mol, functional="HF", basis="sto-3g", density_fitting=False)
    opt = optimize(calc, mol.numbers, mol.coords_angstrom, tight=True)
    # NIST CCCBDB, H2O HF/STO-3G: E = -74.965901 Eh; unscaled harmonic 2170, 4140, 4391 cm-1
    assert opt.converged and opt.energy_hartree == pytest.approx(-74.965901, abs=2e-6)
    freq = frequencies(calc, mol, opt.coords_angstrom)
    assert freq.wavenumbers_cm1 == pytest.approx([2170, 4140, 4391], abs=3)
    assert freq.n_imaginary == 0 and "differences" in freq.hessian_method


def test_boltzmann_ranking_of_two_states_one_kcal_apart():
    from scipy.constants import R, calorie

    ranked = rank_conformers(["b", "a"], [1.0 / kcal_mol_per_hartree(), 0.0], 298.15)
    assert [c.item for c in ranked] == ["a", "b"]
    assert ranked[1].relative_energy_kcal_mol == pytest.approx(1.0)
    ratio = ranked[1].boltzmann_weight / ranked[0].boltzmann_weight
    assert ratio == pytest.approx(math.exp(-1000 * calorie / (R * 298.15)), rel=1e-9)
