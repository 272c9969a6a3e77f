"""Grading and chance-threshold speed on a synthetic 271-experiment single-group task.

Prints grading throughput (submissions/s, through the full validator and grader) and the time of a
4,000-draw chance threshold, each with a baseline measured in the same run: scipy.stats.spearmanr on the
same orders (the correlation alone, no validation) and 4,000 spearmanr calls on random permutations.

    .venv/bin/python bench/grading.py [--submissions 2000] [--draws 4000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from environment.chance import chance_threshold
from environment.grading import grade
from spu_common.task import load_answers, load_task

N_EXPERIMENTS = 271


def build_task(root: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    ids = [f"e{i:04x}" for i in range(N_EXPERIMENTS)]
    values = np.round(rng.normal(50, 15, N_EXPERIMENTS), 1)  # one decimal: some ties, as in real yields
    task_dir = root / "task"
    task_dir.mkdir()
    contract = {
        "task_id": "bench-271",
        "task_version": "1",
        "title": "synthetic",
        "groups": [{"group_id": "g1", "endpoint": "yield (%)", "experiment_ids": ids}],
    }
    (task_dir / "contract.json").write_text(json.dumps(contract))
    (task_dir / "instruction.md").write_text("synthetic benchmark task\n")
    rows = ["experiment_id,group_id,temperature_c"] + [f"{e},g1,{20 + i % 7}" for i, e in enumerate(ids)]
    (task_dir / "targets.csv").write_text("\n".join(rows) + "\n")
    answers = {
        "task_id": "bench-271",
        "task_version": "1",
        "groups": [{"group_id": "g1", "values": dict(zip(ids, values.tolist(), strict=True))}],
    }
    (root / "answers.json").write_text(json.dumps(answers))
    return task_dir, root / "answers.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=4000)
    args = parser.parse_args()
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        task_dir, answers_path = build_task(Path(tmp), rng)
        task, answers = load_task(task_dir), load_answers(answers_path)
        ids = task.groups[0].experiment_ids
        values = answers.group("g1").values
        orders = [list(rng.permutation(ids)) for _ in range(args.submissions)]
        raw = [
            json.dumps(
                {"task_id": "bench-271", "task_version": "1", "rankings": [{"group_id": "g1", "order": o}]}
            ).encode()
            for o in orders
        ]

        start = time.perf_counter()
        scores = [grade(r, task, answers).score for r in raw]
        ours_s = time.perf_counter() - start

        start = time.perf_counter()
        reference = []
        for order in orders:
            position = {e: i for i, e in enumerate(order)}
            reference.append(spearmanr([values[e] for e in ids], [position[e] for e in ids]).statistic)
        scipy_s = time.perf_counter() - start
        worst = float(np.max(np.abs(np.array(scores) - np.array(reference))))

        start = time.perf_counter()
        result = chance_threshold(task, answers, draws=args.draws, seed=0)
        chance_s = time.perf_counter() - start

        start = time.perf_counter()
        measured = [values[e] for e in ids]
        baseline = [spearmanr(measured, rng.permutation(N_EXPERIMENTS)).statistic for _ in range(args.draws)]
        baseline_threshold = float(np.quantile(baseline, 0.95))
        baseline_s = time.perf_counter() - start

    print(f"task: 1 group, {N_EXPERIMENTS} experiments")
    print(
        f"grading: {args.submissions / ours_s:,.0f} submissions/s (parse + validate + grade from bytes); "
        f"scipy.stats.spearmanr alone: {args.submissions / scipy_s:,.0f}/s; ratio {scipy_s / ours_s:.2f}x; "
        f"max |score - scipy| = {worst:.1e}"
    )
    print(
        f"chance threshold ({args.draws} draws): {chance_s * 1000:.1f} ms (threshold "
        f"{result['chance_threshold']:.4f});"
        f" {args.draws} x scipy.stats.spearmanr: {baseline_s * 1000:.1f} ms (threshold "
        f"{baseline_threshold:.4f}); "
        f"speed-up {baseline_s / chance_s:.1f}x"
    )


if __name__ == "__main__":
    main()
