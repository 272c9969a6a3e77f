"""protein_variant_scores checks the variants against the wild type before it looks for any weights."""

from __future__ import annotations

from tools_server.protein.tools import VariantScoresInput, protein_variant_scores

# position 62 of this wild type is W (1-based)
WT = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKAWPDAQFEVVHSLAKWKRQTLGQ"


def test_a_mismatched_variant_is_reported_without_weights(weights_dir, ctx_factory):
    # weights_dir is empty: loading any ESM model would fail with weights_missing
    assert WT[61] == "W"
    out = protein_variant_scores(
        VariantScoresInput(wild_type=WT, variants=["A62Y"], model="esm1v"), ctx_factory("pvs")
    )
    item = out.items[0]
    assert item.ok is False and item.error.code == "invalid_mutation"
    assert "W" in item.error.message and "62" in item.error.message
    assert out.n_errors == 1 and out.models == [] and out.ranking_high_to_low == []
