"""`spu task build` time against the number of groups: a compact synthetic spec of N groups (three
experiments each, one setup field and a number), built at N and at ten times N in the same run. The ratio
says how the build grows: about 10.0x is linear, 100x would be quadratic.

    .venv/bin/python bench/taskbuild.py [--groups 1000] [--members 3]
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from environment.taskbuild import build_task

SPEC_HEAD = """\
task_id: bench-build
task_version: '1'
title: Partitioning of synthetic compounds
domain: chemistry
instruction: Order the compounds by the measured value.
procedure: Each compound was measured once with the same procedure.
experiments: experiments.csv
setup_fields: [name, temperature_c]
citation: "A. Author, 'A synthetic data set for benchmarks', J Synth 2020"
data_source: Table 1 of the article
license: CC-BY-4.0
groups:
"""


def write_spec(root: Path, groups: int, members: int) -> Path:
    """A spec of ``groups`` groups in flow style (a 10,000-group spec stays under the 1 MB spec limit)."""
    rng = random.Random(groups)
    root.mkdir(parents=True)
    lines, rows = [SPEC_HEAD], []
    for g in range(groups):
        keys = [f"k{g}x{j}" for j in range(members)]
        lines.append(
            f"- {{group_id: G{g}, endpoint: log P, unit: log10 units, members: [{', '.join(keys)}]}}\n"
        )
        rows += [
            (k, f"compound {k}", rng.randint(20, 80), f"{rng.uniform(-3, 3):.3f}", "Table 1") for k in keys
        ]
    (root / "spec.yaml").write_text("".join(lines))
    with (root / "experiments.csv").open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["key", "name", "temperature_c", "value", "source"])
        writer.writerows(rows)
    return root


def timed_build(work: Path, groups: int, members: int) -> float:
    spec = write_spec(work / f"spec-{groups}", groups, members)
    start = time.perf_counter()
    build_task(spec, work / f"out-{groups}", allow_presented_order=True)  # random values: 1 in 20 is refused
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--groups", type=int, default=1000, help="the smaller build; the larger has ten times"
    )
    parser.add_argument("--members", type=int, default=3, help="experiments per group")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        timed_build(Path(tmp), 10, args.members)  # imports and first-call costs out of the way
        small = timed_build(Path(tmp), args.groups, args.members)
        large = timed_build(Path(tmp), 10 * args.groups, args.members)
    print(f"build {args.groups:>6} groups: {small:7.1f} s")
    print(f"build {10 * args.groups:>6} groups: {large:7.1f} s")
    print(f"10x groups: {large / small:.2f}x time (10x is linear)")


if __name__ == "__main__":
    main()
