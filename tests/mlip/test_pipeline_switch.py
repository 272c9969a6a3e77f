"""One calculator interface (tools_server.engines.calculator) under one procedure layer (engines):
the same frequency call runs on GFN2-xTB or on ANI-2x by changing one argument, and each gives the numbers
its own tool reports."""

from __future__ import annotations

import pytest

from tools_server.core.context import ToolContext


def test_one_argument_switches_the_shared_pipeline_from_xtb_to_an_ml_potential(tiny_ani2x, ctx):
    from tools_server.engines.calculator import get_calculator
    from tools_server.engines.optimize import optimize
    from tools_server.engines.thermo import frequencies
    from tools_server.mlip.tools import MlipInput, mlip_run
    from tools_server.molecules import load_molecule
    from tools_server.qc.tools import XtbInput, xtb_run

    mol = load_molecule("O")
    results = {}
    for engine in ("xtb", "ani2x"):
        calc = get_calculator(engine, mol)
        results[engine] = frequencies(calc, mol, temperature_k=298.15)
        assert len(results[engine].wavenumbers_cm1) == 3  # 3N - 6 for water, whatever the model
        opt = optimize(calc, mol.numbers, mol.coords_angstrom, max_steps=3)
        assert opt.n_steps >= 1 and opt.energies_hartree[0] == pytest.approx(results[engine].energy_hartree)

    xtb = xtb_run(
        XtbInput(molecules=["O"], task="frequencies", optimize_first=False), ToolContext("xtb_run", "j")
    ).items[0]
    assert results["xtb"].wavenumbers_cm1 == xtb.frequencies.wavenumbers_cm1
    for key in ("zpe_hartree", "enthalpy_hartree", "gibbs_free_energy_hartree", "entropy_cal_mol_k"):
        assert results["xtb"].thermo[key] == pytest.approx(getattr(xtb.thermo, key), abs=1e-9)
    assert results["xtb"].energy_hartree == xtb.energy_hartree

    ani = mlip_run(MlipInput(molecules=["O"], engine="ani2x"), ctx).items[0]
    assert results["ani2x"].energy_hartree == pytest.approx(ani.energy_hartree, abs=1e-8)
    assert results["ani2x"].wavenumbers_cm1 != results["xtb"].wavenumbers_cm1  # another model answered


def test_an_unknown_engine_is_named():
    from tools_server.engines.calculator import CalculatorError, get_calculator
    from tools_server.molecules import load_molecule

    with pytest.raises(CalculatorError) as err:
        get_calculator("gfn-ff", load_molecule("O"))
    assert err.value.code == "invalid_input" and "xtb" in err.value.message
