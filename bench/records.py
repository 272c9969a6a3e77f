"""Replacing a job record: the job store's write against an atomic rename over the old file.

    .venv/bin/python bench/records.py [--writes 200]

A job that outlives the deferred write of its submission record (50 ms) has its final record replace that
file on the job's critical path. Renaming a new file over an existing one makes ext4 write the new file out
first (``auto_da_alloc``); the job store writes a new file, removes the old record and renames the new one
into place. Both write the same record over an existing file, alternating, in the same folder.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from spu_common.jsonfiles import atomic_write_json
from tools_server.core.jobs.model import Job
from tools_server.core.jobs.store import JobStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="spu-bench-records-"))
    store = JobStore(folder)
    job = Job(
        job_id="xtb_run-0123456789",
        tool="xtb_run",
        module="tools_server.qc.tools",
        params={"molecules": ["CCO"]},
        resource="cpu",
        time_limit_s=600,
        memory_limit_mb=None,
    )
    job.status, job.result = "done", {"items": [{"energy_hartree": -11.39}] * 20}
    other = folder / "other.json"
    store.save(job)
    atomic_write_json(other, job.record(), indent=None, fsync=False, default=str)
    store_s, rename_s = [], []
    for _ in range(opts.writes):
        start = time.perf_counter()
        store.save(job)
        store_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        atomic_write_json(other, job.record(), indent=None, fsync=False, default=str)
        rename_s.append(time.perf_counter() - start)
    a, b = statistics.median(rename_s) * 1e3, statistics.median(store_s) * 1e3
    print(f"{'write over an existing record':44s} {'p50 ms':>8s}")
    print(f"{'atomic rename over the old file (baseline)':44s} {a:8.3f}")
    print(f"{'job store (remove, then rename)':44s} {b:8.3f}   {a / b:.1f}x faster")


if __name__ == "__main__":
    main()
