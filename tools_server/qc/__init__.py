"""Quantum chemistry: GFN2-xTB (tblite, xtb-python) and DFT (PySCF on the CPU, gpu4pyscf on the GPU)."""

from tools_server.core.domain import Domain, Engine
from tools_server.qc.checks import CHECKS

#: gpu4pyscf ships one distribution per CUDA major version; the first one installed gives the version.
GPU4PYSCF = Engine("gpu4pyscf", ("gpu4pyscf-cuda12x", "gpu4pyscf-cuda13x", "gpu4pyscf-cuda11x", "gpu4pyscf"))

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
