"""A benchmark task: the directory the agent sees, and the answers kept apart from it.

A task directory holds ``contract.json`` (task id and version, title, comparison groups), ``instruction.md``,
``targets.csv`` (one row per experiment: ``experiment_id``, ``group_id``, then the conditions), and
optionally ``experiment.md``, ``protocol.json`` and input files (structures, sequences). ``answers.json``
(the measured value of every experiment) never lives inside it. Formats: ``docs/task-format.md``.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from spu_common import confined
from spu_common.contract import (
    DEFAULT_DIRECTION,
    REQUIRED_FILES,
    TASK_FILES,
    WEIGHT_TOLERANCE,
    as_id,
    filled_weights,
    parse_number,
    repeated,
    weight_problem,
    weights_problem,
)
from spu_common.jsonfiles import DuplicateKeyError, load_json_strict, loads_strict

__all__ = ["DEFAULT_DIRECTION", "REQUIRED_FILES", "TASK_FILES", "WEIGHT_TOLERANCE"]


#: The largest file of a task folder that is read (contract, targets, prose): bytes.
MAX_TASK_FILE_BYTES = 16 * 2**20


class TaskError(ValueError):
    """A task or answers file that cannot be used as given; the message says what to fix."""


class Group(BaseModel):
    """One comparison group: experiments sharing one measured endpoint, ranked lowest to highest."""

    model_config = ConfigDict(extra="allow")

    group_id: str
    endpoint: str = ""
    unit: str = ""
    direction: str = DEFAULT_DIRECTION
    weight: float
    experiment_ids: list[str]


class Task(BaseModel):
    """A loaded task directory. ``groups`` keep the contract's (presented) order of experiments."""

    task_id: str
    task_version: str
    title: str = ""
    groups: list[Group]
    root: Path
    instruction: str = ""
    experiment: str = ""
    protocol: dict[str, Any] = Field(default_factory=dict)
    targets: list[dict[str, Any]] = Field(default_factory=list)
    target_columns: list[str] = Field(default_factory=list)
    numeric_columns: list[str] = Field(default_factory=list)
    input_files: list[str] = Field(default_factory=list)

    def group(self, group_id: str) -> Group:
        return _group_by_id(self, group_id)

    @property
    def group_ids(self) -> list[str]:
        return [g.group_id for g in self.groups]

    @property
    def n_experiments(self) -> int:
        return sum(len(g.experiment_ids) for g in self.groups)

    def condition_columns(self) -> list[str]:
        """The columns of ``targets.csv`` after ``experiment_id`` and ``group_id``."""
        return [c for c in self.target_columns if c not in ("experiment_id", "group_id")]

    def rows_of(self, group_id: str) -> list[dict[str, Any]]:
        """The ``targets.csv`` rows of one group, in file order."""
        return [row for row in self.targets if row["group_id"] == group_id]


class AnswerGroup(BaseModel):
    model_config = ConfigDict(extra="allow")

    group_id: str
    weight: float | None = None
    unit: str | None = None
    values: dict[str, float]
    sources: dict[str, str] = Field(default_factory=dict)


class Answers(BaseModel):
    """Measured values per experiment per group, read only by the grader and statistics."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    task_version: str
    groups: list[AnswerGroup]

    def group(self, group_id: str) -> AnswerGroup:
        return _group_by_id(self, group_id)


def _group_by_id(model: Task | Answers, group_id: str) -> Any:
    """The group of ``model.groups`` with this id, through an index kept beside the list it was built from
    (built again when ``groups`` is another list or has another length), so that looking up every group of
    a task stays linear in the number of groups (a 10,000-group task took minutes)."""
    index = model.__dict__.get("_group_index")
    if index is None or index[0] is not model.groups or index[2] != len(model.groups):
        index = (model.groups, {g.group_id: g for g in reversed(model.groups)}, len(model.groups))
        model.__dict__["_group_index"] = index
    found = index[1].get(group_id)
    if found is None or found.group_id != group_id:
        raise KeyError(group_id)
    return found


def _read_json(path: Path, what: str) -> Any:
    try:
        return load_json_strict(path)
    except FileNotFoundError:
        raise TaskError(f"{what}: {path} does not exist") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise TaskError(f"{what}: cannot read {path}: {exc}") from None
    except DuplicateKeyError as exc:
        raise TaskError(f"{what}: {path.name}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise TaskError(f"{what}: {path.name} is not valid JSON: {exc}") from None


def _parse_json(data: bytes, path: Path, what: str) -> Any:
    try:
        return loads_strict(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TaskError(f"{what}: cannot read {path}: {exc}") from None
    except DuplicateKeyError as exc:
        raise TaskError(f"{what}: {path.name}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise TaskError(f"{what}: {path.name} is not valid JSON: {exc}") from None


def _task_file(root: Path, name: str, roots: Sequence[Path], allow_hard_links: bool) -> bytes | None:
    """The bytes of the task file ``name`` (read with :mod:`spu_common.confined` below ``roots``), or None
    when there is none."""
    try:
        read = confined.read_file(
            root / name, roots, max_bytes=MAX_TASK_FILE_BYTES, allow_hard_links=allow_hard_links
        )
    except confined.Refused as exc:
        if exc.reason == "missing":
            return None
        raise TaskError(f"task file {name}: {exc.message}") from None
    return read.data


def _as_id(value: Any, where: str) -> str:
    text = as_id(value)
    if text is None:
        raise TaskError(f"{where} must be a non-empty string, not {value!r}")
    return text


def parse_contract(data: Any, root: Path) -> dict[str, Any]:
    """Check a contract object and return task fields with weights filled in (equal when absent)."""
    if not isinstance(data, dict):
        raise TaskError("contract.json must hold a JSON object")
    for key in ("task_id", "task_version", "groups"):
        if key not in data:
            raise TaskError(f"contract.json lacks {key!r}")
    task_id = _as_id(data["task_id"], "contract.json task_id")
    task_version = _as_id(data["task_version"], "contract.json task_version")
    raw_groups = data["groups"]
    if not isinstance(raw_groups, list) or not raw_groups:
        raise TaskError("contract.json 'groups' must be a non-empty list")
    groups: list[dict[str, Any]] = []
    seen_groups: set[str] = set()
    for index, raw in enumerate(raw_groups):
        where = f"contract.json groups[{index}]"
        if not isinstance(raw, dict):
            raise TaskError(f"{where} must be an object")
        if "group_id" not in raw:
            raise TaskError(f"{where} lacks 'group_id'")
        group_id = _as_id(raw["group_id"], f"{where}.group_id")
        if group_id in seen_groups:
            raise TaskError(f"contract.json names group {group_id!r} twice")
        seen_groups.add(group_id)
        ids = raw.get("experiment_ids")
        if not isinstance(ids, list) or not ids:
            raise TaskError(f"group {group_id!r}: 'experiment_ids' must list at least one experiment")
        ids = [_as_id(x, f"group {group_id!r} experiment id") for x in ids]
        duplicates = repeated(ids)
        if duplicates:
            raise TaskError(f"group {group_id!r} lists experiment ids more than once: {duplicates}")
        problem = weight_problem(raw.get("weight"))
        if problem:
            raise TaskError(f"group {group_id!r}: {problem}")
        groups.append({**raw, "group_id": group_id, "experiment_ids": ids, "weight": raw.get("weight")})
    weights = [g["weight"] for g in groups]
    problem = weights_problem(weights)
    if problem:
        raise TaskError(f"contract.json: {problem}")
    for g, weight in zip(groups, filled_weights(weights), strict=True):
        g["weight"] = weight
    return {
        "task_id": task_id,
        "task_version": task_version,
        "title": str(data.get("title", "")),
        "groups": [Group(**g) for g in groups],
        "root": root,
    }


def parse_targets(text: str, groups: list[Group]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Parse ``targets.csv`` and check it has one row per experiment of the contract, and no other.

    A condition column whose non-empty cells all parse as finite numbers becomes numeric (floats; empty
    cells become ``None``). ``experiment_id`` and ``group_id`` always stay strings.
    """
    reader = csv.DictReader(io.StringIO(text))
    columns = list(reader.fieldnames or [])
    for needed in ("experiment_id", "group_id"):
        if needed not in columns:
            raise TaskError(f"targets.csv lacks the column {needed!r} (columns: {columns})")
    if len(set(columns)) != len(columns):
        raise TaskError("targets.csv has a repeated column name")
    rows: list[dict[str, Any]] = []
    for line, row in enumerate(reader, start=2):
        if None in row or any(v is None for v in row.values()):
            raise TaskError(f"targets.csv line {line} has a different number of cells than the header")
        rows.append({k: (v or "").strip() for k, v in row.items()})
    expected = {(g.group_id, e) for g in groups for e in g.experiment_ids}
    seen: set[tuple[str, str]] = set()
    for line, row in enumerate(rows, start=2):
        key = (row["group_id"], row["experiment_id"])
        if key in seen:
            raise TaskError(
                f"targets.csv line {line}: experiment {key[1]!r} of group {key[0]!r} appears twice"
            )
        if key not in expected:
            raise TaskError(
                f"targets.csv line {line}: experiment {key[1]!r} of group {key[0]!r} is not in contract.json"
            )
        seen.add(key)
    missing = sorted(expected - seen)
    if missing:
        shown = ", ".join(f"{e} ({g})" for g, e in missing[:10])
        raise TaskError(f"targets.csv has no row for {len(missing)} experiment(s) of the contract: {shown}")
    numeric: list[str] = []
    for column in columns:
        if column in ("experiment_id", "group_id"):
            continue
        cells = [row[column] for row in rows if row[column] != ""]
        if cells and all(parse_number(c) is not None for c in cells):
            numeric.append(column)
            for row in rows:
                row[column] = parse_number(row[column]) if row[column] != "" else None
    return rows, columns, numeric


def load_task(
    path: str | Path, *, roots: Sequence[Path] | None = None, allow_hard_links: bool = True
) -> Task:
    """Load and check a task directory; raise :class:`TaskError` saying what is wrong.

    Every file is read once with :mod:`spu_common.confined` below ``roots`` (default: the task directory
    itself): no link below them is followed, a FIFO or device is refused, and a file over
    :data:`MAX_TASK_FILE_BYTES` is refused unread. ``allow_hard_links=False`` refuses a file with more than
    one hard link too (the tool server's rule)."""
    root = Path(path)
    within = list(roots) if roots is not None else [root]
    try:  # the folder as reached below its root: the path is never resolved by name (a link swapped in
        shown = confined.check_dir(root, within)  # later would be followed, or raise mid-resolution)
    except confined.Refused as exc:
        if exc.reason in ("missing", "not_regular"):
            raise TaskError(f"task directory {root} does not exist or is not a directory") from None
        raise TaskError(f"task directory: {exc.message}") from None
    files = {name: _task_file(root, name, within, allow_hard_links) for name in TASK_FILES}
    for name in REQUIRED_FILES:
        if files[name] is None:
            raise TaskError(f"task directory {root} lacks {name}")
    if os.path.lexists(root / "answers.json"):
        raise TaskError(f"{root} holds answers.json: answers must be kept outside the task directory")
    fields = parse_contract(
        _parse_json(files["contract.json"] or b"", root / "contract.json", "contract"), shown
    )
    try:
        targets_text = (files["targets.csv"] or b"").decode("utf-8-sig")
        instruction = (files["instruction.md"] or b"").decode("utf-8")
        experiment = (files["experiment.md"] or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"task file is not UTF-8 text: {exc}") from None
    protocol: dict[str, Any] = {}
    if files["protocol.json"] is not None:
        loaded = _parse_json(files["protocol.json"], root / "protocol.json", "protocol")
        if not isinstance(loaded, dict):
            raise TaskError("protocol.json must hold a JSON object")
        protocol = loaded
    rows, columns, numeric = parse_targets(targets_text, fields["groups"])
    try:
        entries = confined.walk(root, within)
    except confined.Refused as exc:
        raise TaskError(f"task directory: {exc.message}") from None
    inputs = [e.relative for e in entries if e.kind == "file" and e.relative not in TASK_FILES]
    return Task(
        **fields,
        instruction=instruction,
        experiment=experiment,
        protocol=protocol,
        targets=rows,
        target_columns=columns,
        numeric_columns=numeric,
        input_files=inputs,
    )


def parse_answers(data: Any) -> Answers:
    if not isinstance(data, dict):
        raise TaskError("answers.json must hold a JSON object")
    for key in ("task_id", "task_version", "groups"):
        if key not in data:
            raise TaskError(f"answers.json lacks {key!r}")
    if not isinstance(data["groups"], list):
        raise TaskError("answers.json 'groups' must be a list")
    groups = []
    for index, raw in enumerate(data["groups"]):
        if not isinstance(raw, dict) or "group_id" not in raw or not isinstance(raw.get("values"), dict):
            raise TaskError(f"answers.json groups[{index}] must be an object with 'group_id' and 'values'")
        values: dict[str, float] = {}
        for exp, value in raw["values"].items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise TaskError(
                    f"answers.json group {raw['group_id']!r}: the value of {exp!r} must be a finite number, "
                    f"not {value!r}"
                )
            values[str(exp)] = float(value)
        groups.append(AnswerGroup(**{**raw, "group_id": str(raw["group_id"]), "values": values}))
    return Answers(
        **{
            **data,
            "task_id": str(data["task_id"]),
            "task_version": str(data["task_version"]),
            "groups": groups,
        }
    )


def load_answers(path: str | Path) -> Answers:
    """Load ``answers.json``; raise :class:`TaskError` if it is malformed."""
    return parse_answers(_read_json(Path(path), "answers"))


def check_answers(task: Task, answers: Answers) -> None:
    """Raise :class:`TaskError` unless ``answers`` has a value for every experiment of ``task``.

    Also requires matching task identity and weights (when the answers give them). A group whose values
    all tie, or that holds one experiment, is accepted: it carries no order, and any valid order of it
    scores 0 (:func:`spu_common.rank_agreement.group_rho`).
    """
    if answers.task_id != task.task_id or answers.task_version != task.task_version:
        raise TaskError(
            f"answers are for task {answers.task_id!r} version {answers.task_version!r}, "
            f"not {task.task_id!r} version {task.task_version!r}"
        )
    answer_ids = [g.group_id for g in answers.groups]
    if sorted(answer_ids) != sorted(task.group_ids):
        raise TaskError(f"answers name groups {answer_ids}, the task has {task.group_ids}")
    for group in task.groups:
        given = answers.group(group.group_id)
        if given.weight is not None and abs(given.weight - group.weight) > WEIGHT_TOLERANCE:
            raise TaskError(
                f"group {group.group_id!r}: weight {given.weight} in answers differs from {group.weight} "
                "in the contract"
            )
        missing = [e for e in group.experiment_ids if e not in given.values]
        extra = sorted(set(given.values) - set(group.experiment_ids))
        if missing or extra:
            raise TaskError(
                f"group {group.group_id!r}: answers lack values for {missing} and have unknown experiments "
                f"{extra}"
            )


def measured_values(task: Task, answers: Answers, group_id: str) -> list[float]:
    """The measured values of a group, in the contract's order of experiment ids."""
    values = answers.group(group_id).values
    return [values[e] for e in task.group(group_id).experiment_ids]
