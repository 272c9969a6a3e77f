"""Acknowledged jobs after a SIGKILL: how many records are on disk, and what ``job_wait`` answers after a
restart.

    .venv/bin/python bench/durability.py [--jobs 1000] [--drop-caches]

Starts ``spu serve`` over stdio, sends ``--jobs`` ``xtb_run`` calls with ``wait_s: 0`` (distinct
molecules, so each is a job that waits for one of the CPU slots), reads every acknowledgement (a job id),
then kills the server with SIGKILL. With ``--drop-caches`` (root only) it then runs
``echo 3 > /proc/sys/vm/drop_caches``: the kernel drops clean pages only, so what a killed process wrote
stays readable; a power cut that loses written but unsynced data is what the ``lost`` answer for a
missing record covers. It counts the job
records on disk, restarts the server and calls ``job_wait`` on every acknowledged id, and prints how many
ids resolved to each status (``job_not_found`` must be 0).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from mcp_wire import RawServer  # the tests' raw stdio driver, on the path above


def _molecule(i: int) -> str:
    """A distinct molecule per call (an amino ether), so no two calls share a cache entry."""
    return "C" * (1 + i % 25) + "O" + "C" * (i // 25) + "N"


def _outcome(result: dict[str, Any]) -> str:
    structured = result.get("structuredContent") or {}
    if result.get("isError"):
        error = structured.get("error") or {}
        status = (error.get("details") or {}).get("status")
        return status or error.get("code") or "error"
    return structured.get("status") or "done"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache after the kill")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spu-bench-durability-"))
    try:
        run(work, opts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, opts: argparse.Namespace) -> None:
    env = {**os.environ, "SPU_WORKDIR": str(work), "SPU_CACHE_DIR": str(work / "cache")}
    server = RawServer(env)
    started = time.perf_counter()
    acks = server.call_all(
        [("xtb_run", {"molecules": [_molecule(i)], "wait_s": 0}) for i in range(opts.jobs)]
    )
    acked_s = time.perf_counter() - started
    job_ids = []
    for ack in acks:
        structured = ack.get("structuredContent") or {}
        job_ids.append(structured.get("job_id") or (structured.get("provenance") or {}).get("job_id"))
    server.kill()
    if opts.drop_caches:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    on_disk = {p.stem for p in (work / "jobs").glob("*.json")}
    recorded = sum(job_id in on_disk for job_id in job_ids)
    server = RawServer(env)
    try:
        waits = server.call_all([("job_wait", {"job_id": j, "wait_s": 0}) for j in job_ids])
        answers = collections.Counter(_outcome(result) for result in waits)
    finally:
        server.kill()
    dropped = ", page cache dropped" if opts.drop_caches else ""
    print(f"{opts.jobs} jobs acknowledged in {acked_s:.2f} s; SIGKILL{dropped}")
    print(f"records on disk for acknowledged ids: {recorded} of {len(job_ids)}")
    print("job_wait after restart: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())))


if __name__ == "__main__":
    main()
