"""``spu report RUNS_DIR``: grade every run, then statistics across configurations, as markdown and PNG.

Runs directory layout (see ``docs/environment.md``)::

    RUNS_DIR/<configuration>/<task_id>/rankings.json            one run
    RUNS_DIR/<configuration>/<task_id>/<run>/rankings.json      repeated runs (any sub-directory names)

A run directory without ``rankings.json`` is a run without a file. An optional ``outcome.json`` in a run
directory (``{"outcome": "refusal"}``) marks a refusal, which is excluded from the scored mean even when
it left a file. Runs are found by :func:`environment.runs.find_runs` (directories whose names start with
``.`` or ``_`` are skipped). Tasks and answers (:func:`environment.runs.load_tasks_and_answers`): the demo
tasks and answers, those a ``spu batch`` into RUNS_DIR ran (``RUNS_DIR/_tasks``, the answers its
``_batch`` records name), then ``--tasks`` and ``--answers`` (found by :mod:`environment.finder`'s rules,
answers matched by their ``task_id``).

Per run: the strict score (the official one; a missing file, or a file the strict grader rejects, a
schema departure anywhere included, scores -1), and the score after recovering the five schema
departures, computed only for rejected files. A run is *scored* when the strict grader accepts its file
or recovery does, and it is not a refusal; its scored value is the strict score, or the recovered one
for a recovered file. A configuration's task score is the mean over its scored runs of that task.

Above chance is decided per scored run against its task's chance threshold (the threshold is for one
run: the mean of several runs of a random model beats it far less often than 5%), then summarised per
configuration as the share of scored runs above chance and the share of scored tasks where the majority
(more than half) of the scored runs are above, each with a Wilson 95% interval. Repeated runs also give
the pooled within-task standard deviation (paper §3.6).
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from environment.chance import chance_threshold
from environment.grading import grade
from environment.runs import find_runs, load_tasks_and_answers, read_json
from environment.statistics import (
    BOOTSTRAP_RESAMPLES,
    adjusted_means,
    bootstrap_intervals,
    design_connected,
    paired_comparisons,
    pooled_sd_interval,
    pooled_within_sd,
    raw_means,
    wilson_interval,
)
from spu_common.outputs import claim_folder
from spu_common.task import Answers, Task, TaskError, check_answers


@dataclass
class RunRecord:
    """One run. ``strict_score``: the official score; ``recovered_score``: after recovery (rejected files
    only, else the strict score); ``rejected``: the strict grader rejected the file; ``recovered``: it was
    rejected and recovery made it acceptable; ``score``: the value scored statistics use (None when the
    run is not scored); ``above_chance``: ``score`` above the task's chance threshold (None when not
    scored)."""

    configuration: str
    task_id: str
    run: str
    has_file: bool
    outcome: str | None
    strict_score: float
    recovered_score: float
    scored: bool
    rejected: bool = False
    recovered: bool = False
    score: float | None = None
    above_chance: bool | None = None
    departures: list[str] = field(default_factory=list)
    file_errors: list[str] = field(default_factory=list)


def collect_runs(
    runs_dir: Path, tasks: dict[str, Task], answers: dict[str, Answers]
) -> tuple[list[RunRecord], list[str]]:
    """Grade every run under ``runs_dir`` (found by :func:`environment.runs.find_runs`); return the
    records and warnings about skipped directories."""
    records: list[RunRecord] = []
    warnings: list[str] = []
    for run in find_runs(runs_dir):
        config, task_id = run.configuration, run.task_folder
        if config is None or task_id is None:
            warnings.append(f"{run.label}: not in RUNS_DIR/<configuration>/<task_id>/; skipped")
            continue
        if task_id not in tasks or task_id not in answers:
            warning = f"{config}/{task_id}: no task or answers with this id; skipped"
            if warning not in warnings:
                warnings.append(warning)
            continue
        records.append(
            _grade_run(run.path, config, task_id, run.name, tasks[task_id], answers[task_id], warnings)
        )
    return records, warnings


def _grade_run(
    run_dir: Path, config: str, task_id: str, run_name: str, task: Task, ans: Answers, warnings: list[str]
) -> RunRecord:
    outcome = None
    outcome_path = run_dir / "outcome.json"
    if outcome_path.is_file():
        data, _ = read_json(outcome_path)
        if isinstance(data, dict):
            outcome = str(data.get("outcome"))
        else:
            warnings.append(f"{outcome_path}: unreadable outcome.json; ignored")
    path = run_dir / "rankings.json"
    if not path.is_file():
        return RunRecord(
            config, task_id, run_name, False, outcome, -1.0, -1.0, False, file_errors=["no rankings.json"]
        )
    result = grade(path, task, ans)
    scored = result.scored and outcome != "refusal"
    return RunRecord(
        config,
        task_id,
        run_name,
        True,
        outcome,
        result.score,
        result.recovered_score,
        scored,
        rejected=result.rejected,
        recovered=bool(result.rejected and result.recovery_accepted),
        score=result.scored_value if scored else None,
        departures=result.departures,
        file_errors=result.file_errors,
    )


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "\u2013"
    return f"{value:.{digits}f}"


def _share(successes: int, trials: int) -> dict[str, Any]:
    low, high = wilson_interval(successes, trials)
    return {
        "count": successes,
        "of": trials,
        "share": successes / trials if trials else None,
        "wilson_ci": [low, high] if trials else None,
    }


def _chance_by_task(
    task_ids: list[str], tasks: dict[str, Task], answers: dict[str, Answers], *, draws: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Chance threshold, attainable maximum, presented-order score and size of each task."""
    chance = {}
    for task_id in task_ids:
        check_answers(tasks[task_id], answers[task_id])
        result = chance_threshold(tasks[task_id], answers[task_id], draws=draws, seed=seed)
        chance[task_id] = {
            k: result[k]
            for k in ("chance_threshold", "chance_method", "attainable_max", "presented_order_score")
        }
        chance[task_id]["n_experiments"] = tasks[task_id].n_experiments
    return chance


def _cell_means(
    cell_runs: dict[tuple[str, str], list[RunRecord]], task_ids: list[str], configs: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task (rows) and configuration (columns): the mean scored value (NaN when none is scored), the
    mean strict score and the mean recovered score (-1 where there is no run)."""
    scores = np.full((len(task_ids), len(configs)), np.nan)
    strict = np.full((len(task_ids), len(configs)), -1.0)
    recovered = np.full((len(task_ids), len(configs)), -1.0)
    for ti, task_id in enumerate(task_ids):
        for ci, config in enumerate(configs):
            runs = cell_runs.get((task_id, config), [])
            scored = [r.score for r in runs if r.scored and r.score is not None]
            if scored:
                scores[ti, ci] = float(np.mean(scored))
            if runs:
                strict[ti, ci] = float(np.mean([r.strict_score for r in runs]))
                recovered[ti, ci] = float(np.mean([r.recovered_score for r in runs]))
    return scores, strict, recovered


def _configuration_row(
    ci: int,
    config: str,
    records: list[RunRecord],
    cell_runs: dict[tuple[str, str], list[RunRecord]],
    task_ids: list[str],
    scores: np.ndarray,
    means: dict[str, Any],
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """One configuration's row of :func:`summarize` (column ``ci`` of the score matrix), its ``means``
    (raw and adjusted with their intervals, at -1 and after recovery) among the counts."""
    runs = [r for r in records if r.configuration == config]
    scored_runs = [r for r in runs if r.scored]
    scored_tasks = [task_ids[ti] for ti in range(len(task_ids)) if not math.isnan(scores[ti, ci])]
    majority_above = []
    repeats = []
    for task_id in scored_tasks:
        task_scored = [r for r in cell_runs[(task_id, config)] if r.scored]
        if 2 * sum(1 for r in task_scored if r.above_chance) > len(task_scored):
            majority_above.append(task_id)
        repeats.append([r.score for r in task_scored])
    runs_above = sum(1 for r in scored_runs if r.above_chance)
    within = pooled_within_sd(repeats)
    return {
        "configuration": config,
        "runs": len(runs),
        "scored_runs": len(scored_runs),
        "scored_tasks": len(scored_tasks),
        "coverage": len(scored_tasks) / len(task_ids) if task_ids else 0.0,
        **means,
        "above_chance": len(majority_above),
        "above_chance_runs": _share(runs_above, len(scored_runs)),
        "above_chance_tasks": _share(len(majority_above), len(scored_tasks)),
        "within_task_sd": within["sd"],
        "within_task_sd_ci": list(pooled_sd_interval(repeats, n_boot=n_boot, seed=seed)),
        "within_task_sd_df": within["df"],
        "tasks_with_repeats": within["tasks"],
        "median_task_sd": within["median_task_sd"],
        "rejected_runs": sum(1 for r in runs if r.rejected),
        "recovered_runs": sum(1 for r in runs if r.recovered),
        "runs_without_file": sum(1 for r in runs if not r.has_file),
        "refusals": sum(1 for r in runs if r.outcome == "refusal"),
    }


def summarize(
    records: list[RunRecord],
    tasks: dict[str, Task],
    answers: dict[str, Answers],
    *,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    draws: int = 4000,
) -> dict[str, Any]:
    """All statistics of the report as one JSON-ready dict (sets ``above_chance`` on the records)."""
    configs = sorted({r.configuration for r in records})
    task_ids = sorted({r.task_id for r in records})
    chance = _chance_by_task(task_ids, tasks, answers, draws=draws, seed=seed)
    for record in records:
        if record.scored and record.score is not None:
            record.above_chance = bool(record.score > chance[record.task_id]["chance_threshold"])
    cell_runs: dict[tuple[str, str], list[RunRecord]] = {}
    for record in records:
        cell_runs.setdefault((record.task_id, record.configuration), []).append(record)
    scores, strict, recovered = _cell_means(cell_runs, task_ids, configs)
    raw = raw_means(scores) if configs else np.array([])
    connected = design_connected(scores) if configs else True
    adjusted = adjusted_means(scores) if configs and connected else np.full(len(configs), np.nan)
    intervals = bootstrap_intervals(scores, n_boot=n_boot, seed=seed) if configs and task_ids else None
    rows = []
    for ci, config in enumerate(configs):
        means = {
            "raw_mean": float(raw[ci]),
            "raw_ci": intervals["raw"][ci].tolist() if intervals else None,
            "adjusted_mean": float(adjusted[ci]),
            "adjusted_ci": intervals["adjusted"][ci].tolist() if intervals and connected else None,
            "mean_at_minus_one": float(strict[:, ci].mean()),
            "mean_after_recovery": float(recovered[:, ci].mean()),
        }
        rows.append(_configuration_row(ci, config, records, cell_runs, task_ids, scores, means, n_boot, seed))
    return {
        "configurations": rows,
        "tasks": [
            {
                "task_id": t,
                **chance[t],
                "scores": {c: _nan_to_none(scores[i, j]) for j, c in enumerate(configs)},
            }
            for i, t in enumerate(task_ids)
        ],
        "paired": paired_comparisons(scores, configs) if len(configs) > 1 else [],
        "design_connected": connected,
        "bootstrap": {"resamples": n_boot, "seed": seed},
        "chance": {
            "draws": draws,
            "seed": seed,
            "methods": dict(sorted(Counter(chance[t]["chance_method"] for t in task_ids).items())),
        },
    }


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _ci(ci: list[float] | None) -> str:
    if not ci or any(v is None or math.isnan(v) for v in ci):
        return ""
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def _share_text(share: dict[str, Any] | None) -> str:
    if not share or not share["of"]:
        return "\u2013"
    low, high = share["wilson_ci"]
    return f"{share['count']}/{share['of']} ({share['share']:.0%}) [{low:.0%}, {high:.0%}]"


#: the end of report.md: the figures and what the columns mean
PLOTS_AND_DEFINITIONS = [
    "",
    "## Plots",
    "",
    "![Scores against chance thresholds](scores_vs_chance.png)",
    "",
    "![Configuration means](configuration_means.png)",
    "",
    "## Definitions",
    "",
    (
        "- *Scored*: a run whose rankings.json the strict grader accepts, or whose group orders were "
        "recovered from one of the five documented schema departures, and that is not a refusal. A "
        "configuration's task score is the mean of its scored runs on that task."
    ),
    (
        "- *Mean at -1 (strict)*: the official score over all tasks; a missing file, or one the strict "
        "grader rejects (any schema departure), scores -1. *After recovery*: the same with recovered "
        "files scored. *Rejected*: files the strict grader rejected; *recovered*: those of them recovery "
        "made acceptable."
    ),
    "- *Task-adjusted mean*: alpha_c + mean(mu_t) from the additive model y_tc = mu_t + alpha_c.",
    (
        "- *Above chance*: decided per scored run against its task's chance threshold (a threshold for "
        "one run; a mean over repeats would beat it far less often than 5% under random ranking)."
    ),
]


def _paired_lines(summary: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if summary["paired"]:
        lines += [
            "",
            "## Paired comparisons",
            "",
            (
                "Mean difference (A - B) on the tasks scored for both; two-sided Wilcoxon signed-rank test, "
                "Holm correction over all pairs."
            ),
            "",
            "| A | B | shared tasks | mean difference | p | Holm p |",
            "|---|---|---|---|---|---|",
        ]
        for row in summary["paired"]:
            lines.append(
                f"| {row['a']} | {row['b']} | {row['shared_tasks']} | {_fmt(row['mean_difference'])} | "
                f"{_fmt(row['p'], 4)} | {_fmt(row['p_holm'], 4)} |"
            )
    return lines


def _task_lines(summary: dict[str, Any]) -> list[str]:
    configs = [row["configuration"] for row in summary["configurations"]]
    lines = [
        "",
        "## Tasks",
        "",
        "| task | experiments | chance threshold | attainable max | presented order | "
        + " | ".join(configs)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(configs),
    ]
    for task in summary["tasks"]:
        cells = " | ".join(_fmt(task["scores"][c]) for c in configs)
        lines.append(
            f"| {task['task_id']} | {task['n_experiments']} | "
            f"{_fmt(task['chance_threshold'])} ({task['chance_method']}) | "
            f"{_fmt(task['attainable_max'])} | {_fmt(task['presented_order_score'])} | {cells} |"
        )
    return lines


def _chance_sentence(chance: dict[str, Any]) -> str:
    """How the chance thresholds of the table were found: exact (every order counted) or sampled."""
    methods = chance.get("methods", {})
    parts = []
    if methods.get("exact"):
        parts.append(
            f"exact for {methods['exact']} task{'s' if methods['exact'] != 1 else ''} (every order counted)"
        )
    if methods.get("sampled"):
        parts.append(
            f"the 95th percentile of {chance['draws']} random valid submissions for {methods['sampled']} "
            f"task{'s' if methods['sampled'] != 1 else ''}"
        )
    return "Chance thresholds (95th percentile of random valid submissions): " + "; ".join(parts) + "."


def render_markdown(summary: dict[str, Any], runs_dir: Path, warnings: list[str]) -> str:
    lines = [
        "# SPU run report",
        "",
        (
            f"Runs: `{runs_dir.name}`; {len(summary['configurations'])} configurations, "
            f"{len(summary['tasks'])} tasks. Intervals: 95% percentile bootstrap over tasks "
            f"({summary['bootstrap']['resamples']} resamples). " + _chance_sentence(summary["chance"])
        ),
        "",
        "## Configurations",
        "",
        (
            "| configuration | scored tasks | coverage | raw mean [95% CI] | task-adjusted mean [95% CI] "
            "| mean at -1 (strict) | after recovery | rejected | recovered | no file | refusals |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary["configurations"]:
        lines.append(
            f"| {row['configuration']} | {row['scored_tasks']} | {row['coverage']:.0%} | "
            f"{_fmt(row['raw_mean'])}{_ci(row['raw_ci'])} | "
            f"{_fmt(row['adjusted_mean'])}{_ci(row['adjusted_ci'])} | "
            f"{_fmt(row['mean_at_minus_one'])} | {_fmt(row['mean_after_recovery'])} | "
            f"{row['rejected_runs']} | {row['recovered_runs']} | {row['runs_without_file']} | "
            f"{row['refusals']} |"
        )
    lines += [
        "",
        "## Above chance and run-to-run variation",
        "",
        (
            "Each scored run is compared with its task's chance threshold. Runs: share of scored runs above "
            "chance; tasks: share of scored tasks where more than half of the scored runs are above. "
            "Intervals: Wilson 95%. Within-task SD: pooled over tasks with at least two scored runs, with "
            "a 95% bootstrap interval over those tasks."
        ),
        "",
        (
            "| configuration | runs above chance [95% CI] | tasks above chance [95% CI] "
            "| within-task SD [95% CI] | tasks with repeats | median task SD |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for row in summary["configurations"]:
        lines.append(
            f"| {row['configuration']} | {_share_text(row['above_chance_runs'])} | "
            f"{_share_text(row['above_chance_tasks'])} | "
            f"{_fmt(row['within_task_sd'])}{_ci(row['within_task_sd_ci'])} | {row['tasks_with_repeats']} | "
            f"{_fmt(row['median_task_sd'])} |"
        )
    if not summary["design_connected"]:
        lines += [
            "",
            "The scored tasks do not link every configuration, so task-adjusted means are not defined.",
        ]
    lines += _paired_lines(summary) + _task_lines(summary) + PLOTS_AND_DEFINITIONS
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``scores_vs_chance.png`` and ``configuration_means.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted(summary["tasks"], key=lambda t: t["chance_threshold"])
    configs = [row["configuration"] for row in summary["configurations"]]
    paths = []
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(tasks) + 3), 4.5))
    x = np.arange(len(tasks))
    ax.plot(x, [t["chance_threshold"] for t in tasks], "k_", markersize=18, label="chance threshold")
    ax.plot(x, [t["attainable_max"] for t in tasks], "_", color="0.6", markersize=18, label="attainable max")
    markers = "osD^v<>pXh*"
    for i, config in enumerate(configs):
        ys = [t["scores"][config] for t in tasks]
        ax.scatter(
            x + (i - (len(configs) - 1) / 2) * 0.08,
            [np.nan if y is None else y for y in ys],
            marker=markers[i % len(markers)],
            label=config,
            zorder=3,
        )
    ax.axhline(0, color="0.85", linewidth=0.8)
    ax.set_xticks(x, [t["task_id"] for t in tasks], rotation=45, ha="right", fontsize=8)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("task score (Spearman, weighted)")
    ax.set_title("Scores against chance thresholds")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    paths.append(out_dir / "scores_vs_chance.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(configs) + 1.8))
    y = np.arange(len(configs))
    for offset, key, label in ((-0.15, "raw", "raw mean"), (0.15, "adjusted", "task-adjusted mean")):
        means = np.array([row[f"{key}_mean"] for row in summary["configurations"]], dtype=float)
        cis = [row[f"{key}_ci"] for row in summary["configurations"]]
        low = np.array(
            [means[i] - c[0] if c and c[0] is not None else 0.0 for i, c in enumerate(cis)], dtype=float
        )
        high = np.array(
            [c[1] - means[i] if c and c[1] is not None else 0.0 for i, c in enumerate(cis)], dtype=float
        )
        ax.errorbar(
            means, y + offset, xerr=[np.nan_to_num(low), np.nan_to_num(high)], fmt="o", capsize=3, label=label
        )
    ax.set_yticks(y, configs)
    ax.axvline(0, color="0.85", linewidth=0.8)
    ax.set_xlabel("mean task score with 95% bootstrap interval")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out_dir / "configuration_means.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def build_report(
    runs_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    tasks_dir: str | Path | None = None,
    answers: str | Path | None = None,
    n_boot: int | None = None,
    seed: int = 0,
    draws: int = 4000,
    force: bool = False,
) -> dict[str, Any]:
    """Grade all runs, compute the statistics and write report.md, summary.json, runs.csv and two PNGs.

    ``out_dir`` defaults to ``RUNS_DIR/_report`` (skipped when the runs are scanned again); it is written
    under the output rule of :mod:`spu_common.outputs` (an earlier report there is replaced; a folder this
    command did not write only with ``force``). ``n_boot``: default
    :data:`~environment.statistics.BOOTSTRAP_RESAMPLES`.
    """
    runs = Path(runs_dir)
    if not runs.is_dir():
        raise TaskError(f"runs directory {runs} does not exist")
    out = Path(out_dir) if out_dir is not None else runs / "_report"
    tasks, found_answers, notes = load_tasks_and_answers(
        runs, Path(tasks_dir) if tasks_dir else None, Path(answers) if answers else None
    )
    records, warnings = collect_runs(runs, tasks, found_answers)
    warnings = notes + warnings
    if not records:
        raise TaskError(
            f"no runs found under {runs} (layout: RUNS_DIR/<configuration>/<task_id>/rankings.json)"
        )
    n_boot = BOOTSTRAP_RESAMPLES if n_boot is None else n_boot
    summary = _clean(summarize(records, tasks, found_answers, n_boot=n_boot, seed=seed, draws=draws))
    summary["warnings"] = warnings
    given = [Path(p) for p in (tasks_dir, answers) if p is not None]
    claim_folder(out, "report", force=force, inputs=[runs, *given])
    (out / "report.md").write_text(render_markdown(summary, runs, warnings), encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with open(out / "runs.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(records[0]).keys()), lineterminator="\n")
        writer.writeheader()
        for record in records:
            row = asdict(record)
            row["departures"] = "; ".join(row["departures"])
            row["file_errors"] = "; ".join(row["file_errors"])
            writer.writerow(row)
    plots = plot(summary, out)
    summary["files"] = [
        str(out / "report.md"),
        str(out / "summary.json"),
        str(out / "runs.csv"),
        *map(str, plots),
    ]
    return summary
