"""``spu doctor``: a cold run, a re-run with nothing changed, and a ``--fresh`` run, against a baseline.

    .venv/bin/python bench/doctor.py [--runs 3] [--baseline DIR] [--profile all] [-j N]

Each round runs, from this checkout: ``spu doctor`` with an empty cache folder (*cold*: every engine check
runs), ``spu doctor`` again with that folder (*re-run*: the environment is unchanged, so the engine results
are reused), and ``spu doctor --fresh`` (every engine check again, the cache kept); with ``--baseline DIR``,
also a cold run of another checkout of the project (its ``spu`` package imported from DIR with this
interpreter, its own empty cache folder), in the same round, so both meet the same load. Prints per case the
median and min of the wall time, the time to doctor's first line and to its first check result, the CPU
seconds of the whole process tree (user + system: what a busy machine does not inflate as it does wall
time), and the ratio of each median wall time to the first case's; then the cores and the load average at
the start and the end (the machine may be shared: say it beside the figures).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
#: the line doctor prints before any check has finished
HEADER = "spu doctor:"


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(root: Path, args: list[str], cache: Path) -> dict[str, float]:
    """One ``spu doctor`` run from ``root`` with ``cache`` as its cache folder: seconds to the end, to the
    first line, to the first check result, and the CPU seconds of it and every process it started."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "SPU_CACHE_DIR": str(cache),
        "SPU_WORKDIR": str(cache.parent / "work"),
        "COLUMNS": "200",
    }
    cpu0 = _children_cpu_s()
    start = time.perf_counter()
    first_line = first_result = None
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "doctor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=root,
        env=env,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter() - start
        if first_line is None and line.strip():
            first_line = now
        if first_result is None and line.strip() and not line.startswith(HEADER):
            first_result = now
    proc.wait()
    end = time.perf_counter() - start
    return {
        "wall": end,
        "first_line": first_line if first_line is not None else end,
        "first_result": first_result if first_result is not None else end,
        "cpu": _children_cpu_s() - cpu0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout of the project (e.g. an older one)")
    parser.add_argument("--profile", default="all")
    parser.add_argument("-j", "--jobs", type=int, help="checks at once (default: doctor's own)")
    opts = parser.parse_args()
    args = ["--profile", opts.profile, *(["-j", str(opts.jobs)] if opts.jobs else [])]
    labels = ["cold", "re-run", "--fresh"]
    if opts.baseline is not None:
        labels.insert(0, f"baseline cold ({opts.baseline.name})")
    times: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="spu-bench-doctor-") as tmp:
        for run in range(opts.runs):
            cache = Path(tmp) / f"cache-{run}"
            if opts.baseline is not None:
                base = one_run(opts.baseline.resolve(), args, Path(tmp) / f"baseline-{run}")
                times[labels[0]].append(base)
            times["cold"].append(one_run(HERE, args, cache))
            times["re-run"].append(one_run(HERE, args, cache))
            times["--fresh"].append(one_run(HERE, [*args, "--fresh"], cache))
            print(
                f"round {run + 1}: " + ", ".join(f"{k} {v[-1]['wall']:.1f} s" for k, v in times.items()),
                file=sys.stderr,
            )
    print(
        f"{'case':28s} {'wall med':>9s} {'wall min':>9s} {'1st line':>9s} {'1st check':>9s} {'CPU s':>7s} "
        f"{'ratio':>6s}"
    )
    base_wall = None
    for label, rows in times.items():
        wall = statistics.median(r["wall"] for r in rows)
        base_wall = base_wall or wall
        print(
            f"{label:28s} {wall:9.1f} {min(r['wall'] for r in rows):9.1f} "
            f"{statistics.median(r['first_line'] for r in rows):9.2f} "
            f"{statistics.median(r['first_result'] for r in rows):9.2f} "
            f"{statistics.median(r['cpu'] for r in rows):7.1f} {wall / base_wall:5.2f}x"
        )
    load_end = os.getloadavg()
    print(
        f"{os.cpu_count()} cores; load average (1, 5, 15 min) {load_start[0]:.1f} {load_start[1]:.1f} "
        f"{load_start[2]:.1f} at the start, {load_end[0]:.1f} {load_end[1]:.1f} {load_end[2]:.1f} at the end"
    )


if __name__ == "__main__":
    main()
