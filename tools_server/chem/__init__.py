"""Cheminformatics with RDKit: parse and validate structures, descriptors, fingerprints, similarity,
substructure, conformers, depictions."""

from tools_server.chem.checks import CHECKS
from tools_server.chem.geometry import CODES as GEOMETRY_CODES
from tools_server.core.domain import Domain, Engine

DOMAIN = Domain(
    name="chem",
    tool_modules=("tools_server.chem.tools",),
    engines=(Engine("rdkit", "rdkit"),),
    doctor_checks=CHECKS,
    error_codes={
        "invalid_smiles": "Check the SMILES string (valences, ring closures, brackets) or pass a molblock.",
        "charge_multiplicity_mismatch": "Check the total charge and the spin multiplicity (2S+1): an even "
        "number of electrons needs an odd multiplicity and vice versa.",
        "unsupported_element": "Use a method that supports this element (GFN2-xTB covers H-Rn) or a basis "
        "set that defines it.",
        **GEOMETRY_CODES,
    },
)
