"""PROPKA 3 per-residue pKa values and PDB2PQR protonation states; imported inside the tool (worker)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path
from typing import Any

#: Amber residue names PDB2PQR writes (``--ffout AMBER``) -> (residue, state) for titratable residues.
AMBER_STATES = {
    "ASP": ("ASP", "deprotonated (-1)"),
    "ASH": ("ASP", "protonated (0)"),
    "GLU": ("GLU", "deprotonated (-1)"),
    "GLH": ("GLU", "protonated (0)"),
    "HID": ("HIS", "neutral, H on ND1 (0)"),
    "HIE": ("HIS", "neutral, H on NE2 (0)"),
    "HIP": ("HIS", "protonated (+1)"),
    "LYS": ("LYS", "protonated (+1)"),
    "LYN": ("LYS", "neutral (0)"),
    "CYS": ("CYS", "protonated (0)"),
    "CYM": ("CYS", "deprotonated (-1)"),
    "CYX": ("CYS", "disulfide"),
    "ARG": ("ARG", "protonated (+1)"),
    "TYR": ("TYR", "protonated (0)"),
}


@contextlib.contextmanager
def _quiet(work_dir: Path):
    """PROPKA and PDB2PQR log to the root logger and write files into the working directory."""
    cwd = os.getcwd()
    loggers = [logging.getLogger(n) for n in ("propka", "pdb2pqr", "PDB2PQR")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    os.chdir(work_dir)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        os.chdir(cwd)
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def run_propka(pdb: Path, ph: float, work_dir: Path) -> dict[str, Any]:
    """Per-group pKa values in PROPKA's own summary order, the isoelectric points and the folding energy."""
    import propka.run

    pdb = pdb.resolve()
    with _quiet(work_dir):
        molecule = propka.run.single(str(pdb), optargs=["--quiet", f"--pH={ph}"], write_pka=True)
    conformation = molecule.conformations["AVR"]
    params = molecule.version.parameters
    groups: list[dict[str, Any]] = []
    for residue_type in params.write_out_order:
        for group in conformation.groups:
            if group.residue_type != residue_type:
                continue
            coupled = group.coupled_titrating_group is not None
            if coupled and params.remove_penalised_group:
                continue
            label = group.label  # e.g. "ASP  25 A"
            parts = label.split()
            groups.append(
                {
                    "label": " ".join(parts),
                    "residue": parts[0] if parts else group.residue_type,
                    "number": int(parts[1]) if len(parts) > 1 and parts[1].lstrip("-").isdigit() else None,
                    "chain": parts[2] if len(parts) > 2 else None,
                    "pka": round(float(group.pka_value), 2),
                    "model_pka": round(float(group.model_pka), 2),
                    "shift": round(float(group.pka_value) - float(group.model_pka), 2),
                    "buried_percent": round(100.0 * float(getattr(group, "buried", 0.0)), 0),
                    "ligand_group": group.atom.type == "hetatm",
                    "coupled_with": group.coupled_titrating_group.label if coupled else None,
                }
            )
    pi_folded, pi_unfolded = molecule.get_pi()
    folding = None
    with contextlib.suppress(Exception):
        profile, _opt, _range, _stab = molecule.get_folding_profile(grid=(ph, ph + 0.01, 0.1))
        if profile:
            folding = round(float(profile[0][1]), 2)
    pka_file = work_dir / (pdb.stem + ".pka")
    return {
        "groups": groups,
        "pi_folded": round(float(pi_folded), 2),
        "pi_unfolded": round(float(pi_unfolded), 2),
        "folding_free_energy_kcal_mol": folding,
        "pka_file": str(pka_file) if pka_file.is_file() else None,
    }


def run_pdb2pqr(pdb: Path, ph: float, forcefield: str, out_pqr: Path, out_pdb: Path) -> dict[str, Any]:
    """Protonate at ``ph`` with PROPKA pKa values; per-residue states from the Amber residue names."""
    from pdb2pqr.main import build_main_parser, main_driver

    pdb, out_pqr, out_pdb = pdb.resolve(), out_pqr.resolve(), out_pdb.resolve()

    args = build_main_parser().parse_args(
        [
            f"--ff={forcefield}",
            "--ffout=AMBER",
            "--titration-state-method=propka",
            f"--with-ph={ph}",
            "--drop-water",
            "--keep-chain",
            f"--pdb-output={out_pdb}",
            "--log-level=ERROR",
            str(pdb),
            str(out_pqr),
        ]
    )
    with _quiet(out_pqr.parent):
        main_driver(args)
    states: list[dict[str, Any]] = []
    seen = set()
    charge = 0.0
    for line in out_pqr.read_text().splitlines():
        if not line.startswith(("ATOM", "HETATM")):
            continue
        fields = line.split()
        # PQR: ATOM serial name resName [chain] resSeq x y z charge radius
        with contextlib.suppress(ValueError, IndexError):
            charge += float(fields[-2])
        name = line[17:20].strip()
        chain = line[21:22].strip() or None
        number = line[22:26].strip()
        key = (chain, number, name)
        if key in seen or name not in AMBER_STATES:
            continue
        seen.add(key)
        residue, state = AMBER_STATES[name]
        states.append(
            {
                "residue": residue,
                "number": int(number) if number.lstrip("-").isdigit() else number,
                "chain": chain,
                "amber_name": name,
                "state": state,
            }
        )
    return {"states": states, "net_charge_e": round(charge, 2)}


def engine_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("propka", "pdb2pqr"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out
