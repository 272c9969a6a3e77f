"""``spu doctor`` wall time, and when its first result shows: this checkout against a baseline.

    .venv/bin/python bench/doctor.py [--runs 3] [--baseline DIR] [--profile all] [-j N ...]

Runs ``spu doctor`` (text output) of this checkout and, with ``--baseline DIR``, of another checkout of the
project (its ``spu`` package imported from DIR with this interpreter), alternating between them run by
run, so both meet the same load. ``-j`` adds runs of this checkout with that many checks at once
(repeatable). Prints per case the median and min of the wall time and of the time to the first check
result on stdout (the baseline prints nothing until it ends), and the ratio of each median to the first
case's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
#: the line doctor prints before any check has finished
HEADER = "spu doctor:"


def one_run(root: Path, args: list[str]) -> tuple[float, float]:
    """(seconds to the end, seconds to the first check result) of one ``spu doctor`` run from ``root``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    first = None
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "doctor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=root,
        env={**env, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if first is None and line.strip() and not line.startswith(HEADER):
            first = time.perf_counter() - start
    proc.wait()
    end = time.perf_counter() - start
    return end, first if first is not None else end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout of the project (e.g. an older one)")
    parser.add_argument("--profile", default="all")
    parser.add_argument("-j", "--jobs", type=int, action="append", default=[])
    opts = parser.parse_args()
    cases: dict[str, tuple[Path, list[str]]] = {}
    if opts.baseline is not None:
        cases[f"baseline ({opts.baseline.name})"] = (opts.baseline.resolve(), ["--profile", opts.profile])
    cases["this checkout"] = (HERE, ["--profile", opts.profile])
    for jobs in opts.jobs:
        cases[f"this checkout, -j {jobs}"] = (HERE, ["--profile", opts.profile, "-j", str(jobs)])
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
    for run in range(opts.runs):
        for label, (root, args) in cases.items():
            times[label].append(one_run(root, args))
            print(f"run {run + 1} {label}: {times[label][-1][0]:.1f} s", file=sys.stderr)
    print(f"{'case':36s} {'wall med':>9s} {'wall min':>9s} {'first med':>9s} {'first min':>9s} {'ratio':>6s}")
    base = None
    for label, rows in times.items():
        walls, firsts = [w for w, _ in rows], [f for _, f in rows]
        median = statistics.median(walls)
        base = base or median
        print(
            f"{label:36s} {median:9.1f} {min(walls):9.1f} {statistics.median(firsts):9.1f} "
            f"{min(firsts):9.1f} {median / base:5.2f}x"
        )
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
