"""Racing link swaps against a reader of files, and a detector of reads outside the roots.

A raced input is a path ``BASE/cN/d0/…/d{depth-1}/LEAF`` whose one component (a folder ``d<k>`` or the leaf)
is exchanged, again and again while a call runs, with a hostile twin (``renameat2(RENAME_EXCHANGE)``: the
two names trade places atomically, so at every instant the path names either the good tree or the twin):

* for a folder component: a symbolic link to a mirror of the rest of the path outside the roots
  (``link_out``), a chain of two links to it (``link_chain``), or a link to a copy inside the roots
  (``link_in``);
* for the leaf: a link out, a chain of links out, a link to a file inside, a hard link to a file outside
  (``hard_out``), a FIFO, a sparse file of 3 GiB, or a folder where a file is expected (a file where a
  folder is expected).

Outside reads are counted by the kernel, not by the reader: an ``inotify`` watch on every file outside the
roots reports each open and each read of it (for the hard-linked file, reads only: opening it to look at
its link count is not reading it), by any process (the server and its workers).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

IN_ACCESS = 0x1
IN_OPEN = 0x20
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)

DIR_TWINS = ("link_out", "link_chain", "link_in")
FILE_TWINS = ("link_out", "link_chain", "link_in", "hard_out", "fifo", "sparse", "other_kind")
#: what each outside file holds: a marker that must never reach an answer
OUTSIDE_MARKER = "OUTSIDE-SECRET-5b1e"


class Inotify:
    """Counts opens and reads of watched files, by any process."""

    def __init__(self) -> None:
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.paths: dict[int, str] = {}

    def watch(self, path: Path, mask: int) -> None:
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(str(path)), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self.paths[wd] = str(path)

    def drain(self) -> list[tuple[str, int]]:
        """The events since the last drain: (watched path, mask)."""
        events = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, size = struct.unpack_from("iIII", data, offset)
                offset += 16 + size
                if wd in self.paths:
                    events.append((self.paths[wd], mask))

    def close(self) -> None:
        os.close(self.fd)


def exchange(a: Path, b: Path) -> None:
    if _libc.renameat2(_AT_FDCWD, os.fsencode(str(a)), _AT_FDCWD, os.fsencode(str(b)), _RENAME_EXCHANGE):
        raise OSError(ctypes.get_errno(), f"renameat2 {a} {b}")


@dataclass(frozen=True)
class Layout:
    """One raced input: ``depth`` folders between the call's folder and the leaf, the component swapped
    (``swap_at`` = depth: the leaf), its hostile ``twin``, how the path is spelled (``plain``, ``dot``:
    with ``./`` components, ``dotdot``: through ``d0/../d0``, ``slashes``: doubled separators), and how
    many exchanges are made before the call goes out (``lead``: an odd count starts it on the twin, and
    the count moves the phase of the race against the reader)."""

    depth: int
    swap_at: int
    twin: str
    spelling: str
    lead: int = 0


class Racer:
    """Builds raced inputs under ``base`` (inside the roots) with mirrors under ``outside`` (outside them),
    watched by one :class:`Inotify`."""

    def __init__(self, base: Path, outside: Path) -> None:
        self.base = base
        self.outside = outside
        self.inotify = Inotify()
        self._mirrors: dict[tuple, Path] = {}
        self._inside_watched: set[str] = set()
        self.calls = 0
        base.mkdir(parents=True, exist_ok=True)
        outside.mkdir(parents=True, exist_ok=True)

    def _outside_tree(
        self, rest: list[str], leaf: str, payload: dict[str, bytes] | bytes, hard: bool
    ) -> Path:
        """A folder outside the roots holding ``rest/leaf`` (a file, or a folder of files), watched."""
        key = (tuple(rest), leaf, hard, isinstance(payload, dict))
        if key not in self._mirrors:
            top = self.outside / f"m{len(self._mirrors)}"
            target = top.joinpath(*rest, leaf)
            if isinstance(payload, dict):
                target.mkdir(parents=True)
                files = []
                for name in payload:
                    (target / name).write_text(f"{OUTSIDE_MARKER} {name}\n")
                    files.append(target / name)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(f"{OUTSIDE_MARKER}\n")
                files = [target]
            for file in files:
                self.inotify.watch(file, IN_ACCESS if hard else IN_OPEN | IN_ACCESS)
            self._mirrors[key] = top
        return self._mirrors[key]

    def prepare(self, layout: Layout, leaf: str, payload: bytes | dict[str, bytes]) -> tuple[str, Path, Path]:
        """Build one raced input holding ``payload`` (a file's bytes, or a folder's files); returns the
        path as spelled, and the two names whose exchange is the race."""
        self.calls += 1
        call = self.base / f"c{self.calls}"
        dirs = [f"d{i}" for i in range(layout.depth)]
        parent = call.joinpath(*dirs)
        parent.mkdir(parents=True)
        good = parent / leaf
        if isinstance(payload, dict):
            good.mkdir()
            for name, data in payload.items():
                (good / name).write_bytes(data)
            self._watch_inside(good / next(iter(payload)))
        else:
            good.write_bytes(payload)
            self._watch_inside(good)
        if layout.swap_at < layout.depth:  # a folder component
            swapped = call.joinpath(*dirs[: layout.swap_at + 1])
            rest = dirs[layout.swap_at + 1 :]
            mirror = self._outside_tree(rest, leaf, payload, hard=False)
            twin = swapped.with_name(swapped.name + ".twin")
            if layout.twin == "link_in":
                copy = swapped.with_name(swapped.name + ".copy")
                shutil.copytree(swapped, copy, symlinks=True)
                twin.symlink_to(copy, target_is_directory=True)
            elif layout.twin == "link_chain":
                hop = call / "hop"
                hop.symlink_to(mirror, target_is_directory=True)
                twin.symlink_to(hop, target_is_directory=True)
            else:
                twin.symlink_to(mirror, target_is_directory=True)
        else:
            swapped, twin = good, good.with_name(leaf + ".twin")
            self._leaf_twin(layout.twin, twin, leaf, payload, call)
        return _spelled(call, dirs, leaf, layout.spelling), swapped, twin

    def _leaf_twin(
        self, kind: str, twin: Path, leaf: str, payload: bytes | dict[str, bytes], call: Path
    ) -> None:
        folder = isinstance(payload, dict)
        if kind in ("link_out", "link_chain"):
            mirror = self._outside_tree([], leaf, payload, hard=False) / leaf
            if kind == "link_chain":
                hop = call / "hop"
                hop.symlink_to(mirror, target_is_directory=folder)
                mirror = hop
            twin.symlink_to(mirror, target_is_directory=folder)
        elif kind == "link_in":
            sibling = twin.with_name(leaf + ".copy")
            if folder:
                shutil.copytree(twin.with_name(leaf), sibling)
            else:
                sibling.write_bytes(payload)
            twin.symlink_to(sibling, target_is_directory=folder)
        elif kind == "hard_out" and not folder:
            os.link(self._outside_tree(["hard"], leaf, payload, hard=True) / "hard" / leaf, twin)
        elif kind == "fifo":
            os.mkfifo(twin)
        elif kind == "sparse" and not folder:
            with open(twin, "wb") as fh:
                fh.truncate(3 * 2**30)
        elif folder:  # a file where a folder is expected
            twin.write_text("not a folder\n")
        else:  # a folder where a file is expected
            twin.mkdir()

    def _watch_inside(self, path: Path) -> None:
        self.inotify.watch(path, IN_ACCESS)
        self._inside_watched.add(str(path))

    @contextlib.contextmanager
    def racing(self, swapped: Path, twin: Path, lead: int = 0) -> Iterator[None]:
        """Exchange ``swapped`` and ``twin`` ``lead`` times, then without pause while the block runs."""
        stop = threading.Event()
        for _ in range(lead):
            exchange(swapped, twin)

        def swap() -> None:
            while not stop.is_set():
                exchange(swapped, twin)

        thread = threading.Thread(target=swap, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def reads(self) -> tuple[list[str], int]:
        """(the outside files opened or read since the last call, how many reads of inside files)."""
        outside, inside = [], 0
        for path, _mask in self.inotify.drain():
            if path in self._inside_watched:
                inside += 1
            else:
                outside.append(path)
        return outside, inside

    def clean(self) -> None:
        """Remove the calls' folders (the sparse files with them)."""
        for call in self.base.glob("c*"):
            shutil.rmtree(call, ignore_errors=True)

    def close(self) -> None:
        self.inotify.close()


def _spelled(call: Path, dirs: list[str], leaf: str, spelling: str) -> str:
    if spelling == "dot":
        return str(call.joinpath(*[p for d in dirs for p in (".", d)], leaf))
    if spelling == "dotdot" and dirs:
        return str(call.joinpath(dirs[0], "..", *dirs, leaf))
    if spelling == "slashes":
        return str(call) + "//" + "//".join([*dirs, leaf])
    return str(call.joinpath(*dirs, leaf))
