"""The screen's panel on a folder of tasks: its size, the time it takes, and each task's verdict.

Per task: the entries the panel computes and the distinct ones the family-wise test keeps, the time to
compute the panel cold (a fresh process's first look at each input) and again from the per-input cache
(the design screen and the shuffled controls of one task reuse it), the time of the family-wise test, and
the verdict with its p-value. Totals at the end, with the cached/cold ratio and the share of tasks that are
prior-solvable or undecided.

    .venv/bin/python bench/prior_panel.py [--tasks environment/tasks]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from environment.chance import chance_threshold
from environment.prior_screen import descriptor_columns, screen
from spu_common.task import load_answers, load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=Path("environment/tasks"))
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    cold_total = warm_total = test_total = 0.0
    flagged: list[str] = []
    task_dirs = sorted(args.tasks.glob("*/task"))
    print("task | entries (distinct) | panel cold s | panel cached s | test s | verdict | p | best")
    for task_dir in task_dirs:
        task, answers = load_task(task_dir), load_answers(task_dir.parent / "answers.json")
        threshold = chance_threshold(task, answers)["chance_threshold"]
        start = time.perf_counter()
        columns, notes = descriptor_columns(task)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        descriptor_columns(task)
        warm = time.perf_counter() - start
        start = time.perf_counter()
        result = screen(task, answers, threshold, columns=columns, notes=notes)
        tested = time.perf_counter() - start
        cold_total, warm_total, test_total = cold_total + cold, warm_total + warm, test_total + tested
        if result["prior_verdict"] != "not-prior-solvable":
            flagged.append(f"{task.task_id} ({result['prior_verdict']})")
        best = result["best"]
        shown = f"{best['name']} {best['direction']} {best['expected_score']:+.3f}" if best else "-"
        print(
            f"{task.task_id} | {result['panel_entries']} ({result['distinct_entries']}) | {cold:.2f} | "
            f"{warm:.3f} | {tested:.2f} | {result['prior_verdict']} | {result['prior_p_value'] or 0:.4f} | "
            f"{shown}"
        )
    n = len(task_dirs)
    print(
        f"\n{n} tasks: panel {cold_total:.1f} s cold, {warm_total:.2f} s cached "
        f"({warm_total / cold_total:.3f}x); family-wise tests {test_total:.1f} s; per task "
        f"{(cold_total + test_total) / n:.2f} s on average"
    )
    share = len(flagged) / n
    print(f"prior-solvable or undecided: {len(flagged)} of {n} ({share:.1%}): {', '.join(flagged)}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
