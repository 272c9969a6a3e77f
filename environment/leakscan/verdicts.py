"""A tar stream whose members recur, scanned member by member, each member once per machine: ``docker save``,
whose members are an image's layers (most of them the same bytes as in the image built before) and its
configuration.

A member's verdict (what the scanner found in it, and the names of its documents that match the caller's
``keep`` pattern) is stored in a cache folder under a key made of the SHA-256 of the member's bytes, the
digest of the marks the scanner looks for, the digest of the scanner's own code (this package's files), the
reading limits and the ``keep`` pattern. A verdict is reused only for the same bytes read by the same scanner
for the same marks: a changed layer, a new task or a changed rule scans again, and a first run scans
everything. A cache file that does not parse or names another key is a miss, never a pass.

The stream is read twice: once to hash every member (cheap next to a scan), once to scan the members no
verdict is stored for, hashing them again so that what is scanned is what the verdict is stored under (a
stream whose members changed between the two reads is an error, not a verdict).

The cache folder is ``SPU_LEAKSCAN_CACHE``, else ``spu-leakscan`` in the user cache directory; deleting it
only makes the next scan cold.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import platformdirs

from environment.leakscan.reading import Limits, read_stream
from environment.leakscan.scan import Finding, Scanner

#: opens the stream afresh (a context manager: ``docker save`` started again), once per read
Opener = Callable[[], contextlib.AbstractContextManager[BinaryIO]]

_CHUNK = 1 << 20


class StreamChangedError(RuntimeError):
    """A member's bytes differ between the two reads of a stream (the image was rebuilt meanwhile)."""


def cache_dir() -> Path:
    """Where verdicts are kept: ``SPU_LEAKSCAN_CACHE``, else the user cache directory's ``spu-leakscan``."""
    return Path(
        os.environ.get("SPU_LEAKSCAN_CACHE") or platformdirs.user_cache_dir("spu-leakscan")
    ).absolute()


@functools.cache
def scanner_digest() -> str:
    """The SHA-256 of this package's code: a changed rule makes every stored verdict a miss."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return sorted(([_canonical(k), _canonical(v)] for k, v in value.items()), key=json.dumps)
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=json.dumps)
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


def marks_digest(scanner: Scanner) -> str:
    """The SHA-256 of every mark the scanner looks for (all fields of each task's marks)."""
    return hashlib.sha256(json.dumps(_canonical(scanner.marks), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """What the scanner found in one member: findings and kept names, relative to the member (``""`` for the
    member itself, ``"!/path"`` for a document inside it)."""

    findings: list[tuple[str, str, str]]
    names: list[str]


class VerdictCache:
    """Stored verdicts of one scanner, limits and ``keep`` pattern, by the SHA-256 of a member's bytes."""

    def __init__(self, root: Path, scanner: Scanner, limits: Limits, keep: re.Pattern[str] | None) -> None:
        self.root = root
        self.scanner = scanner
        self.limits = limits
        self.keep = keep
        self._context = {
            "marks": marks_digest(scanner),
            "scanner": scanner_digest(),
            "limits": repr(limits),
            "keep": keep.pattern if keep else None,
        }

    def _key(self, member_sha256: str) -> dict[str, Any]:
        return {"member_sha256": member_sha256, **self._context}

    def _path(self, key: dict[str, Any]) -> Path:
        return self.root / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + ".json")

    def get(self, member_sha256: str) -> Verdict | None:
        key = self._key(member_sha256)
        try:
            stored = json.loads(self._path(key).read_text(encoding="utf-8"))
            if stored["key"] != key:
                return None
            findings = [(str(w), str(t), str(what)) for w, t, what in stored["findings"]]
            return Verdict(findings, [str(n) for n in stored["names"]])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, member_sha256: str, verdict: Verdict) -> None:
        """Store a verdict (atomically: a reader sees the whole file or none). Raises OSError."""
        key = self._key(member_sha256)
        self.root.mkdir(parents=True, exist_ok=True)
        data = {"key": key, "findings": verdict.findings, "names": verdict.names}
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".verdict-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, self._path(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@dataclass
class TarScan:
    """The findings and kept names of every member of a tar stream, and what this run scanned."""

    findings: list[Finding] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    members: int = 0
    #: (member name, bytes) of the members scanned in this run; the others' verdicts were stored
    scanned: list[tuple[str, int]] = field(default_factory=list)
    #: verdicts that could not be stored (the next run scans those members again)
    warnings: list[str] = field(default_factory=list)


class _Hashing(io.RawIOBase):
    """A member's bytes as they are read, hashed on the way."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self.sha256 = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self._source.read(len(buffer))
        self.sha256.update(data)
        self.size += len(data)
        buffer[: len(data)] = data
        return len(data)

    def drain(self) -> str:
        """Read what the scan left unread; the SHA-256 of all the member's bytes."""
        while self.read(_CHUNK):
            pass
        return self.sha256.hexdigest()


def _members(stream: BinaryIO) -> Iterator[tuple[tarfile.TarInfo, BinaryIO]]:
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            handle = archive.extractfile(member) if member.isreg() else None
            if handle is not None:
                yield member, handle


def scan_tar_members(name: str, open_stream: Opener, cache: VerdictCache) -> TarScan:
    """Every regular member of the tar stream ``open_stream`` gives, scanned or its verdict reused; documents
    are named ``name!/member`` and ``name!/member!/path`` as :func:`environment.leakscan.scan_stream` names
    them."""
    digests: dict[str, str] = {}
    with open_stream() as stream:
        for member, handle in _members(stream):
            digests[member.name] = _Hashing(handle).drain()
    verdicts = {d: v for d in set(digests.values()) if (v := cache.get(d)) is not None}
    result = TarScan(members=len(digests))
    if len(verdicts) < len(set(digests.values())):
        with open_stream() as stream:
            for member, handle in _members(stream):
                digest = digests.get(member.name)
                if digest is None or digest in verdicts:
                    continue
                verdicts[digest] = _scan_member(f"{name}!/{member.name}", handle, digest, cache)
                result.scanned.append((member.name, member.size))
                try:
                    cache.put(digest, verdicts[digest])
                except OSError as exc:
                    result.warnings.append(f"{member.name}: verdict not stored in {cache.root}: {exc}")
    for member_name, digest in digests.items():
        where = f"{name}!/{member_name}"
        verdict = verdicts[digest]
        result.findings += [Finding(where + rest, task, what) for rest, task, what in verdict.findings]
        result.names += [where + rest for rest in verdict.names]
    return result


def _scan_member(where: str, handle: BinaryIO, digest: str, cache: VerdictCache) -> Verdict:
    reader = _Hashing(handle)
    #: one finding per document, task and kind (a large document is read in overlapping pieces)
    findings: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    names: list[str] = []
    for doc, data in read_stream(where, io.BufferedReader(reader, _CHUNK), cache.limits):
        rest = doc[len(where) :]
        if cache.keep is not None and cache.keep.search(rest) and (not names or names[-1] != rest):
            names.append(rest)
        for f in cache.scanner.scan(doc, data):
            findings.setdefault((rest, f.task_id, f.what.split(" (")[0]), (rest, f.task_id, f.what))
    if reader.drain() != digest:
        raise StreamChangedError(f"{where}: its bytes changed between the two reads of the stream")
    return Verdict(list(findings.values()), names)
