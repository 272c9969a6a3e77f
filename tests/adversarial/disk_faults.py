"""Real disk faults for the fault-injection tests: a small tmpfs (a disk that fills up) and a read-only bind
mount, made as root and removed after the test (the ``mounts`` fixture of this folder's conftest)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


class Mounts:
    def __init__(self) -> None:
        self.made: list[Path] = []

    def _mount(self, *args: str) -> None:
        done = subprocess.run(["mount", *args], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"mount {' '.join(args)} failed ({done.stderr.strip()}): no CAP_SYS_ADMIN here")

    def tmpfs(self, path: Path, size_kb: int) -> Path:
        """A tmpfs of ``size_kb`` KiB at ``path``: a disk that fills up."""
        path.mkdir(parents=True, exist_ok=True)
        self._mount("-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path))
        self.made.append(path)
        return path

    def read_only(self, path: Path) -> Path:
        """``path`` bound onto itself read-only (root writes there fail with EROFS, as a user's would)."""
        self._mount("--bind", str(path), str(path))
        self.made.append(path)
        self._mount("-o", "remount,bind,ro", str(path))
        return path

    def undo(self) -> None:
        for path in reversed(self.made):
            subprocess.run(["umount", str(path)], capture_output=True)
        self.made.clear()


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` until a write fails; returns the filler file (delete it to free
    the space)."""
    filler = folder / "filler"
    block = b"\0" * 65536
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(block)
        except OSError:
            pass
    with open(filler, "ab", buffering=0) as fh:  # the last partial block
        try:
            while True:
                fh.write(b"\0" * 512)
        except OSError:
            pass
    return filler
