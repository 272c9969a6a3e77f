"""Generated output trees for the collect hook's checks (environment/harbor/boundary.py), on this machine's
file system, without Docker: regular files (some with holes, some too long), hard links inside the tree and
to a file outside it, files and folders of another user (as root), symbolic links (inside, outside,
dangling, to a folder), named pipes, sockets, devices (as root), folders nested past the depth limit, and
names of any bytes but ``/`` and NUL.

The expected outcome of each entry is worked out from how it was made, by the rules the hook documents
(type, then link count, owner, holes, length), and compared with what the copy kept and left out, and with
what a clean in place left behind. The real trial is tests/container/test_hostile_agent.py."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environment.harbor import boundary

ROOT = os.geteuid() == 0
#: the owner of files "of another user" (as root); the tally accepts the test's own uid only
OTHER_UID = 64124
MAX_FILE_BYTES = 6000
#: the hook's depth limit, lowered so that generated trees pass it
MAX_DEPTH = 3
#: how far the generated trees nest (past MAX_DEPTH)
NEST = 5

KINDS = [
    "file",
    "sparse",
    "long",
    "hard_link_inside",
    "hard_link_outside",
    "symlink_inside",
    "symlink_outside",
    "symlink_dangling",
    "symlink_folder",
    "fifo",
    "socket",
    "folder",
    *(["foreign_file", "foreign_folder", "device"] if ROOT else []),
]

names = st.binary(min_size=1, max_size=24).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


@dataclass
class Made:
    """What a generated tree holds: each path (relative, as ``os.fsdecode`` gives it) with how it was made,
    the inode group of every regular file name, and every folder."""

    kinds: dict[str, str] = field(default_factory=dict)
    group: dict[str, int] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    names_of_group: dict[int, int] = field(default_factory=dict)
    groups: int = 0

    def new_group(self, names: int = 1) -> int:
        self.groups += 1
        self.names_of_group[self.groups] = names
        return self.groups


def _build(data: st.DataObject, folder: Path, rel: str, depth: int, made: Made, outside: Path) -> None:
    entries = data.draw(st.lists(names, max_size=4, unique=True), label=f"names in {rel or '.'}")
    # a spine of folders down to NEST, so that every tree passes the depth limit somewhere
    spine = b"spine" if depth < NEST and b"spine" not in entries else None
    for raw in [*entries, *([spine] if spine else [])]:
        name = os.fsdecode(raw)
        path = folder / name
        key = f"{rel}/{name}" if rel else name
        regular_files = [p for p, k in made.kinds.items() if p in made.group and made.group[p] > 0]
        choices = [k for k in KINDS if k != "hard_link_inside" or regular_files]
        if depth >= NEST:
            choices = [k for k in choices if k not in ("folder", "foreign_folder")]
        if raw == spine:
            choices = ["folder", "foreign_folder"] if ROOT else ["folder"]
        kind = data.draw(st.sampled_from(choices), label=f"kind of {key!r}")
        made.kinds[key] = kind
        if kind in ("file", "foreign_file", "long"):
            size = data.draw(
                st.integers(0, 2000) if kind != "long" else st.integers(MAX_FILE_BYTES + 1, 9000)
            )
            seed = data.draw(st.binary(min_size=1, max_size=16), label="content")
            content = (seed * (size // len(seed) + 1))[:size]
            path.write_bytes(content)
            made.contents[key] = content
            made.group[key] = made.new_group()
            if kind == "foreign_file":
                os.chown(path, OTHER_UID, OTHER_UID)
        elif kind == "sparse":
            # data, then a hole of at least two blocks (or a hole first): a hole on any file system
            head = data.draw(st.binary(max_size=100), label="head")
            with path.open("wb") as fh:
                if data.draw(st.booleans(), label="hole first"):
                    fh.seek(data.draw(st.integers(16384, 2**40), label="hole"))
                    fh.write(head or b"x")
                else:
                    fh.write(head)
                    fh.truncate(len(head) + data.draw(st.integers(16384, 2**40), label="hole"))
            made.group[key] = made.new_group()
        elif kind == "hard_link_inside":
            target = data.draw(st.sampled_from(sorted(regular_files)), label="linked file")
            os.link(folder.parents[depth - 1] / target if depth else folder / target, path)
            made.group[key] = made.group[target]
            made.names_of_group[made.group[target]] += 1
            made.kinds[key] = made.kinds[target]
            if target in made.contents:
                made.contents[key] = made.contents[target]
        elif kind == "hard_link_outside":
            shared = outside / f"linked-{made.groups}"
            shared.write_bytes(b"outside the output")
            os.link(shared, path)
            made.group[key] = made.new_group(names=2)
            made.contents[key] = b"outside the output"
        elif kind == "symlink_inside":
            path.symlink_to(".")
        elif kind == "symlink_outside":
            path.symlink_to(outside / "secret.txt")
        elif kind == "symlink_dangling":
            path.symlink_to(outside / "no-such-file")
        elif kind == "symlink_folder":
            path.symlink_to(outside, target_is_directory=True)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            os.mknod(path, stat.S_IFSOCK | 0o600)
        elif kind == "device":
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        else:
            path.mkdir()
            if kind == "foreign_folder":
                os.chown(path, OTHER_UID, OTHER_UID)
            _build(data, path, key, depth + 1, made, outside)


def _expected(made: Made) -> tuple[dict[str, bytes], set[str], dict[str, str]]:
    """(kept files and their bytes, kept folders, left-out path -> kind) by the documented rules."""
    files: dict[str, bytes] = {}
    folders: set[str] = set()
    left_out: dict[str, str] = {}
    for path, kind in sorted(made.kinds.items()):
        parent, _, _ = path.rpartition("/")
        if parent and parent not in folders:
            continue  # inside a folder left out: never looked at
        depth = path.count("/")
        if kind in ("folder", "foreign_folder"):
            if depth >= MAX_DEPTH:
                left_out[path] = "too_deep"
            elif kind == "foreign_folder":
                left_out[path] = "foreign_owner"
            else:
                folders.add(path)
        elif kind.startswith("symlink") or kind in ("fifo", "socket", "device"):
            left_out[path] = "not_regular"
        elif made.names_of_group[made.group[path]] > 1:
            left_out[path] = "hard_link"
        elif kind == "foreign_file":
            left_out[path] = "foreign_owner"
        elif kind == "sparse":
            left_out[path] = "sparse"
        elif kind == "long":
            left_out[path] = "too_large"
        else:
            files[path] = made.contents[path]
    return files, folders, left_out


def _tree(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """(regular files and their bytes, folders) under ``root``; fails on anything else."""
    files, folders = {}, set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            folders.add(os.path.relpath(os.path.join(dirpath, name), root))
        for name in filenames:
            path = os.path.join(dirpath, name)
            st_ = os.lstat(path)
            assert stat.S_ISREG(st_.st_mode), f"{path} is not a regular file"
            files[os.path.relpath(path, root)] = Path(path).read_bytes()
    return files, folders


@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_generated_trees_are_copied_and_cleaned_by_the_rules(data, monkeypatch):
    monkeypatch.setattr(boundary, "MAX_DEPTH", MAX_DEPTH)
    base = Path(tempfile.mkdtemp(prefix="spu-trees-"))
    try:
        outside = base / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(b"host secret")
        output = base / "output"
        output.mkdir()
        made = Made()
        _build(data, output, "", 0, made, outside)
        files, folders, left_out = _expected(made)
        owners = frozenset({os.geteuid()})

        target = base / "collected"
        target.mkdir()
        copy = boundary._Tally(MAX_FILE_BYTES, 2**40, 10_000, owners)
        boundary.copy_regular_tree(output, target, copy)
        assert _tree(target) == (files, folders)
        assert {i["path"]: i["kind"] for i in copy.left_out} == left_out
        assert copy.left_out_count == len(left_out) and copy.files == len(files)
        for item in copy.left_out:
            if item["kind"] in ("hard_link", "sparse", "too_large"):  # read from the opened file
                assert {"apparent_bytes", "allocated_bytes", "links", "uid"} <= item.keys(), item

        clean = boundary._Tally(MAX_FILE_BYTES, 2**40, 10_000, owners, in_place=True)
        boundary.clean_tree(output, clean)
        assert _tree(output) == (files, folders)
        assert {i["path"]: i["kind"] for i in clean.left_out} == left_out
        assert (outside / "secret.txt").read_bytes() == b"host secret"  # nothing outside was touched
        assert all(p.read_bytes() == b"outside the output" for p in outside.glob("linked-*"))
    finally:
        shutil.rmtree(base)


def test_a_tree_deeper_than_the_stack_is_removed_in_place(tmp_path):
    """Nested folders deeper than Python's recursion limit (``shutil.rmtree`` recurses) and than a path may be
    long: cleaned away below the depth limit, the files at the bottom with them, by folder descriptors."""
    levels = sys.getrecursionlimit() + 200
    logs = tmp_path / "logs"
    logs.mkdir()
    fd = os.open(logs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        with os.fdopen(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as fh:
            fh.write("deep")
        os.link("bottom.txt", "linked.txt", src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
    (logs / "kept.txt").write_text("kept")
    tally = boundary._Tally(2**20, 2**30, 100, in_place=True)
    boundary.clean_tree(logs, tally)
    # the folders within the depth limit stay, empty; everything below went
    kept = [os.path.relpath(os.path.join(d, f), logs) for d, _, files in os.walk(logs) for f in files]
    assert kept == ["kept.txt"]
    assert max(d.count("/") for d, _, _ in os.walk(logs)) - str(logs).count("/") == boundary.MAX_DEPTH
    assert [(i["path"].count("/"), i["kind"]) for i in tally.left_out] == [(boundary.MAX_DEPTH, "too_deep")]
    assert tally.linked  # the hard-linked file removed with the tree is remembered


def test_a_socket_bound_in_the_output_is_left_out_unopened(tmp_path):
    output = tmp_path / "o"
    output.mkdir()
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(output / "s"))
        listening.listen()
        target = tmp_path / "c"
        target.mkdir()
        tally = boundary._Tally(2**20, 2**30, 100)
        boundary.copy_regular_tree(output, target, tally)
        listening.setblocking(False)
        with pytest.raises(BlockingIOError):
            listening.accept()  # nobody connected: the hook never opened it
    assert [(i["path"], i["kind"], i["reason"]) for i in tally.left_out] == [("s", "not_regular", "a socket")]
