"""Molecular dynamics with OpenMM: proteins (amber14) and small-molecule liquids (MMFF94)."""

from tools_server.md.checks import CHECKS
from tools_server.plugin import Domain, Engine

DOMAIN = Domain(
    name="md",
    tool_modules=("tools_server.md.tools",),
    engines=(Engine("openmm", "openmm"), Engine("pdbfixer", "pdbfixer"), Engine("mdtraj", "mdtraj")),
    doctor_checks=CHECKS,
)
