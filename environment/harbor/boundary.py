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
   the host receives: regular files only (links, named pipes, sockets and devices are left out), each at most
   :data:`MAX_FILE_BYTES`, all together at most :data:`MAX_TOTAL_BYTES`, at most :data:`MAX_ENTRIES`
   entries, judged by ``lstat`` before any byte is read;
3. the folders Harbor mounts from the host (``--clean``: the agent's logs) are cleaned in place by the same
   rules (what is not a regular file or a folder, and files over the limit, are removed);
4. ``INTO/collection.json`` records what was ended, copied, left out and removed, and why.

When an agent process cannot be ended the output is not copied (the verifier then finds no submission) and
the command exits with status 1: a boundary that did not hold fails closed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

from spu_common.filekinds import not_regular

MAX_FILE_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 2**30
MAX_ENTRIES = 20_000
MAX_DEPTH = 32
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


class _Tally:
    """What a copy or a clean did, with the totals it is held to."""

    def __init__(self, max_file_bytes: int, max_total_bytes: int, max_entries: int) -> None:
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.max_entries = max_entries
        self.files = 0
        self.bytes = 0
        self.entries = 0
        self.left_out: list[dict[str, str]] = []
        self.left_out_count = 0

    def leave_out(self, rel: str, reason: str) -> None:
        self.left_out_count += 1
        if len(self.left_out) < LISTED:
            self.left_out.append({"path": rel, "reason": reason})

    def refusal(self, st: os.stat_result) -> str | None:
        """Why a regular file of this size is not kept, given what was kept so far."""
        if st.st_size > self.max_file_bytes:
            return f"{st.st_size} bytes, more than the limit of {self.max_file_bytes} per file"
        if self.bytes + st.st_size > self.max_total_bytes:
            return f"{st.st_size} bytes would pass the limit of {self.max_total_bytes} for the whole output"
        return None

    def summary(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "left_out_count": self.left_out_count,
            "left_out": self.left_out,
        }


def _copy_file(source: str, target: Path, st: os.stat_result) -> None:
    """Copy one regular file (opened without following a link or blocking; the same inode as ``st``)."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as src:
        opened = os.fstat(src.fileno())
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise OSError("replaced while it was copied")
        with target.open("xb") as dst:
            remaining = st.st_size
            while remaining > 0 and (chunk := src.read(min(remaining, 2**20))):
                dst.write(chunk)
                remaining -= len(chunk)
    target.chmod(0o755 if st.st_mode & 0o111 else 0o644)


def copy_regular_tree(source: Path, target: Path, tally: _Tally, rel: str = "", depth: int = 0) -> None:
    """Copy the regular files and folders under ``source`` into ``target`` (which exists), by the tally's
    rules; everything else is left out with a reason."""
    try:
        entries = sorted(os.scandir(source), key=lambda e: e.name)
    except OSError as exc:
        tally.leave_out(rel or ".", f"cannot be listed: {exc.strerror}")
        return
    for entry in entries:
        path = f"{rel}/{entry.name}" if rel else entry.name
        if tally.entries >= tally.max_entries:
            tally.leave_out(path, f"more than {tally.max_entries} entries in the output")
            continue
        tally.entries += 1
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            tally.leave_out(path, f"cannot be read: {exc.strerror}")
            continue
        if stat.S_ISDIR(st.st_mode):
            if depth >= MAX_DEPTH:
                tally.leave_out(path, f"nested deeper than {MAX_DEPTH} folders")
                continue
            (target / entry.name).mkdir(mode=0o755)
            copy_regular_tree(Path(entry.path), target / entry.name, tally, path, depth + 1)
        elif kind := not_regular(st.st_mode):
            tally.leave_out(path, kind)
        elif reason := tally.refusal(st):
            tally.leave_out(path, reason)
        else:
            try:
                _copy_file(entry.path, target / entry.name, st)
            except OSError as exc:
                tally.leave_out(path, f"cannot be copied: {exc.strerror or exc}")
                continue
            tally.files += 1
            tally.bytes += st.st_size


def clean_tree(root: Path, tally: _Tally, rel: str = "", depth: int = 0) -> None:
    """Remove, in place under ``root``, what :func:`copy_regular_tree` would leave out (``left_out`` then
    lists what was removed); the set-id bits of the files kept are cleared."""
    try:
        entries = list(os.scandir(root))
    except OSError as exc:
        tally.leave_out(rel or ".", f"cannot be listed: {exc.strerror}")
        return
    for entry in entries:
        path = f"{rel}/{entry.name}" if rel else entry.name
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if depth < MAX_DEPTH:
                    clean_tree(Path(entry.path), tally, path, depth + 1)
                    continue
                shutil.rmtree(entry.path)
                reason = f"nested deeper than {MAX_DEPTH} folders"
            elif reason := not_regular(st.st_mode) or tally.refusal(st):
                os.unlink(entry.path)
            else:
                if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    os.chmod(entry.path, stat.S_IMODE(st.st_mode) & 0o777)
                tally.files += 1
                tally.bytes += st.st_size
                continue
        except OSError as exc:
            reason = f"cannot be checked or removed: {exc.strerror}"
        tally.leave_out(path, reason)


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
    record, with nothing copied) when a process cannot be ended."""
    uid = pwd.getpwnam(user).pw_uid
    _fresh_folder(into)
    record: dict[str, Any] = {
        "user": user,
        "limits": {"file_bytes": max_file_bytes, "total_bytes": max_total_bytes, "entries": max_entries},
    }
    try:
        ended = end_processes(uid)
    except BoundaryError as exc:
        record["error"] = f"{exc}; the output was not collected"
        (into / "collection.json").write_text(json.dumps(record, indent=1) + "\n")
        raise
    record["ended_processes"] = {"count": len(ended), "listed": ended[:LISTED]}
    (into / "output").mkdir(mode=0o755)
    tally = _Tally(max_file_bytes, max_total_bytes, max_entries)
    if output.is_dir() and not output.is_symlink():
        copy_regular_tree(output, into / "output", tally)
    else:
        tally.leave_out(".", f"{output} is not a folder")
    record["output"] = {"source": str(output), **tally.summary()}
    record["cleaned"] = {}
    for folder in clean:
        if folder.is_dir() and not folder.is_symlink():
            cleaned = _Tally(max_file_bytes, max_total_bytes, max_entries)
            clean_tree(folder, cleaned)
            record["cleaned"][str(folder)] = {
                "removed_count": cleaned.left_out_count,
                "removed": cleaned.left_out,
            }
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
