"""Protein electrostatics: PROPKA pKa values and PDB2PQR protonation states."""

from tools_server.core.domain import Domain, Engine
from tools_server.pka.checks import CHECKS

DOMAIN = Domain(
    name="pka",
    tool_modules=("tools_server.pka.tools",),
    engines=(Engine("propka", "propka"), Engine("pdb2pqr", "pdb2pqr")),
    doctor_checks=CHECKS,
)
