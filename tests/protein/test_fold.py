"""protein_fold on a tiny randomly initialised ESMFold saved with save_pretrained into SPU_WEIGHTS_DIR."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tools_server.core.errors import ToolError  # noqa: E402 - after the skips
from tools_server.protein.tools import ProteinFoldInput, protein_fold  # noqa: E402


@pytest.fixture
def tiny_esmfold(weights_dir):
    from transformers import EsmConfig, EsmForProteinFolding

    from tools_server.protein import weights

    weights._load_esmfold_cached.cache_clear()
    cfg = EsmConfig(
        vocab_size=33, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=1026, position_embedding_type="rotary", token_dropout=True, mask_token_id=32,
        pad_token_id=1, is_folding_model=True,
        esmfold_config={
            "trunk": {
                "num_blocks": 1, "sequence_state_dim": 32, "pairwise_state_dim": 16, "sequence_head_width": 8,
                "pairwise_head_width": 8,
                "structure_module": {
                    "sequence_dim": 32, "pairwise_dim": 16, "ipa_dim": 16, "num_heads_ipa": 2,
                    "num_qk_points": 2,
                    "num_v_points": 2, "num_blocks": 1, "num_transition_layers": 1, "resnet_dim": 16,
                    "num_resnet_blocks": 1,
                },
            },
            "lddt_head_hid_dim": 16,
        },
    )  # fmt: skip
    torch.manual_seed(0)
    EsmForProteinFolding(cfg).save_pretrained(weights_dir / "esmfold" / "tiny")
    return "tiny"


def test_fold_returns_plddt_ptm_and_pdb(tiny_esmfold, ctx_factory):
    seq = "MKTAYIAKQRQISFVKSHFSRQ"
    out = protein_fold(
        ProteinFoldInput(sequence=seq, model=tiny_esmfold, num_recycles=1), ctx_factory("protein_fold")
    )
    assert out.length == len(seq) and len(out.plddt_per_residue) == len(seq)
    assert all(0 <= x <= 100 for x in out.plddt_per_residue)
    assert 0 <= out.ptm <= 1
    pdb = Path(out.artifacts["pdb"]).read_text()
    ca = [line for line in pdb.splitlines() if line.startswith("ATOM") and line[12:16].strip() == "CA"]
    assert len(ca) == len(seq)
    # pLDDT (0-100) is written to the B-factor column.
    assert float(ca[0][60:66]) == pytest.approx(out.plddt_per_residue[0], abs=0.06)
    # A random model is not confident: the low-confidence warning must be raised.
    assert out.mean_plddt < 70 and any("pLDDT" in w for w in out.warnings)


def test_long_sequence_is_refused_before_loading(tiny_esmfold, ctx_factory):
    with pytest.raises(ToolError) as err:
        protein_fold(
            ProteinFoldInput(sequence="A" * 900, model=tiny_esmfold, max_memory_gb=0.05), ctx_factory("pf")
        )
    assert err.value.code == "too_large"
    fits = err.value.details["max_residues_that_fit"]
    assert 0 < fits < 900
    assert f"up to about {fits} residues" in err.value.hint


def test_published_esmfold_estimate_exceeds_16_gib_at_1000_residues():
    from tools_server.protein import folding

    need = folding.estimate_bytes(None, 1000, folding.ESMFOLD_V1_WEIGHT_BYTES, folding.DEFAULT_CHUNK)
    assert need > 16 * 1024**3


def test_fold_without_weights_is_weights_missing(weights_dir, ctx_factory):
    with pytest.raises(ToolError) as err:
        protein_fold(ProteinFoldInput(sequence="MKTAYIAK"), ctx_factory("pf"))
    assert err.value.code in ("weights_missing", "too_large")
    if err.value.code == "weights_missing":
        assert err.value.details["expected_path"].endswith("config.json")


def test_fold_rejects_bad_sequence(ctx_factory, weights_dir):
    with pytest.raises(ToolError) as err:
        protein_fold(ProteinFoldInput(sequence="MKT-AYIAK"), ctx_factory("pf"))
    assert err.value.code == "invalid_sequence"
