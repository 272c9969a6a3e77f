"""The trial boundary run inside the agent's container (environment/harbor/boundary.py), on this machine:
processes of a user of their own ended, the output copied by the rules, host-mounted folders cleaned,
the verifier's folders locked. The same code in a real Harbor trial: tests/container/test_hostile_agent.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from environment.harbor import boundary

#: a uid no account and no process of this machine has; the processes the tests end run as it
AGENT_UID = 64123

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="starting processes as another user needs root")


def _hostile_tree(root: Path, outside: Path) -> None:
    """A valid file, links in and out, a pipe, a socket, a 3 GiB sparse file, a set-uid file, a subfolder."""
    root.mkdir()
    (root / "rankings.json").write_text('{"task_id": "t"}')
    (root / "sub").mkdir()
    (root / "sub" / "report.md").write_text("# report\n")
    (root / "to-passwd").symlink_to("/etc/passwd")
    (root / "to-outside").symlink_to(outside)
    (root / "to-inside").symlink_to(root / "rankings.json")
    (root / "linked-folder").symlink_to(outside.parent, target_is_directory=True)
    os.mkfifo(root / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock"))
    with (root / "huge.json").open("wb") as fh:
        fh.truncate(3 * 2**30)
    setuid = root / "tool"
    setuid.write_text("#!/bin/sh\n")
    setuid.chmod(0o4755)


def test_copy_keeps_regular_files_and_says_why_it_left_each_other_thing_out(tmp_path, monkeypatch):
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret")
    _hostile_tree(tmp_path / "output", outside)
    target = tmp_path / "collected"
    target.mkdir()
    monkeypatch.setattr(os, "mkfifo", None)  # nothing may create a pipe while copying
    tally = boundary._Tally(max_file_bytes=2**20, max_total_bytes=2**30, max_entries=100)
    boundary.copy_regular_tree(tmp_path / "output", target, tally)
    copied = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    assert copied == ["rankings.json", "sub", "sub/report.md", "tool"]
    assert (target / "rankings.json").read_text() == '{"task_id": "t"}'
    assert stat.S_IMODE((target / "tool").stat().st_mode) == 0o755  # the set-uid bit is not copied
    reasons = {item["path"]: (item["kind"], item["reason"]) for item in tally.left_out}
    assert reasons == {
        "huge.json": ("sparse", f"sparse: no data from byte 0 of {3 * 2**30} (0 bytes allocated)"),
        "linked-folder": ("not_regular", "a symbolic link"),
        "pipe": ("not_regular", "a named pipe"),
        "sock": ("not_regular", "a socket"),
        "to-inside": ("not_regular", "a symbolic link"),
        "to-outside": ("not_regular", "a symbolic link"),
        "to-passwd": ("not_regular", "a symbolic link"),
    }
    huge = next(item for item in tally.left_out if item["path"] == "huge.json")
    assert (huge["apparent_bytes"], huge["allocated_bytes"], huge["links"]) == (3 * 2**30, 0, 1)
    assert (tally.files, tally.left_out_count) == (3, 7)
    assert tally.summary()["left_out_kinds"] == {"not_regular": 6, "sparse": 1}


def test_copy_holds_the_total_and_the_entry_limits(tmp_path):
    source = tmp_path / "output"
    source.mkdir()
    for i in range(5):
        (source / f"f{i}").write_bytes(b"x" * 100)
    target = tmp_path / "collected"
    target.mkdir()
    tally = boundary._Tally(max_file_bytes=1000, max_total_bytes=250, max_entries=4)
    boundary.copy_regular_tree(source, target, tally)
    assert sorted(p.name for p in target.iterdir()) == ["f0", "f1"]
    assert [(item["kind"], item["reason"]) for item in tally.left_out] == [
        ("over_total", "100 bytes would pass the limit of 250 in all"),
        ("over_total", "100 bytes would pass the limit of 250 in all"),
        ("too_many_entries", "more than 4 entries in the output"),
    ]


def test_clean_removes_in_place_what_a_copy_would_leave_out(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret")
    logs = tmp_path / "logs-agent"
    _hostile_tree(logs, outside)
    tally = boundary._Tally(max_file_bytes=2**20, max_total_bytes=2**30, max_entries=100, in_place=True)
    boundary.clean_tree(logs, tally)
    assert sorted(str(p.relative_to(logs)) for p in logs.rglob("*")) == [
        "rankings.json",
        "sub",
        "sub/report.md",
        "tool",
    ]
    assert stat.S_IMODE((logs / "tool").stat().st_mode) == 0o755
    assert outside.read_text() == "host secret" and Path("/etc/passwd").is_file()  # the targets are untouched
    assert tally.left_out_count == 7


def test_hard_links_are_refused_by_their_link_count_whoever_owns_the_file(tmp_path):
    """Two names of the agent's own file, and (as root) a name of a file of another user: refused by the link
    count on the descriptor, whatever fs.protected_hardlinks would have allowed."""
    source = tmp_path / "output"
    source.mkdir()
    (source / "mine.json").write_text('{"a": 1}')
    os.link(source / "mine.json", source / "again.json")
    others = tmp_path / "others.txt"
    others.write_text("another user's file")
    if os.geteuid() == 0:
        os.chown(others, AGENT_UID + 1, AGENT_UID + 1)
    os.link(others, source / "theirs.txt")
    (source / "plain.txt").write_text("kept")
    target = tmp_path / "collected"
    target.mkdir()
    tally = boundary._Tally(2**20, 2**30, 100, frozenset({os.geteuid()}))
    boundary.copy_regular_tree(source, target, tally)
    assert sorted(p.name for p in target.iterdir()) == ["plain.txt"]
    kinds = {item["path"]: (item["kind"], item["links"]) for item in tally.left_out}
    assert kinds == {
        "again.json": ("hard_link", 2),
        "mine.json": ("hard_link", 2),
        "theirs.txt": ("hard_link", 2),
    }
    # in place: every name goes, the second one too although removing the first left it a single link
    clean = boundary._Tally(2**20, 2**30, 100, frozenset({os.geteuid()}), in_place=True)
    boundary.clean_tree(source, clean)
    assert sorted(p.name for p in source.iterdir()) == ["plain.txt"]
    assert others.read_text() == "another user's file"
    assert clean.summary()["left_out_kinds"] == {"hard_link": 3}


def test_space_allocated_beyond_the_end_counts_where_the_file_stays(tmp_path):
    """A file of length 0 with 8 MiB allocated past its end (fallocate --keep-size): a copy costs nothing and
    keeps it; left in place it costs the 8 MiB and is removed at a 1 MiB limit."""
    source = tmp_path / "output"
    source.mkdir()
    fallocated = source / "reserved.bin"
    fallocated.touch()
    subprocess.run(["fallocate", "--keep-size", "-l", "8MiB", str(fallocated)], check=True)
    if fallocated.stat().st_blocks * 512 < 8 * 2**20:
        pytest.skip("this file system does not allocate past a file's end")
    target = tmp_path / "collected"
    target.mkdir()
    copy = boundary._Tally(2**20, 2**30, 100)
    boundary.copy_regular_tree(source, target, copy)
    assert (target / "reserved.bin").stat().st_size == 0 and copy.left_out == []
    clean = boundary._Tally(2**20, 2**30, 100, in_place=True)
    boundary.clean_tree(source, clean)
    assert not fallocated.exists()
    assert [(i["kind"], i["apparent_bytes"], i["allocated_bytes"]) for i in clean.left_out] == [
        ("too_large", 0, 8 * 2**20)
    ]


def test_files_of_another_owner_are_refused_and_folders_of_one_not_entered(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making files of another user needs root")
    source = tmp_path / "output"
    (source / "theirs").mkdir(parents=True)
    (source / "theirs" / "inside.txt").write_text("x")
    (source / "theirs.txt").write_text("x")
    (source / "mine.txt").write_text("x")
    for path in (source / "theirs", source / "theirs.txt"):
        os.chown(path, AGENT_UID + 1, AGENT_UID + 1)
    target = tmp_path / "collected"
    target.mkdir()
    tally = boundary._Tally(2**20, 2**30, 100, frozenset({0, AGENT_UID}))
    boundary.copy_regular_tree(source, target, tally)
    assert sorted(p.name for p in target.iterdir()) == ["mine.txt"]
    assert {(i["path"], i["kind"]) for i in tally.left_out} == {
        ("theirs", "foreign_owner"),
        ("theirs.txt", "foreign_owner"),
    }


def test_the_record_says_whether_each_cleaned_folder_is_mounted(monkeypatch, tmp_path):
    output, logs = tmp_path / "output", tmp_path / "logs"
    output.mkdir()
    logs.mkdir()
    monkeypatch.setattr(boundary, "end_processes", lambda uid: [])
    monkeypatch.setattr(boundary.pwd, "getpwnam", lambda name: SimpleNamespace(pw_uid=AGENT_UID))
    record = boundary.collect("agent", output, tmp_path / "collected", [logs, tmp_path / "absent"])
    assert record["version"] == 2 and record["uid"] == AGENT_UID
    assert record["cleaned"][str(logs)]["mounted"] is False
    assert list(record["cleaned"]) == [str(logs)]  # a folder that is not there is not cleaned
    assert record["warnings"][0].startswith(f"{logs} is not mounted from the host")
    monkeypatch.setattr(boundary, "mount_points", lambda: {str(logs)})
    record = boundary.collect("agent", output, tmp_path / "collected", [logs])
    assert record["cleaned"][str(logs)]["mounted"] is True and record["warnings"] == []
    # a link where a folder to clean should be is neither followed nor passed over in silence
    (tmp_path / "linked").symlink_to(logs)
    record = boundary.collect("agent", output, tmp_path / "collected", [tmp_path / "linked"])
    assert record["cleaned"] == {} and record["warnings"] == [
        f"{tmp_path / 'linked'} was not cleaned: it is not a folder (Not a directory)"
    ]


def test_mount_points_are_read_with_their_escapes(monkeypatch, tmp_path):
    if not Path("/proc/self/mountinfo").is_file():
        pytest.skip("no /proc/self/mountinfo")
    assert "/" in boundary.mount_points()


#: what an agent may leave behind: a loop in a session of its own (as `setsid nohup ... &` starts one) that
#: keeps writing into the output, and the agent's own shell
LEFTOVER = (
    'setsid sh -c \'while :; do printf x >> "$1"; sleep 0.01; done\' spu-leftover "$1" & '
    'touch "$2"; exec sleep 1000'
)


@pytest.fixture
def shared_dir():
    """A folder the agent's user can reach and write (pytest's own are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="spu-boundary-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    give_up = time.monotonic() + 120  # a guard against a hang, not a measure
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < give_up, f"{path} was never written"
        time.sleep(0.01)


@needs_root
def test_collect_ends_every_process_of_the_agent_user_before_copying(shared_dir, monkeypatch):
    output = shared_dir / "output"
    output.mkdir()
    output.chmod(0o777)
    ticks, ready = output / "ticks", shared_dir / "ready"
    proc = subprocess.Popen(
        ["/bin/sh", "-c", LEFTOVER, "spu-agent", str(ticks), str(ready)],
        user=AGENT_UID,
        group=AGENT_UID,
        cwd="/",
    )
    try:
        _wait_for(ready, proc)
        _wait_for(ticks, proc)
        monkeypatch.setattr(boundary.pwd, "getpwnam", lambda name: SimpleNamespace(pw_uid=AGENT_UID))
        record = boundary.collect("agent", output, shared_dir / "collected", [])
        assert boundary._processes_of(AGENT_UID) == {}
        assert proc.wait(timeout=60) == -9  # killed, not asked
        commands = [p["command"] for p in record["ended_processes"]["listed"]]
        assert "sleep 1000" in commands and any(c.startswith("sh -c while") for c in commands), commands
        # nothing writes any more: the copy is the final state of the output
        assert (shared_dir / "collected" / "output" / "ticks").read_bytes() == ticks.read_bytes()
        saved = json.loads((shared_dir / "collected" / "collection.json").read_text())
        assert saved["output"]["files"] == 1 and saved == json.loads(json.dumps(record))
        assert stat.S_IMODE((shared_dir / "collected").stat().st_mode) == 0o755
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in boundary._processes_of(AGENT_UID):
            os.kill(pid, 9)


def test_the_processes_of_root_are_never_ended():
    with pytest.raises(boundary.BoundaryError, match="is root"):
        boundary.end_processes(0)


@needs_root
def test_lock_makes_the_verifier_folder_root_only_and_checks_tests(tmp_path, monkeypatch):
    verifier = tmp_path / "logs" / "verifier"
    verifier.mkdir(parents=True)
    verifier.chmod(0o777)
    os.chown(verifier, AGENT_UID, AGENT_UID)
    tests = tmp_path / "tests"
    monkeypatch.setattr(boundary, "LOCKED", (str(verifier),))
    monkeypatch.setattr(boundary, "NOT_WRITABLE", (str(verifier), str(tests)))
    monkeypatch.setattr(boundary.pwd, "getpwnam", lambda name: SimpleNamespace(pw_uid=AGENT_UID))
    tmp_path.chmod(0o755)
    assert boundary.lock("agent") == []
    st = verifier.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    # a /tests the agent's user could create (its parent writable by others) is reported
    tmp_path.chmod(0o777)
    assert boundary.lock("agent") == [f"{tests}: {tmp_path} is writable by group or others (mode 777)"]


def test_the_boundary_needs_nothing_but_the_standard_library():
    """The hook runs as root with ``python -I`` in the agent's image: without site-packages (``-S``) it still
    imports and answers, so it depends on no third-party package the image might lack."""
    repo = Path(boundary.__file__).resolve().parents[2]
    code = (
        f"import sys; sys.path.insert(0, {str(repo)!r}); "
        "from environment.harbor import boundary; boundary.main(['--help'])"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "collect" in done.stdout, done.stderr
