"""``spu analyze RUNS_DIR``: what runs did and when, from their trajectories and files (docs/analysis.md).

Runs are found by :func:`environment.runs.find_runs`; those with a trajectory (``trajectory.jsonl``, ATIF
``trajectory.json`` or a Harbor trial's ``agent/trajectory.json``) are analysed. The run's configuration is
the first path component below RUNS_DIR when the run lies two or more levels down
(``RUNS_DIR/<configuration>/<task>/<run>``, the layout of ``spu report``); otherwise the agent and model
named by the run's files. Its task is the ``task_id`` of its submission, of
its trajectory or (Harbor) of ``result.json``'s ``task_name``.

Outputs in ``--out``: ``activities.csv``, ``drafts.csv``, ``runs.csv``, ``agreement.csv``,
``consensus.csv``, ``summary.md``, ``activities.png``, ``drafts.png``.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from environment.analysis.activities import CATEGORIES, classify, gpu_use, method_families
from environment.analysis.drafts import Draft, find_drafts, flipped_pairs
from environment.analysis.errors import AnalysisError
from environment.analysis.monotone import monotone_fields
from environment.analysis.trajectories import ToolCall, Trajectory, read_trajectory
from environment.consensus import consensus
from environment.grading import grade
from environment.runs import RunFolder, find_runs, read_json
from spu_common.jsonfiles import atomic_write_text
from spu_common.outputs import claim_folder
from spu_common.rank_agreement import spearman_of_order, spearman_of_values
from spu_common.submission import validate_submission
from spu_common.task import Answers, Task

SUBMISSION_FILES = ("rankings.json", "agent/rankings.json")
OUTPUT_FILES = (
    "activities.csv",
    "drafts.csv",
    "runs.csv",
    "agreement.csv",
    "consensus.csv",
    "summary.md",
    "activities.png",
    "drafts.png",
)
#: Standard deviation of the Gaussian kernel that smooths activity shares, as a fraction of the run.
SMOOTHING_SD = 0.02


@dataclass
class RunAnalysis:
    run: str
    path: Path
    configuration: str
    task: Task
    trajectory: Trajectory
    labels: list[tuple[ToolCall, str, str, str]]
    drafts: list[Draft]
    draft_scores: list[float | None]
    final_orders: dict[str, list[str]] | None
    final_source: str
    final_score: float | None
    monotone: list[tuple[str, str]] = field(default_factory=list)

    @property
    def first_draft(self) -> Draft | None:
        return next((d for d in self.drafts if d.differs_from_presented), None)

    @property
    def methods(self) -> list[str]:
        found: set[str] = set()
        for call, category, domain, _ in self.labels:
            found |= method_families(call, category, domain)
        return sorted(found)

    @property
    def n_revisions(self) -> int:
        first = self.first_draft
        if first is None:
            return 0
        later = [d for d in self.drafts if d.index >= first.index]
        return sum(1 for a, b in itertools.pairwise(later) if a.orders != b.orders)


def _read_json_quiet(path: Path) -> Any:
    return read_json(path)[0]


def _submission_file(run_dir: Path) -> Path | None:
    for name in SUBMISSION_FILES:
        if (run_dir / name).is_file():
            return run_dir / name
    skip = {"drafts", "spu-work", "work", "scripts", "members"}
    for path in sorted(run_dir.rglob("rankings.json"), key=lambda p: len(p.parts)):
        if not skip.intersection(path.relative_to(run_dir).parts[:-1]):
            return path
    return None


def _harbor_result(run_dir: Path) -> dict[str, Any]:
    data = _read_json_quiet(run_dir / "result.json")
    return data if isinstance(data, dict) else {}


def _harbor_reward(run_dir: Path) -> float | None:
    """The verifier's reward of a Harbor trial (the SPU score), for runs analysed without answers."""
    data = _read_json_quiet(run_dir / "verifier" / "reward.json")
    reward = data.get("reward") if isinstance(data, dict) else None
    return float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else None


def _configuration(run: RunFolder, traj: Trajectory) -> str:
    if run.configuration is not None:
        return run.configuration
    run_dir = run.path
    result = _harbor_result(run_dir)
    info = result.get("agent_info") if isinstance(result.get("agent_info"), dict) else {}
    agent = info.get("name") or traj.agent or "agent"
    model_info = info.get("model_info") if isinstance(info.get("model_info"), dict) else {}
    model = model_info.get("name") or traj.model
    return f"{agent}:{model}" if model else str(agent)


def _task_id(run_dir: Path, submission: Path | None, traj: Trajectory) -> str | None:
    if submission is not None:
        data = _read_json_quiet(submission)
        if isinstance(data, dict) and isinstance(data.get("task_id"), str):
            return data["task_id"]
    if traj.task_id:
        return traj.task_id
    name = _harbor_result(run_dir).get("task_name")
    if isinstance(name, str) and name:
        return name.rsplit("/", 1)[-1]
    return None


def task_score(orders: dict[str, list[str]], task: Task, answers: Answers) -> float:
    """Weighted Spearman of complete orders (every group present)."""
    total = 0.0
    for group in task.groups:
        rho = spearman_of_order(orders[group.group_id], answers.group(group.group_id).values)
        total += group.weight * (0.0 if math.isnan(rho) else rho)
    return total


def analyze_run(
    run: RunFolder, traj_path: Path, tasks: dict[str, Task], answers: dict[str, Answers]
) -> RunAnalysis:
    run_dir = run.path
    traj = read_trajectory(traj_path)
    submission = _submission_file(run_dir)
    task_id = _task_id(run_dir, submission, traj)
    if task_id is None:
        raise AnalysisError(
            "task_unknown",
            f"{run_dir}: no task id in the submission, the trajectory or result.json",
            "Pass runs whose rankings.json or trajectory names the task.",
        )
    if task_id not in tasks:
        raise AnalysisError(
            "task_unknown",
            f"{run_dir}: task {task_id!r} is not among the tasks given",
            "Point --tasks at the directory holding this task (default: the demo tasks).",
        )
    task = tasks[task_id]
    ans = answers.get(task_id)
    drafts = find_drafts(traj, task)
    final_orders = None
    final_source = ""
    final_score = None
    if submission is not None:
        final_source = submission.relative_to(run_dir).as_posix()
        report = validate_submission(submission, task, recover=True)
        if report.valid:
            final_orders = {g: list(o) for g, o in report.orders.items()}
        if ans is not None:
            final_score = grade(submission, task, ans).score
    elif drafts:
        final_source = "last draft in the trajectory"
        final_orders = drafts[-1].orders
        final_score = task_score(final_orders, task, ans) if ans is not None else None
    elif ans is not None:
        final_source = "none"
        final_score = -1.0  # the grader's score for a missing file
    if final_score is None:
        final_score = _harbor_reward(run_dir)
    labels = []
    for call in traj.calls:
        category, domain = classify(call)
        labels.append((call, category, domain, gpu_use(call)))
    return RunAnalysis(
        run=run.label,
        path=run_dir,
        configuration=_configuration(run, traj),
        task=task,
        trajectory=traj,
        labels=labels,
        drafts=drafts,
        draft_scores=[task_score(d.orders, task, ans) if ans is not None else None for d in drafts],
        final_orders=final_orders,
        final_source=final_source,
        final_score=final_score,
        monotone=monotone_fields(task, final_orders) if final_orders else [],
    )


# -- across runs ----------------------------------------------------------------------------------------


def agreement_rows(runs: list[RunAnalysis]) -> list[dict[str, Any]]:
    """Mean pairwise Spearman of submitted orders per task and group, for each pair of configurations."""
    rows = []
    by_task: dict[str, list[RunAnalysis]] = defaultdict(list)
    for run in runs:
        if run.final_orders is not None:
            by_task[run.task.task_id].append(run)
    for task_id in sorted(by_task):
        members = by_task[task_id]
        task = members[0].task
        for group in task.groups:
            pairs: dict[tuple[str, str], list[float]] = defaultdict(list)
            for a, b in itertools.combinations(members, 2):
                oa, ob = a.final_orders[group.group_id], b.final_orders[group.group_id]
                pa = {e: i for i, e in enumerate(oa)}
                pb = {e: i for i, e in enumerate(ob)}
                ids = group.experiment_ids
                rho = spearman_of_values([pa[e] for e in ids], [pb[e] for e in ids])
                key = tuple(sorted((a.configuration, b.configuration)))
                pairs[key].append(rho)
                pairs[("*", "*")].append(rho)
            for (ca, cb), values in sorted(pairs.items()):
                rows.append(
                    {
                        "task": task_id,
                        "group": group.group_id,
                        "config_a": ca,
                        "config_b": cb,
                        "scope": "all" if ca == "*" else ("within" if ca == cb else "between"),
                        "n_pairs": len(values),
                        "mean_spearman": float(np.mean(values)),
                    }
                )
    return rows


def consensus_rows(runs: list[RunAnalysis], answers: dict[str, Answers]) -> list[dict[str, Any]]:
    """Score of the mean-rank consensus minus the mean score of its members, per task: all runs, and each
    configuration with two or more runs on the task."""
    rows = []
    by_task: dict[str, list[RunAnalysis]] = defaultdict(list)
    for run in runs:
        if run.final_orders is not None and run.task.task_id in answers:
            by_task[run.task.task_id].append(run)
    for task_id in sorted(by_task):
        members_all = by_task[task_id]
        task = members_all[0].task
        ans = answers[task_id]
        sets: list[tuple[str, list[RunAnalysis]]] = [("*", members_all)]
        by_config: dict[str, list[RunAnalysis]] = defaultdict(list)
        for run in members_all:
            by_config[run.configuration].append(run)
        sets += [(c, m) for c, m in sorted(by_config.items()) if len(m) >= 2 and len(by_config) > 1]
        for label, members in sets:
            if len(members) < 2:
                continue
            submissions = [
                {
                    "task_id": task.task_id,
                    "task_version": task.task_version,
                    "rankings": [{"group_id": g, "order": o} for g, o in m.final_orders.items()],
                }
                for m in members
            ]
            combined = validate_submission(consensus(submissions, task), task).orders
            cons = task_score(combined, task, ans)
            member_scores = [task_score(m.final_orders, task, ans) for m in members]
            mean_member = float(np.mean(member_scores))
            rows.append(
                {
                    "task": task_id,
                    "members": label,
                    "n_members": len(members),
                    "consensus_score": cons,
                    "mean_member_score": mean_member,
                    "best_member_score": max(member_scores),
                    "consensus_gain": cons - mean_member,
                }
            )
    return rows


# -- writing --------------------------------------------------------------------------------------------


def _fmt(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.10g}"
    if isinstance(value, bool):
        return "1" if value else "0"
    return value


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _fmt(row.get(k)) for k in columns})
    tmp.replace(path)


ACTIVITY_COLUMNS = ["run", "step", "t_norm", "category", "tool", "domain", "is_error", "gpu"]
DRAFT_COLUMNS = [
    "run",
    "draft_index",
    "step",
    "t_norm",
    "score",
    "tool",
    "differs_from_presented",
    "flipped_pairs",
    "score_change",
]
RUN_COLUMNS = [
    "run",
    "task",
    "config",
    "final_score",
    "first_draft_step",
    "first_draft_t_norm",
    "n_revisions",
    "monotone_field",
    "tool_errors",
    "gpu_calls",
    "monotone_direction",
    "gpu_probes",
    "methods",
    "n_drafts",
    "n_steps",
    "n_tool_calls",
    "duration_s",
    "time_basis",
    "format",
    "model",
    "exit_status",
    "final_source",
]
AGREEMENT_COLUMNS = ["task", "group", "config_a", "config_b", "scope", "n_pairs", "mean_spearman"]
CONSENSUS_COLUMNS = [
    "task",
    "members",
    "n_members",
    "consensus_score",
    "mean_member_score",
    "best_member_score",
    "consensus_gain",
]


def activity_rows(runs: list[RunAnalysis]) -> list[dict[str, Any]]:
    return [
        {
            "run": r.run,
            "step": call.step,
            "t_norm": r.trajectory.t_norm(call),
            "category": category,
            "tool": call.name,
            "domain": domain,
            "is_error": call.is_error,
            "gpu": gpu,
        }
        for r in runs
        for call, category, domain, gpu in r.labels
    ]


def draft_rows(runs: list[RunAnalysis]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        previous: Draft | None = None
        previous_score: float | None = None
        for draft, score in zip(r.drafts, r.draft_scores, strict=True):
            rows.append(
                {
                    "run": r.run,
                    "draft_index": draft.index,
                    "step": draft.call.step,
                    "t_norm": r.trajectory.t_norm(draft.call),
                    "score": score,
                    "tool": draft.call.name,
                    "differs_from_presented": draft.differs_from_presented,
                    "flipped_pairs": flipped_pairs(previous.orders, draft.orders) if previous else None,
                    "score_change": (score - previous_score)
                    if (score is not None and previous_score is not None)
                    else None,
                }
            )
            previous, previous_score = draft, score
    return rows


def run_rows(runs: list[RunAnalysis]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        first = r.first_draft
        gpu = [g for *_, g in r.labels]
        rows.append(
            {
                "run": r.run,
                "task": r.task.task_id,
                "config": r.configuration,
                "final_score": r.final_score,
                "first_draft_step": first.call.step if first else None,
                "first_draft_t_norm": r.trajectory.t_norm(first.call) if first else None,
                "n_revisions": r.n_revisions,
                "monotone_field": ";".join(f for f, _ in r.monotone),
                "monotone_direction": ";".join(d for _, d in r.monotone),
                "tool_errors": sum(1 for call, *_ in r.labels if call.is_error),
                "gpu_calls": gpu.count("use"),
                "gpu_probes": gpu.count("probe"),
                "methods": ";".join(r.methods),
                "n_drafts": len(r.drafts),
                "n_steps": r.trajectory.n_steps,
                "n_tool_calls": len(r.labels),
                "duration_s": r.trajectory.duration_s,
                "time_basis": r.trajectory.time_basis,
                "format": r.trajectory.format,
                "model": r.trajectory.model,
                "exit_status": r.trajectory.exit_status,
                "final_source": r.final_source,
            }
        )
    return rows


def activity_shares(runs: list[RunAnalysis], grid: np.ndarray) -> dict[str, np.ndarray]:
    """Share of calls in each category along normalised run time; each run counts equally, every call is a
    Gaussian kernel of s.d. ``SMOOTHING_SD`` (reflected at 0 and 1 so the ends are not thinned)."""
    totals = {c: np.zeros_like(grid) for c in CATEGORIES}
    for r in runs:
        if not r.labels:
            continue
        per_run = {c: np.zeros_like(grid) for c in CATEGORIES}
        for call, category, *_ in r.labels:
            t = r.trajectory.t_norm(call)
            for centre in (t, -t, 2.0 - t):
                per_run[category] += np.exp(-0.5 * ((grid - centre) / SMOOTHING_SD) ** 2)
        norm = sum(per_run.values())
        norm[norm == 0] = 1.0
        for c in CATEGORIES:
            totals[c] += per_run[c] / norm
    total = sum(totals.values())
    total[total == 0] = 1.0
    return {c: totals[c] / total for c in CATEGORIES}


def plot_activities(runs: list[RunAnalysis], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0.0, 1.0, 201)
    shares = activity_shares(runs, grid)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.stackplot(grid * 100, *[shares[c] for c in CATEGORIES], labels=list(CATEGORIES))
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 1)
    ax.set_xlabel("run time (% of each run)")
    ax.set_ylabel("share of tool calls")
    ax.set_title(f"Activities over normalised run time ({len(runs)} runs)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_drafts(runs: list[RunAnalysis], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    configs = sorted({r.configuration for r in runs})
    for i, config in enumerate(configs):
        points = [
            r.trajectory.t_norm(r.first_draft.call) * 100
            for r in runs
            if r.configuration == config and r.first_draft
        ]
        jitter = np.linspace(-0.15, 0.15, len(points)) if len(points) > 1 else np.zeros(len(points))
        left.scatter(points, i + jitter, s=18)
        if points:
            left.plot([np.median(points)] * 2, [i - 0.3, i + 0.3], color="black")
    left.set_yticks(range(len(configs)), configs, fontsize=8)
    left.set_xlim(0, 100)
    left.set_xlabel("first complete draft (% of run)")
    left.set_title("a  First complete draft (bar: median)")
    scored = [r for r in runs if r.drafts and any(s is not None for s in r.draft_scores)]
    for r in scored:
        xs = [r.trajectory.t_norm(d.call) * 100 for d in r.drafts]
        right.plot(xs, r.draft_scores, marker="o", markersize=3, linewidth=1)
        if r.final_score is not None:
            right.scatter([100], [r.final_score], marker="s", s=14, color="black")
    right.set_xlim(0, 102)
    right.set_ylim(-1.05, 1.05)
    right.axhline(0, color="grey", linewidth=0.5)
    right.set_xlabel("run time (%)")
    right.set_ylabel("task score")
    right.set_title("b  Score of each draft (square: final file)" if scored else "b  (no answers given)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(values)) if values else None


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.median(values)) if values else None


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def method_family_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per method family: runs that used it, and their task-adjusted score against the other runs'."""
    scored = [r for r in rows if r["final_score"] is not None]
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        by_task[r["task"]].append(r["final_score"])
    families = sorted({m for r in rows for m in r["methods"].split(";") if m})
    if not families:
        return ["No run used a method family (domain tools or libraries, Monte Carlo sampling)."]
    lines = [
        (
            "Task-adjusted score: a run's score minus the mean score of all runs on its task. "
            "Observational: runs choose their methods."
        ),
        "",
        "| family | runs using it | adjusted score, users | adjusted score, others | difference |",
        "|---|---|---|---|---|",
    ]
    for family in families:
        users = [r for r in rows if family in r["methods"].split(";")]
        adj_users = [r["final_score"] - float(np.mean(by_task[r["task"]])) for r in scored if r in users]
        adj_others = [r["final_score"] - float(np.mean(by_task[r["task"]])) for r in scored if r not in users]
        a, b = _mean(adj_users), _mean(adj_others)
        diff = a - b if a is not None and b is not None else None
        lines.append(f"| {family} | {len(users)} | {_cell(a)} | {_cell(b)} | {_cell(diff)} |")
    return lines


def _configuration_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    by_config: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_config[row["config"]].append(row)
    for config in sorted(by_config):
        group = by_config[config]
        first = [r["first_draft_t_norm"] for r in group if r["first_draft_t_norm"] is not None]
        median_first = _median(first)
        lines.append(
            f"| {config} | {len(group)} | {_cell(_mean([r['final_score'] for r in group]))} | "
            f"{_cell(median_first * 100 if median_first is not None else None, 0)} | {len(first)} | "
            f"{_cell(_mean([float(r['n_revisions']) for r in group]), 1)} | "
            f"{sum(1 for r in group if r['monotone_field'])} | {sum(r['tool_errors'] for r in group)} | "
            f"{sum(1 for r in group if r['gpu_calls'])} |"
        )
    return lines


def _agreement_lines(agreement: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Agreement", ""]
    all_rows = [a for a in agreement if a["scope"] == "all"]
    if all_rows:
        within = [a["mean_spearman"] for a in agreement if a["scope"] == "within"]
        between = [a["mean_spearman"] for a in agreement if a["scope"] == "between"]
        lines.append(
            f"Mean pairwise Spearman of submitted orders over {len(all_rows)} groups: "
            f"{_cell(_mean([a['mean_spearman'] for a in all_rows]))} (within a configuration "
            f"{_cell(_mean(within))}, between configurations {_cell(_mean(between))}); "
            "table: `agreement.csv`."
        )
        scores = _mean([r["final_score"] for r in rows])
        if scores is not None:
            lines.append(
                f"For comparison, the mean score (agreement with the measured order) is {scores:.3f}."
            )
    else:
        lines.append("Fewer than two runs with a valid ranking on any task.")
    return lines


def _consensus_lines(consensus_table: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Consensus", ""]
    if consensus_table:
        lines += [
            "| task | members | n | consensus | mean member | best member | gain |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {c['task']} | {c['members']} | {c['n_members']} | {c['consensus_score']:.3f} | "
            f"{c['mean_member_score']:.3f} | {c['best_member_score']:.3f} | {c['consensus_gain']:+.3f} |"
            for c in consensus_table
        ]
    else:
        lines.append("No task has two scored runs (or no answers were given).")
    return lines


def summary_markdown(
    runs: list[RunAnalysis],
    rows: list[dict[str, Any]],
    agreement: list[dict[str, Any]],
    consensus_table: list[dict[str, Any]],
    skipped: list[str],
    runs_dir: Path,
) -> str:
    lines = [
        "# Analysis of runs",
        "",
        (
            f"{len(runs)} runs of {len({r.task.task_id for r in runs})} tasks by "
            f"{len({r.configuration for r in runs})} configurations, under `{runs_dir.name}`; "
            f"{sum(len(r.labels) for r in runs)} tool calls. Each figure and table is explained in "
            "`docs/analysis.md` of spu-scaffold."
        ),
        "",
        "## Per configuration",
        "",
        (
            "| configuration | runs | mean score | median first draft (% of run) | runs with a draft | "
            "mean revisions | runs following a field | tool errors | runs using the GPU |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _configuration_lines(rows)
    counts: dict[str, int] = defaultdict(int)
    for r in runs:
        for _, category, *_ in r.labels:
            counts[category] += 1
    total_calls = sum(counts.values()) or 1
    lines += [
        "",
        "## Activities",
        "",
        "Share of all tool calls (figure: `activities.png`).",
        "",
        "| activity | calls | share |",
        "|---|---|---|",
    ]
    lines += [f"| {c} | {counts[c]} | {counts[c] / total_calls:.1%} |" for c in CATEGORIES if counts[c]]
    lines += ["", "## Method families and score", ""]
    lines += method_family_lines(rows)
    flagged = [r for r in rows if r["monotone_field"]]
    lines += ["", "## The monotone prior", ""]
    if flagged:
        lines += [
            f"- `{r['run']}` follows `{r['monotone_field']}` ({r['monotone_direction']}); "
            f"score {_cell(r['final_score'])}"
            for r in flagged
        ]
    else:
        lines.append("No final ranking follows a numeric setup field.")
    lines += _agreement_lines(agreement, rows) + _consensus_lines(consensus_table)
    if skipped:
        lines += ["", "## Skipped runs", ""] + [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def analyze(
    runs_dir: Path,
    out: Path,
    tasks: dict[str, Task],
    answers: dict[str, Answers],
    *,
    skip_invalid: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Analyse every run under ``runs_dir``; write the outputs into ``out`` (under the output rule of
    :mod:`spu_common.outputs`: an earlier analysis there is replaced, another folder only with ``force``);
    return a summary dict."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise AnalysisError("runs_dir_missing", f"{runs_dir} is not a directory", "Give the folder of runs.")
    found = [(run, path) for run in find_runs(runs_dir) if (path := run.trajectory()) is not None]
    if not found:
        raise AnalysisError(
            "no_runs",
            f"{runs_dir}: no trajectory.jsonl, trajectory.json or agent/trajectory.json below it",
            "Point RUNS_DIR at run directories of the reference agent or a Harbor job directory.",
        )
    runs: list[RunAnalysis] = []
    skipped: list[str] = []
    for run, traj_path in found:
        try:
            runs.append(analyze_run(run, traj_path, tasks, answers))
        except AnalysisError as exc:
            if not skip_invalid:
                raise
            skipped.append(str(exc))
    claim_folder(out, "analysis", force=force, inputs=[runs_dir])
    rows = run_rows(runs)
    agreement = agreement_rows(runs)
    consensus_table = consensus_rows(runs, answers)
    _write_csv(out / "activities.csv", ACTIVITY_COLUMNS, activity_rows(runs))
    _write_csv(out / "drafts.csv", DRAFT_COLUMNS, draft_rows(runs))
    _write_csv(out / "runs.csv", RUN_COLUMNS, rows)
    _write_csv(out / "agreement.csv", AGREEMENT_COLUMNS, agreement)
    _write_csv(out / "consensus.csv", CONSENSUS_COLUMNS, consensus_table)
    atomic_write_text(
        out / "summary.md", summary_markdown(runs, rows, agreement, consensus_table, skipped, runs_dir)
    )
    plot_activities(runs, out / "activities.png")
    plot_drafts(runs, out / "drafts.png")
    return {
        "runs": len(runs),
        "skipped": skipped,
        "tool_calls": sum(len(r.labels) for r in runs),
        "files": [str(out / name) for name in OUTPUT_FILES],
        "runs_table": [{k: v for k, v in row.items()} for row in rows],
        "consensus": consensus_table,
    }
