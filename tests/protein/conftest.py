"""Tiny randomly initialised ESM-2 and ESMFold models, saved in their loaders' own formats into a temporary
SPU_WEIGHTS_DIR and loaded back through tools_server.protein.weights (no weights are ever downloaded)."""

from __future__ import annotations

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
    pytest.importorskip("torch")
    pytest.importorskip("esm")
    from tools_server.protein import weights

    weights._load_esm_cached.cache_clear()
    weights.save_random_esm2(weights_dir / "esm" / f"{TINY_ESM2}.pt")
    return TINY_ESM2


@pytest.fixture
def ctx_factory():
    def make(tool: str, job: str = "job") -> ToolContext:
        return ToolContext(tool, job, threads=2)

    return make
