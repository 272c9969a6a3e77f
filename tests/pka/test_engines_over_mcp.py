"""The three engine domains through the real server over stdio: listed by tools/list, errors with codes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("propka")

DATA = Path(__file__).parent / "data"


def test_engine_tools_are_listed_and_answer_over_mcp(mcp_server):
    names = {t.name for t in mcp_server.list_tools()}
    assert {"mlip_run", "mlip_conformers", "dock", "protein_pka"} <= names
    water = "HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\nEND\n"
    assert mcp_server.call_error("protein_pka", {"pdb_text": water, "wait_s": 120})["code"] == "no_protein"
    # Elements are checked before any weights are looked for.
    err = mcp_server.call_error("mlip_run", {"molecules": ["CBr"], "engine": "ani2x", "wait_s": 120})
    assert err["code"] == "unsupported_element"
    out = mcp_server.call_ok(
        "protein_pka", {"pdb_path": str(DATA / "1HPX.pdb"), "protonation_states": False, "wait_s": 300}
    )
    assert out["pi_folded"] == pytest.approx(9.54, abs=0.01)  # PROPKA's published value for 1HPX
    assert out["provenance"]["engine"] == "propka" or "propka" in str(out["provenance"])
