"""Cheminformatics with RDKit: parse and validate structures, descriptors, fingerprints, similarity,
substructure, conformers, depictions."""

from tools_server.chem.checks import CHECKS
from tools_server.plugin import Domain, Engine

DOMAIN = Domain(
    name="chem",
    tool_modules=("tools_server.chem.tools",),
    engines=(Engine("rdkit", "rdkit"),),
    doctor_checks=CHECKS,
)
