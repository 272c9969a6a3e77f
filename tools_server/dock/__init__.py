"""Docking: AutoDock Vina with Meeko ligand and receptor preparation, PDBFixer receptor cleaning."""

from tools_server.core.domain import Domain, Engine
from tools_server.dock.checks import CHECKS

DOMAIN = Domain(
    name="dock",
    tool_modules=("tools_server.dock.tools",),
    engines=(Engine("vina", "vina"), Engine("meeko", "meeko"), Engine("pdbfixer", "pdbfixer")),
    doctor_checks=CHECKS,
    error_codes={
        "empty_box": "Centre the box on the binding site: use box_ligand with a bound ligand, box_residues "
        "with pocket residues, or check centre and size against the receptor's coordinates.",
        "no_protein": "Give a PDB file of a protein (ATOM records of standard amino acids), e.g. from "
        "pdb_lookup.",
        "invalid_smiles": "Check the SMILES string (valences, ring closures, brackets) or pass a molblock.",
        "charge_multiplicity_mismatch": "Check the total charge and the spin multiplicity (2S+1).",
        "unsupported_element": "Vina types H C N O F P S Cl Br I and common metals; remove other elements.",
    },
)
