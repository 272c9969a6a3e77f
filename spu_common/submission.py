"""The submission (``rankings.json``): strict validation, recovery of known schema departures, writing.

Rules (paper §2.5): UTF-8 JSON of at most 1 MiB with unique keys; the task identity; every comparison
group exactly once; each group's ``order`` lists every experiment of the group exactly once. An error that
affects the whole file (unparsable, too large, wrong task, unknown group, no groups) makes the file
invalid (task score -1); an error confined to one group (absent, listed twice, incomplete or padded
order) invalidates only that group (its rho is -1, it keeps its weight).

The strict grader (``recover=False``) rejects the whole file for a schema departure anywhere in it, as the
paper's grader does: an ordering under an alternative key in a single group makes the file invalid, not
only that group. ``departures`` names what it found.

With ``recover=True`` the strict rules run first; only a file they reject (a file error) is read again
with the five schema departures of the paper's Appendix E.1 mapped back to the canonical schema, without
moving any item of any order. A file the strict grader accepts is therefore never changed by recovery:

1. ``rankings`` is an object keyed by group id (values: the order, or a sub-object holding it);
2. an alternative ordering key in a group object: ``item_ids``, ``ranking``, ``ranked_item_ids``,
   ``items``, ``ordering``, ``ordered_item_ids``;
3. an alternative top-level key for ``rankings``: ``groups`` or ``predictions``;
4. ``group`` for ``group_id``;
5. ``task`` and ``version`` for ``task_id`` and ``task_version``.

A canonical key always wins over an alternative one; two different alternatives present at once are
ambiguous and are not recovered. ``version`` is read as ``task_version`` only together with ``task`` for
``task_id`` (departure 5 renames both); beside a canonical ``task_id`` it is an extra key, ignored as the
strict grader ignores it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from spu_common.filekinds import not_regular
from spu_common.jsonfiles import DuplicateKeyError, atomic_write_json, loads_strict
from spu_common.scoring import MAX_SUBMISSION_BYTES
from spu_common.task import Task

ORDER_KEY = "order"
ALT_ORDER_KEYS = ("item_ids", "ranking", "ranked_item_ids", "items", "ordering", "ordered_item_ids")
ALT_TOP_KEYS = ("groups", "predictions")

DEPARTURE_KEYED_BY_GROUP = "object keyed by group id"
DEPARTURE_ORDER_KEY = "alternative ordering key"
DEPARTURE_TOP_KEY = "alternative top-level key"
DEPARTURE_GROUP_KEY = "alternative group identifier key"
DEPARTURE_IDENTITY = "renamed identity fields"


class ValidationReport(BaseModel):
    """The outcome of validating one submission against one task.

    ``valid``: no file error and no group error (after recovery when it was enabled). ``orders``: the
    order of every group that passed, keyed by group id. ``normalized``: the canonical submission built
    from the file (recovered where needed; each order exactly as given), present when there is no file
    error. ``recovered``: one line per schema departure that was mapped back. ``departures``: the schema
    departures found in the file, recovered or not (under the strict grader each one is a file error).
    """

    valid: bool
    file_errors: list[str] = Field(default_factory=list)
    group_errors: dict[str, list[str]] = Field(default_factory=dict)
    recovered: list[str] = Field(default_factory=list)
    departures: list[str] = Field(default_factory=list)
    normalized: dict[str, Any] | None = None
    orders: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def strict_valid(self) -> bool:
        """Valid without any recovery: what the strict grader accepts."""
        return self.valid and not self.recovered

    def messages(self) -> list[str]:
        """Every error as one line, file errors first."""
        out = list(self.file_errors)
        for group_id, errors in self.group_errors.items():
            out.extend(f"group {group_id}: {e}" for e in errors)
        return out


def parse_submission_bytes(raw: bytes) -> tuple[Any, str | None]:
    """Parse raw bytes under the file rules; return ``(document, None)`` or ``(None, error)``."""
    if len(raw) > MAX_SUBMISSION_BYTES:
        return None, f"the file has {len(raw)} bytes, more than the limit of {MAX_SUBMISSION_BYTES} (1 MiB)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"the file is not UTF-8: {exc}"
    if text.startswith("\ufeff"):
        return None, "the file starts with a byte-order mark; write plain UTF-8 JSON"
    if not text.strip():
        return None, "the file is empty"
    try:
        return loads_strict(text), None
    except DuplicateKeyError as exc:
        return None, f"keys must be unique: {exc}"
    except RecursionError:
        return None, "the JSON is nested too deeply"
    except ValueError as exc:  # JSONDecodeError and rejected constants
        return None, f"the file is not valid JSON: {exc}"


def read_submission_file(path: Path) -> tuple[bytes | None, str | None]:
    """The bytes of the submission file at ``path``, or ``(None, error)``; nothing is read before the checks.

    ``lstat`` comes first: only a regular file is read (a link, a pipe, a socket, a device or a directory is
    refused, so a link cannot point the grader at another file and a pipe cannot hang it), and only when it
    holds at most :data:`MAX_SUBMISSION_BYTES`. The file is then opened without following a link and
    without blocking, checked again on the open descriptor (the same file, still regular) and read up to
    one byte past the limit, so a file that grew in between is still refused by the size rule.
    """
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        return None, f"no submission file at {path}"
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    kind = not_regular(before.st_mode)
    if kind is not None:
        return None, f"{path} is {kind}, not a regular file: write the submission as a plain file"
    if before.st_size > MAX_SUBMISSION_BYTES:
        return (
            None,
            f"the file has {before.st_size} bytes, more than the limit of {MAX_SUBMISSION_BYTES} (1 MiB)",
        )
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    with os.fdopen(fd, "rb") as fh:
        opened = os.fstat(fh.fileno())
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(
            opened.st_mode
        ):
            return None, f"{path} was replaced while it was read: write the submission once, then stop"
        try:
            return fh.read(MAX_SUBMISSION_BYTES + 1), None
        except OSError as exc:
            return None, f"cannot read {path}: {exc.strerror}"


def _load(data: Any) -> tuple[Any, str | None]:
    if isinstance(data, os.PathLike):
        raw, error = read_submission_file(Path(data))
        return (None, error) if raw is None else parse_submission_bytes(raw)
    if isinstance(data, bytes | bytearray | memoryview):
        return parse_submission_bytes(bytes(data))
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            return None, f"the text is not valid UTF-8: {exc}"
        document, error = parse_submission_bytes(raw)
        if error and not data.lstrip().startswith(("{", "[")):
            error += " (a str is read as JSON text; pass a pathlib.Path to read a file)"
        return document, error
    try:
        encoded = json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"the submission cannot be written as JSON: {exc}"
    if len(encoded) > MAX_SUBMISSION_BYTES:
        return None, f"the submission has {len(encoded)} bytes as JSON, more than the limit of 1 MiB"
    return data, None


class _Departures:
    """Collects which departures were recovered, with their details, in first-seen order."""

    def __init__(self) -> None:
        self.details: dict[str, list[str]] = {}

    def add(self, kind: str, detail: str) -> None:
        bucket = self.details.setdefault(kind, [])
        if detail not in bucket:
            bucket.append(detail)

    def lines(self) -> list[str]:
        return [f"{kind}: {'; '.join(details)}" for kind, details in self.details.items()]


_STRICT_DEPARTURE = "schema departure"


def _pick_key(
    obj: dict[str, Any],
    canonical: str,
    alternatives: tuple[str, ...],
    recover: bool,
    departures: _Departures | None = None,
    kind: str = "",
) -> tuple[str | None, str | None]:
    """The key to read: ``(key, None)``, or ``(None, reason)`` when none or several alternatives fit.

    Under the strict rules (``recover=False``) an alternative key is never read; when one is present it is
    recorded in ``departures`` and the reason is ``_STRICT_DEPARTURE`` (the file is rejected for it).
    """
    if canonical in obj:
        return canonical, None
    present = [k for k in alternatives if k in obj]
    if not recover:
        if present and departures is not None:
            departures.add(kind, f"{present[0]!r} for {canonical!r}")
            return None, _STRICT_DEPARTURE
        return None, None
    if len(present) == 1:
        return present[0], None
    if len(present) > 1:
        return None, f"several alternative keys {present} for {canonical!r}; cannot tell which to use"
    return None, None


def _extract_order(
    obj: dict[str, Any], recover: bool, where: str, departures: _Departures
) -> tuple[Any, str | None]:
    key, reason = _pick_key(obj, ORDER_KEY, ALT_ORDER_KEYS, recover, departures, DEPARTURE_ORDER_KEY)
    if key is None:
        return None, reason or f"{where} has no {ORDER_KEY!r} list"
    if key != ORDER_KEY:
        departures.add(DEPARTURE_ORDER_KEY, f"{key!r} for {ORDER_KEY!r}")
    return obj[key], None


def _group_entries(
    container: Any, task: Task, recover: bool, departures: _Departures, file_errors: list[str]
) -> list[tuple[str, Any, str | None]]:
    """``(group_id, order_or_None, error_or_None)`` per group entry of the file, in file order."""
    known = set(task.group_ids)
    entries: list[tuple[str, Any, str | None]] = []
    if isinstance(container, dict):
        departures.add(DEPARTURE_KEYED_BY_GROUP, "groups given as an object mapping group id to its order")
        if not recover:
            return []
        departures.add(DEPARTURE_KEYED_BY_GROUP, "groups given as an object mapping group id to its order")
        for group_id, value in container.items():
            if group_id not in known:
                file_errors.append(f"unknown group {group_id!r} (the task's groups are {task.group_ids})")
                continue
            if isinstance(value, list):
                entries.append((group_id, value, None))
            elif isinstance(value, dict):
                order, error = _extract_order(value, recover, f"the entry of group {group_id!r}", departures)
                entries.append((group_id, order, error))
            else:
                entries.append(
                    (group_id, None, f"the entry of group {group_id!r} is neither a list nor an object")
                )
        return entries
    if not isinstance(container, list):
        file_errors.append(f"'rankings' must be a list of group objects, not {type(container).__name__}")
        return []
    for index, entry in enumerate(container):
        where = f"rankings[{index}]"
        if not isinstance(entry, dict):
            file_errors.append(
                f"{where} must be an object with 'group_id' and 'order', not {type(entry).__name__}"
            )
            continue
        key, reason = _pick_key(entry, "group_id", ("group",), recover, departures, DEPARTURE_GROUP_KEY)
        if key is None:
            if reason != _STRICT_DEPARTURE:
                file_errors.append(reason or f"{where} has no 'group_id'")
            continue
        if key != "group_id":
            departures.add(DEPARTURE_GROUP_KEY, "'group' for 'group_id'")
        group_id = entry[key]
        if not isinstance(group_id, str):
            file_errors.append(f"{where}: the group id must be a string, not {type(group_id).__name__}")
            continue
        if group_id not in known:
            file_errors.append(f"unknown group {group_id!r} (the task's groups are {task.group_ids})")
            continue
        order, error = _extract_order(entry, recover, where, departures)
        if error == _STRICT_DEPARTURE:
            continue
        entries.append((group_id, order, error))
    return entries


def _check_order(order: Any, expected: list[str]) -> list[str]:
    if not isinstance(order, list):
        return [f"the order must be a list of experiment ids, not {type(order).__name__}"]
    not_text = [i for i, item in enumerate(order) if not isinstance(item, str)]
    if not_text:
        return [f"order items must be experiment id strings; positions {not_text[:10]} are not"]
    errors: list[str] = []
    counts: dict[str, int] = {}
    for item in order:
        counts[item] = counts.get(item, 0) + 1
    repeated = [item for item, count in counts.items() if count > 1]
    if repeated:
        errors.append(f"experiments listed more than once: {repeated[:20]}")
    expected_set = set(expected)
    unknown = [item for item in counts if item not in expected_set]
    if unknown:
        errors.append(f"ids that are not experiments of this group: {unknown[:20]}")
    missing = [e for e in expected if e not in counts]
    if missing:
        errors.append(f"{len(missing)} of {len(expected)} experiments missing: {missing[:20]}")
    return errors


def _identity(
    doc: dict[str, Any], task: Task, recover: bool, departures: _Departures, file_errors: list[str]
) -> None:
    renamed: list[str] = []
    key, _ = _pick_key(doc, "task_id", ("task",), recover)
    if key is None:
        if not recover and "task" in doc:
            renamed.append("'task' for 'task_id'")
        else:
            file_errors.append("the file does not state 'task_id'")
    else:
        if key != "task_id":
            renamed.append("'task' for 'task_id'")
        if doc[key] != task.task_id:
            file_errors.append(f"task_id {doc[key]!r} is not this task's id {task.task_id!r}")
    # departure 5 renames both identity fields: 'version' stands for 'task_version' only beside 'task'
    version_key = "task_version" if "task_version" in doc else None
    if version_key is None and "version" in doc and "task_id" not in doc and "task" in doc:
        version_key = "version"
        renamed.append("'version' for 'task_version'")
    checked = version_key is not None and (recover or version_key == "task_version")
    if checked and doc[version_key] != task.task_version:
        file_errors.append(
            f"task_version {doc[version_key]!r} is not this task's version {task.task_version!r}"
        )
    if renamed:
        departures.add(DEPARTURE_IDENTITY, ", ".join(renamed))


def validate_submission(data: Any, task: Task, *, recover: bool = True) -> ValidationReport:
    """Check a submission against ``task``. Never raises on bad input.

    ``data``: a ``pathlib.Path`` (read from disk), ``bytes`` (the raw file), ``str`` (JSON text) or an
    already parsed object. ``task_version`` may be omitted from the file; when present it must equal the
    task's version string. Extra keys are ignored.

    The strict rules always run first. With ``recover=True`` a file they reject (any file error, a schema
    departure included) is read again with the departures mapped back; a file they accept is returned as
    the strict grader saw it, so recovery never changes it.
    """
    document, error = _load(data)
    if error is not None:
        return ValidationReport(valid=False, file_errors=[error])
    if not isinstance(document, dict):
        return ValidationReport(
            valid=False, file_errors=[f"the file must hold a JSON object, not {type(document).__name__}"]
        )
    strict = _validate_document(document, task, recover=False)
    if not recover or not strict.file_errors:
        return strict
    return _validate_document(document, task, recover=True)


def _validate_document(document: dict[str, Any], task: Task, *, recover: bool) -> ValidationReport:
    departures = _Departures()
    file_errors: list[str] = []
    _identity(document, task, recover, departures, file_errors)
    key, reason = _pick_key(document, "rankings", ALT_TOP_KEYS, recover, departures, DEPARTURE_TOP_KEY)
    entries: list[tuple[str, Any, str | None]] = []
    if key is None:
        if reason != _STRICT_DEPARTURE:
            file_errors.append(reason or "the file has no 'rankings'")
    else:
        if key != "rankings":
            departures.add(DEPARTURE_TOP_KEY, f"{key!r} for 'rankings'")
        container = document[key]
        if isinstance(container, list | dict) and len(container) == 0:
            file_errors.append("'rankings' is empty: list every comparison group")
        else:
            entries = _group_entries(container, task, recover, departures, file_errors)
    departure_lines = departures.lines()
    recovered = departure_lines if recover else []
    if not recover and departure_lines:
        # a departure anywhere rejects the whole file under the strict grader (paper Appendix E.1)
        file_errors.extend(
            f"schema departure ({line}): the strict grader rejects the file; the recovered score reads it"
            for line in departure_lines
        )
    if file_errors:
        return ValidationReport(
            valid=False, file_errors=file_errors, recovered=recovered, departures=departure_lines
        )

    group_errors: dict[str, list[str]] = {}
    orders: dict[str, list[str]] = {}
    by_group: dict[str, list[tuple[Any, str | None]]] = {}
    for group_id, order, entry_error in entries:
        by_group.setdefault(group_id, []).append((order, entry_error))
    for group in task.groups:
        found = by_group.get(group.group_id, [])
        if not found:
            group_errors[group.group_id] = ["the group is absent from the submission"]
            continue
        if len(found) > 1:
            group_errors[group.group_id] = [f"the group is listed {len(found)} times; list it once"]
            continue
        order, entry_error = found[0]
        errors = [entry_error] if entry_error else _check_order(order, group.experiment_ids)
        if errors:
            group_errors[group.group_id] = errors
        else:
            orders[group.group_id] = list(order)
    normalized = {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "rankings": [
            {"group_id": group_id, "order": list(order)}
            for group_id, order, entry_error in entries
            if entry_error is None and isinstance(order, list)
        ],
    }
    return ValidationReport(
        valid=not group_errors,
        group_errors=group_errors,
        recovered=recovered,
        departures=departure_lines,
        normalized=normalized,
        orders=orders,
    )


def fallback_submission(task: Task) -> dict[str, Any]:
    """A valid submission that lists every group in its presented order (the contract's order)."""
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "rankings": [{"group_id": g.group_id, "order": list(g.experiment_ids)} for g in task.groups],
    }


def submission_from_orders(task: Task, orders: dict[str, list[str]]) -> dict[str, Any]:
    """A canonical submission dict from ``{group_id: order}``, groups in the contract's order."""
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "rankings": [{"group_id": g.group_id, "order": list(orders[g.group_id])} for g in task.groups],
    }


def write_submission_atomic(path: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as UTF-8 JSON to ``path`` so a reader never sees a partial file.

    The JSON goes to a temporary file in the same directory, is flushed and fsynced, then renamed over
    ``path`` with ``os.replace``; the directory is fsynced too where the platform allows.
    """
    return atomic_write_json(path, data)
