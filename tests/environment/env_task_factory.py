"""Builds small task directories with answers for the environment tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any


def write_task(
    root: Path,
    groups: dict[str, dict[str, float]],
    *,
    task_id: str = "t-demo",
    version: str = "1",
    weights: dict[str, float] | None = None,
    conditions: dict[str, dict[str, Any]] | None = None,
) -> tuple[Path, Path]:
    """Write a task directory ``root/task`` and ``root/answers.json`` from {group: {experiment: value}}."""
    task_dir = root / "task"
    task_dir.mkdir(parents=True)
    contract = {
        "task_id": task_id,
        "task_version": version,
        "title": "test task",
        "groups": [
            {
                "group_id": g,
                "endpoint": "value",
                **({"weight": weights[g]} if weights else {}),
                "experiment_ids": list(values),
            }
            for g, values in groups.items()
        ],
    }
    (task_dir / "contract.json").write_text(json.dumps(contract))
    (task_dir / "instruction.md").write_text("Rank the experiments.\n")
    columns = ["experiment_id", "group_id", *sorted({k for c in (conditions or {}).values() for k in c})]
    with open(task_dir / "targets.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for g, values in groups.items():
            for e in values:
                writer.writerow({"experiment_id": e, "group_id": g, **(conditions or {}).get(e, {})})
    answers = {
        "task_id": task_id,
        "task_version": version,
        "groups": [{"group_id": g, "values": values} for g, values in groups.items()],
    }
    (root / "answers.json").write_text(json.dumps(answers))
    return task_dir, root / "answers.json"
