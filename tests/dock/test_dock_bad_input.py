"""dock refuses non-finite box numbers and receptor coordinates and untyped elements with clear codes
(issue 27 item 6: each ended in internal_error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

pytest.importorskip("vina")
pytest.importorskip("meeko")

from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.dock.tools import DockInput, dock

COMPLEX = Path(__file__).parent / "data" / "t4l99a_pxylene.pdb"


@pytest.mark.parametrize(
    ("center", "size"),
    [
        ((float("nan"), 0.0, 0.0), (10.0, 10.0, 10.0)),
        ((float("inf"), 0.0, 0.0), (10.0, 10.0, 10.0)),
        ((1e300, 0.0, 0.0), (10.0, 10.0, 10.0)),
        ((40.0, 45.0, 18.0), (float("nan"), 10.0, 10.0)),
        ((40.0, 45.0, 18.0), (float("inf"), 10.0, 10.0)),
    ],
)
def test_non_finite_box_is_refused_by_the_input_model(center, size):
    with pytest.raises(ValidationError):
        DockInput(ligands=["C"], receptor_path=str(COMPLEX), center=center, size=size)


def test_receptor_with_a_nan_coordinate_is_invalid_input(spu_env):
    lines = COMPLEX.read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("ATOM"))
    lines[k] = lines[k][:30] + "     nan" + lines[k][38:]
    with pytest.raises(ToolError) as err:
        dock(
            DockInput(ligands=["C"], receptor_text="\n".join(lines), box_residues=["A:99"]),
            ToolContext("dock", "t", threads=1),
        )
    assert err.value.code == "invalid_input" and "coordinate" in err.value.message


def test_ligand_with_an_element_vina_cannot_type_is_unsupported_element(spu_env):
    with pytest.raises(ToolError) as err:
        dock(
            DockInput(ligands=["[Og]"], receptor_path=str(COMPLEX), box_residues=["A:99"], exhaustiveness=1),
            ToolContext("dock", "t", threads=1),
        )
    assert err.value.code == "unsupported_element" and "Og" in err.value.message
