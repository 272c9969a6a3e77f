"""Protein and MD tools through the real MCP server over stdio."""

from __future__ import annotations

import pytest


def test_protein_tools_over_mcp(mcp_server):
    names = {t.name for t in mcp_server.list_tools()}
    assert {
        "protein_properties",
        "sequence_align",
        "protein_variant_scores",
        "protein_fold",
        "md_run",
        "md_analyze",
    } <= names
    out = mcp_server.call_ok(
        "protein_properties",
        {"sequences": ["MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"]},
    )
    assert out["items"][0]["isoelectric_point"] == pytest.approx(
        6.56, abs=0.01
    )  # ExPASy ProtParam, ubiquitin
    aln = mcp_server.call_ok("sequence_align", {"reference": "MKTAYIAK", "query": "MKTVYIAK"})
    assert aln["substitutions"] == ["A4V"]


def test_missing_weights_over_mcp(mcp_server, tmp_path, monkeypatch):
    err = mcp_server.call_error(
        "protein_variant_scores",
        {"wild_type": "MKTAYIAK", "variants": ["A4V"], "model": "esm2_missing_model"},
    )
    assert err["code"] == "weights_missing"
