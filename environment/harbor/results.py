"""Read Harbor's job folders: one line on the trials' rewards (``spu harbor results JOBS_DIR``).

``harbor run`` exits 0 even when trials fail, so scripts and CI read the trials' ``result.json`` files
(Harbor's ``TrialResult``: ``verifier_result.rewards``, ``exception_info``) through this module instead.
A trial *failed* when it raised (``exception_info``) or left no reward; ``min_reward`` also counts a
reward below it as a failure.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


class ResultsError(ValueError):
    """The jobs folder cannot be read as asked; the message says what to fix."""


@dataclass(frozen=True)
class Trial:
    trial_name: str
    task_name: str
    agent: str
    reward: float | None
    exception: str | None
    path: str
    seconds: float | None

    @property
    def failed(self) -> bool:
        return self.exception is not None or self.reward is None


def _seconds(result: dict[str, Any]) -> float | None:
    from datetime import datetime

    start, end = result.get("started_at"), result.get("finished_at")
    if not start or not end:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


def read_trials(jobs_dir: str | Path) -> list[Trial]:
    """Every trial result (``result.json`` with a ``trial_name``) at or below ``jobs_dir``."""
    root = Path(jobs_dir)
    if not root.is_dir():
        raise ResultsError(f"{root} is not a folder (give the jobs folder of `harbor run`, e.g. jobs/)")
    trials = []
    for path in sorted(root.rglob("result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(result, dict) or "trial_name" not in result:
            continue
        rewards = (result.get("verifier_result") or {}).get("rewards") or {}
        reward = rewards.get("reward")
        exception = result.get("exception_info") or None
        agent = (result.get("agent_info") or {}).get("name") or ""
        trials.append(
            Trial(
                trial_name=str(result["trial_name"]),
                task_name=str(result.get("task_name") or ""),
                agent=str(agent),
                reward=float(reward) if isinstance(reward, int | float) else None,
                exception=(
                    f"{exception.get('exception_type', 'error')}: {exception.get('exception_message', '')}"[
                        :300
                    ]
                    if isinstance(exception, dict)
                    else None
                ),
                path=str(path.parent),
                seconds=_seconds(result),
            )
        )
    return trials


def summarize(trials: list[Trial], min_reward: float | None = None) -> dict[str, Any]:
    """Counts, mean reward and the failed trials (``min_reward``: rewards below it fail too)."""
    rewards = [t.reward for t in trials if t.reward is not None]
    failed = [t for t in trials if t.failed or (min_reward is not None and t.reward < min_reward)]
    return {
        "trials": len(trials),
        "rewarded": len(rewards),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "min_reward": min(rewards) if rewards else None,
        "max_reward": max(rewards) if rewards else None,
        "failed": [asdict(t) for t in failed],
        "items": [asdict(t) for t in trials],
    }


def summary_line(summary: dict[str, Any]) -> str:
    if not summary["trials"]:
        return "0 trials found"
    parts = [f"{summary['trials']} trials", f"{summary['rewarded']} rewarded"]
    if summary["mean_reward"] is not None:
        parts.append(
            f"reward mean {summary['mean_reward']:.4f} (min {summary['min_reward']:.4f}, "
            f"max {summary['max_reward']:.4f})"
        )
    failed = summary["failed"]
    parts.append(f"{len(failed)} failed")
    line = ", ".join(parts)
    if failed:
        line += ": " + "; ".join(f"{t['trial_name']} ({_why(t)})" for t in failed[:5])
    return line


def _why(trial: dict[str, Any]) -> str:
    if trial["exception"]:
        return trial["exception"]
    return "no reward" if trial["reward"] is None else f"reward {trial['reward']:.4f}"
