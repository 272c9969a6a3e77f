"""Machine-learned interatomic potentials (ANI-2x, AIMNet2, MACE-OFF, SevenNet) through ASE calculators."""

from tools_server.core.domain import Domain, Engine
from tools_server.mlip.checks import CHECKS

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
