"""Tiny randomly initialised ESM-2 and ESMFold models, saved in their loaders' own formats into a temporary
SPU_WEIGHTS_DIR and loaded back through tools_server.protein.weights (no weights are ever downloaded)."""

from __future__ import annotations

from argparse import Namespace

import pytest

from tools_server.core.context import ToolContext

TINY_ESM2 = "esm2_t2_tiny_test"


@pytest.fixture
def weights_dir(tmp_path, monkeypatch, spu_env):
    path = tmp_path / "weights"
    path.mkdir()
    monkeypatch.setenv("SPU_WEIGHTS_DIR", str(path))
    monkeypatch.delenv("SPU_WEIGHTS_DOWNLOAD", raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return path


@pytest.fixture
def tiny_esm2(weights_dir):
    """A 2-layer ESM-2 (embed dim 32) saved like fair-esm's esm2 checkpoints: {'model', 'cfg'}."""
    torch = pytest.importorskip("torch")
    esm = pytest.importorskip("esm")
    from tools_server.protein import weights

    weights._load_esm_cached.cache_clear()
    torch.manual_seed(0)
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    model = esm.model.esm2.ESM2(
        num_layers=2, embed_dim=32, attention_heads=4, alphabet=alphabet, token_dropout=True
    )
    cfg = Namespace(encoder_layers=2, encoder_embed_dim=32, encoder_attention_heads=4, token_dropout=True)
    state = {f"encoder.{k}": v for k, v in model.state_dict().items()}
    (weights_dir / "esm").mkdir()
    torch.save({"model": state, "cfg": {"model": cfg}}, weights_dir / "esm" / f"{TINY_ESM2}.pt")
    return TINY_ESM2


@pytest.fixture
def ctx_factory():
    def make(tool: str, job: str = "job") -> ToolContext:
        return ToolContext(tool, job, threads=2)

    return make
