"""protein_pka on HIV-1 protease (PDB 1HPX) against PROPKA's own published regression values.

The structure and the reference values are those of PROPKA's regression test (``tests/pdb/1HPX.pdb`` and
``tests/results/1HPX.json`` in the PROPKA 3 repository, release 3.5): 49 titratable groups in PROPKA's
summary order, the folded and unfolded isoelectric points. See data/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("propka")
pytest.importorskip("pdb2pqr")

from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.pka.tools import ProteinPkaInput, protein_pka

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def hpx(tmp_path_factory):
    import os

    work = tmp_path_factory.mktemp("pka")
    old = os.environ.get("SPU_WORKDIR")
    os.environ["SPU_WORKDIR"] = str(work)
    try:
        yield protein_pka(
            ProteinPkaInput(pdb_path=str(DATA / "1HPX.pdb"), ph=7.0), ToolContext("protein_pka", "t")
        )
    finally:
        if old is None:
            os.environ.pop("SPU_WORKDIR", None)
        else:
            os.environ["SPU_WORKDIR"] = old


def test_pka_values_match_propka_published_regression(hpx):
    ref = json.loads((DATA / "1HPX_propka_reference.json").read_text())
    got = [g.pka for g in hpx.groups]
    assert len(got) == len(ref["pKa"]) == 49
    assert got == pytest.approx(ref["pKa"], abs=0.01)
    assert hpx.pi_folded == pytest.approx(ref["pI_folded"], abs=0.01)
    assert hpx.pi_unfolded == pytest.approx(ref["pI_unfolded"], abs=0.01)


def test_catalytic_aspartates_and_protonation_states(hpx):
    by_label = {g.label: g for g in hpx.groups}
    # The two catalytic Asp25 of the dimer: one is pushed far up (published 9.28), one stays low (5.07).
    assert by_label["ASP 25 A"].pka == pytest.approx(5.07, abs=0.01)
    assert by_label["ASP 25 B"].pka == pytest.approx(9.28, abs=0.01)
    assert by_label["ASP 25 A"].model_pka == pytest.approx(3.80, abs=0.01)
    states = {(s.chain, s.number): s for s in hpx.states if s.residue == "ASP"}
    # PDB2PQR at pH 7 with these pKa values: Asp25 B (pKa 9.3) protonated, Asp25 A (5.1) charged.
    assert states[("B", 25)].amber_name == "ASH"
    assert states[("A", 25)].amber_name == "ASP"
    pqr = Path(hpx.artifacts["pqr"]).read_text()
    assert " ASH B  25 " in pqr or "ASH B  25" in pqr
    assert "ASP 25 B" in hpx.large_shifts


def test_no_protein_is_a_stable_error(spu_env):
    water = "HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\nEND\n"
    with pytest.raises(ToolError) as err:
        protein_pka(ProteinPkaInput(pdb_text=water), ToolContext("protein_pka", "w"))
    assert err.value.code == "no_protein"


def test_missing_file_is_invalid_input(spu_env, tmp_path):
    with pytest.raises(ToolError) as err:
        protein_pka(ProteinPkaInput(pdb_path=str(tmp_path / "none.pdb")), ToolContext("protein_pka", "m"))
    assert err.value.code == "invalid_input"
