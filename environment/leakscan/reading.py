"""Every document a file, a folder or a stream holds, whatever its name: archives (tar, zip) are opened and
compressed streams (gzip, bzip2, xz) decompressed by their first bytes, nested to :attr:`Limits.depth`, and
within bounds (a decompression bomb is refused, not read): at most :attr:`Limits.bytes_out` bytes out of one
compressed stream or zip member, and at most :attr:`Limits.ratio` times the bytes that went in. A large
plain document is read in pieces of :attr:`Limits.piece_bytes` (overlapping by :attr:`Limits.overlap_bytes`),
so a whole image layer is read as a stream, never held at once.

Links, devices and other non-regular entries are not followed or read (a tar's hard link names a member read
on its own).
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

#: (name, bytes): one document, or one piece of a large one
Document = tuple[str, bytes]

_PEEK = 512
_READ = 1 << 16


class ScanLimitError(ValueError):
    """A document that cannot be read within the limits (a decompression bomb, too deep a nesting)."""


@dataclass(frozen=True)
class Limits:
    """How much reading one document may cost."""

    bytes_out: int = 1 << 30
    ratio: int = 200
    depth: int = 8
    piece_bytes: int = 32 << 20
    overlap_bytes: int = 1 << 16


class _Peeked(io.RawIOBase):
    """A stream with its first bytes read ahead and given back first."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Decompressed(io.RawIOBase):
    """The decompressed bytes of a stream, refused past the limits."""

    def __init__(self, name: str, source: BinaryIO, new: Callable[[], object], limits: Limits) -> None:
        self._name, self._source, self._new, self._limits = name, source, new, limits
        self._decompressor = new()
        self._pending = b""
        self._in = self._out = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def _more(self, size: int) -> bytes:
        d = self._decompressor
        while not self._done:
            if d.eof:  # type: ignore[attr-defined]
                rest = d.unused_data  # type: ignore[attr-defined]
                if not rest:
                    rest = self._source.read(_READ)
                    self._in += len(rest)
                if not rest:
                    self._done = True
                    break
                d = self._decompressor = self._new()  # another member (gzip, bzip2, xz allow several)
                self._pending = rest
            tail = getattr(d, "unconsumed_tail", b"")
            needs = getattr(d, "needs_input", not tail)
            if not self._pending and needs and not tail:
                self._pending = self._source.read(_READ)
                self._in += len(self._pending)
                if not self._pending:
                    if not d.eof:  # type: ignore[attr-defined]
                        raise ScanLimitError(f"{self._name}: the compressed stream ends early")
                    continue
            data, self._pending = (self._pending or tail), b""
            out = d.decompress(data, size)  # type: ignore[attr-defined]
            if out:
                self._out += len(out)
                if self._out > self._limits.bytes_out:
                    raise ScanLimitError(
                        f"{self._name}: decompresses to more than {self._limits.bytes_out} bytes"
                    )
                if self._out > self._limits.ratio * self._in + (1 << 20):
                    raise ScanLimitError(
                        f"{self._name}: decompresses to more than {self._limits.ratio} times its size"
                    )
                return out
        return b""

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        try:
            data = self._more(len(buffer))
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            raise ScanLimitError(f"{self._name}: not a readable compressed stream ({exc})") from None
        buffer[: len(data)] = data
        return len(data)


_COMPRESSED: dict[bytes, Callable[[], object]] = {
    b"\x1f\x8b": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    b"BZh": bz2.BZ2Decompressor,
    b"\xfd7zXZ\x00": lzma.LZMADecompressor,
}


def _is_tar(head: bytes) -> bool:
    return len(head) >= 262 and head[257:262] == b"ustar"


def read_stream(name: str, stream: BinaryIO, limits: Limits, depth: int = 0) -> Iterator[Document]:
    """The documents of one stream, opened or decompressed by its first bytes."""
    head = stream.read(_PEEK)
    while len(head) < _PEEK:
        more = stream.read(_PEEK - len(head))
        if not more:
            break
        head += more
    whole = io.BufferedReader(_Peeked(head, stream), _READ)
    kind = next((k for k in _COMPRESSED if head.startswith(k)), None)
    nested = kind is not None or _is_tar(head) or head.startswith((b"PK\x03\x04", b"PK\x05\x06"))
    if nested and depth >= limits.depth:
        raise ScanLimitError(f"{name}: archives nested more than {limits.depth} deep")
    if kind is not None:
        inner = io.BufferedReader(_Decompressed(name, whole, _COMPRESSED[kind], limits), _READ)
        yield from read_stream(f"{name}!", inner, limits, depth + 1)
    elif _is_tar(head):
        yield from _read_tar(name, whole, limits, depth + 1)
    elif head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        yield from _read_zip(name, _bounded_read(name, whole, limits), limits, depth + 1)
    else:
        yield from _pieces(name, whole, limits)


def _bounded_read(name: str, stream: BinaryIO, limits: Limits) -> bytes:
    data = stream.read(limits.bytes_out + 1)
    if len(data) > limits.bytes_out:
        raise ScanLimitError(f"{name}: more than {limits.bytes_out} bytes to hold at once")
    return data


def _pieces(name: str, stream: BinaryIO, limits: Limits) -> Iterator[Document]:
    tail = b""
    while True:
        data = stream.read(limits.piece_bytes)
        if not data:
            if not tail:
                yield name, b""
            return
        yield name, tail + data
        tail = data[-limits.overlap_bytes :]
        if len(data) < limits.piece_bytes:
            return


def _read_tar(name: str, stream: BinaryIO, limits: Limits, depth: int) -> Iterator[Document]:
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                if member.isreg():
                    handle = archive.extractfile(member)
                    if handle is not None:
                        yield from read_stream(f"{name}!/{member.name}", handle, limits, depth)
    except tarfile.TarError as exc:
        raise ScanLimitError(f"{name}: not a readable tar archive ({exc})") from None


def _read_zip(name: str, data: bytes, limits: Limits, depth: int) -> Iterator[Document]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        for info in archive.infolist():
            if info.is_dir():
                continue
            if info.file_size > limits.bytes_out or info.file_size > limits.ratio * max(
                info.compress_size, 1
            ) + (1 << 20):
                raise ScanLimitError(
                    f"{name}!/{info.filename}: {info.file_size} bytes from {info.compress_size}"
                )
            with archive.open(info) as member:
                yield from read_stream(f"{name}!/{info.filename}", member, limits, depth)  # type: ignore[arg-type]
    except (zipfile.BadZipFile, zlib.error, NotImplementedError) as exc:
        raise ScanLimitError(f"{name}: not a readable zip archive ({exc})") from None


def read_path(path: Path, limits: Limits, name: str | None = None) -> Iterator[Document]:
    """The documents of a file, or of every regular file below a folder (links not followed)."""
    name = name or str(path)
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        for child in sorted(os.listdir(path)):
            yield from read_path(path / child, limits, f"{name}/{child}")
    elif stat.S_ISREG(info.st_mode):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            yield from read_stream(name, handle, limits)
