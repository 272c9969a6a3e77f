"""Quantum chemistry: GFN2-xTB (tblite, xtb-python) and DFT (PySCF on the CPU, gpu4pyscf on the GPU)."""

from typing import Any

from tools_server.engines.calculator import register_calculator
from tools_server.plugin import Domain, Engine
from tools_server.qc.checks import CHECKS
from tools_server.qc.device import GPU4PYSCF


def _xtb_calculator(mol: Any, **options: Any) -> Any:
    from tools_server.qc.xtb import make_calculator

    return make_calculator(mol, **options)


def _dft_calculator(mol: Any, **options: Any) -> Any:
    from tools_server.qc.dft import make_calculator

    return make_calculator(mol, **options)


register_calculator("xtb", _xtb_calculator)
register_calculator("dft", _dft_calculator)

DOMAIN = Domain(
    name="qc",
    tool_modules=("tools_server.qc.tools",),
    engines=(
        Engine("tblite", "tblite"),
        Engine("xtb", "xtb"),
        Engine("pyscf", "pyscf"),
        GPU4PYSCF,
        Engine("geometric", "geometric"),
        Engine("pyscf.dispersion", "pyscf-dispersion"),
    ),
    doctor_checks=CHECKS,
    error_codes={
        "too_large_for_cpu": "Use xTB instead of DFT, a smaller basis set, or run on a machine with a GPU.",
    },
)
