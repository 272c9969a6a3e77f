"""Files read only beneath given roots: each opened once, without following a link in any part of its path,
checked on the open descriptor and read from that descriptor.

A check of a path followed by an open of the same name leaves a gap: a link swapped in between is
followed. So nothing here checks a name and opens it again. The roots themselves are trusted (an operator
or a command line named them, and they may be reached through links); below a root:

* the path is opened with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` from
  a descriptor of the root where the kernel has it (Linux 5.6 and later), else by a walk from the root's
  descriptor one component at a time, each opened with ``O_NOFOLLOW`` (a ``..`` steps back to the
  descriptor already held, and never above the root). A symbolic link anywhere below the root is refused,
  whether it points in or out;
* the last component is opened with ``O_NONBLOCK`` (a FIFO cannot block the open) and ``O_NOCTTY``;
* the descriptor is checked with ``fstat``: a regular file (not a FIFO, socket, device or folder), one hard
  link (another link to the same file may lie outside every root: the link count is the only sign of it;
  a caller may allow more), at most ``max_bytes`` bytes (a larger or sparse file is refused before a byte
  of it is read);
* the bytes come from that descriptor, at most ``max_bytes`` of them (a file that grows meanwhile is still
  refused).

Paths under ``/proc``, ``/sys`` and ``/dev`` are refused whatever the roots (a root of ``/`` must not expose
``/proc/self/environ``). Every refusal is a :class:`Refused` with a ``reason`` from :data:`REASONS`; its
message names the path, never the file's content, and callers word it for their users.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

#: Never readable, whatever the roots: kernel and device pseudo-filesystems.
SYSTEM_PREFIXES = (Path("/proc"), Path("/sys"), Path("/dev"))

#: Why a path is refused: ``outside`` (under no root), ``system`` (under /proc, /sys or /dev), ``link`` (a
#: symbolic link in some component), ``missing``, ``not_regular`` (a FIFO, socket, device, or a folder
#: where a file was asked for, or a file where a folder was), ``hard_link``, ``too_large``, ``unreadable``
#: (permission denied, an I/O error), ``bad_name`` (empty, or a NUL character).
REASONS = (
    "outside",
    "system",
    "link",
    "missing",
    "not_regular",
    "hard_link",
    "too_large",
    "unreadable",
    "bad_name",
)

_CHUNK_BYTES = 1 << 20
_FILE_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK | os.O_NOFOLLOW
_DIR_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY | os.O_NOFOLLOW


class Refused(Exception):
    """A path that may not be read; ``reason`` is one of :data:`REASONS`, ``path`` the path as given.
    ``size_bytes`` and ``limit_bytes`` are set for ``too_large``, ``links`` for ``hard_link``."""

    def __init__(
        self,
        reason: str,
        path: str,
        message: str,
        *,
        size_bytes: int | None = None,
        limit_bytes: int | None = None,
        links: int | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path
        self.message = message
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        self.links = links

    @property
    def code(self) -> str:
        """The project's stable error code: ``too_large`` for a file over its cap, else ``invalid_input``."""
        return "too_large" if self.reason == "too_large" else "invalid_input"


@dataclass(frozen=True)
class FileRead:
    """A file's bytes as read from its checked descriptor. ``path``: the file under its root (the root
    resolved, the rest as written, normalised); ``sha256``: the hex digest of ``data``."""

    path: Path
    data: bytes
    sha256: str


# -- openat2 ---------------------------------------------------------------------------------------------

_SYS_OPENAT2 = 437  # the same number on every architecture (the generic syscall table, Linux 5.6)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_openat2_works: bool | None = None
_syscall = None


def _raw_openat2(dirfd: int, relative: str, flags: int) -> int:
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    name = os.fsencode(relative)
    for _ in range(64):  # EAGAIN: a rename raced a ".." (the kernel asks to try again)
        fd = _syscall(_SYS_OPENAT2, dirfd, name, ctypes.byref(how), ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err not in (errno.EINTR, errno.EAGAIN):
            raise OSError(err, os.strerror(err), relative)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), relative)


def openat2_available() -> bool:
    """Whether this kernel (and its seccomp filter) offers ``openat2`` with ``RESOLVE_BENEATH``; probed
    once per process."""
    global _openat2_works, _syscall
    if _openat2_works is None:
        _openat2_works = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                _syscall = libc.syscall
                _syscall.restype = ctypes.c_long
                _syscall.argtypes = (
                    ctypes.c_long,
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_void_p,
                    ctypes.c_size_t,
                )
                probe = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.close(_raw_openat2(probe, ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
                    _openat2_works = True
                finally:
                    os.close(probe)
            except (OSError, AttributeError):  # ENOSYS, EPERM from a seccomp filter, no libc
                _openat2_works = False
    return _openat2_works


# -- opening below a root --------------------------------------------------------------------------------


def _walk_open(root_fd: int, parts: Sequence[str], leaf_flags: int) -> int:
    """Open ``parts`` below ``root_fd`` one component at a time, none of them followed if it is a link."""
    held = [os.dup(root_fd)]
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part == "..":
                if len(held) == 1:
                    raise OSError(errno.EXDEV, "leaves the root", part)
                os.close(held.pop())
                if last:
                    return os.dup(held[-1])  # a folder: a caller that wanted a file refuses it on fstat
                continue
            try:
                fd = os.open(part, leaf_flags if last else _DIR_FLAGS, dir_fd=held[-1])
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link_at(held[-1], part):
                    raise OSError(errno.ELOOP, "a symbolic link", part) from None
                raise
            if last:
                return fd
            held.append(fd)
        return os.dup(held[-1])  # no parts: the root itself
    finally:
        for fd in held:
            os.close(fd)


def _open_below(root: Path, relative: PurePosixPath, leaf_flags: int) -> int:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if openat2_available():  # RESOLVE_NO_SYMLINKS refuses the last component too (ELOOP)
            name = str(relative) if relative.parts else "."
            return _raw_openat2(root_fd, name, leaf_flags & ~os.O_NOFOLLOW)
        return _walk_open(root_fd, relative.parts, leaf_flags)
    finally:
        os.close(root_fd)


def _candidates(given: str, roots: Sequence[str | os.PathLike[str]]) -> list[tuple[Path, PurePosixPath]]:
    """(root resolved, the rest of the path below it) for each root the path is written under, the deepest
    root first. Both the root as written and its resolved form count as a spelling of it."""
    absolute = PurePosixPath(os.path.join(os.getcwd(), os.path.expanduser(given)))
    parts = [p for p in absolute.parts[1:] if p not in ("", ".")]
    found: list[tuple[int, Path, PurePosixPath]] = []
    for root in roots:
        spelled = os.path.abspath(os.path.expanduser(os.fspath(root)))
        resolved = os.path.realpath(spelled)
        for spelling in dict.fromkeys((spelled, resolved)):
            prefix = [p for p in PurePosixPath(spelling).parts[1:] if p not in ("", ".")]
            if parts[: len(prefix)] == prefix:
                found.append((len(prefix), Path(resolved), PurePosixPath(*parts[len(prefix) :])))
    found.sort(key=lambda item: -item[0])
    return [(root, rest) for _, root, rest in found]


def _shown(root: Path, rest: PurePosixPath) -> Path:
    return Path(os.path.normpath(root / rest)) if rest.parts else root


def _refusal(exc: OSError, given: str) -> Refused:
    code = exc.errno
    if code == errno.ELOOP:
        return Refused("link", given, f"{given} goes through a symbolic link; links are not followed")
    if code == errno.EXDEV:
        return Refused("outside", given, f"{given} leads outside the folders it may be read from")
    if code in (errno.ENOENT, errno.ENOTDIR):
        return Refused("missing", given, f"No such file: {given}")
    if code in (errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
        return Refused("not_regular", given, f"{given} is not a regular file")
    if code in (errno.EACCES, errno.EPERM):
        return Refused("unreadable", given, f"{given} cannot be read (permission denied)")
    if code == errno.ENAMETOOLONG:
        return Refused("bad_name", given, f"{given[:200]} is too long a name")
    return Refused("unreadable", given, f"{given} cannot be read ({exc.strerror or exc})")


def _open(
    path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]], leaf_flags: int
) -> tuple[int, Path]:
    """A descriptor of ``path`` opened below one of ``roots`` (the deepest that works), and its shown path."""
    given = os.fspath(path)
    if not given.strip() or "\x00" in given:
        raise Refused("bad_name", given, "The path is empty or holds a NUL character.")
    normal = Path(os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(given))))
    if any(normal == p or normal.is_relative_to(p) for p in SYSTEM_PREFIXES):
        raise Refused("system", given, f"{given} is a system file; it is never read")
    candidates = _candidates(given, roots)
    if not candidates:
        raise Refused("outside", given, f"{given} is outside the folders it may be read from")
    refusal: Refused | None = None
    for root, rest in candidates:
        try:
            return _open_below(root, rest, leaf_flags), _shown(root, rest)
        except OSError as exc:
            found = _refusal(exc, given)
            if found.reason != "outside":  # a ".." that left this root may stay inside a shallower one
                raise found from None
            refusal = refusal or found
    assert refusal is not None
    raise refusal


# -- files -------------------------------------------------------------------------------------------------


@dataclass
class OpenFile:
    """A checked regular file: its descriptor (closed when the ``with`` block of :func:`open_file` ends),
    its ``fstat`` and its shown path."""

    fd: int
    stat: os.stat_result
    path: Path

    def read(self, max_bytes: int) -> bytes:
        """At most ``max_bytes`` bytes from the descriptor; :class:`Refused` ``too_large`` past them."""
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(self.fd, min(_CHUNK_BYTES, max_bytes + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(str(self.path), total, max_bytes, grew=True)

    def copy_to(self, handle: int, max_bytes: int) -> str:
        """Copy the file into the open descriptor ``handle``; returns the SHA-256 of what was copied."""
        digest = hashlib.sha256()
        total = 0
        while chunk := os.read(self.fd, _CHUNK_BYTES):
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(str(self.path), total, max_bytes, grew=True)
            digest.update(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(handle, view) :]
        return digest.hexdigest()


def _too_large(given: str, size: int, limit: int, *, grew: bool = False) -> Refused:
    more = "more than" if grew else f"{size} bytes;"
    return Refused(
        "too_large",
        given,
        f"{given} has {more} the limit of {limit} bytes",
        size_bytes=size,
        limit_bytes=limit,
    )


@contextlib.contextmanager
def open_file(
    path: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    max_bytes: int,
    allow_hard_links: bool = False,
) -> Iterator[OpenFile]:
    """The checked regular file ``path`` below one of ``roots``, open for reading (see the module docstring);
    :class:`Refused` otherwise. Nothing of the file is read here."""
    fd, shown = _open(path, roots, _FILE_FLAGS)
    try:
        st = os.fstat(fd)
        given = os.fspath(path)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not_regular", given, f"{given} is not a regular file")
        if st.st_nlink > 1 and not allow_hard_links:
            raise Refused(
                "hard_link", given, f"{given} has {st.st_nlink} hard links; only files with one are read",
                links=st.st_nlink,
            )  # fmt: skip
        if st.st_size > max_bytes:
            raise _too_large(given, st.st_size, max_bytes)
        yield OpenFile(fd, st, shown)
    finally:
        os.close(fd)


def read_file(
    path: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    max_bytes: int,
    allow_hard_links: bool = False,
) -> FileRead:
    """The bytes of the regular file ``path`` below one of ``roots`` (see the module docstring), read from the
    descriptor that was checked; :class:`Refused` otherwise."""
    with open_file(path, roots, max_bytes=max_bytes, allow_hard_links=allow_hard_links) as opened:
        try:
            data = opened.read(max_bytes)
        except OSError as exc:
            raise _refusal(exc, os.fspath(path)) from None
    return FileRead(opened.path, data, hashlib.sha256(data).hexdigest())


# -- folders -----------------------------------------------------------------------------------------------


def check_dir(path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> Path:
    """The shown path of the folder ``path`` below one of ``roots``, reached without following a link;
    :class:`Refused` otherwise."""
    try:
        fd, shown = _open(path, roots, _DIR_FLAGS)
    except Refused as exc:
        if exc.reason == "missing" and _is_file(path, roots):
            raise Refused("not_regular", exc.path, f"{exc.path} is not a directory") from None
        raise
    os.close(fd)
    return shown


def _is_file(path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> bool:
    try:
        fd, _ = _open(path, roots, _FILE_FLAGS)
    except Refused:
        return False
    os.close(fd)
    return True


@dataclass(frozen=True)
class Entry:
    """What :func:`walk` found below a folder: ``relative`` (POSIX) and ``kind``: ``file`` (a regular
    file), ``link``, or ``other`` (a FIFO, socket or device)."""

    relative: str
    kind: str


def walk(
    path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]], *, max_entries: int = 100_000
) -> list[Entry]:
    """Everything below the folder ``path`` (itself below one of ``roots``), sorted, found through folder
    descriptors only: a link is listed as one and never entered, whether it names a file or a folder.
    :class:`Refused` when ``path`` is no such folder, or ``too_large`` past ``max_entries``."""
    top, _ = _open(path, roots, _DIR_FLAGS)
    found: list[Entry] = []

    def visit(fd: int, prefix: str) -> None:
        for name in sorted(os.listdir(fd)):
            rel = f"{prefix}{name}"
            if len(found) >= max_entries:
                raise _too_large(os.fspath(path), len(found) + 1, max_entries)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            if stat.S_ISDIR(st.st_mode):
                try:
                    inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    found.append(Entry(rel, "link" if _is_link_at(fd, name) else "other"))
                    continue
                try:
                    visit(inner, rel + "/")
                finally:
                    os.close(inner)
            elif stat.S_ISREG(st.st_mode):
                found.append(Entry(rel, "file"))
            elif stat.S_ISLNK(st.st_mode):
                found.append(Entry(rel, "link"))
            else:
                found.append(Entry(rel, "other"))

    try:
        visit(top, "")
    finally:
        os.close(top)
    return found


def _is_link_at(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
