"""The prior screen's verdicts on the task suite: false alarms, seed stability, exact thresholds, power, time.

1. Shuffled-value controls: each task's values shuffled within its groups ``--shuffles`` times; the share
   the family-wise verdict calls prior-solvable (nominal 5%), against the share the old rule flags (the
   best entry of the same panel reaching the single-ranking chance threshold).
2. Seed stability: each task's verdict under seeds 0 .. ``--seeds`` - 1; a flip is a task called
   prior-solvable under one seed and not-prior-solvable under another.
3. Per task: the exact and the 4,000-draw chance threshold, power (5 runs, expected score 0.3), the
   effect for 80% power, the verdict and its p-value.
4. Time: the exact chance threshold and power against the 4,000-draw threshold (ratio), and the screen.

    .venv/bin/python bench/prior_screen.py [--tasks environment/tasks] [--shuffles 100] [--seeds 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from environment.chance import chance_threshold, random_scores
from environment.prior_screen import descriptor_columns, screen, shuffled_answers
from spu_common.task import load_answers, load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=Path("environment/tasks"))
    parser.add_argument("--shuffles", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    flagged = old_flagged = undecided = controls = 0
    flips = []
    exact_time = sampled_time = screen_time = 0.0
    differences = []
    print("task | threshold exact (sampled) | power | 80% from | verdict | p [interval] | seeds")
    for task_dir in sorted(args.tasks.glob("*/task")):
        task, answers = load_task(task_dir), load_answers(task_dir.parent / "answers.json")
        start = time.perf_counter()
        chance = chance_threshold(task, answers)
        exact_time += time.perf_counter() - start
        start = time.perf_counter()
        float(np.quantile(random_scores(task, answers), 0.95))
        sampled_time += time.perf_counter() - start
        threshold = chance["chance_threshold"]
        differences.append(abs(threshold - chance["sampled_threshold"]))
        start = time.perf_counter()
        columns, notes = descriptor_columns(task)
        result = screen(task, answers, threshold, columns=columns, notes=notes)
        screen_time += time.perf_counter() - start
        verdicts = {
            screen(task, answers, seed=s, columns=columns, notes=notes)["prior_verdict"]
            for s in range(args.seeds)
        }
        if {"prior-solvable", "not-prior-solvable"} <= verdicts:
            flips.append(task.task_id)
        for s in range(args.shuffles):
            control = shuffled_answers(task, answers, 10_000 + s)
            got = screen(task, control, threshold, seed=s, columns=columns, notes=notes)
            flagged += got["prior_verdict"] == "prior-solvable"
            undecided += got["prior_verdict"] == "undecided"
            old_flagged += bool(got["best"] and got["best"]["expected_score"] >= threshold)
            controls += 1
        low, high = result["prior_p_interval"] or (float("nan"), float("nan"))
        print(
            f"{task.task_id} | {threshold:.3f} ({chance['sampled_threshold']:.3f}) | {chance['power']:.2f} | "
            f"{chance['effect_for_80pct_power']:+.3f} | {result['prior_verdict']} | "
            f"{result['prior_p_value'] or 0:.3f} [{low:.3f}, {high:.3f}] | {'/'.join(sorted(verdicts))}"
        )
    print(
        f"\nshuffled controls: {flagged}/{controls} prior-solvable = {flagged / controls:.3f} "
        f"({undecided} undecided); the old rule flags {old_flagged}/{controls} = "
        f"{old_flagged / controls:.3f} ({old_flagged / max(flagged, 1):.2f}x)"
    )
    print(f"seed flips over {args.seeds} seeds: {len(flips)} {flips}")
    print(
        f"exact vs sampled threshold: largest difference {max(differences):.4f}, "
        f"mean {np.mean(differences):.4f}"
    )
    print(
        f"time: exact threshold and power {exact_time:.2f} s vs 4,000-draw threshold {sampled_time:.2f} s "
        f"({exact_time / sampled_time:.1f}x); screens with the family-wise test {screen_time:.2f} s"
    )


if __name__ == "__main__":
    main()
