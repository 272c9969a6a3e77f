"""`spu analyze` speed on synthetic reference-agent runs of a demo task.

Writes RUNS runs of CALLS tool calls each (a mix of reading, search, code, domain tools and drafts), then
prints the time of the whole analysis (tables, summary, both plots) against a baseline measured in the
same run: only parsing every trajectory.jsonl with json.loads, line by line.

    .venv/bin/python bench/analyze_runs.py [--runs 100] [--calls 300]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "environment"))

from analysis_runs import write_jsonl_run

from environment.analysis.analyze import analyze
from environment.demo_tasks import demo_answers_path, demo_task_dir
from environment.runs import find_runs
from spu_common.task import load_answers, load_task


def make_runs(root: Path, n_runs: int, n_calls: int) -> None:
    task = load_task(demo_task_dir("aromatic-acidity"))
    rng = random.Random(0)
    for r in range(n_runs):
        calls = []
        for i in range(n_calls):
            kind = rng.random()
            if i % 50 == 49:
                orders = {
                    g.group_id: rng.sample(g.experiment_ids, len(g.experiment_ids)) for g in task.groups
                }
                calls.append(
                    (
                        "submit_rankings",
                        {"rankings": [{"group_id": g, "order": o} for g, o in orders.items()]},
                    )
                )
            elif kind < 0.2:
                calls.append(("web_search", {"query": f"pKa substituted benzoic acid {i}"}, "x" * 2000))
            elif kind < 0.5:
                code = "import numpy as np\nrng = np.random.default_rng(0)\n" + "x = 1\n" * 40
                calls.append(("python", {"code": code}, "y" * 1000))
            elif kind < 0.7:
                calls.append(
                    (
                        "chem_descriptors",
                        {"molecules": ["CCO"]},
                        json.dumps({"provenance": {"device": "cpu"}}),
                    )
                )
            else:
                calls.append(("read_file", {"path": "targets.csv"}, "z" * 1500))
        final = {g.group_id: list(g.experiment_ids) for g in task.groups}
        write_jsonl_run(root / "cfg" / task.task_id / f"r{r:04d}", task.task_id, calls, final=final)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    task = load_task(demo_task_dir("aromatic-acidity"))
    answers = load_answers(demo_answers_path("aromatic-acidity"))
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        make_runs(runs, args.runs, args.calls)
        files = [run.trajectory() for run in find_runs(runs)]
        size = sum(f.stat().st_size for f in files)
        start = time.perf_counter()
        for path in files:
            for line in path.read_text(encoding="utf-8").splitlines():
                json.loads(line)
        parse_s = time.perf_counter() - start
        start = time.perf_counter()
        analyze(runs, Path(tmp) / "out", {task.task_id: task}, {task.task_id: answers})
        analyze_s = time.perf_counter() - start
    calls = args.runs * args.calls
    print(f"{args.runs} runs x {args.calls} calls ({size / 1e6:.1f} MB of trajectories)")
    print(f"baseline, json.loads of every line: {parse_s:.2f} s")
    print(f"spu analyze (tables, summary, plots): {analyze_s:.2f} s = {calls / analyze_s:,.0f} calls/s")
    print(f"ratio analyze / parse: {analyze_s / parse_s:.1f}")


if __name__ == "__main__":
    main()
