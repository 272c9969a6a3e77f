"""Machine-learned interatomic potentials (ANI-2x, AIMNet2, MACE-OFF, SevenNet) through ASE calculators."""

from typing import Any

from tools_server.engines.calculator import register_calculator
from tools_server.mlip.checks import CHECKS
from tools_server.plugin import Domain, Engine


def _mlip_calculator(mol: Any, **options: Any) -> Any:
    from tools_server.mlip.models import make_calculator

    return make_calculator(mol, **options)


for _engine in ("ani2x", "aimnet2", "mace_off", "sevennet"):
    register_calculator(_engine, _mlip_calculator)

DOMAIN = Domain(
    name="mlip",
    tool_modules=("tools_server.mlip.tools",),
    engines=(
        Engine("torchani", "torchani"),
        Engine("aimnet", "aimnet"),
        Engine("mace", "mace-torch"),
        Engine("sevenn", "sevenn"),
        Engine("ase", "ase"),
    ),
    doctor_checks=CHECKS,
    error_codes={
        "unsupported_charge": "This model is trained on neutral closed-shell molecules only; use AIMNet2 or "
        "xTB for ions and radicals.",
    },
)
