"""How the benchmark's statistical rules behave on simulated data: the figures quoted in the docs.

1. Above chance per run: for synthetic tasks of 4 to 60 experiments, the share of random runs above the
   task's chance threshold (the rule of `spu report`, expected about 5%), against the share of means of
   three random runs above the same threshold (the old rule, far below 5%).
2. The honest-noise control of `spu contamination audit`: simulated cells of ESOL-like labels (normal,
   mean -3, SD 2, three figures) predicted by honest models of several error SDs and by a model that
   copies 5% of labels; per kind, how many cells are flagged, on R12 alone, and beyond the control.

    .venv/bin/python bench/scoring_rules.py [--runs 3000] [--cells 30] [--items 300]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from environment.chance import chance_threshold, random_scores
from environment.contamination.audit import Prediction, run_audit
from environment.contamination.digits import format_figures
from environment.contamination.simulate import simulated_labels
from spu_common.task import load_answers, load_task

TASK_SHAPES = [(4,), (5,), (6,), (8,), (5, 5), (10,), (7, 8), (15,), (20, 20), (60,)]


def build_task(root: Path, task_id: str, sizes: tuple[int, ...], rng: np.random.Generator):
    task_dir = root / task_id / "task"
    task_dir.mkdir(parents=True)
    groups = {f"g{j}": [f"{task_id}g{j}e{i}" for i in range(n)] for j, n in enumerate(sizes)}
    contract = {
        "task_id": task_id,
        "task_version": "1",
        "groups": [{"group_id": g, "experiment_ids": ids} for g, ids in groups.items()],
    }
    (task_dir / "contract.json").write_text(json.dumps(contract))
    (task_dir / "instruction.md").write_text("synthetic task\n")
    rows = ["experiment_id,group_id"] + [f"{e},{g}" for g, ids in groups.items() for e in ids]
    (task_dir / "targets.csv").write_text("\n".join(rows) + "\n")
    answers = {
        "task_id": task_id,
        "task_version": "1",
        "groups": [
            {
                "group_id": g,
                "values": {e: float(v) for e, v in zip(ids, rng.normal(size=len(ids)), strict=True)},
            }
            for g, ids in groups.items()
        ],
    }
    (root / task_id / "answers.json").write_text(json.dumps(answers))
    return load_task(task_dir), load_answers(root / task_id / "answers.json")


def above_chance(runs: int) -> None:
    rng = np.random.default_rng(0)
    print("1. random runs above the single-run chance threshold (exact where countable, else 4,000 draws)")
    print(f"{'experiments':>12} {'threshold':>10} {'per run':>9} {'mean of 3':>10}")
    singles, means = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k, sizes in enumerate(TASK_SHAPES):
            task, answers = build_task(Path(tmp), f"t{k}", sizes, rng)
            threshold = chance_threshold(task, answers, draws=4000, seed=0)["chance_threshold"]
            scores = random_scores(task, answers, draws=3 * runs, seed=1000 + k)
            single = float(np.mean(scores > threshold))
            mean3 = float(np.mean(scores.reshape(runs, 3).mean(axis=1) > threshold))
            singles.append(single)
            means.append(mean3)
            print(f"{sum(sizes):>12} {threshold:>10.3f} {single:>9.2%} {mean3:>10.2%}")
    print(f"{'all tasks':>12} {'':>10} {np.mean(singles):>9.2%} {np.mean(means):>10.2%}")
    print("   ratio (per run / mean of 3): " + f"{np.mean(singles) / max(np.mean(means), 1e-9):.1f}")


def honest_control(cells: int, items: int) -> None:
    rng = np.random.default_rng(5)
    kinds = [("honest SD 0.05", 0.05, 0.0), ("honest SD 0.1", 0.1, 0.0), ("honest SD 0.2", 0.2, 0.0)]
    kinds += [("honest SD 0.4", 0.4, 0.0), ("copies 5%, SD 0.2", 0.2, 0.05)]
    print(f"\n2. honest-noise control, {cells} cells of {items} labels per kind, 200 simulations per cell")
    print(f"{'model':>20} {'flagged':>8} {'R12 alone':>10} {'beyond honest':>14}")
    for name, noise, share in kinds:
        rows = []
        for c in range(cells):
            labels = simulated_labels(items, rng)
            for i, y in enumerate(labels):
                copied = rng.random() < share
                prediction = y if copied else format_figures(float(y) + float(rng.normal(0.0, noise)))
                rows.append(Prediction(f"m{c}", f"b{c}", f"{i:05d}", prediction, y))
        result = run_audit(rows, seed=1, honest_sims=200)
        beyond = sum(1 for cell in result.cells if cell.beyond_honest)
        print(f"{name:>20} {len(result.flagged):>8} {len(result.r12_only):>10} {beyond:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000, help="random runs of three per task")
    parser.add_argument("--cells", type=int, default=30, help="simulated audit cells per kind")
    parser.add_argument("--items", type=int, default=300, help="labels per audit cell")
    args = parser.parse_args()
    above_chance(args.runs)
    honest_control(args.cells, args.items)


if __name__ == "__main__":
    main()
