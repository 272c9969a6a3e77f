"""protein_embed and protein_variant_scores on a tiny ESM-2 loaded through the real weights code."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("esm")

from tools_server.core.errors import ToolError
from tools_server.protein.tools import (
    ProteinEmbedInput,
    VariantScoresInput,
    protein_embed,
    protein_variant_scores,
)

WT = (
    "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVVHSLAKWKRQTLGQHDFSAGE"
    "GLYTHMKALRPDEDRLSPLHSVYVDQWDWERVMGDGERQFSTLKSTVEAIWAGIKATEAAVSEEFGLAPFLPDQIHFVHSQELLSRYPDL"
    "DAKGRERAIAKDLGAVFLVGIGGKLSDGHRHDVRAPDYDDWUAR"
).replace("U", "S")


def test_embeddings_are_saved_and_similarities_consistent(tiny_esm2, ctx_factory):
    seqs = [WT[:60], WT[:60], WT[60:130]]
    out = protein_embed(ProteinEmbedInput(sequences=seqs, model=tiny_esm2), ctx_factory("protein_embed"))
    emb = np.load(out.artifacts["embeddings_npy"])
    assert emb.shape == (3, 32) and out.embedding_dim == 32
    sim = np.array(out.cosine_similarity)
    # Identical sequences embed identically; cosine similarity is symmetric with a unit diagonal.
    assert sim[0, 1] == pytest.approx(1.0, abs=1e-4)
    assert np.allclose(sim, sim.T, atol=1e-4) and np.allclose(np.diag(sim), 1.0, atol=1e-4)
    assert sim[0, 2] < 0.9999
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    assert np.allclose(unit @ unit.T, np.load(out.artifacts["similarity_npy"]), atol=1e-5)


def _score(tiny, wt, variants, method, ctx_factory):
    out = protein_variant_scores(
        VariantScoresInput(wild_type=wt, variants=variants, model=tiny, method=method), ctx_factory("pvs")
    )
    return out


@pytest.mark.parametrize("method", ["masked_marginal", "masked_marginal_joint", "wildtype_marginal"])
def test_single_mutant_score_flips_sign_when_reversed(tiny_esm2, ctx_factory, method):
    wt = WT[:80]
    forward = _score(tiny_esm2, wt, ["A4V"], method, ctx_factory).items[0].score
    mutant = wt[:3] + "V" + wt[4:]
    backward = _score(tiny_esm2, mutant, ["V4A"], method, ctx_factory).items[0].score
    assert forward != 0.0
    if method == "wildtype_marginal":
        # The unmasked context contains the residue being scored, so no exact antisymmetry is expected.
        assert backward != pytest.approx(-forward, abs=1e-6)
    else:
        # Masking position 4 makes wild-type and mutant contexts identical: exact antisymmetry.
        assert backward == pytest.approx(-forward, abs=1e-3)


def test_multi_mutant_joint_antisymmetry_and_additivity(tiny_esm2, ctx_factory):
    wt = WT[:80]
    assert wt[3] == "A" and wt[9] == "R"
    mutant = wt[:3] + "V" + wt[4:9] + "D" + wt[10:]  # A4V and R10D
    fwd = _score(tiny_esm2, wt, ["A4V:R10D"], "masked_marginal_joint", ctx_factory).items[0].score
    back = _score(tiny_esm2, mutant, ["V4A:D10R"], "masked_marginal_joint", ctx_factory).items[0].score
    assert back == pytest.approx(-fwd, abs=1e-3)
    # masked_marginal is additive over positions.
    out = _score(tiny_esm2, wt, ["A4V", "R10D", "A4V:R10D", "WT"], "masked_marginal", ctx_factory)
    s = {it.variant: it.score for it in out.items}
    assert s["A4V:R10D"] == pytest.approx(s["A4V"] + s["R10D"], abs=2e-4)
    assert s["WT"] == 0.0
    assert out.ranking_high_to_low[0] == max(s, key=s.get)


def test_bad_variants_are_per_item_errors(tiny_esm2, ctx_factory):
    wt = WT[:80]
    out = _score(
        tiny_esm2,
        wt,
        ["A4V", "G4V", "A400V", "A4Z", "A4V:A4G", "hello", "a4v"],
        "masked_marginal",
        ctx_factory,
    )
    items = out.items
    assert [it.ok for it in items] == [True, False, False, False, False, False, True]
    assert all(it.error.code == "invalid_mutation" for it in items if not it.ok)
    assert "has A at position 4" in items[1].error.message
    assert items[6].score == items[0].score
    assert out.n_errors == 5


def test_bad_wild_type_fails_the_call(tiny_esm2, ctx_factory):
    with pytest.raises(ToolError) as err:
        _score(tiny_esm2, "MKT1AY", ["K2A"], "masked_marginal", ctx_factory)
    assert err.value.code == "invalid_sequence"
    with pytest.raises(ToolError) as err:
        _score(tiny_esm2, "A" * 1023, ["A2V"], "masked_marginal", ctx_factory)
    assert err.value.code == "too_large"


def test_missing_weights_is_a_clear_error(weights_dir, ctx_factory):
    with pytest.raises(ToolError) as err:
        protein_embed(ProteinEmbedInput(sequences=["MKT"]), ctx_factory("protein_embed"))
    assert err.value.code == "weights_missing"
    assert "esm2_t33_650M_UR50D.pt" in err.value.details["expected_path"]
    with pytest.raises(ToolError) as err:
        _score("esm1v", "MKTAY", ["K2A"], "masked_marginal", ctx_factory)
    assert err.value.code == "weights_missing"


def test_runs_are_whole_batches_of_about_equal_length():
    from tools_server.protein.tools import _runs

    assert _runs(20, 8, 64) == [(0, 8), (8, 16), (16, 20)]
    assert _runs(20, 8, 1) == [(0, 20)]
    assert _runs(0, 8, 64) == [(0, 0)]
    runs = _runs(100, 8, 12)  # 13 batches in 12 runs
    assert len(runs) == 12 and runs[0][0] == 0 and runs[-1][1] == 100
    assert all(a % 8 == 0 and a < b for a, b in runs)
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(runs))


@pytest.mark.parametrize("method", ["masked_marginal", "masked_marginal_joint", "wildtype_marginal"])
def test_scores_split_in_runs_equal_one_pass_over_all_variants(tiny_esm2, ctx_factory, method):
    """The tool splits its forward passes into runs of whole batches (its items on a cluster): 20 mutated
    positions are three runs, and each score is the one a single variant_scores call gives."""
    from tools_server.protein import language_model, weights
    from tools_server.protein.sequences import format_mutations, parse_mutations

    wt = WT[:60]
    texts = [f"{wt[p - 1]}{p}{'W' if wt[p - 1] != 'W' else 'A'}" for p in range(1, 41, 2)]
    texts += [f"{texts[0]}:{texts[5]}", "WT"]
    out = _score(tiny_esm2, wt, texts, method, ctx_factory)
    model, alphabet = weights.load_esm(tiny_esm2)
    muts = [parse_mutations(t, wt) for t in texts]
    direct = language_model.variant_scores(model, alphabet, wt, muts, method, "cpu")
    assert [it.variant for it in out.items] == [format_mutations(m) for m in muts]
    assert [it.score for it in out.items] == [round(s, 4) for s in direct]
    assert len({it.score for it in out.items}) > 10  # the scores differ between variants


def test_embeddings_in_runs_equal_one_pass(tiny_esm2, ctx_factory):
    """Eleven sequences are two runs of the model's batches; the saved embeddings are one call's."""
    from tools_server.protein import language_model, weights

    seqs = [WT[k : k + 25 + 3 * k] for k in range(11)]
    out = protein_embed(ProteinEmbedInput(sequences=seqs, model=tiny_esm2), ctx_factory("protein_embed"))
    model, alphabet = weights.load_esm(tiny_esm2)
    direct = language_model.mean_embeddings(model, alphabet, seqs, "cpu")
    assert np.array_equal(np.load(out.artifacts["embeddings_npy"]), direct)
