"""Protein electrostatics: PROPKA pKa values and PDB2PQR protonation states."""

from tools_server.pka.checks import CHECKS
from tools_server.plugin import Domain, Engine

DOMAIN = Domain(
    name="pka",
    tool_modules=("tools_server.pka.tools",),
    engines=(Engine("propka", "propka"), Engine("pdb2pqr", "pdb2pqr")),
    doctor_checks=CHECKS,
)
