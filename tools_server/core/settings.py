"""Where the server keeps its files, from the environment (the variables are listed in docs/server.md), and
how every domain looks up model weights (the directory, whether downloads are allowed, the error when a file
is missing)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from tools_server.core.errors import ToolError


class FolderError(Exception):
    """A folder the server needs cannot be made; the message is the one line ``spu serve`` prints."""


def _make(path: Path) -> str | None:
    """Why ``path`` cannot be made a folder (None when it is one now)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if path.is_dir() else "not a directory"


def prepare_folders() -> str | None:
    """Make the folders the server needs, before it answers anyone: the work directory with its ``jobs``
    folder, and the cache directory. The default work directory (``./spu-work``, when ``SPU_WORKDIR`` is not
    set) that cannot be made falls back to the user's state folder (``$XDG_STATE_HOME/spu/work``), and
    ``SPU_WORKDIR`` is set to it so the workers agree; the note to print is returned. A folder named by
    ``SPU_WORKDIR`` or ``SPU_CACHE_DIR`` that cannot be made, or a fallback that cannot be made either, is a
    :class:`FolderError`. (A folder that exists but refuses writes later is a ``storage_error`` warning on
    the results, not a refusal to start.)"""
    note = None
    work = workdir(create=False)
    why = _make(work / "jobs")
    if why is not None and os.environ.get("SPU_WORKDIR"):
        raise FolderError(
            f"SPU_WORKDIR={work} cannot be used ({why}); point SPU_WORKDIR at a folder the server can write"
        )
    if why is not None:
        fallback = Path(platformdirs.user_state_dir("spu")) / "work"
        if (again := _make(fallback / "jobs")) is not None:
            raise FolderError(
                f"the work folder {work} cannot be made ({why}), nor {fallback} ({again}); set SPU_WORKDIR "
                "to a folder the server can write"
            )
        os.environ["SPU_WORKDIR"] = str(fallback)
        note = f"the work folder {work} cannot be made ({why}); using {fallback} (set SPU_WORKDIR to choose)"
    cache = Path(os.environ.get("SPU_CACHE_DIR") or platformdirs.user_cache_dir("spu")).absolute()
    if (why := _make(cache)) is not None:
        named = "SPU_CACHE_DIR=" if os.environ.get("SPU_CACHE_DIR") else "the cache folder "
        raise FolderError(
            f"{named}{cache} cannot be used ({why}); set SPU_CACHE_DIR to a folder the server can write"
        )
    return note


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
