"""Protein electrostatics: PROPKA pKa values and PDB2PQR protonation states."""

from tools_server.core.domain import Domain, Engine
from tools_server.pka.checks import CHECKS

DOMAIN = Domain(
    name="pka",
    tool_modules=("tools_server.pka.tools",),
    engines=(Engine("propka", "propka"), Engine("pdb2pqr", "pdb2pqr")),
    doctor_checks=CHECKS,
    error_codes={
        "no_protein": "Give a PDB file of a protein (ATOM records of standard amino acids), e.g. from "
        "pdb_lookup.",
    },
)
