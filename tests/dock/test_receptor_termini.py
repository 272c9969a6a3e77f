"""Receptor preparation at a chain end whose cap was stripped (issue 47 item 3: the SYK receptor of
bio-kinase-inhibitor-potency ended in internal_error, "unable to build rdkit mol for residue GLY ... A:637").

PDBFixer adds the missing C-terminal OXT; its own placement left it 1.77 Å from CA on that receptor, where
Meeko bonds it to CA too. The repair now places every OXT it adds as in a carboxylate, and a residue Meeko
still cannot type is ``receptor_unpreparable``, never an internal error. The fragment is the task's receptor
cut to its last five residues (data/README.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("vina")
pytest.importorskip("meeko")
pytest.importorskip("pdbfixer")

from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.dock.tools import DockInput, dock
from tools_server.engines.protein_system import CARBOXYLATE_CO_ANGSTROM, load_fixer, repair

DATA = Path(__file__).parent / "data"
FRAGMENT = DATA / "syk_c_terminus.pdb"
#: Where PDBFixer 1.12 put the OXT of GLY A:637 when repairing the task's whole SYK receptor (Å).
PDBFIXER_OXT_ANGSTROM = (-6.627, 1.619, 47.154)


def _angle_deg(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    u, v = a - b, c - b
    return math.degrees(math.acos(float(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v))))


def _terminal_geometry(pdb_text: str) -> dict[str, float]:
    from openmm import unit

    fixer = load_fixer(None, pdb_text)
    repair(fixer, 7.4)
    pos = np.asarray(fixer.positions.value_in_unit(unit.angstrom))
    (res,) = [r for r in fixer.topology.residues() if any(a.name == "OXT" for a in r.atoms())]
    at = {a.name: pos[a.index] for a in res.atoms()}
    return {
        "c_oxt": float(np.linalg.norm(at["OXT"] - at["C"])),
        "ca_oxt": float(np.linalg.norm(at["OXT"] - at["CA"])),
        "ca_c_oxt": _angle_deg(at["CA"], at["C"], at["OXT"]),
        "o_c_oxt": _angle_deg(at["O"], at["C"], at["OXT"]),
        "ca_c_o": _angle_deg(at["CA"], at["C"], at["O"]),
    }


def _rotated(text: str, rotation: np.ndarray, shift: np.ndarray) -> str:
    out = []
    for line in text.splitlines():
        if line.startswith("ATOM"):
            xyz = rotation @ np.array([float(line[30:38]), float(line[38:46]), float(line[46:54])]) + shift
            line = f"{line[:30]}{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}{line[54:]}"
        out.append(line)
    return "\n".join(out) + "\n"


@settings(max_examples=4, deadline=None)
@given(
    quaternion=st.tuples(*[st.floats(-1.0, 1.0) for _ in range(4)]).filter(
        lambda q: sum(x * x for x in q) > 0.1
    ),
    shift=st.tuples(*[st.floats(-50.0, 50.0) for _ in range(3)]),
)
def test_an_added_terminal_oxygen_sits_as_in_a_carboxylate_in_any_frame(quaternion, shift):
    from scipy.spatial.transform import Rotation

    rotation = Rotation.from_quat(quaternion).as_matrix()
    geo = _terminal_geometry(_rotated(FRAGMENT.read_text(), rotation, np.asarray(shift)))
    # trigonal planar at C: the three angles sum to 360 and the two O split what CA-C-O leaves equally
    # (PDBFixer 1.12 alone: 116 and 124 degrees on this fragment, 78 and 162 on the whole receptor)
    assert geo["c_oxt"] == pytest.approx(CARBOXYLATE_CO_ANGSTROM, abs=0.005)
    assert geo["ca_c_oxt"] + geo["o_c_oxt"] + geo["ca_c_o"] == pytest.approx(360.0, abs=0.5)
    assert geo["ca_c_oxt"] == pytest.approx(geo["o_c_oxt"], abs=0.5)
    assert geo["ca_oxt"] > 2.2  # no bond to CA for a reader that bonds by distance


def test_the_chain_end_of_the_syk_receptor_docks(spu_env):
    out = dock(
        DockInput(ligands=["CC(=O)N"], receptor_path=str(FRAGMENT), box_residues=["A:637"], exhaustiveness=1),
        ToolContext("dock", "t", threads=1),
    )
    assert out.n_ok == 1 and out.receptor["residues_left_out_of_pdbqt"] == []
    pdbqt = Path(out.receptor["pdbqt"]).read_text()
    assert sum(1 for ln in pdbqt.splitlines() if ln.startswith("ATOM") and ln[17:20] == "GLY") >= 5
    assert out.ligands[0].poses[0].vina_score_kcal_mol < 0.0


def test_a_residue_meeko_cannot_type_is_receptor_unpreparable(spu_env):
    # The OXT where PDBFixer put it on the whole receptor, given in the file: the repair keeps atoms it did
    # not add, and Meeko, bonding OXT to CA as well, cannot match GLY A:637 to any template.
    lines = FRAGMENT.read_text().splitlines()
    last = max(i for i, ln in enumerate(lines) if ln.startswith("ATOM"))
    x, y, z = PDBFIXER_OXT_ANGSTROM
    oxt = f"ATOM   4452  OXT GLY A 637    {x:8.3f}{y:8.3f}{z:8.3f}  1.00 75.10           O  "
    text = "\n".join([*lines[: last + 1], oxt, *lines[last + 1 :]]) + "\n"
    with pytest.raises(ToolError) as err:
        dock(
            DockInput(ligands=["CC(=O)N"], receptor_text=text, box_residues=["A:637"], exhaustiveness=1),
            ToolContext("dock", "t", threads=1),
        )
    assert err.value.code == "receptor_unpreparable"
    assert "GLY" in err.value.message and "A:637" in err.value.message
    assert err.value.hint and "residue" in err.value.hint


def test_the_whole_syk_receptor_of_the_kinase_task_is_prepared(tmp_path):
    from tools_server.dock.engine import prepare_receptor

    task = Path(__file__).resolve().parents[2] / "environment/tasks/bio-kinase-inhibitor-potency/task"
    text = (task / "proteins" / "syk.pdb").read_text()
    _clean, pdbqt, report = prepare_receptor(None, text, 7.4, tmp_path)
    assert report["residues_left_out_of_pdbqt"] == []
    typed = {ln[17:26] for ln in pdbqt.read_text().splitlines() if ln.startswith("ATOM")}
    assert "GLY A 637" in typed
