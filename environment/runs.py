"""Run folders and what they hold: the one reader behind ``spu report``, ``spu analyze``, ``spu view`` and
``bench/`` (docs/runs.md).

**Which folders are runs.** A run folder holds at least one of :data:`RUN_FILES` (``trajectory.jsonl``,
``trajectory.json``, ``run.json``, ``rankings.json``, ``drafts/``, or a Harbor trial's
``agent/trajectory.json[l]``). Below ``RUNS_DIR`` the search stops at a run, skips folders whose names
start with ``.`` or ``_`` (``_tasks``, ``_report``, ``_batch``) and goes at most :data:`MAX_DEPTH` levels
down. A folder with no sub-folders two or more levels down (``RUNS_DIR/<configuration>/<task_id>``) is a
run too, one that left no files (``spu report`` scores it -1). In the layout ``spu batch`` and ``spu
report`` use, ``RUNS_DIR/<configuration>/<task_id>[/<run>]``, the first folder names the configuration and
the second the task. With ``confine=True`` (``spu view``) no link below ``RUNS_DIR`` is followed, and the
readers below, given ``root``, read each file once below it with :mod:`spu_common.confined` (no link in
any component, no FIFO waited on, at most :data:`MAX_RUN_FILE_BYTES`).

**Trajectories.** :func:`read_trajectory` reads the reference agent's ``trajectory.jsonl`` or an ATIF
``trajectory.json`` (any agent, through Harbor) into the same records (the JSONL record schema of
docs/runs.md; ATIF steps become ``message``, ``model_turn`` and ``tool_result`` records). Reading never
raises: what is wrong is listed as :class:`Problem` s with a stable code and the line, and what could be
read is kept. Strict callers (``spu analyze``) stop at the first problem; the viewer shows them all.

**What a batch ran.** :func:`load_tasks_and_answers` finds the tasks and answers of a runs directory: the
demo tasks, the copies ``spu batch`` keeps in ``RUNS_DIR/_tasks``, the answers beside the task folders
(or given to ``--answers``) that ``RUNS_DIR/_batch/*.json`` records, then what the user names.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spu_common import confined

#: files (and a folder) whose presence makes a folder a run folder
RUN_FILES = (
    "trajectory.jsonl",
    "trajectory.json",
    "run.json",
    "rankings.json",
    "drafts",
    "agent/trajectory.jsonl",
    "agent/trajectory.json",
)
#: where a run's trajectory lies, in the order they are preferred (the JSONL is the agent's own record)
TRAJECTORY_FILES = ("trajectory.jsonl", "trajectory.json", "agent/trajectory.jsonl", "agent/trajectory.json")
#: how many folder levels below RUNS_DIR are searched for runs
MAX_DEPTH = 6
#: the largest run file read below a confining root (``spu view``): bytes
MAX_RUN_FILE_BYTES = 512 * 2**20


def read_bytes(path: Path, root: Path | None = None) -> bytes:
    """The bytes of a run's file; with ``root``, read once below it (:mod:`spu_common.confined`). Raises
    ``OSError`` (a refusal's message names the path and why, never the content)."""
    if root is None:
        return path.read_bytes()
    try:
        return confined.read_file(path, [root], max_bytes=MAX_RUN_FILE_BYTES, allow_hard_links=True).data
    except confined.Refused as exc:
        raise OSError(exc.message) from None


# -- run folders ----------------------------------------------------------------------------------------


def within(root: Path, path: Path) -> bool:
    """``path`` (links resolved) lies at or under ``root`` (links resolved)."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


def is_run_dir(path: Path) -> bool:
    """``path`` holds one of :data:`RUN_FILES` (by name: a link counts, whether or not it is followed)."""
    return path.is_dir() and any(os.path.lexists(path / name) for name in RUN_FILES)


@dataclass(frozen=True)
class RunFolder:
    """One run folder and where it lies below the runs directory (``parts``: the folder names)."""

    path: Path
    parts: tuple[str, ...]

    @property
    def label(self) -> str:
        return "/".join(self.parts) if self.parts else self.path.name

    @property
    def configuration(self) -> str | None:
        """The first folder below RUNS_DIR, when the run lies two or more levels down."""
        return self.parts[0] if len(self.parts) >= 2 else None

    @property
    def task_folder(self) -> str | None:
        """The second folder below RUNS_DIR (the task id in the layout of ``spu report``)."""
        return self.parts[1] if len(self.parts) >= 2 else None

    @property
    def name(self) -> str:
        """The run's name within its task: the folders below the task folder, or ``1``."""
        return "/".join(self.parts[2:]) or "1"

    @property
    def top(self) -> Path:
        """The runs directory the run was found in (the run folder itself for a lone run)."""
        return self.path.parents[len(self.parts) - 1] if self.parts else self.path

    def trajectory(self, *, root: Path | None = None) -> Path | None:
        """The run's trajectory file (:data:`TRAJECTORY_FILES`, first found), or None."""
        for name in TRAJECTORY_FILES:
            if (self.path / name).is_file() and (root is None or within(root, self.path / name)):
                return self.path / name
        return None


def _visible_subdirs(folder: Path, root: Path | None) -> list[Path]:
    try:  # confined below a root: a link to a folder is not entered
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not (root and p.is_symlink()))
    except OSError:
        return []
    return [p for p in children if not p.name.startswith((".", "_")) and (root is None or within(root, p))]


def find_runs(root: str | Path, *, confine: bool = False) -> list[RunFolder]:
    """Run folders at or under ``root``, sorted by path (module docstring); ``confine``: follow no link
    out of ``root``."""
    root = Path(root)
    limit = root if confine else None
    if is_run_dir(root):
        return [RunFolder(root, ())]
    found: list[RunFolder] = []

    def walk(folder: Path, parts: tuple[str, ...]) -> None:
        if len(parts) >= MAX_DEPTH:
            return
        for child in _visible_subdirs(folder, limit):
            here = (*parts, child.name)
            if is_run_dir(child):
                found.append(RunFolder(child, here))
            elif len(here) >= 2 and not _visible_subdirs(child, limit):
                found.append(RunFolder(child, here))  # a run that left nothing
            else:
                walk(child, here)

    walk(root, ())
    return found


# -- JSON files of a run (run.json, rankings.json, drafts, sources.json, outcome.json) -------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which JSON does not allow")


def read_json(path: Path, root: Path | None = None) -> tuple[Any, Problem | None]:
    """A run's JSON file (``run.json``, ``rankings.json`` ...): its value, or None and what is wrong.

    Strict JSON: ``NaN`` and ``Infinity`` (which Python's parser accepts) and nesting too deep to read are
    problems, as are an empty file, invalid UTF-8 and invalid JSON (code ``file_unreadable``,
    ``file_empty`` or ``file_malformed``). ``root``: read below it (:func:`read_bytes`)."""
    try:
        raw = read_bytes(path, root)
    except OSError as exc:
        return None, Problem("file_unreadable", f"cannot be read: {exc}")
    return json_of(raw)


def json_of(raw: bytes) -> tuple[Any, Problem | None]:
    """The value of a run's JSON file from its bytes, or None and what is wrong (:func:`read_json`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, Problem("file_unreadable", f"cannot be read: {exc}")
    if not text.strip():
        return None, Problem("file_empty", "is empty", hint="the run was probably killed while writing it")
    try:
        return json.loads(text, parse_constant=_no_constant), None
    except ValueError as exc:
        return None, Problem(
            "file_malformed", f"is not valid JSON ({exc})", hint="the file was cut short or edited by hand"
        )
    except RecursionError:
        return None, Problem(
            "file_malformed", "is nested too deeply to be read", hint="is it the run's file?"
        )


# -- trajectories ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """What is wrong in a run's file. ``code``: ``trajectory_unreadable``, ``trajectory_malformed``,
    ``trajectory_truncated``, ``trajectory_empty`` (a trajectory), ``file_unreadable``, ``file_empty``,
    ``file_malformed`` (another JSON file, :func:`read_json`); ``line``: 1-based (JSONL, or the JSON
    parser's line); ``level``: ``error``, or ``warning`` when the rest of the file is still a whole run."""

    code: str
    message: str
    line: int | None = None
    hint: str = ""
    level: str = "error"

    def located(self, path: Path) -> str:
        return f"{path}:{self.line}: {self.message}" if self.line else f"{path}: {self.message}"


@dataclass
class TrajectoryRead:
    """A trajectory file as records of the JSONL schema, with what was wrong in it."""

    path: Path
    format: str  # "jsonl" or "atif"
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: the 1-based line of each record in a JSONL file (empty for ATIF)
    lines: list[int] = field(default_factory=list)


def read_trajectory(path: str | Path, root: Path | None = None) -> TrajectoryRead:
    """Either format, by file name: ``*.jsonl`` is the reference agent's, anything else ATIF. ``root``: read
    below it (:func:`read_bytes`)."""
    path = Path(path)
    return read_jsonl(path, root) if path.suffix == ".jsonl" else read_atif(path, root)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``trajectory.jsonl``, skipping whatever cannot be read (a torn last line included)."""
    return read_jsonl(path).records


def read_jsonl(path: str | Path, root: Path | None = None) -> TrajectoryRead:
    """The reference agent's ``trajectory.jsonl``: one JSON object with a string ``type`` per line."""
    path = Path(path)
    read = TrajectoryRead(path, "jsonl")
    try:
        raw = read_bytes(path, root)
    except OSError as exc:
        read.problems.append(Problem("trajectory_unreadable", f"cannot read: {exc}"))
        return read
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        read.problems.append(
            Problem(
                "trajectory_malformed",
                "not UTF-8 text",
                raw[: exc.start].count(b"\n") + 1,
                "Check the file was copied whole.",
            )
        )
        text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if number == len(lines) and not text.endswith("\n"):
                read.problems.append(
                    Problem(
                        "trajectory_truncated",
                        "the last line is cut off (the run was killed while writing it)",
                        number,
                        "The records before it are whole; delete the partial line to use them.",
                        level="warning",
                    )
                )
                continue
            detail = (
                f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "too deep"
            )
            read.problems.append(
                Problem(
                    "trajectory_malformed",
                    f"not a JSON record ({detail})",
                    number,
                    "Each line of trajectory.jsonl must be one JSON object.",
                )
            )
            continue
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            read.problems.append(
                Problem(
                    "trajectory_malformed",
                    "a record must be a JSON object with a string 'type'",
                    number,
                    "Is this a reference-agent trajectory.jsonl?",
                )
            )
            continue
        read.records.append(record)
        read.lines.append(number)
    if not read.records and not read.problems:
        read.problems.append(Problem("trajectory_empty", "no records", hint="The run wrote nothing."))
    elif read.records and read.records[0]["type"] != "run_start":
        read.problems.append(
            Problem(
                "trajectory_malformed",
                f"the first record is {read.records[0]['type']!r}, not 'run_start'",
                read.lines[0],
                "Its first lines are missing, or this is not a reference-agent trajectory.jsonl.",
                level="warning",
            )
        )
    return read


def read_atif(path: str | Path, root: Path | None = None) -> TrajectoryRead:
    """An ATIF ``trajectory.json`` (Harbor's ``harbor.models.trajectories``, read as plain JSON)."""
    path = Path(path)
    read = TrajectoryRead(path, "atif")
    try:
        text = read_bytes(path, root).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        read.problems.append(Problem("trajectory_unreadable", f"cannot read: {exc}"))
        return read
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip())
        read.problems.append(
            Problem(
                "trajectory_truncated" if truncated else "trajectory_malformed",
                ("the JSON ends early (a truncated file)" if truncated else f"not valid JSON ({exc.msg})")
                + f" at column {exc.colno}",
                exc.lineno,
                "An ATIF trajectory.json is one JSON object; copy the file again from the run.",
            )
        )
        return read
    except RecursionError:
        read.problems.append(Problem("trajectory_malformed", "nested too deeply to be a trajectory"))
        return read
    read.records = atif_records(data, read.problems)
    return read


def atif_records(data: Any, problems: list[Problem]) -> list[dict[str, Any]]:
    """Records of the JSONL schema rebuilt from ATIF: ``run_start`` from ``agent``, a ``message`` per system
    or user step, a ``model_turn`` per agent step (copied context skipped) and a ``tool_result`` per
    observation result, ``run_end`` from ``final_metrics.extra``. Times: ``elapsed_s`` from the step
    timestamps relative to the first; a result at its step's time plus its wall time."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        problems.append(
            Problem(
                "trajectory_malformed",
                "not an ATIF trajectory (no 'steps' list)",
                hint="Expected a trajectory.json with schema_version ATIF-v1.x.",
            )
        )
        return []
    agent = _dict(data.get("agent"))
    extra = _dict(agent.get("extra"))
    records: list[dict[str, Any]] = [
        {
            "type": "run_start",
            "run_id": data.get("session_id"),
            "agent": agent.get("name"),
            "model": agent.get("model_name"),
            "task_id": extra.get("task_id"),
            "task_version": extra.get("task_version"),
            "elapsed_s": 0.0,
        }
    ]
    t0: float | None = None
    turns = 0
    for i, step in enumerate(data["steps"]):
        where = f"steps[{i}]"
        if not isinstance(step, dict) or not isinstance(step.get("source"), str):
            problems.append(Problem("trajectory_malformed", f"{where} is not a step object with a 'source'"))
            continue
        stamp = _timestamp(step.get("timestamp"))
        if stamp is not None and t0 is None:
            t0 = stamp
            records[0]["time"] = step.get("timestamp")
        t = round(stamp - t0, 3) if stamp is not None and t0 is not None else None
        if step["source"] != "agent":
            records.append(
                {
                    "type": "message",
                    "elapsed_s": t,
                    "time": step.get("timestamp"),
                    "kind": _dict(step.get("extra")).get("kind") or step["source"],
                    "message": {"role": step["source"], "content": step.get("message")},
                }
            )
            continue
        if step.get("is_copied_context") is True:
            continue  # context repeated after a compaction
        turns += 1
        records.extend(_agent_step_records(step, where, t, turns, problems))
    final = _dict(data.get("final_metrics"))
    fextra = _dict(final.get("extra"))
    if fextra.get("exit_status"):
        records.append({"type": "run_end", **fextra, "steps": turns, "cost_usd": final.get("total_cost_usd")})
    return records


def _agent_step_records(
    step: dict[str, Any], where: str, t: float | None, turn: int, problems: list[Problem]
) -> list[dict[str, Any]]:
    """The ``model_turn`` of one ATIF agent step and a ``tool_result`` per tool call, in call order (a call
    without an observation result gets empty content)."""
    records: list[dict[str, Any]] = []
    calls = step.get("tool_calls") or []
    if not isinstance(calls, list):
        problems.append(Problem("trajectory_malformed", f"{where}.tool_calls is not a list"))
        calls = []
    for j, call in enumerate(calls):
        if not isinstance(call, dict):
            problems.append(Problem("trajectory_malformed", f"{where}.tool_calls[{j}] is not an object"))
    calls = [c for c in calls if isinstance(c, dict)]
    metrics = _dict(step.get("metrics"))
    mextra = _dict(metrics.get("extra"))
    records.append(
        {
            "type": "model_turn",
            "elapsed_s": t,
            "time": step.get("timestamp"),
            "step": turn,
            "model": step.get("model_name"),
            "message": {
                "role": "assistant",
                "content": step.get("message"),
                "reasoning": step.get("reasoning_content"),
                "tool_calls": [
                    {
                        "id": c.get("tool_call_id"),
                        "name": c.get("function_name"),
                        "arguments": c.get("arguments"),
                        **_dict(c.get("extra")),
                    }
                    for c in calls
                ],
            },
            "usage": {
                "input_tokens": metrics.get("prompt_tokens"),
                "output_tokens": metrics.get("completion_tokens"),
            },
            "cost_usd": metrics.get("cost_usd"),
            "latency_s": mextra.get("latency_s"),
            "attempts": mextra.get("attempts"),
        }
    )
    results_by_id: dict[str, dict[str, Any]] = {}
    results = _dict(step.get("observation")).get("results") or []
    for k, result in enumerate(results if isinstance(results, list) else []):
        if isinstance(result, dict):
            results_by_id.setdefault(str(result.get("source_call_id")), result)
        else:
            problems.append(
                Problem("trajectory_malformed", f"{where}.observation.results[{k}] is not an object")
            )
    for call in calls:  # one result per call, in call order (a call without a result has empty content)
        result = results_by_id.get(str(call.get("tool_call_id")), {})
        rextra = _dict(result.get("extra"))
        content = text_of(result.get("content"))
        wall = _number(rextra.get("wall_s"))
        records.append(
            {
                "type": "tool_result",
                "elapsed_s": None if t is None else round(t + (wall or 0.0), 3),
                "step": turn,
                "tool_call_id": call.get("tool_call_id"),
                "name": call.get("function_name") or "",
                "arguments": call.get("arguments"),
                "content": content,
                "is_error": any(rextra.get(key) is True for key in ("is_error", "tool_result_is_error"))
                or _looks_like_error(content),
                "wall_s": wall,
            }
        )
    return records


def text_of(content: Any) -> str:
    """Tool output as text: a string, ATIF content parts (``[{type: text, text}]``) or any JSON value."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _looks_like_error(content: str) -> bool:
    head = content.lstrip()[:200]
    if head.startswith(("<tool_use_error>", "Error:", "error:")):
        return True
    return bool(re.match(r"^\[[a-z_]+\] ", head))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


# -- what a batch ran -----------------------------------------------------------------------------------


def batch_answers(runs_dir: Path | None) -> list[Path]:
    """Answers a ``spu batch`` into ``runs_dir`` used: its ``--answers`` and the ``answers.json`` beside
    each task folder, as ``RUNS_DIR/_batch/*.json`` records them (those that still exist)."""
    if runs_dir is None or not (runs_dir / "_batch").is_dir():
        return []
    found: list[Path] = []
    for record in sorted((runs_dir / "_batch").glob("*.json")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        tasks = data.get("tasks") if isinstance(data.get("tasks"), list) else []
        candidates = [Path(str(t)).parent / "answers.json" for t in tasks]
        if isinstance(data.get("answers"), str):
            candidates.append(Path(data["answers"]))
        for candidate in candidates:
            if candidate.exists() and candidate not in found:
                found.append(candidate)
    return found


def load_tasks_and_answers(
    runs_dir: Path | None,
    tasks_dir: Path | None = None,
    answers: Path | None = None,
    *,
    demo_answers: bool = True,
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Tasks and answers for the runs under ``runs_dir``, by task id, and notes on what was skipped.

    Tasks: the demo tasks, then ``RUNS_DIR/_tasks`` (``spu batch``'s copies), then ``tasks_dir``; answers:
    the demo answers (unless ``demo_answers`` is False), then those :func:`batch_answers` finds, then
    ``answers``. Each source is searched by :mod:`environment.finder`'s rules; later sources win for the
    same task id. A source given by the caller that cannot be read raises
    :class:`~spu_common.task.TaskError`; one found on the way becomes a note."""
    from environment.demo_tasks import DEMO_TASKS, demo_answers_path, demo_task_dir
    from environment.finder import find_answers, find_tasks
    from spu_common.task import TaskError

    def answers_of(source: Path) -> dict[str, Any]:
        return {task_id: found.answers for task_id, found in find_answers(source).items()}

    tasks: dict[str, Any] = find_tasks([demo_task_dir(s) for s in DEMO_TASKS])
    found: dict[str, Any] = {}
    notes: list[str] = []
    if runs_dir is not None and (runs_dir / "_tasks").is_dir():
        try:
            tasks.update(find_tasks(runs_dir / "_tasks"))
        except TaskError as exc:
            notes.append(f"tasks under {runs_dir / '_tasks'}: {exc}")
    sources = [demo_answers_path(s) for s in DEMO_TASKS] if demo_answers else []
    for source in sources + batch_answers(runs_dir):
        try:
            found.update(answers_of(source))
        except TaskError as exc:
            notes.append(f"answers {source}: {exc}")
    if tasks_dir is not None:
        tasks.update(find_tasks(tasks_dir))
    if answers is not None:
        found.update(answers_of(answers))
    return tasks, found, notes
