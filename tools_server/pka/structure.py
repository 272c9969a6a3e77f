"""Reading a protein structure for PROPKA and PDB2PQR: one place for the path/text choice and the checks."""

from __future__ import annotations

from pathlib import Path

from tools_server.plugin import ToolError, read_input

AMINO_ACIDS = {
    "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS", "MET", "PHE",
    "PRO", "SER", "THR", "TRP", "TYR", "VAL",
    # protonation-state and Amber/CHARMM variants PDB files written by other tools may carry
    "ASH", "GLH", "HID", "HIE", "HIP", "HSD", "HSE", "HSP", "LYN", "CYX", "CYM", "MSE",
}  # fmt: skip


def read_structure(pdb_path: str | None, pdb_text: str | None, work_dir: Path, name: str = "input") -> Path:
    """A PDB file on disk holding the input (mmCIF is refused: PROPKA reads PDB). Raises ToolError."""
    if (pdb_path is None) == (pdb_text is None):
        raise ToolError("invalid_input", "Give exactly one of pdb_path or pdb_text.")
    if pdb_path is not None:  # read once, from the checked descriptor
        text = read_input(pdb_path, kind="structure").data.decode("utf-8", errors="replace")
    else:
        text = pdb_text or ""
    if text.lstrip().startswith("data_"):
        raise ToolError(
            "invalid_input",
            "mmCIF input is not read here; give a PDB-format file.",
            hint="Ask pdb_lookup for the PDB format, or convert the mmCIF with gemmi or PyMOL first.",
        )
    check_protein(text)
    out = work_dir / f"{name}.pdb"
    out.write_text(text)
    return out


def protein_residues(text: str) -> int:
    """How many distinct amino-acid residues the ATOM/HETATM records hold."""
    seen = set()
    for line in text.splitlines():
        if line.startswith(("ATOM  ", "HETATM")) and line[17:20].strip() in AMINO_ACIDS:
            seen.add((line[21:22], line[22:27]))
    return len(seen)


def check_protein(text: str) -> int:
    n = protein_residues(text)
    if n == 0:
        raise ToolError(
            "no_protein",
            "The structure holds no amino-acid residues (no ATOM records of standard residues).",
        )
    return n
