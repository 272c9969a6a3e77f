"""The audit log at size: a writer's first check and append, later appends, and ``verify``, on logs of 1 MB,
100 MB and 1 GB, against an earlier checkout of the project.

    .venv/bin/python bench/audit_log.py [--sizes-mb 1 100 1000] [--appends 20] [--baseline DIR]

Builds a log of web-call records (about 600 bytes each, a valid chain) of each size, syncs it to disk, and
in a fresh process per case, with the project at this checkout and, with ``--baseline``, at the checkout in
DIR (``git worktree add DIR <commit>``), times: the first ``check`` and ``append`` of a new writer (what the
first web call after a server start pays), the median of ``--appends`` further appends (fsynced, as the
server writes), and ``verify`` of the whole log. Each version gets the seal its own writer writes (the
earlier one holds only the count and head hash). Prints seconds and the baseline / new ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: Run in a fresh interpreter with the checkout under test first on the path.
MEASURE = r"""
import json, statistics, sys, time
from tools_server.web.audit import AuditLog
from spu_common.audit_log import verify
path, appends = sys.argv[1], int(sys.argv[2])
log = AuditLog(path)
record = {"kind": "call", "tool": "web_fetch", "args": {"url": "https://example.org/bench"}}
start = time.perf_counter()
log.check()
log.append(record)
first = time.perf_counter() - start
times = []
for _ in range(appends):
    start = time.perf_counter()
    log.check()
    log.append(record)
    times.append(time.perf_counter() - start)
start = time.perf_counter()
result = verify(path)
verify_s = time.perf_counter() - start
assert result.ok, result.errors[:3]
print(json.dumps({"first_s": first, "append_ms": statistics.median(times) * 1e3, "verify_s": verify_s}))
"""


def build_log(path: Path, size: int) -> tuple[int, str]:
    """A valid chain of web-call records of about ``size`` bytes; returns (records, head hash)."""
    sys.path.insert(0, str(REPO))
    from spu_common.audit_log import GENESIS, record_hash
    from spu_common.jsonfiles import canonical_json

    prev, seq, written = GENESIS, 0, 0
    with open(path, "wb") as fh:
        while written < size:
            record = {
                "seq": seq,
                "ts": "2026-01-02T03:04:05.123456Z",
                "kind": "call",
                "tool": "web_fetch",
                "call_id": f"{seq:016x}",
                "args": {"url": f"https://example.org/articles/{seq}", "max_length": 20000, "start_index": 0},
                "provider": "fetch",
                "sources": [
                    {
                        "url": f"https://example.org/articles/{seq}",
                        "final_url": f"https://www.example.org/articles/{seq}",
                        "status": 200,
                        "content_type": "text/html; charset=utf-8",
                        "bytes": 48213,
                        "title": "A page about the solubility of small organic molecules in water",
                    }
                ],
                "latency_ms": 412.5,
                "prev": prev,
            }
            record["hash"] = prev = record_hash(record)
            line = (canonical_json(record) + "\n").encode()
            fh.write(line)
            written += len(line)
            seq += 1
    return seq, prev


def write_seal(log: Path, count: int, head: str, new_format: bool) -> None:
    """The seal each version's writer leaves: the new one also covers the log's size and SHA-256."""
    from spu_common.audit_log import Seal, seal_path

    if new_format:
        import hashlib

        digest = hashlib.sha256()
        with open(log, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
        data = Seal(count, head, log.stat().st_size, digest.hexdigest()).to_bytes()
    else:  # the earlier writer's seal: count and head, padded to 256 bytes
        text = json.dumps({"count": count, "head": head, "ts": "x"}, separators=(",", ":"), sort_keys=True)
        data = text.encode().ljust(255) + b"\n"
    seal_path(log).write_bytes(data)


def measure(checkout: Path, log: Path, appends: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(log), str(appends)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit to compare with")
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="spu-bench-audit-"))
    versions = [("new", REPO, True)]
    if opts.baseline is not None:
        versions.insert(0, ("baseline", opts.baseline.resolve(), False))
    print(f"{'log':>8s} {'version':>9s} {'first call s':>13s} {'append p50 ms':>14s} {'verify s':>9s}")
    try:
        for size_mb in opts.sizes_mb:
            source = folder / "source.jsonl"
            count, head = build_log(source, int(size_mb * 1e6))
            rows = {}
            for name, checkout, new_format in versions:
                log = folder / f"{name}.jsonl"
                shutil.copyfile(source, log)
                write_seal(log, count, head, new_format)
                os.sync()
                rows[name] = row = measure(checkout, log, opts.appends)
                print(
                    f"{size_mb:>6.0f}MB {name:>9s} {row['first_s']:13.3f} {row['append_ms']:14.2f} "
                    f"{row['verify_s']:9.2f}",
                    flush=True,
                )
                log.unlink()
            if "baseline" in rows:
                old, new = rows["baseline"], rows["new"]
                print(
                    f"{size_mb:>6.0f}MB {'ratio':>9s} {old['first_s'] / new['first_s']:12.1f}x "
                    f"{old['append_ms'] / new['append_ms']:13.1f}x {old['verify_s'] / new['verify_s']:8.1f}x",
                    flush=True,
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
