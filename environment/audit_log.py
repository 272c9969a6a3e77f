"""Reading the audit log of web access: verify its hash chain and seal, summarise it, and write a run's
source record (``sources.json``).

The tool server writes the log (``tools_server.web.audit.AuditLog``); the agent, the verifier and the
``spu audit`` commands read it through this module, which owns the format:

One JSON object per line, keys sorted, no spaces::

    {"seq": 7, "ts": "2026-01-02T03:04:05.123456Z", "kind": "http", ..., "prev": "<hash of seq 6>",
     "hash": "<sha256 hex>"}

``hash`` is SHA-256 over the canonical JSON (sorted keys, ``(",", ":")`` separators, UTF-8) of the record
without its ``hash`` field, ``prev`` included; the first record's ``prev`` is 64 zeros. The seal file
(``audit.jsonl.seal``) holds ``{"count": N, "head": "<hash of the last record>"}``, so a truncated tail is
detected. A keyed log (the audit service's) also gives every record ``mac``, HMAC-SHA256 of its hash
under a key kept beside the log (``audit.jsonl.key``), and the seal a ``mac`` of ``count:head``; ``hash``
covers the record without ``hash`` and ``mac``. Record kinds: ``attempt`` (an HTTP attempt about to
connect), ``http`` (its outcome), ``call`` (one tool call with its outcome and detector flags), ``recovery``
(a torn last line dropped at start-up), ``service`` (audit service start).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import os
from collections import Counter
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


def seal_mac(key: bytes, count: int, head: str) -> str:
    """HMAC-SHA256 of the seal's ``count:head`` under the log's key."""
    return hmac.new(key, f"{count}:{head}".encode("ascii"), hashlib.sha256).hexdigest()


def key_path(log_path: Path) -> Path:
    """Where the audit service keeps the log's HMAC key by default: beside the log."""
    return log_path.with_name(log_path.name + ".key")


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seal_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".seal")


def read_records(path: str | os.PathLike[str]):
    path = Path(path)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@dataclass
class VerifyResult:
    ok: bool
    count: int
    head: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "count": self.count,
            "head": self.head,
            "errors": self.errors,
            "warnings": self.warnings,
        }


def verify(path: str | os.PathLike[str], key: bytes | None = None) -> VerifyResult:
    """Check every line's hash and link, the sequence numbers, and the seal (truncation); with the log's
    ``key``, also every record's and the seal's MAC (forgery by someone without the key)."""
    path = Path(path)
    errors: list[str] = []
    warnings: list[str] = []
    if not path.exists():
        return VerifyResult(False, 0, GENESIS, [f"no audit log at {path.name}"])
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        errors.append("the last line is incomplete (torn write)")
    prev = GENESIS
    hashes: list[str] = []
    macs_unchecked = False
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            errors.append(f"line {lineno}: not valid JSON")
            prev = None  # type: ignore[assignment]
            continue
        if not isinstance(record, dict):
            errors.append(f"line {lineno}: not a JSON object")
            prev = None  # type: ignore[assignment]
            continue
        seq = record.get("seq")
        if seq != len(hashes):
            errors.append(
                f"line {lineno}: seq {seq} where {len(hashes)} was expected (a line was removed or moved)"
            )
        if record.get("hash") != record_hash(record):
            errors.append(f"line {lineno}: hash does not match the record (the line was modified)")
        if prev is not None and record.get("prev") != prev:
            errors.append(f"line {lineno}: prev does not match the previous record's hash (chain broken)")
        if key is not None and not hmac.compare_digest(
            str(record.get("mac", "")), record_mac(key, str(record.get("hash", "")))
        ):
            errors.append(f"line {lineno}: the MAC does not match (forged, or re-chained without the key)")
        elif key is None and "mac" in record and not macs_unchecked:
            macs_unchecked = True
            warnings.append("the log is keyed but no key was given: MACs were not checked (--key FILE)")
        prev = record.get("hash")
        hashes.append(record.get("hash", ""))
    head = hashes[-1] if hashes else GENESIS
    seal_file = seal_path(path)
    if not seal_file.exists():
        errors.append("the seal file is missing")
    else:
        try:
            seal = json.loads(seal_file.read_text())
            sealed_count, sealed_head = int(seal["count"]), seal["head"]
        except (ValueError, KeyError, TypeError):
            errors.append("the seal file is not valid")
        else:
            if key is not None and not hmac.compare_digest(
                str(seal.get("mac", "")), seal_mac(key, sealed_count, str(sealed_head))
            ):
                errors.append("the seal's MAC does not match (rewritten without the key)")
            if sealed_count > len(hashes):
                errors.append(
                    f"the log holds {len(hashes)} records but the seal counts {sealed_count}: the tail was "
                    "truncated"
                )
            elif sealed_count >= 1 and hashes[sealed_count - 1] != sealed_head:
                errors.append(f"record {sealed_count - 1} does not match the sealed head hash")
            elif sealed_count < len(hashes):
                extra = len(hashes) - sealed_count
                msg = f"{extra} record(s) after the seal (a writer stopped between the log and the seal)"
                (warnings if extra == 1 else errors).append(msg)
    return VerifyResult(not errors, len(hashes), head, errors, warnings)


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
