"""Docking: AutoDock Vina with Meeko ligand and receptor preparation, PDBFixer receptor cleaning."""

from tools_server.dock.checks import CHECKS
from tools_server.plugin import Domain, Engine

DOMAIN = Domain(
    name="dock",
    tool_modules=("tools_server.dock.tools",),
    engines=(Engine("vina", "vina"), Engine("meeko", "meeko"), Engine("pdbfixer", "pdbfixer")),
    doctor_checks=CHECKS,
    error_codes={
        "empty_box": "Centre the box on the binding site: use box_ligand with a bound ligand, box_residues "
        "with pocket residues, or check centre and size against the receptor's coordinates.",
        "receptor_unpreparable": "Fix or remove the residue the message names in the receptor file (atoms "
        "closer than a bond, a broken residue, a residue that is not an amino acid) and dock again.",
    },
)
