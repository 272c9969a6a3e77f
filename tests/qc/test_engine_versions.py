"""gpu4pyscf's version is read from whichever CUDA-specific distribution is installed (it ships as
gpu4pyscf-cuda12x or gpu4pyscf-cuda13x, never as plain gpu4pyscf)."""

from __future__ import annotations

import sys

import pytest

from tools_server.core.domain import distribution_version
from tools_server.qc import GPU4PYSCF


@pytest.fixture(autouse=True)
def _fresh_versions():
    """Versions are read once per process; these tests install metadata, so they start from a clean read."""
    distribution_version.cache_clear()
    yield
    distribution_version.cache_clear()


def _install_metadata(root, name: str, version: str) -> None:
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.mark.parametrize("dist", ["gpu4pyscf-cuda13x", "gpu4pyscf-cuda12x"])
def test_version_comes_from_the_installed_cuda_distribution(dist, tmp_path, monkeypatch):
    if GPU4PYSCF.version() is not None:
        pytest.skip("a real gpu4pyscf is installed here")
    _install_metadata(tmp_path, dist, "1.9.0")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    distribution_version.cache_clear()
    assert GPU4PYSCF.version() == "1.9.0"


def test_no_distribution_means_no_version(tmp_path, monkeypatch):
    if GPU4PYSCF.version() is not None:
        pytest.skip("a real gpu4pyscf is installed here")
    assert GPU4PYSCF.version() is None
