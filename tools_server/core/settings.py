"""Where the server keeps its files, from the environment (the variables are listed in docs/server.md)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def workdir() -> Path:
    """Artifacts, job records and (embedded mode) the audit log: ``SPU_WORKDIR`` or ``./spu-work``."""
    path = Path(os.environ.get("SPU_WORKDIR") or "spu-work").absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """The result cache: ``SPU_CACHE_DIR`` or the user cache directory."""
    path = Path(os.environ.get("SPU_CACHE_DIR") or platformdirs.user_cache_dir("spu")).absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def weights_dir() -> Path:
    """Model weights (ESM, ESMFold): ``SPU_WEIGHTS_DIR`` or ``<user cache>/weights``."""
    return Path(os.environ.get("SPU_WEIGHTS_DIR") or Path(platformdirs.user_cache_dir("spu")) / "weights")


def artifacts_dir() -> Path:
    path = workdir() / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path
