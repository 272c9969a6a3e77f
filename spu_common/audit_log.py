"""Reading the audit log of web access: verify its hash chain and seal, summarise it, and write a run's
source record (``sources.json``).

The tool server writes the log (``tools_server.web.audit.AuditLog``); the agent, the verifier and the
``spu audit`` commands read it through this module, which owns the format:

One JSON object per line, keys sorted, no spaces::

    {"seq": 7, "ts": "2026-01-02T03:04:05.123456Z", "kind": "http", ..., "prev": "<hash of seq 6>",
     "hash": "<sha256 hex>"}

``hash`` is SHA-256 over the canonical JSON (sorted keys, ``(",", ":")`` separators, UTF-8) of the record
without its ``hash`` field, ``prev`` included; the first record's ``prev`` is 64 zeros. The seal file
(``audit.jsonl.seal``, one line padded to :data:`SEAL_BYTES`) holds ``{"count": N, "head": "<hash of the last
record>", "size": <bytes of the log it covers>, "sha256": "<SHA-256 of those bytes>"}``, so a truncated tail
is detected, and a writer starting on a long log checks it by hashing its bytes, without parsing a record
(seals written before ``size`` and ``sha256`` existed hold only ``count`` and ``head``). A keyed log (the
audit service's) also gives every record ``mac``, HMAC-SHA256 of its hash under a key kept beside the log
(``audit.jsonl.key``), and the seal a ``mac`` of ``count:head:size:sha256`` (``count:head`` in an old seal);
``hash`` covers the record without ``hash`` and ``mac``. Record kinds: ``attempt`` (an HTTP attempt about to
connect), ``http`` (its outcome), ``call`` (one tool call with its outcome and detector flags), ``recovery``
(a torn last line dropped at start-up), ``service`` (audit service start), ``rotation`` (the first record of
a log that follows a rotated one).

**Rotation.** A log is rotated by renaming it (``spu audit rotate``, or logrotate renaming or copying it away
and emptying it): its records stay in the renamed file (the *archive*, named ``audit.jsonl.<suffix>`` beside
it), and the next log begins with a ``rotation`` record whose ``previous`` names the archive's file name,
record count, head hash, size and SHA-256 (what its seal said). An archive is recognised by content, not by
name: :func:`find_rotated` looks beside the log for a file whose first ``size`` bytes hash to the seal's
SHA-256, so a later rename (logrotate's ``.1`` becoming ``.2``) loses nothing. :func:`verify` follows the
chain of rotation records from log to archive and checks each archive against what its successor names.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import os
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from spu_common.jsonfiles import atomic_write_json, canonical_json

GENESIS = "0" * 64
SOURCES_SCHEMA = "spu.sources/1"


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k not in ("hash", "mac")}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def record_mac(key: bytes, record_hash_hex: str) -> str:
    """HMAC-SHA256 of a record's hash under the log's key (the ``mac`` field of a keyed log)."""
    return hmac.new(key, record_hash_hex.encode("ascii"), hashlib.sha256).hexdigest()


def seal_mac(key: bytes, count: int, head: str, size: int | None = None, sha256: str | None = None) -> str:
    """HMAC-SHA256 of the seal's ``count:head:size:sha256`` (``count:head`` for an old seal) under the log's
    key."""
    text = f"{count}:{head}" if size is None else f"{count}:{head}:{size}:{sha256}"
    return hmac.new(key, text.encode("ascii"), hashlib.sha256).hexdigest()


def record_hash_ok(line: bytes, record: dict[str, Any]) -> bool:
    """Whether ``record`` (parsed from ``line``, one line of the log) holds the hash of its content.

    A line the writer wrote is canonical JSON, so its bytes without the ``hash`` and ``mac`` fields are what
    was hashed: hashing them skips serialising the record again (half of a long log's verification). A line
    that is not in that form is checked the long way, with the same verdict."""
    digest = record.get("hash")
    if not isinstance(digest, str):
        return False
    body = line.rstrip(b"\n")
    for field_name in ("hash", "mac"):
        value = record.get(field_name)
        if isinstance(value, str) and value.isascii():
            pair = f'"{field_name}":"{value}"'.encode()
            body = (
                body.replace(b"," + pair, b"", 1)
                if b"," + pair in body
                else body.replace(pair + b",", b"", 1)
            )
    if hashlib.sha256(body).hexdigest() == digest:
        return True
    return record_hash(record) == digest


def key_path(log_path: Path) -> Path:
    """Where the audit service keeps the log's HMAC key by default: beside the log."""
    return log_path.with_name(log_path.name + ".key")


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seal_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".seal")


#: A seal is one line of this many bytes, overwritten in place (one ``pwrite``, no rename).
SEAL_BYTES = 512


@dataclass(frozen=True)
class Seal:
    """The seal: the log's first ``size`` bytes hold ``count`` records ending in ``head``, and hash to
    ``sha256`` (``size`` and ``sha256`` are None in a seal written before they existed)."""

    count: int
    head: str
    size: int | None = None
    sha256: str | None = None
    mac: str | None = None

    def mac_ok(self, key: bytes) -> bool:
        expected = seal_mac(key, self.count, self.head, self.size, self.sha256)
        return hmac.compare_digest(str(self.mac or ""), expected)

    def to_bytes(self, key: bytes | None = None) -> bytes:
        """The seal file's content, with its MAC when ``key`` is given."""
        fields: dict[str, Any] = {"count": self.count, "head": self.head, "ts": utc_now()}
        if self.size is not None:
            fields.update(size=self.size, sha256=self.sha256)
        if key is not None:
            fields["mac"] = seal_mac(key, self.count, self.head, self.size, self.sha256)
        return canonical_json(fields).encode().ljust(SEAL_BYTES - 1) + b"\n"


def parse_seal(data: bytes) -> Seal:
    """The seal in ``data``; ``ValueError`` when it is not one."""
    seal = json.loads(data)
    if not isinstance(seal, dict):
        raise ValueError("not an object")
    count, head, size, sha256 = seal.get("count"), seal.get("head"), seal.get("size"), seal.get("sha256")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0 or not isinstance(head, str):
        raise ValueError("no record count and head")
    if (size is None) != (sha256 is None) or (
        size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0)
    ):
        raise ValueError("size and sha256 go together")
    if sha256 is not None and not isinstance(sha256, str):
        raise ValueError("sha256 is not a string")
    mac = seal.get("mac")
    return Seal(count, head, size, sha256, mac if isinstance(mac, str) else None)


def read_records(path: str | os.PathLike[str]):
    path = Path(path)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


#: The files the tools keep beside a log (``LOG.seal``, ``LOG.lock``, ``LOG.key``, ``LOG.exposed``): never an
#: archive of it.
SIDECARS = (".seal", ".lock", ".key", ".exposed")


def _prefix_sha256(path: Path, size: int) -> str | None:
    """The SHA-256 of the first ``size`` bytes of the regular file ``path`` (not followed if a link), or None
    when it is shorter, not a regular file, or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size < size:
            return None
        digest = hashlib.sha256()
        left = size
        while left:
            block = fh.read(min(1 << 20, left))
            if not block:
                return None
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def find_rotated(log_path: str | os.PathLike[str], size: int, sha256: str) -> Path | None:
    """The archive of a rotated log: the file beside ``log_path`` named after it (``audit.jsonl.1``,
    ``audit.jsonl-20260102``, ``audit.jsonl.20260102T030405Z``) whose first ``size`` bytes hash to
    ``sha256`` (what the log's seal, or a rotation record, says); the shortest such file, or None."""
    log_path = Path(log_path)
    found: list[tuple[int, str, Path]] = []
    try:
        entries = list(os.scandir(log_path.parent))
    except OSError:
        return None
    for entry in entries:
        name = entry.name
        if (
            not name.startswith(log_path.name)
            or len(name) == len(log_path.name)
            or name[len(log_path.name)] not in ".-_"
            or name.endswith(SIDECARS)
        ):
            continue
        try:
            if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_size < size:
                continue
            found.append((entry.stat(follow_symlinks=False).st_size, name, Path(entry.path)))
        except OSError:
            continue
    for _, _, path in sorted(found):
        if _prefix_sha256(path, size) == sha256:
            return path
    return None


def rotation_fields(archive: str, seal: Seal, by: str) -> dict[str, Any]:
    """The fields of the ``rotation`` record that begins the log after ``archive`` (its file name), whose
    seal was ``seal``; ``by`` says who rotated (``spu audit rotate``, or ``writer``: the writer found the log
    renamed or copied away)."""
    return {
        "kind": "rotation",
        "by": by,
        "previous": {
            "file": archive,
            "count": seal.count,
            "head": seal.head,
            "size": seal.size,
            "sha256": seal.sha256,
        },
    }


def rotation_of(record: dict[str, Any]) -> Seal | None:
    """What a ``rotation`` record says of the log before it, as a seal (the archive's file name is
    ``record["previous"]["file"]``); None for any other record or a malformed one."""
    previous = record.get("previous") if record.get("kind") == "rotation" else None
    if not isinstance(previous, dict) or not isinstance(previous.get("file"), str):
        return None
    try:
        return parse_seal(canonical_json(previous).encode())
    except ValueError:
        return None


@dataclass
class VerifyResult:
    """What :func:`verify` found. ``state`` is ``ok``, ``rotated`` (the log follows, or was renamed away to,
    an archive that verifies) or ``failed``; ``rotations`` lists the archives checked, newest first."""

    ok: bool
    count: int
    head: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    state: str = "ok"
    rotations: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "state": self.state,
            "count": self.count,
            "head": self.head,
            "errors": self.errors,
            "warnings": self.warnings,
            "rotations": self.rotations,
        }


#: How many problems :func:`verify` lists before it only counts them (a damaged long log has millions).
MAX_LISTED_PROBLEMS = 100
#: :func:`verify` reports its progress about every this many bytes.
PROGRESS_BYTES = 16 * 2**20


class _Problems(list):
    """The first :data:`MAX_LISTED_PROBLEMS` problems, and how many more there were."""

    more = 0

    def add(self, text: str) -> None:
        if len(self) < MAX_LISTED_PROBLEMS:
            self.append(text)
        else:
            self.more += 1

    def listed(self) -> list[str]:
        return [*self, f"... and {self.more} more problems"] if self.more else list(self)


@dataclass
class _Checked:
    """One file's verification: the result, its seal, and its first record (a rotation names the file
    before it)."""

    result: VerifyResult
    seal: Seal | None
    first: dict[str, Any] | None


def _verify_file(
    path: Path,
    key: bytes | None,
    progress: Callable[[int, int], None] | None,
    expected: Seal | None = None,
) -> _Checked:
    """Verify one file; ``expected`` is what the rotation record of its successor says of it (it stands in
    for a seal file the archive lacks, and must agree with the one it has)."""
    errors = _Problems()
    warnings: list[str] = []
    first: dict[str, Any] | None = None
    seal: Seal | None = None
    seal_file = seal_path(path)
    if not path.exists():
        try:
            seal = parse_seal(seal_file.read_bytes())
        except (OSError, ValueError):
            seal = None
        return _Checked(VerifyResult(False, 0, GENESIS, [f"no audit log at {path.name}"]), seal, None)
    if not seal_file.exists():
        if expected is None and path.stat().st_size > 0:  # an empty log without a seal holds nothing
            errors.add("the seal file is missing")
        seal = expected
    else:
        try:
            seal = parse_seal(seal_file.read_bytes())
        except (OSError, ValueError):
            errors.add("the seal file is not valid")
        if (
            seal is not None
            and expected is not None
            and (seal.count, seal.head, seal.sha256)
            != (
                expected.count,
                expected.head,
                expected.sha256,
            )
        ):
            errors.add(
                f"its seal ({seal.count} records, head {seal.head[:16]}…) is not what the next log's "
                f"rotation record names ({expected.count} records, head {expected.head[:16]}…)"
            )
    digest = hashlib.sha256() if seal is not None and seal.size is not None else None
    sealed_bytes = seal.size if seal is not None and seal.size is not None else 0
    sealed_hash = GENESIS
    prev: str | None = GENESIS
    count = 0
    head = GENESIS
    macs_unchecked = False
    done = 0
    next_report = PROGRESS_BYTES
    with open(path, "rb") as fh:
        total = os.fstat(fh.fileno()).st_size
        for lineno, line in enumerate(fh, start=1):
            start, done = done, done + len(line)
            if digest is not None and start < sealed_bytes:
                digest.update(line[: sealed_bytes - start])
            if progress is not None and done >= next_report:
                progress(done, total)
                next_report = done + PROGRESS_BYTES
            if not line.endswith(b"\n"):
                errors.add("the last line is incomplete (torn write)")
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))  # a str skips json's encoding detection
            except ValueError:
                errors.add(f"line {lineno}: not valid JSON")
                prev = None
                continue
            if not isinstance(record, dict):
                errors.add(f"line {lineno}: not a JSON object")
                prev = None
                continue
            if first is None:
                first = record
            seq = record.get("seq")
            if seq != count:
                errors.add(
                    f"line {lineno}: seq {seq} where {count} was expected (a line was removed or moved)"
                )
            if not record_hash_ok(line, record):
                errors.add(f"line {lineno}: hash does not match the record (the line was modified)")
            if prev is not None and record.get("prev") != prev:
                errors.add(f"line {lineno}: prev does not match the previous record's hash (chain broken)")
            if key is not None and not hmac.compare_digest(
                str(record.get("mac", "")), record_mac(key, str(record.get("hash", "")))
            ):
                errors.add(f"line {lineno}: the MAC does not match (forged, or re-chained without the key)")
            elif key is None and "mac" in record and not macs_unchecked:
                macs_unchecked = True
                warnings.append("the log is keyed but no key was given: MACs were not checked (--key FILE)")
            prev = head = str(record.get("hash", ""))
            count += 1
            if seal is not None and count == seal.count:
                sealed_hash = head
    if progress is not None:
        progress(done, total)
    if seal is not None:
        if key is not None and seal is not expected and not seal.mac_ok(key):
            errors.add("the seal's MAC does not match (rewritten without the key)")
        if seal.count > count:
            errors.add(
                f"the log holds {count} records but the seal counts {seal.count}: the tail was truncated"
            )
        elif seal.count >= 1 and sealed_hash != seal.head:
            errors.add(f"record {seal.count - 1} does not match the sealed head hash")
        elif seal.count < count:
            extra = count - seal.count
            msg = f"{extra} record(s) after the seal (a writer stopped between the log and the seal)"
            if extra == 1:
                warnings.append(msg)
            else:
                errors.add(msg)
        if digest is not None and total < sealed_bytes:
            errors.add(f"the log holds {total} bytes but its seal covers {sealed_bytes}: it was truncated")
        elif digest is not None and digest.hexdigest() != seal.sha256:
            errors.add(
                f"the log's first {sealed_bytes} bytes are not those its seal covers (SHA-256 differs)"
            )
    problems = errors.listed()
    return _Checked(VerifyResult(not problems, count, head, problems, warnings), seal, first)


#: :func:`verify` follows at most this many rotations back.
MAX_ROTATIONS = 10_000


def verify(
    path: str | os.PathLike[str],
    key: bytes | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyResult:
    """Check every line's hash and link, the sequence numbers, and the seal (truncation, and the SHA-256
    of the bytes it covers); with the log's ``key``, also every record's and the seal's MAC (forgery by
    someone without the key). The log is read as a stream, one line at a time; ``progress(bytes_done,
    bytes_total)`` is called about every :data:`PROGRESS_BYTES`.

    Across rotations: a log that begins with a ``rotation`` record is followed to the archive it names
    (found by content, :func:`find_rotated`, when its name now holds something else), which must hold what
    the record says, and so on back; a log renamed away with its seal left behind (logrotate, before the
    next web call starts the new log) is found the same way. Both report ``state`` ``rotated``; an archive
    no longer beside the log (compressed, moved, deleted) is a warning: the chain is verified from there."""
    path = Path(path)
    checked = _verify_file(path, key, progress)
    result = checked.result
    seal = checked.seal
    if not result.ok and seal is not None and seal.size is not None and seal.count > 0:
        archive = find_rotated(path, seal.size, seal.sha256 or "")
        if archive is not None and _holds_no_sealed_record(path):
            # renamed away alone: the seal speaks of the archive, the log is new (empty or missing)
            result = VerifyResult(True, 0, GENESIS, state="rotated")
            result.warnings.append(
                f"the log was rotated: its {seal.count} records are in {archive.name}; the next web call "
                "starts the new log with a rotation record naming it"
            )
            _follow(result, archive, seal, key, progress, path)
            return result
    if checked.first is not None and rotation_of(checked.first) is not None:
        result.state = "rotated"
        previous = rotation_of(checked.first)
        assert previous is not None
        archive = _archive(path, checked.first["previous"]["file"], previous, {path})
        if archive is None:
            result.warnings.append(
                f"the log before this one ({checked.first['previous']['file']}, {previous.count} records, "
                f"head {previous.head[:16]}…) is not beside it (moved, compressed or deleted): verified from "
                "the rotation on"
            )
        else:
            _follow(result, archive, previous, key, progress, path)
    if not result.ok:
        result.state = "failed"
    return result


def _holds_no_sealed_record(path: Path) -> bool:
    """Whether the log is missing or holds nothing but an unsealed rotation record (its seal still speaks of
    the archive)."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read(1 << 16).splitlines()
    except FileNotFoundError:
        return True
    if not lines:
        return True
    try:
        return len(lines) == 1 and rotation_of(json.loads(lines[0])) is not None
    except ValueError:
        return False


def _archive(log: Path, name: str, expected: Seal, visited: set[Path]) -> Path | None:
    """The archive a rotation record names: the file of that name beside ``log`` when it holds what the
    record says, else the file beside it that does (renamed since), else the file of that name if it is no
    later log of the chain (an archive changed in place: verifying it says how), else None (gone)."""
    named = log.with_name(name) if name and "/" not in name and name not in (".", "..") else None
    if (
        named is not None
        and expected.size is not None
        and _prefix_sha256(named, expected.size) == expected.sha256
    ):
        return named
    if expected.size is not None and expected.sha256 is not None:
        found = find_rotated(log, expected.size, expected.sha256)
        if found is not None:
            return found
    # logrotate reuses names (a later archive is now audit.jsonl.1): such a file is not this archive
    if named is not None and named.is_file() and named not in visited:
        return named
    return None


def _follow(
    result: VerifyResult,
    archive: Path,
    expected: Seal,
    key: bytes | None,
    progress: Callable[[int, int], None] | None,
    log: Path,
) -> None:
    """Verify ``archive`` and the archives before it, adding to ``result``."""
    seen: set[Path] = {log}
    while len(seen) <= MAX_ROTATIONS and archive not in seen:
        seen.add(archive)
        checked = _verify_file(archive, key, progress, expected)
        sub = checked.result
        result.rotations.append({"file": archive.name, "records": sub.count, "head": sub.head, "ok": sub.ok})
        result.errors += [f"{archive.name}: {e}" for e in sub.errors]
        result.warnings += [f"{archive.name}: {w}" for w in sub.warnings]
        result.ok = result.ok and sub.ok
        previous = rotation_of(checked.first) if checked.first is not None else None
        if previous is None:
            return
        name = checked.first["previous"]["file"] if checked.first else ""
        found = _archive(log, name, previous, seen)
        if found is None:
            result.warnings.append(
                f"the log before {archive.name} ({name}, {previous.count} records) is not beside it (moved, "
                "compressed or deleted): verified from that rotation on"
            )
            return
        archive, expected = found, previous


#: call outcomes that are refusals: by the information policy, or by the address guard (SSRF)
REFUSAL_CODES = frozenset({"policy_blocked", "url_refused"})


def summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Counts for a human: calls per tool, attempts per kind and status class, bytes, flags, refusals
    (``refused_calls``: calls refused by the policy or the address guard; ``policy_refusals`` and
    ``url_refusals``, HTTP attempts the address guard refused, split them by cause)."""
    tools: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    domains: Counter[str] = Counter()
    n_http = n_bytes = n_flagged = n_blocked = n_url_refused = n_refused_calls = 0
    first = last = None
    for rec in read_records(path):
        first = first or rec.get("ts")
        last = rec.get("ts")
        if rec.get("kind") == "http":
            n_http += 1
            n_bytes += int(rec.get("bytes") or 0)
            status = rec.get("status")
            statuses[f"{status // 100}xx" if isinstance(status, int) else (rec.get("error") or "none")] += 1
            host = urlsplit(rec.get("url") or "").hostname
            if host:
                domains[host] += 1
            n_url_refused += rec.get("error") == "url_refused"
        elif rec.get("kind") == "call":
            tools[rec.get("tool") or "?"] += 1
            outcomes[rec.get("error") or "ok"] += 1
            n_flagged += bool(rec.get("flags"))
            n_blocked += rec.get("error") == "policy_blocked"
            n_refused_calls += rec.get("error") in REFUSAL_CODES
    return {
        "calls": sum(tools.values()),
        "calls_by_tool": dict(tools),
        "outcomes": dict(outcomes),
        "http_attempts": n_http,
        "http_status": dict(statuses),
        "bytes": n_bytes,
        "flagged_calls": n_flagged,
        "policy_refusals": n_blocked,
        "url_refusals": n_url_refused,
        "refused_calls": n_refused_calls,
        "top_domains": dict(domains.most_common(10)),
        "first_ts": first,
        "last_ts": last,
    }


def sources(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's source record (schema ``spu.sources/1``, documented in docs/web.md)."""
    path = Path(path)
    searches: list[dict[str, Any]] = []
    fetched: dict[str, dict[str, Any]] = {}
    flags: list[dict[str, Any]] = []
    for rec in read_records(path):
        if rec.get("kind") != "call":
            continue
        base = {"seq": rec["seq"], "ts": rec["ts"], "tool": rec.get("tool")}
        if rec.get("flags"):
            flags.append({**base, "kinds": sorted(set(rec["flags"]))})
        if rec.get("error"):
            continue
        args = rec.get("args") or {}
        if rec.get("tool") in ("web_search", "literature_search"):
            searches.append(
                {
                    **base,
                    "provider": rec.get("provider"),
                    "query": args.get("query"),
                    "n_results": rec.get("n_results"),
                }
            )
        for src in rec.get("sources") or []:
            key = src.get("final_url") or src.get("url")
            if key and key not in fetched:
                fetched[key] = {**base, **src, "flagged": bool(rec.get("flags"))}
    check = verify(path)
    return {
        "schema": SOURCES_SCHEMA,
        "generated_at": utc_now(),
        "audit_log": {"file": path.name, "records": check.count, "head": check.head, "verified": check.ok},
        "searches": searches,
        "sources": list(fetched.values()),
        "flags": flags,
    }


def write_sources(log_path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the run's ``sources.json`` from the audit log; returns what was written."""
    data = sources(log_path)
    atomic_write_json(out_path, data)
    return data
