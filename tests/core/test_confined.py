"""The open-once reader (:mod:`spu_common.confined`), both ways it opens (``openat2`` and the ``O_NOFOLLOW``
walk), on generated trees: a file is read exactly when every component below the root is a real folder and
the leaf a regular file of one hard link within the cap; otherwise the refusal names the reason, and no
byte of a file outside the root is ever returned, also while a component is swapped during the read."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from link_races import exchange

from spu_common import confined

pytestmark = pytest.mark.slow  # hundreds of generated trees each
OUTSIDE = b"OUTSIDE-SECRET\n"
INSIDE = b"inside bytes\n"
CAP = 1 << 20
PROFILE = {
    "max_examples": 1000 if os.environ.get("SPU_HYPOTHESIS") == "deep" else 150,
    "derandomize": True,
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture],
}


@pytest.fixture(params=["openat2", "walk"])
def mode(request, monkeypatch):
    """Each test runs with openat2 (where the kernel has it) and with the descriptor walk."""
    if request.param == "openat2" and not confined.openat2_available():
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(confined, "_openat2_works", request.param == "openat2")
    return request.param


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "secret").write_bytes(OUTSIDE)
    (outside / "sub" / "secret").write_bytes(OUTSIDE)
    return root, outside


#: what a component of the path is: a real folder, a link to a folder inside or outside, a link chain
COMPONENTS = st.sampled_from(["dir", "link_in", "link_out", "link_chain"])
#: what the leaf is
LEAVES = st.sampled_from(["file", "link_in", "link_out", "hard_out", "fifo", "sparse", "dir", "missing"])


def _build(root: Path, outside: Path, case: int, components: list[str], leaf: str) -> tuple[str, str | None]:
    """Build the tree of one case; returns the path to read and the reason it must be refused (None: read).

    The folders ``c0 … c<n>`` and the leaf ``secret`` are made real first; then each component drawn as a
    link is moved aside (``c<i>.real``) and replaced by a link: back to its real folder (``link_in``), to a
    mirror outside the root holding the rest of the path with outside bytes (``link_out``), or through a
    second link to that mirror (``link_chain``)."""
    base = root / f"case{case}"
    names = [f"c{i}" for i in range(len(components))]
    here = base.joinpath(*names)
    here.mkdir(parents=True)
    path = here / "secret"
    if leaf == "file":
        path.write_bytes(INSIDE)
    elif leaf == "link_in":
        (here / "other").write_bytes(INSIDE)
        path.symlink_to("other")
    elif leaf == "link_out":
        path.symlink_to(outside / "secret")
    elif leaf == "hard_out":
        os.link(outside / "secret", path)
    elif leaf == "fifo":
        os.mkfifo(path)
    elif leaf == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(3 * 2**30)
    elif leaf == "dir":
        path.mkdir()
    expected = {
        "file": None,
        "link_in": "link",
        "link_out": "link",
        "hard_out": "hard_link",
        "fifo": "not_regular",
        "sparse": "too_large",
        "dir": "not_regular",
        "missing": "missing",
    }[leaf]
    for i in reversed(range(len(components))):
        kind = components[i]
        if kind == "dir":
            continue
        expected = "link"
        folder = base.joinpath(*names[: i + 1])
        folder.rename(folder.with_name(f"{names[i]}.real"))
        mirror = outside / f"case{case}-{i}"
        mirror.joinpath(*names[i + 1 :]).mkdir(parents=True, exist_ok=True)
        mirror.joinpath(*names[i + 1 :], "secret").write_bytes(OUTSIDE)
        if kind == "link_in":
            folder.symlink_to(f"{names[i]}.real", target_is_directory=True)
        elif kind == "link_out":
            folder.symlink_to(mirror, target_is_directory=True)
        else:
            folder.with_name(f"{names[i]}.hop").symlink_to(mirror, target_is_directory=True)
            folder.symlink_to(f"{names[i]}.hop", target_is_directory=True)
    return str(base.joinpath(*names, "secret")), expected


@given(data=st.data())
@settings(**PROFILE)
def test_a_file_is_read_only_through_real_folders_below_the_root(mode, tree, data):
    root, outside = tree
    components = data.draw(st.lists(COMPONENTS, max_size=4), label="components")
    leaf = data.draw(LEAVES, label="leaf")
    case = len(list(root.iterdir()))
    path, expected = _build(root, outside, case, components, leaf)
    try:
        read = confined.read_file(path, [root], max_bytes=CAP)
    except confined.Refused as exc:
        got = exc.reason
        assert OUTSIDE.decode() not in exc.message
    else:
        got = None
        assert read.data == INSIDE and read.path == Path(path)
    assert got == expected, (components, leaf, path)


@given(spelling=st.lists(st.sampled_from(["..", ".", "sub"]), max_size=6))
@settings(**PROFILE)
def test_dot_dot_never_climbs_above_the_root(mode, tree, spelling):
    root, _ = tree
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "secret").write_bytes(INSIDE)
    (root / "secret").write_bytes(INSIDE)
    where: list[str] = []
    expected = None  # the first step that leaves the root, or names no folder, decides
    for part in spelling:
        if expected is not None or part == ".":
            continue
        if part == "..":
            expected = "outside" if not where else None
            where = where[:-1]
        elif where:  # root/sub/sub does not exist
            expected = "missing"
        else:
            where = ["sub"]
    relative = "/".join([*spelling, "secret"])
    try:
        read = confined.read_file(root / relative, [root], max_bytes=CAP)
    except confined.Refused as exc:
        assert exc.reason == expected, relative
    else:
        assert expected is None and read.data == INSIDE, relative


@given(
    at=st.integers(0, 2),
    twin=st.sampled_from(["link_out", "link_chain", "hard_out", "fifo", "sparse"]),
    reads=st.integers(20, 60),
)
@settings(**{**PROFILE, "max_examples": PROFILE["max_examples"] // 5})
def test_a_swap_during_the_read_never_yields_outside_bytes(mode, tree, at, twin, reads):
    """A component exchanged with a hostile twin without pause (``renameat2``) while the reader reads:
    every read gives the inside bytes or a refusal, never the outside file."""
    root, outside = tree
    case = root / f"race{len(list(root.iterdir()))}"
    (case / "a" / "b").mkdir(parents=True)
    (case / "a" / "b" / "f").write_bytes(INSIDE)
    parts = ["a", "b", "f"]
    swapped = case.joinpath(*parts[: at + 1])
    other = swapped.with_name(swapped.name + ".twin")
    if at < 2 and twin in ("link_out", "link_chain"):
        mirror = outside / f"m{case.name}"
        mirror.joinpath(*parts[at + 1 : -1]).mkdir(parents=True, exist_ok=True)
        mirror.joinpath(*parts[at + 1 :]).write_bytes(OUTSIDE)
        other.symlink_to(mirror, target_is_directory=True)
    elif twin in ("link_out", "link_chain"):
        other.symlink_to(outside / "secret")
    elif twin == "hard_out":
        os.link(outside / "secret", other)
    elif twin == "fifo":
        os.mkfifo(other)
    else:
        with open(other, "wb") as fh:
            fh.truncate(3 * 2**30)
    if at < 2 and twin not in ("link_out", "link_chain"):  # a folder's twin must be a folder or a link
        other.unlink()
        other.symlink_to(outside, target_is_directory=True)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            exchange(swapped, other)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    got = set()
    try:
        for _ in range(reads):
            try:
                got.add(confined.read_file(case.joinpath(*parts), [root], max_bytes=CAP).data)
            except confined.Refused as exc:
                assert exc.reason in ("link", "hard_link", "not_regular", "too_large", "missing"), exc.reason
    finally:
        stop.set()
        thread.join()
    assert got <= {INSIDE}


def test_walk_lists_links_without_entering_them(mode, tree):
    root, outside = tree
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f").write_bytes(INSIDE)
    (root / "d" / "out").symlink_to(outside, target_is_directory=True)
    (root / "d" / "file_out").symlink_to(outside / "secret")
    os.mkfifo(root / "d" / "pipe")
    found = {(e.relative, e.kind) for e in confined.walk(root / "d", [root])}
    assert found == {("e/f", "file"), ("out", "link"), ("file_out", "link"), ("pipe", "other")}
    with pytest.raises(confined.Refused) as err:
        confined.walk(root / "d" / "out", [root])
    assert err.value.reason == "link"


def test_system_files_and_paths_under_no_root_are_refused(mode, tree):
    root, outside = tree
    climb = "/".join([".."] * len(root.parts))
    for path, roots, reason in [
        ("/proc/self/environ", [root, "/"], "system"),  # a root of / does not open /proc
        (f"{root}/{climb}/proc/self/environ", [root, "/"], "system"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", ["/"], "system"),
        ("/dev/zero", ["/"], "system"),
        (str(outside / "secret"), [root], "outside"),
        ("", [root], "bad_name"),
        (str(root) + "/a\x00b", [root], "bad_name"),
    ]:
        with pytest.raises(confined.Refused) as err:
            confined.read_file(path, roots, max_bytes=CAP)
        assert err.value.reason == reason, path
