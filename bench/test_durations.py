"""Where the test suite's time goes, and the list of slow tests that the quick subset leaves out.

    .venv/bin/python -m pytest tests/core --durations=0 -q > core.log     # one log per folder, or one for all
    .venv/bin/python bench/test_durations.py core.log [more.log ...] [--top 40] [--write-slow-list [SECONDS]]

Reads pytest's ``--durations=0`` report (setup, call and teardown of each test, summed per test) and prints
the total and the share of each folder, the slowest ``--top`` tests, and how long the quick subset
(``-m "not slow"``) would take at a few thresholds. ``--write-slow-list`` writes ``tests/slow_tests.txt``:
every test that took at least SECONDS (default 1) in these logs, merged with the tests already listed there
whose folder no log covers. tests/conftest.py marks each listed test ``slow``, so ``-m "not slow"`` is the
quick subset (docs/testing.md). Measure on an idle machine: a busy one lists tests that are not slow.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOW_LIST = ROOT / "tests" / "slow_tests.txt"
LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(tests/\S+)$")
HEADER = """\
# Tests that took at least {threshold:g} s on the 2-core development machine (bench/test_durations.py writes
# this list from pytest --durations=0 logs). tests/conftest.py marks each one `slow`, so -m "not slow" is the
# quick subset (docs/testing.md).
"""


def read_durations(paths: list[Path]) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if match := LINE.match(line):
                seconds[match.group(3)] += float(match.group(1))
    return dict(seconds)


def folder(node_id: str) -> str:
    return node_id.split("/")[1]


def write_slow_list(seconds: dict[str, float], threshold: float) -> int:
    measured = {folder(n) for n in seconds}
    kept = []
    if SLOW_LIST.is_file():  # a folder that no log covers keeps its entries
        kept = [
            line
            for line in SLOW_LIST.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#") and folder(line) not in measured
        ]
    slow = sorted({*kept, *(n for n, s in seconds.items() if s >= threshold)})
    SLOW_LIST.write_text(
        HEADER.format(threshold=threshold) + "".join(f"{n}\n" for n in slow), encoding="utf-8"
    )
    return len(slow)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--write-slow-list", nargs="?", type=float, const=1.0, metavar="SECONDS")
    args = parser.parse_args()
    seconds = read_durations(args.logs)
    if not seconds:
        sys.exit("no --durations=0 lines in the logs (run pytest with --durations=0)")
    total = sum(seconds.values())
    print(f"{len(seconds)} tests, {total:.0f} s in setup, call and teardown")
    per_folder: dict[str, list[float]] = defaultdict(list)
    for node, s in seconds.items():
        per_folder[folder(node)].append(s)
    for name, times in sorted(per_folder.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:<15}{len(times):>5} tests{sum(times):>8.0f} s{100 * sum(times) / total:>6.0f} %")
    print(f"\nslowest {args.top}:")
    for node, s in sorted(seconds.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {s:7.1f} s  {node}")
    print("\nquick subset (tests under the threshold; pytest leaves those under 5 ms out of its report):")
    for threshold in (0.5, 1.0, 2.0, 5.0):
        quick = [s for s in seconds.values() if s < threshold]
        print(f"  under {threshold:g} s: {len(quick)} reported tests, {sum(quick):.0f} s")
    if args.write_slow_list is not None:
        n = write_slow_list(seconds, args.write_slow_list)
        print(f"\n{SLOW_LIST.relative_to(ROOT)}: {n} tests at or over {args.write_slow_list:g} s")


if __name__ == "__main__":
    main()
