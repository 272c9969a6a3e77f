"""The trial boundary inside the agent's container, run as root by the task ``spu harbor export`` writes.

Two commands, standard library only (they run with ``python -I``, so nothing the agent wrote is imported)::

    python -I -m environment.harbor.boundary lock --user spu
    python -I -m environment.harbor.boundary collect --user spu --output /app/output --into /app/collected \\
        --clean /logs/agent --clean /logs/artifacts

``lock`` runs as the task's healthcheck, after Harbor has made its log folders and before the agent starts:
it makes ``/logs/verifier`` (a folder of the host's trial, which Harbor mounts world-writable) owned by root
and not writable by others, and checks that the agent's user can write neither there nor ``/tests``. A
failed check fails the healthcheck, so the trial does not start (docs/harbor.md).

``collect`` runs as the task's collect hook, after the agent's command has returned and before Harbor copies
anything out of the container:

1. every process of the agent's user is stopped (``SIGSTOP``, so none can fork or write any more), then
   killed, until none is left: a process the agent left behind cannot change the output afterwards;
2. the output folder is copied into a fresh root-owned folder (``INTO/output``) that the verifier grades and
   the host receives. Each entry is judged before a byte of it is read, by what it really costs: its type
   (``lstat``: links, named pipes, sockets and devices are left out, never opened), then, on the descriptor
   of the file opened without following a link or waiting (``fstat``): its owner (the agent's user, root or
   the folder's own owner), its link count (one: a hard link is refused whatever the kernel's
   ``fs.protected_hardlinks``), its holes (a sparse file is refused), its length and the bytes allocated to
   it (each at most :data:`MAX_FILE_BYTES`, all together at most :data:`MAX_TOTAL_BYTES`: :class:`_Tally`
   says how each counts), at most :data:`MAX_ENTRIES` entries and :data:`MAX_DEPTH` folders deep; the
   bytes copied are read from that descriptor;
3. the folders Harbor mounts from the host (``--clean``: the agent's logs) are cleaned in place by the same
   rules (what a copy would leave out is removed; set-id bits are cleared);
4. ``INTO/collection.json`` records what was ended, copied, left out and removed, each with a stable kind
   (:data:`KINDS`) and its reason, and whether each cleaned folder is mounted from the host.

When an agent process cannot be ended the output is not copied (the verifier then finds no submission) and
the command exits with status 1: a boundary that did not hold fails closed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spu_common.filekinds import not_regular

MAX_FILE_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 2**30
MAX_ENTRIES = 20_000
MAX_DEPTH = 32
#: the version of ``collection.json``: 2 added each refusal's kind and what was read of the file, the
#: owners accepted, the folders' mount state and ``warnings``
COLLECTION_VERSION = 2
#: how long ``collect`` keeps killing before it gives up (processes in an uninterruptible wait die late)
END_DEADLINE_S = 30.0
#: entries listed by name in the record (the counts are always complete)
LISTED = 200
LOCKED = ("/logs/verifier",)
NOT_WRITABLE = ("/logs/verifier", "/tests")


class BoundaryError(RuntimeError):
    """The boundary does not hold; the message says where."""


def _processes_of(uid: int) -> dict[int, str]:
    """Live processes (not zombies) of ``uid`` other than this one: pid -> command line."""
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = Path(entry.path, "status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if int(fields["Uid"].split()[1]) != uid or fields.get("State", "").strip().startswith("Z"):
                continue
            command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, KeyError, ValueError, IndexError):
            continue  # ended meanwhile
        found[int(entry.name)] = command.strip()[:200]
    return found


def end_processes(uid: int, deadline_s: float = END_DEADLINE_S) -> list[dict[str, Any]]:
    """Stop, then kill, every process of ``uid`` until none is left; the ended ones, in the order found.

    Each round stops every process it sees before it kills any, so a process cannot fork a replacement
    between the two; a new process seen in a later round gets the same. Raises :class:`BoundaryError` when
    some are still alive after ``deadline_s``.
    """
    if uid == 0:
        raise BoundaryError("the agent's user is root: its processes cannot be told from the system's")
    ended: dict[int, str] = {}
    give_up = time.monotonic() + deadline_s
    while live := _processes_of(uid):
        if time.monotonic() > give_up:
            raise BoundaryError(f"{len(live)} processes of uid {uid} are still alive: {sorted(live)[:10]}")
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in live:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        for pid, command in live.items():
            ended.setdefault(pid, command)
        time.sleep(0.01)  # let the kernel finish the kills before the next look
    return [{"pid": pid, "command": command} for pid, command in ended.items()]


#: how every entry is opened: never through a link, never waiting (on a pipe), never as a terminal
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


@dataclass(frozen=True)
class Refusal:
    """Why an entry is not kept: a stable ``kind`` (:data:`KINDS`), the reason in words, and what the checks
    read from the opened file (sizes, links, owner), when they got that far."""

    kind: str
    reason: str
    facts: dict[str, int] = field(default_factory=dict)
    folder: bool = False


#: the kinds of :class:`Refusal`, as ``collection.json`` names them
KINDS = (
    "not_regular",  # a symbolic link, a named pipe, a socket, a device: never opened
    "foreign_owner",  # owned by a user other than the agent's, root or the folder's own owner
    "hard_link",  # more than one name: a copy of a file made elsewhere, whatever fs.protected_hardlinks says
    "sparse",  # a hole before its end, or fewer bytes allocated than its size: it costs less than it copies
    "too_large",  # over the per-file limit, by its size or by the bytes allocated to it
    "over_total",  # would take the whole output past its limit
    "too_many_entries",
    "too_deep",
    "unreadable",  # could not be listed, opened or copied, or was replaced while it was checked
)


class _Tally:
    """What a copy or a clean (``in_place``) did, with the limits it is held to and the owners it accepts.

    A file counts against the limits by what it costs: a copy its length (a file with holes is refused, so a
    copy is never shorter on disk than it reads), a file left in place the larger of its length and the bytes
    allocated to it (``fallocate`` can allocate far beyond a file's end)."""

    def __init__(
        self,
        max_file_bytes: int,
        max_total_bytes: int,
        max_entries: int,
        owners: frozenset[int] = frozenset(),
        *,
        in_place: bool = False,
    ) -> None:
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.max_entries = max_entries
        self.owners = owners
        self.in_place = in_place
        self.linked: set[tuple[int, int]] = set()
        self.files = 0
        self.bytes = 0
        self.entries = 0
        self.left_out: list[dict[str, Any]] = []
        self.left_out_count = 0
        self.left_out_kinds: dict[str, int] = {}

    def leave_out(self, rel: str, refusal: Refusal) -> None:
        self.left_out_count += 1
        self.left_out_kinds[refusal.kind] = self.left_out_kinds.get(refusal.kind, 0) + 1
        if len(self.left_out) < LISTED:
            self.left_out.append(
                {"path": rel, "kind": refusal.kind, "reason": refusal.reason, **refusal.facts}
            )

    def judge(self, fd: int, st: os.stat_result) -> Refusal | None:
        """Why the entry open at ``fd`` (``st``: its ``fstat``) is not kept, given what was kept so far."""
        foreign = bool(self.owners) and st.st_uid not in self.owners
        owner = f"owned by uid {st.st_uid}, not the agent's user, root or the folder's owner"
        if stat.S_ISDIR(st.st_mode):
            return Refusal("foreign_owner", owner, {"uid": st.st_uid}) if foreign else None
        allocated = st.st_blocks * 512
        facts = {
            "apparent_bytes": st.st_size,
            "allocated_bytes": allocated,
            "links": st.st_nlink,
            "uid": st.st_uid,
        }
        if st.st_nlink > 1:
            # remembered: once one name is removed in place, the others of the inode are refused as well
            self.linked.add((st.st_dev, st.st_ino))
            return Refusal("hard_link", f"a file with {st.st_nlink} hard links", facts)
        if (st.st_dev, st.st_ino) in self.linked:
            return Refusal("hard_link", "a hard link of a file refused under another name", facts)
        if foreign:
            return Refusal("foreign_owner", owner, facts)
        if sparse := _sparseness(fd, st):
            return Refusal("sparse", sparse, facts)
        cost = self.cost(st)
        if cost > self.max_file_bytes:
            return Refusal(
                "too_large", f"{cost} bytes, more than the limit of {self.max_file_bytes} per file", facts
            )
        if self.bytes + cost > self.max_total_bytes:
            return Refusal(
                "over_total", f"{cost} bytes would pass the limit of {self.max_total_bytes} in all", facts
            )
        return None

    def cost(self, st: os.stat_result) -> int:
        return max(st.st_size, st.st_blocks * 512) if self.in_place else st.st_size

    def keep(self, st: os.stat_result) -> None:
        self.files += 1
        self.bytes += self.cost(st)

    def summary(self) -> dict[str, Any]:
        return {
            "owners": sorted(self.owners),
            "files": self.files,
            "bytes": self.bytes,
            "left_out_count": self.left_out_count,
            "left_out_kinds": dict(sorted(self.left_out_kinds.items())),
            "left_out": self.left_out,
        }


def _sparseness(fd: int, st: os.stat_result) -> str | None:
    """How the file open at ``fd`` is sparse, or None: a hole before its end (``SEEK_HOLE``: never written,
    or allocated but unwritten), or, for a file system that reports no holes, fewer bytes allocated than its
    whole blocks."""
    if st.st_size == 0:
        return None
    allocated = st.st_blocks * 512
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        hole = st.st_size  # SEEK_HOLE not supported: the block count decides
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    if hole < st.st_size:
        return f"sparse: no data from byte {hole} of {st.st_size} ({allocated} bytes allocated)"
    if allocated < st.st_size - st.st_size % (st.st_blksize or 512):
        return f"sparse: {allocated} bytes allocated for {st.st_size}"
    return None


def _open_checked(dir_fd: int, name: str, tally: _Tally, depth: int) -> tuple[int, os.stat_result] | Refusal:
    """``name`` in the folder open at ``dir_fd``, opened and checked on its descriptor; or why not.

    The entry's type is read first (``lstat``) so that a pipe, a socket or a device is never opened (opening
    one can act); a regular file or a folder is then opened without following a link or waiting, and every
    check is made on ``fstat`` of that descriptor, the file that will be read (the same inode, or it was
    replaced meanwhile and is refused)."""
    try:
        seen = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        return Refusal("unreadable", f"cannot be read: {exc.strerror}")
    folder = stat.S_ISDIR(seen.st_mode)
    if kind := not_regular(seen.st_mode) if not folder else None:
        return Refusal("not_regular", kind)
    if folder and depth >= MAX_DEPTH:
        return Refusal("too_deep", f"nested deeper than {MAX_DEPTH} folders", folder=True)
    try:
        fd = os.open(name, OPEN_FLAGS | (os.O_DIRECTORY if folder else 0), dir_fd=dir_fd)
    except OSError as exc:
        return Refusal("unreadable", f"cannot be opened: {exc.strerror}", folder=folder)
    st = os.fstat(fd)
    refusal = None
    if (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)) != (
        seen.st_dev,
        seen.st_ino,
        stat.S_IFMT(seen.st_mode),
    ):
        refusal = Refusal("unreadable", "replaced while it was checked", folder=folder)
    elif (judged := tally.judge(fd, st)) is not None:
        refusal = Refusal(judged.kind, judged.reason, judged.facts, folder)
    if refusal is not None:
        os.close(fd)
        return refusal
    return fd, st


def _copy_from(fd: int, st: os.stat_result, target: Path) -> None:
    """Copy the regular file open at ``fd`` (``st`` its checked ``fstat``) into the new file ``target``."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(out, "wb") as dst:
        remaining = st.st_size
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 2**20))
            if not chunk:
                raise OSError(f"shorter than the {st.st_size} bytes it had when checked")
            dst.write(chunk)
            remaining -= len(chunk)
        if os.read(fd, 1):
            raise OSError(f"longer than the {st.st_size} bytes it had when checked")
        os.fchmod(dst.fileno(), 0o755 if st.st_mode & 0o111 else 0o644)


def _remove(dir_fd: int, name: str, folder: bool, tally: _Tally) -> None:
    if folder:
        _remove_tree(dir_fd, name, tally)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _remove_tree(parent_fd: int, name: str, tally: _Tally) -> None:
    """Remove the folder ``name`` of ``parent_fd`` with everything in it, never following a link, one open
    folder at a time and without recursion (an agent's tree may be deeper than Python's stack or the open
    files allowed; ``shutil.rmtree`` recurses). The agent's processes are ended, so the way back up (``..``)
    is checked against the folder it came from. A file removed with other names is remembered in ``tally``,
    so that its other names are refused too."""
    here = os.open(name, OPEN_FLAGS | os.O_DIRECTORY, dir_fd=parent_fd)
    path: list[tuple[str, int, int]] = []  # (name, device, inode of its parent) of each folder entered
    try:
        while True:
            folder = None
            with os.scandir(here) as entries:
                for entry in entries:
                    st = os.stat(entry.name, dir_fd=here, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        folder = entry.name
                        break
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        tally.linked.add((st.st_dev, st.st_ino))
                    os.unlink(entry.name, dir_fd=here)
            if folder is not None:  # go down into it
                below = os.open(folder, OPEN_FLAGS | os.O_DIRECTORY, dir_fd=here)
                parent = os.fstat(here)
                path.append((folder, parent.st_dev, parent.st_ino))
                os.close(here)
                here = below
                continue
            if not path:  # ``name`` itself is empty
                break
            done, device, inode = path.pop()  # go back up, and remove the folder left empty
            up = os.open("..", OPEN_FLAGS | os.O_DIRECTORY, dir_fd=here)
            os.close(here)
            here = up
            back = os.fstat(here)
            if (back.st_dev, back.st_ino) != (device, inode):
                raise OSError(f"{name} was moved while it was removed")
            os.rmdir(done, dir_fd=here)
    finally:
        os.close(here)
    os.rmdir(name, dir_fd=parent_fd)


def _walk(dir_fd: int, tally: _Tally, target: Path | None, rel: str = "", depth: int = 0) -> None:
    """Copy the regular files and folders of the folder open at ``dir_fd`` into ``target`` (which exists) by
    the tally's rules, leaving out everything else with a reason; with ``target`` None, remove in place what
    a copy would leave out (and clear the set-id bits of the files kept)."""
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as exc:
        tally.leave_out(rel or ".", Refusal("unreadable", f"cannot be listed: {exc.strerror}"))
        return
    for name in names:
        path = f"{rel}/{name}" if rel else name
        if tally.entries >= tally.max_entries:
            try:
                folder = stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except OSError:
                folder = False
            opened: tuple[int, os.stat_result] | Refusal = Refusal(
                "too_many_entries", f"more than {tally.max_entries} entries in the output", folder=folder
            )
        else:
            tally.entries += 1
            opened = _open_checked(dir_fd, name, tally, depth)
        if isinstance(opened, Refusal):
            if target is None:
                try:
                    _remove(dir_fd, name, opened.folder, tally)
                except OSError as exc:
                    opened = Refusal(
                        "unreadable", f"{opened.reason}; cannot be removed: {exc.strerror or exc}"
                    )
            tally.leave_out(path, opened)
            continue
        fd, st = opened
        try:
            if stat.S_ISDIR(st.st_mode):
                inner = None
                if target is not None:
                    inner = target / name
                    inner.mkdir(mode=0o755)
                _walk(fd, tally, inner, path, depth + 1)
                continue
            if target is not None:
                try:
                    _copy_from(fd, st, target / name)
                except OSError as exc:
                    (target / name).unlink(missing_ok=True)
                    tally.leave_out(path, Refusal("unreadable", f"cannot be copied: {exc.strerror or exc}"))
                    continue
            elif st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777)
            tally.keep(st)
        finally:
            os.close(fd)


def _open_top(folder: Path) -> tuple[int, os.stat_result]:
    """The folder a copy or a clean starts from, opened without following a link."""
    fd = os.open(folder, OPEN_FLAGS | os.O_DIRECTORY)
    return fd, os.fstat(fd)


def copy_regular_tree(source: Path, target: Path, tally: _Tally) -> None:
    """Copy what the tally's rules keep of ``source`` into ``target`` (which exists)."""
    fd, _ = _open_top(source)
    try:
        _walk(fd, tally, target)
    finally:
        os.close(fd)


def clean_tree(root: Path, tally: _Tally) -> None:
    """Remove, in place under ``root``, what :func:`copy_regular_tree` would leave out (``left_out`` then
    lists what was removed); the set-id bits of the files kept are cleared."""
    fd, _ = _open_top(root)
    try:
        _walk(fd, tally, None)
    finally:
        os.close(fd)


def mount_points() -> set[str]:
    """The mount points of this process's mount namespace (``/proc/self/mountinfo``)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    # the fifth field, with space, tab, newline and backslash written as octal escapes
    return {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in lines}


def _fresh_folder(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(mode=0o755, parents=True)
    os.chown(path, 0, 0)


def collect(
    user: str,
    output: Path,
    into: Path,
    clean: list[Path],
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_entries: int = MAX_ENTRIES,
) -> dict[str, Any]:
    """End the processes of ``user``, copy ``output`` into ``into/output``, clean the ``clean`` folders and
    write ``into/collection.json``; returns that record. Raises :class:`BoundaryError` (after writing the
    record, with nothing copied) when a process cannot be ended.

    A file is kept when it is a regular file owned by the agent's user, root or the folder's own owner, with
    one link and no hole, within ``max_file_bytes`` and, with what was kept before, ``max_total_bytes``
    (:class:`_Tally` says what each file costs)."""
    uid = pwd.getpwnam(user).pw_uid
    _fresh_folder(into)
    record: dict[str, Any] = {
        "version": COLLECTION_VERSION,
        "user": user,
        "uid": uid,
        "limits": {
            "file_bytes": max_file_bytes,
            "total_bytes": max_total_bytes,
            "entries": max_entries,
            "depth": MAX_DEPTH,
        },
    }
    try:
        ended = end_processes(uid)
    except BoundaryError as exc:
        record["error"] = f"{exc}; the output was not collected"
        (into / "collection.json").write_text(json.dumps(record, indent=1) + "\n")
        raise
    record["ended_processes"] = {"count": len(ended), "listed": ended[:LISTED]}
    (into / "output").mkdir(mode=0o755)
    try:
        fd, top = _open_top(output)
        os.close(fd)
    except OSError as exc:
        tally = _Tally(max_file_bytes, max_total_bytes, max_entries)
        tally.leave_out(".", Refusal("unreadable", f"{output} is not a folder: {exc.strerror}"))
    else:
        tally = _Tally(max_file_bytes, max_total_bytes, max_entries, frozenset({uid, 0, top.st_uid}))
        copy_regular_tree(output, into / "output", tally)
    record["output"] = {"source": str(output), **tally.summary()}
    record["cleaned"] = {}
    record["warnings"] = []
    mounted = mount_points()
    for folder in clean:
        try:
            fd, top = _open_top(folder)
            os.close(fd)
        except FileNotFoundError:
            continue  # not there: nothing to clean
        except OSError as exc:
            record["warnings"].append(f"{folder} was not cleaned: it is not a folder ({exc.strerror})")
            continue
        owners = frozenset({uid, 0, top.st_uid})
        cleaned = _Tally(max_file_bytes, max_total_bytes, max_entries, owners, in_place=True)
        clean_tree(folder, cleaned)
        summary = cleaned.summary()
        record["cleaned"][str(folder)] = {
            "mounted": str(folder) in mounted,
            "owners": summary["owners"],
            "kept_files": summary["files"],
            "kept_bytes": summary["bytes"],
            "removed_count": summary["left_out_count"],
            "removed_kinds": summary["left_out_kinds"],
            "removed": summary["left_out"],
        }
        if str(folder) not in mounted:
            record["warnings"].append(
                f"{folder} is not mounted from the host: what Harbor copied from it before this step (it "
                "copies /logs/agent before any hook) was not checked; run Harbor with --ek auto_mounting=true"
            )
    (into / "collection.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def _writable_by_others(path: Path) -> str | None:
    """Why a user other than root could write ``path`` (or create it, when it does not exist), or None."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = probe.lstat()
    if stat.S_ISLNK(st.st_mode):
        return f"{probe} is a symbolic link"
    if st.st_uid != 0:
        return f"{probe} is owned by uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"{probe} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def lock(user: str) -> list[str]:
    """Make the verifier's folders root-only for writing; the paths the agent's user could still write."""
    pwd.getpwnam(user)  # the agent's user exists
    for name in LOCKED:
        path = Path(name)
        if path.is_dir() and not path.is_symlink():
            os.chown(path, 0, 0)
            path.chmod(0o755)
    problems = []
    for name in NOT_WRITABLE:
        reason = _writable_by_others(Path(name))
        if reason:
            problems.append(f"{name}: {reason}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -I -m environment.harbor.boundary", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    lock_cmd = commands.add_parser("lock", help="make the verifier's folders root-only; check them")
    lock_cmd.add_argument("--user", required=True, help="the agent's user")
    collect_cmd = commands.add_parser("collect", help="end the agent's processes, collect its output")
    collect_cmd.add_argument("--user", required=True, help="the agent's user")
    collect_cmd.add_argument("--output", type=Path, required=True, help="the agent's output folder")
    collect_cmd.add_argument("--into", type=Path, required=True, help="the folder the verifier reads")
    collect_cmd.add_argument("--clean", type=Path, action="append", default=[], help="a host-mounted folder")
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            problems = lock(args.user)
            for problem in problems:
                print(f"boundary: the agent's user could write {problem}", file=sys.stderr)
            return 1 if problems else 0
        record = collect(args.user, args.output, args.into, args.clean)
    except (BoundaryError, KeyError, OSError) as exc:
        print(f"boundary: {exc}", file=sys.stderr)
        return 1
    out = record["output"]
    print(
        f"boundary: ended {record['ended_processes']['count']} processes of {args.user}; collected "
        f"{out['files']} files ({out['bytes']} bytes), left out {out['left_out_count']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
