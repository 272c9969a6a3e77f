"""Where the server keeps its files, from the environment (the variables are listed in docs/server.md), and
how every domain looks up model weights (the directory, whether downloads are allowed, the error when a file
is missing)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from tools_server.core.errors import ToolError


def workdir(*, create: bool = True) -> Path:
    """Artifacts, job records and (embedded mode) the audit log: ``SPU_WORKDIR`` or ``./spu-work``."""
    path = Path(os.environ.get("SPU_WORKDIR") or "spu-work").absolute()
    if create:
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


def download_allowed() -> bool:
    """Whether loaders may fetch missing weights into :func:`weights_dir` (``SPU_WEIGHTS_DOWNLOAD``)."""
    return os.environ.get("SPU_WEIGHTS_DOWNLOAD", "").strip().lower() in ("1", "true", "yes")


def weights_missing(what: str, expected: Path) -> ToolError:
    """The ``weights_missing`` error for weights of ``what`` expected at ``expected``, downloads being off."""
    return ToolError(
        "weights_missing",
        f"The weights for {what} are not in {expected.parent} and downloading is off.",
        hint=f"Place the file at {expected} (see docs/weights.md), or set SPU_WEIGHTS_DOWNLOAD=1 to fetch it "
        "on first use.",
        expected_path=str(expected),
    )


def artifacts_dir(*, create: bool = True) -> Path:
    path = workdir(create=create) / "artifacts"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
