"""Molecular dynamics with OpenMM: proteins (amber14) and small-molecule liquids (MMFF94)."""

from tools_server.core.domain import Domain, Engine
from tools_server.md.checks import CHECKS

DOMAIN = Domain(
    name="md",
    tool_modules=("tools_server.md.tools",),
    engines=(Engine("openmm", "openmm"), Engine("pdbfixer", "pdbfixer"), Engine("mdtraj", "mdtraj")),
    doctor_checks=CHECKS,
    error_codes={
        "invalid_smiles": "Check the SMILES string (valences, ring closures, brackets) or pass a molblock.",
        "unsupported_element": "Use a method that supports this element or another force field.",
        "no_protein": "Give a PDB file of a protein (ATOM records of standard amino acids), e.g. from "
        "pdb_lookup.",
    },
)
