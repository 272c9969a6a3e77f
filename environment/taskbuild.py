"""Build a task directory and its answers from a spec: ``spu task build SPEC_DIR -o OUT_DIR``.

A spec is a folder holding ``spec.yaml`` (task identity, instruction, shared procedure, setup fields,
groups, citation, data source, licence) and a CSV of experiments (one row per experiment: ``key``, the
setup fields, ``value``, ``source``). The builder writes ``OUT_DIR/task/`` (what the agent sees:
anonymized ids, seeded shuffled order, one neutral template, no values or source identifiers) and
``OUT_DIR/answers.json`` (values, a source per value, the citation, the id mapping). Same spec, same bytes:
ids and order are drawn from a generator seeded with the task id and version.

Every problem of a spec is collected and reported together (:class:`SpecError`, one
:class:`SpecProblem` per problem with file, row and field); a built task also gets author warnings
(:class:`AuthorWarning`): orders that follow one varied setup field exactly, adjacent values within the
stated noise band, ties, and source identifiers found in agent-visible text. Format and walk-through:
``docs/authoring-tasks.md``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import os
import random
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from environment import prior_screen
from environment.anonymize import _new_ids
from environment.rank_agreement import average_ranks
from environment.task import (
    DEFAULT_DIRECTION,
    TASK_FILES,
    WEIGHT_TOLERANCE,
    TaskError,
    check_answers,
    load_answers,
    load_task,
)

SPEC_FILE = "spec.yaml"
DOMAINS = ("chemistry", "materials", "biology", "medicine")
TASK_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
REQUIRED_KEYS = (
    "task_id",
    "task_version",
    "title",
    "domain",
    "instruction",
    "procedure",
    "experiments",
    "setup_fields",
    "citation",
    "data_source",
    "license",
    "groups",
)
OPTIONAL_KEYS = ("inputs", "noise_band")
GROUP_REQUIRED = ("group_id", "endpoint", "unit", "members")
GROUP_OPTIONAL = ("direction", "weight")
CSV_REQUIRED = ("key", "value", "source")
#: Column names the builder writes itself or keeps hidden: never setup fields.
RESERVED_FIELDS = ("key", "value", "source", "experiment_id", "group_id")
#: Licence texts that do not allow redistribution.
NON_REDISTRIBUTABLE = ("all rights reserved", "proprietary", "unknown", "none", "no licence", "no license")
MAX_TEXT_INPUT = 5_000_000
#: A run of this many consecutive words of the study's title in agent-visible text is reported.
TITLE_RUN = 4

INFORMATION_POLICY = """\
The measured values of this task come from published sources. You must not retrieve them or
reconstruct them from memory: do not look up the measured values of these experiments, or of the same
kind of measurement on these items, in handbooks, tables, databases, papers or their supplementary data,
and do not fit a predictor to such results. Reason from mechanisms, compute what you need (descriptors,
quantum chemistry, simulation, statistics on data you are allowed to use) and use general scientific
knowledge. Make every search and download through the audited tools. If a permitted query exposes a
prohibited result, stop and record in your report the step that exposed it. Disclose in your report any
recollection of results that you notice."""

SUBMISSION_RULES = """\
List every comparison group exactly once. Each `order` lists every experiment id of its group exactly
once, from the lowest to the highest measured value; ties are not allowed in a submission. Write a valid
draft early and replace it as your prediction improves. Also write `report.md` (method, evidence,
uncertainty, and anything the information policy asks you to record).

Scoring: each group is scored by the Spearman correlation between your order and the measured values
(ties in the measured values share average ranks); the task score is the weighted sum over groups. A
missing or unreadable file scores -1; an invalid group scores -1 and keeps its weight."""


# ---------------------------------------------------------------------------------------------- problems


@dataclass
class SpecProblem:
    """One problem of a spec: where it is (file, CSV line, field), what is wrong, how to fix it."""

    code: str
    file: str
    message: str
    row: int | None = None
    field: str | None = None
    hint: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f" line {self.row}"
        if self.field:
            where += f", field {self.field!r}"
        text = f"{where}: {self.message} [{self.code}]"
        return text + (f" (hint: {self.hint})" if self.hint else "")


class SpecError(TaskError):
    """A spec that cannot be built; ``problems`` lists every problem found."""

    def __init__(self, problems: list[SpecProblem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass
class AuthorWarning:
    """Something an author should look at in a task that builds (it does not stop the build)."""

    code: str
    message: str
    group: str | None = None  # the author's group id
    built_group: str | None = None  # the group id in the built task

    def __str__(self) -> str:
        where = ""
        if self.group is not None:
            where = f"group {self.group!r}" + (f" (built as {self.built_group})" if self.built_group else "")
            where += ": "
        return f"[{self.code}] {where}{self.message}"


# ---------------------------------------------------------------------------------------------- the spec


@dataclass
class SpecGroup:
    group_id: str
    endpoint: str
    unit: str
    direction: str
    weight: float | None
    members: list[str]


@dataclass
class SpecRow:
    key: str
    line: int
    cells: dict[str, str]
    value: float
    source: str


@dataclass
class Spec:
    root: Path
    task_id: str
    task_version: str
    title: str
    domain: str
    instruction: str
    procedure: str
    experiments_file: str
    setup_fields: list[str]
    inputs: list[str]
    noise_band: float | None
    citation: str | dict[str, Any]
    data_source: str
    license: str
    groups: list[SpecGroup]
    rows: dict[str, SpecRow]
    unused_keys: list[str] = field(default_factory=list)

    @property
    def citation_text(self) -> str:
        if isinstance(self.citation, dict):
            parts = [self.citation.get(k) for k in ("authors", "title", "journal", "year", "doi", "url")]
            return ", ".join(
                "; ".join(map(str, p)) if isinstance(p, list) else str(p)
                for p in parts
                if p not in (None, "")
            )
        return self.citation


class _RepeatedKey(Exception):
    def __init__(self, key: str, line: int):
        super().__init__(key)
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe YAML loader, refusing a key repeated in one mapping (plain YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = str(self.construct_object(key_node, deep=deep))
            if key in seen:
                raise _RepeatedKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_lines(path: Path) -> dict[tuple, int]:
    """Line numbers (1-based) of the keys of spec.yaml: ("task_id",), ("groups", 0), ("groups", 0, "unit")."""
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return {}
    lines: dict[tuple, int] = {}
    if not isinstance(root, yaml.MappingNode):
        return lines
    for key, value in root.value:
        lines[(key.value,)] = key.start_mark.line + 1
        if key.value == "groups" and isinstance(value, yaml.SequenceNode):
            for index, item in enumerate(value.value):
                lines[("groups", index)] = item.start_mark.line + 1
                if isinstance(item, yaml.MappingNode):
                    for group_key, _ in item.value:
                        lines[("groups", index, group_key.value)] = group_key.start_mark.line + 1
    return lines


def _line_of(field_name: str, lines: dict[tuple, int]) -> int | None:
    match = re.match(r"groups\[(\d+)\](?: \([^)]*\))?(?:\.(.+))?$", field_name)
    if match:
        index, key = int(match.group(1)), match.group(2)
        return lines.get(("groups", index, key)) or lines.get(("groups", index)) or lines.get(("groups",))
    return lines.get((field_name,))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def load_spec(spec_dir: str | Path) -> Spec:
    """Read and check a spec folder (or its ``spec.yaml``); raise :class:`SpecError` listing every problem."""
    path = Path(spec_dir)
    root = path.parent if path.is_file() else path
    spec_path = path if path.is_file() else path / SPEC_FILE
    problems: list[SpecProblem] = []

    def problem(code: str, message: str, *, file: str = SPEC_FILE, **kw: Any) -> None:
        problems.append(SpecProblem(code, file, message, **kw))

    if not spec_path.is_file():
        raise SpecError(
            [
                SpecProblem(
                    "spec-missing",
                    str(spec_path),
                    "no spec file here",
                    hint=f"a spec is a folder holding {SPEC_FILE} and a CSV of experiments",
                )
            ]
        )
    try:
        data = yaml.load(spec_path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except UnicodeDecodeError:
        raise SpecError([SpecProblem("spec-encoding", SPEC_FILE, "is not UTF-8 text")]) from None
    except OSError as exc:
        raise SpecError([SpecProblem("spec-unreadable", str(spec_path), f"cannot be read: {exc}")]) from None
    except _RepeatedKey as exc:
        raise SpecError(
            [
                SpecProblem(
                    "repeated-key",
                    SPEC_FILE,
                    f"the key {exc.key!r} appears twice in one mapping (YAML would keep only the last)",
                    row=exc.line,
                    field=exc.key,
                )
            ]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SpecError(
            [
                SpecProblem(
                    "yaml-syntax",
                    SPEC_FILE,
                    f"is not valid YAML: {getattr(exc, 'problem', None) or exc}",
                    row=(mark.line + 1) if mark is not None else None,
                    hint="check indentation and quote text containing ': ' or '#'",
                )
            ]
        ) from None
    if not isinstance(data, dict):
        raise SpecError(
            [SpecProblem("spec-not-mapping", SPEC_FILE, "must hold a mapping of keys (task_id: ..., ...)")]
        )

    for key in data:
        if key not in REQUIRED_KEYS + OPTIONAL_KEYS:
            problem(
                "unknown-key",
                f"unknown key {key!r}",
                field=str(key),
                hint=f"allowed keys: {', '.join(REQUIRED_KEYS + OPTIONAL_KEYS)}",
            )
    for key in REQUIRED_KEYS:
        if key not in data or data[key] is None:
            problem("missing-field", "is missing", field=key)

    task_id = data.get("task_id")
    if task_id is not None and (not isinstance(task_id, str) or not TASK_ID_RE.match(task_id)):
        problem(
            "bad-task-id",
            f"{task_id!r} is not a task id",
            field="task_id",
            hint="lowercase letters, digits and single hyphens, e.g. chem-hydration-free-energy",
        )
    version = data.get("task_version")
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if data.get("task_version") is not None and not _text(version):
        problem(
            "bad-version",
            f"must be a non-empty string, not {data.get('task_version')!r}",
            field="task_version",
            hint='quote it: task_version: "1"',
        )
    for key in ("title", "instruction", "procedure", "data_source", "license", "experiments"):
        if data.get(key) is not None and not _text(data.get(key)):
            problem("bad-type", "must be non-empty text", field=key)
    domain = data.get("domain")
    if domain is not None and domain not in DOMAINS:
        problem(
            "bad-domain", f"{domain!r} is not a domain", field="domain", hint=f"one of {', '.join(DOMAINS)}"
        )
    licence = data.get("license")
    if _text(licence) and any(
        licence.strip().lower() == bad or bad in licence.lower() for bad in NON_REDISTRIBUTABLE[:2]
    ):
        problem(
            "license-not-redistributable",
            f"{licence!r} does not allow redistribution",
            field="license",
            hint="use a source whose licence allows redistribution (CC0, CC-BY, public domain, ...)",
        )
    elif _text(licence) and licence.strip().lower() in NON_REDISTRIBUTABLE[2:]:
        problem(
            "license-unknown",
            f"{licence!r} says nothing about redistribution",
            field="license",
            hint="state the data source's licence; leave out sources you may not redistribute",
        )
    citation = data.get("citation")
    if citation is not None:
        if isinstance(citation, dict):
            unknown = sorted(set(citation) - {"authors", "title", "journal", "year", "doi", "url"})
            if unknown:
                problem("bad-citation", f"unknown citation keys {unknown}", field="citation")
            if not _text(citation.get("title")):
                problem("bad-citation", "a citation mapping needs a 'title'", field="citation")
        elif not _text(citation):
            problem(
                "bad-citation",
                "must be text or a mapping (authors, title, journal, year, doi)",
                field="citation",
            )
    noise = data.get("noise_band")
    if noise is not None and (
        isinstance(noise, bool)
        or not isinstance(noise, int | float)
        or not math.isfinite(noise)
        or noise <= 0
    ):
        problem("bad-noise-band", f"must be a positive number, not {noise!r}", field="noise_band")
        noise = None

    setup_fields = data.get("setup_fields")
    if setup_fields is not None:
        if not isinstance(setup_fields, list) or not all(_text(f) for f in setup_fields):
            problem("bad-type", "must be a list of CSV column names", field="setup_fields")
            setup_fields = None
        else:
            for name in setup_fields:
                if name in RESERVED_FIELDS:
                    problem(
                        "reserved-setup-field",
                        f"{name!r} cannot be shown to the agent",
                        field="setup_fields",
                        hint="key, value and source stay hidden; "
                        "the builder writes experiment_id and group_id",
                    )
            repeated = sorted({f for f in setup_fields if setup_fields.count(f) > 1})
            if repeated:
                problem("repeated-setup-field", f"lists {repeated} more than once", field="setup_fields")

    inputs = data.get("inputs") or []
    checked_inputs: list[str] = []
    if not isinstance(inputs, list):
        problem("bad-type", "must be a list of paths relative to spec.yaml", field="inputs")
        inputs = []
    for item in inputs:
        if not _text(item):
            problem("bad-input", f"{item!r} is not a path", field="inputs")
            continue
        rel = PurePosixPath(item)
        target = (root / item).resolve()
        if rel.is_absolute() or ".." in rel.parts or not target.is_relative_to(root.resolve()):
            problem("bad-input", f"{item!r} lies outside the spec folder", field="inputs")
        elif not target.exists():
            problem("missing-input", f"{item!r} does not exist beside spec.yaml", field="inputs")
        elif rel.parts[0] in (*TASK_FILES, "answers.json", SPEC_FILE) or item == data.get("experiments"):
            problem(
                "bad-input",
                f"{item!r} would replace a file the builder writes, or hand over the spec",
                field="inputs",
            )
        else:
            checked_inputs.append(rel.as_posix())

    # the experiments CSV
    rows: dict[str, SpecRow] = {}
    csv_name = data.get("experiments") if _text(data.get("experiments")) else None
    if csv_name:
        csv_path = root / csv_name
        if not csv_path.is_file():
            problem("missing-csv", f"{csv_name!r} does not exist beside spec.yaml", field="experiments")
        else:
            rows = _read_rows(
                csv_path, csv_name, setup_fields if isinstance(setup_fields, list) else [], problem
            )

    # groups
    groups: list[SpecGroup] = []
    raw_groups = data.get("groups")
    if raw_groups is not None and (not isinstance(raw_groups, list) or not raw_groups):
        problem("bad-groups", "must be a non-empty list of groups", field="groups")
        raw_groups = []
    seen_groups: set[str] = set()
    member_of: dict[str, str] = {}
    for index, raw in enumerate(raw_groups or []):
        where = f"groups[{index}]"
        if not isinstance(raw, dict):
            problem("bad-group", "must be a mapping (group_id, endpoint, unit, members, ...)", field=where)
            continue
        for key in raw:
            if key not in GROUP_REQUIRED + GROUP_OPTIONAL:
                problem(
                    "unknown-key",
                    f"unknown group key {key!r}",
                    field=f"{where}.{key}",
                    hint=f"allowed: {', '.join(GROUP_REQUIRED + GROUP_OPTIONAL)}",
                )
        for key in GROUP_REQUIRED:
            if raw.get(key) is None:
                problem("missing-field", "is missing", field=f"{where}.{key}")
        gid = raw.get("group_id")
        if isinstance(gid, int) and not isinstance(gid, bool):
            gid = str(gid)
        if raw.get("group_id") is not None and not _text(gid):
            problem("bad-type", "must be text", field=f"{where}.group_id")
            gid = None
        if gid is not None:
            if gid in seen_groups:
                problem("repeated-group", f"group id {gid!r} is used twice", field=f"{where}.group_id")
            seen_groups.add(gid)
            where = f"groups[{index}] ({gid})"
        for key in ("endpoint", "unit"):
            if raw.get(key) is not None and not _text(raw.get(key)):
                problem("bad-type", "must be non-empty text", field=f"{where}.{key}")
        direction = raw.get("direction", DEFAULT_DIRECTION)
        if not _text(direction):
            problem("bad-type", "must be non-empty text", field=f"{where}.direction")
            direction = DEFAULT_DIRECTION
        elif re.search(r"highest\s+to\s+(?:the\s+)?lowest|descending|decreasing", direction.lower()):
            problem(
                "bad-direction",
                f"{direction!r}: groups are always ranked from the lowest to the highest measured value",
                field=f"{where}.direction",
                hint="negate the values (and say so in the endpoint) to rank the other way",
            )
        weight = raw.get("weight")
        if weight is not None and (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight < 0
        ):
            problem("bad-weight", f"must be a non-negative number, not {weight!r}", field=f"{where}.weight")
            weight = None
        members = raw.get("members")
        clean: list[str] = []
        if members is not None:
            if not isinstance(members, list):
                problem("bad-members", "must be a list of experiment keys", field=f"{where}.members")
                members = []
            for m in members:
                key = str(m) if isinstance(m, int | str) and not isinstance(m, bool) else None
                if key is None:
                    problem("bad-members", f"{m!r} is not an experiment key", field=f"{where}.members")
                    continue
                if key in clean:
                    problem("repeated-member", f"lists {key!r} twice", field=f"{where}.members")
                    continue
                if csv_name and rows and key not in rows:
                    problem(
                        "unknown-member",
                        f"{key!r} is not a key of {csv_name}",
                        field=f"{where}.members",
                    )
                elif key in member_of:
                    problem(
                        "member-in-two-groups",
                        f"{key!r} is already a member of group {member_of[key]!r}",
                        field=f"{where}.members",
                        hint="a row has one measured value: give each group its own rows",
                    )
                else:
                    member_of[key] = gid or where
                clean.append(key)
            if len(clean) < 2:
                problem("group-too-small", "a group needs at least two members", field=f"{where}.members")
            elif rows and all(k in rows for k in clean) and len({rows[k].value for k in clean}) < 2:
                problem(
                    "group-all-equal",
                    "all members have the same value, so no order can be scored",
                    field=f"{where}.members",
                )
        groups.append(
            SpecGroup(
                group_id=gid or "",
                endpoint=str(raw.get("endpoint") or ""),
                unit=str(raw.get("unit") or ""),
                direction=direction.strip(),
                weight=float(weight) if weight is not None else None,
                members=clean,
            )
        )
    weights = [g.weight for g in groups if g.weight is not None]
    if weights and len(weights) != len(groups):
        problem(
            "partial-weights",
            f"{len(weights)} of {len(groups)} groups have a weight",
            field="groups",
            hint="give a weight to every group or to none (then groups weigh equally)",
        )
    elif weights and abs(sum(weights) - 1.0) > WEIGHT_TOLERANCE:
        problem("weights-sum", f"group weights sum to {sum(weights):.6g}, not 1", field="groups")

    if problems:
        lines = _yaml_lines(spec_path)
        for item in problems:
            if item.file == SPEC_FILE and item.row is None and item.field:
                item.row = _line_of(item.field, lines)
        raise SpecError(problems)
    unused = [k for k in rows if k not in member_of]
    return Spec(
        root=root,
        task_id=task_id,
        task_version=version,
        title=data["title"].strip(),
        domain=domain,
        instruction=data["instruction"],
        procedure=data["procedure"],
        experiments_file=csv_name,
        setup_fields=list(setup_fields),
        inputs=checked_inputs,
        noise_band=float(noise) if noise is not None else None,
        citation=citation if isinstance(citation, dict) else citation.strip(),
        data_source=data["data_source"].strip(),
        license=licence.strip(),
        groups=groups,
        rows=rows,
        unused_keys=unused,
    )


def _read_rows(path: Path, name: str, setup_fields: list[str], problem) -> dict[str, SpecRow]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        problem("csv-encoding", "is not UTF-8 text", file=name)
        return {}
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        problem("csv-empty", "is empty: it needs a header row (key, setup fields, value, source)", file=name)
        return {}
    except csv.Error as exc:
        problem("csv-syntax", f"is not readable CSV: {exc}", file=name, row=reader.line_num or 1)
        return {}
    header = [h.strip() for h in header]
    ok = True
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        problem("csv-repeated-column", f"repeats the columns {repeated}", file=name, row=1)
        ok = False
    for col in CSV_REQUIRED:
        if col not in header:
            problem("csv-missing-column", f"has no column {col!r}", file=name, row=1, field=col)
            ok = False
    for col in setup_fields:
        if col not in header and col not in RESERVED_FIELDS:
            problem(
                "unknown-setup-field",
                f"setup field {col!r} is not a column of {name}",
                field="setup_fields",
                hint=f"columns: {', '.join(header)}",
            )
            ok = False
    if not ok:
        return {}
    rows: dict[str, SpecRow] = {}
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problem("csv-syntax", f"is not readable CSV: {exc}", file=name, row=reader.line_num)
            break
        line_no = reader.line_num  # the record's last line (a quoted cell may span lines)
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            problem(
                "csv-ragged-row",
                f"has {len(cells)} cells, the header has {len(header)}",
                file=name,
                row=line_no,
                hint="quote cells that contain commas",
            )
            continue
        row = {h: c.strip() for h, c in zip(header, cells, strict=True)}
        key = row["key"]
        if not key:
            problem("csv-empty-key", "has an empty key", file=name, row=line_no, field="key")
            continue
        if key in rows:
            problem(
                "csv-repeated-key",
                f"key {key!r} already used on line {rows[key].line}",
                file=name,
                row=line_no,
                field="key",
            )
            continue
        value = _number(row["value"])
        if value is None:
            problem(
                "csv-bad-value",
                f"value {row['value']!r} is not a finite number",
                file=name,
                row=line_no,
                field="value",
                hint="one number in the group's unit, with a dot as decimal mark; no units or ranges",
            )
        if not row["source"]:
            problem(
                "csv-missing-source",
                f"key {key!r} has no source",
                file=name,
                row=line_no,
                field="source",
                hint="say where this value was read: table and row, data set file and record id",
            )
        rows[key] = SpecRow(key, line_no, row, value if value is not None else math.nan, row["source"])
    if not rows:
        problem("csv-no-rows", "has no experiment rows", file=name)
    return rows


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------------------------------------- rendering


@dataclass
class Rendered:
    """A built task in memory: the task files (relative path to bytes), the answers, and the mappings."""

    files: dict[str, bytes]
    answers: bytes
    id_map: dict[str, str]  # new experiment id -> author key
    group_map: dict[str, str]  # new group id -> author group id

    def agent_text(self) -> dict[str, str]:
        """The agent-visible files that are text, decoded."""
        out = {}
        for name, data in self.files.items():
            if len(data) > MAX_TEXT_INPUT:
                continue
            try:
                out[name] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
        return out


def seed_of(task_id: str, task_version: str) -> int:
    """The generator seed of a task: from its id and version only, so a rebuild gives the same bytes."""
    digest = hashlib.sha256(f"spu-task-build\0{task_id}\0{task_version}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _token_pattern(keys: list[str]) -> re.Pattern[str] | None:
    if not keys:
        return None
    alternatives = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")


def render(spec: Spec) -> Rendered:
    """Lay out the task files and the answers of ``spec`` in memory (seeded by task id and version)."""
    rng = random.Random(seed_of(spec.task_id, spec.task_version))
    order = list(range(len(spec.groups)))
    rng.shuffle(order)
    built = [(f"g{i + 1}", spec.groups[j]) for i, j in enumerate(order)]
    keys = [k for g in spec.groups for k in g.members]
    new_of = _new_ids(keys, rng)
    presented: dict[str, list[str]] = {}
    for gid, group in built:
        ids = [new_of[k] for k in group.members]
        rng.shuffle(ids)
        presented[gid] = ids
    key_of = {new: key for key, new in new_of.items()}
    weights = {gid: (g.weight if g.weight is not None else 1.0 / len(spec.groups)) for gid, g in built}

    # input files: keys inside their names become the new ids; setup cells naming an input follow
    pattern = _token_pattern(keys)
    input_files: dict[str, Path] = {}
    for item in spec.inputs:
        source = spec.root / item
        paths = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for p in paths:
            rel = p.relative_to(spec.root).as_posix()
            new_rel = pattern.sub(lambda m: new_of[m.group(0)], rel) if pattern else rel
            input_files[new_rel] = p
    renamed = {}
    for new_rel, p in input_files.items():
        old_rel = p.relative_to(spec.root).as_posix()
        if old_rel != new_rel:
            renamed[old_rel] = new_rel
            renamed.setdefault(PurePosixPath(old_rel).name, PurePosixPath(new_rel).name)

    contract = {
        "task_id": spec.task_id,
        "task_version": spec.task_version,
        "title": spec.title,
        "groups": [
            {
                "group_id": gid,
                "endpoint": g.endpoint,
                "unit": g.unit,
                "direction": g.direction,
                "weight": weights[gid],
                "experiment_ids": presented[gid],
            }
            for gid, g in built
        ],
    }

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["experiment_id", "group_id", *spec.setup_fields])
    for gid, _ in built:
        for new in presented[gid]:
            cells = spec.rows[key_of[new]].cells
            writer.writerow([new, gid, *(renamed.get(cells[f], cells[f]) for f in spec.setup_fields)])
    targets = out.getvalue()

    group_lines = "\n".join(
        f"- `{gid}`: {g.endpoint}, in {g.unit} ({len(g.members)} experiments); {g.direction}."
        for gid, g in built
    )
    shown = ", ".join(f"`{f}`" for f in spec.setup_fields)
    file_lines = [
        "- `experiment.md`: the shared procedure and the definition of each endpoint",
        "- `protocol.json`: the same information in machine-readable form",
        f"- `targets.csv`: one row per experiment: `experiment_id`, `group_id`, then its settings ({shown})",
        "- `contract.json`: the machine-readable contract "
        "(task id and version, groups, weights, experiment ids)",
    ]
    if input_files:
        file_lines.append("- input files: " + ", ".join(f"`{name}`" for name in sorted(input_files)))
    example = ", ".join(
        f'{{"group_id": "{gid}", "order": ["<lowest id>", "...", "<highest id>"]}}' for gid, _ in built
    )
    instruction = (
        f"# {spec.title}\n\n{spec.instruction.strip()}\n\n## Comparison groups\n\n{group_lines}\n\n"
        f"## Files\n\n" + "\n".join(file_lines) + "\n\n"
        f"## Information policy\n\n{INFORMATION_POLICY}\n\n"
        "## Submission\n\n"
        "Write `rankings.json` in your output directory: UTF-8 JSON, at most 1 MiB, "
        "each key once per object:\n\n"
        f'```json\n{{"task_id": "{spec.task_id}", "task_version": "{spec.task_version}",\n'
        f' "rankings": [{example}]}}\n```\n\n{SUBMISSION_RULES}\n'
    )
    endpoint_lines = "\n".join(f"- Group `{gid}`: {g.endpoint}, in {g.unit}." for gid, g in built)
    experiment = (
        f"# Experiment\n\n{spec.procedure.strip()}\n\n## Endpoints\n\n{endpoint_lines}\n\n"
        f"`targets.csv` gives each experiment's settings: {shown}.\n"
    )
    protocol = {
        "domain": spec.domain,
        "procedure": spec.procedure.strip(),
        "setup_fields": spec.setup_fields,
        "groups": {
            gid: {"endpoint": g.endpoint, "unit": g.unit, "direction": g.direction} for gid, g in built
        },
        "input_files": sorted(input_files),
    }
    answers = {
        "task_id": spec.task_id,
        "task_version": spec.task_version,
        "groups": [
            {
                "group_id": gid,
                "weight": weights[gid],
                "unit": g.unit,
                "endpoint": g.endpoint,
                "values": {new_of[k]: spec.rows[k].value for k in g.members},
                "sources": {new_of[k]: spec.rows[k].source for k in g.members},
            }
            for gid, g in built
        ],
        "citation": spec.citation,
        "data_source": spec.data_source,
        "license": spec.license,
        "id_map": {new_of[k]: k for k in keys},
        "group_map": {gid: g.group_id for gid, g in built},
        "built_by": "spu task build",
    }
    files = {
        "contract.json": _dump_json(contract),
        "instruction.md": instruction.encode("utf-8"),
        "experiment.md": experiment.encode("utf-8"),
        "protocol.json": _dump_json(protocol),
        "targets.csv": targets.encode("utf-8"),
    }
    for new_rel, p in sorted(input_files.items()):
        try:
            files[new_rel] = p.read_bytes()
        except OSError as exc:
            raise SpecError(
                [SpecProblem("bad-input", SPEC_FILE, f"cannot read {new_rel}: {exc}", field="inputs")]
            ) from None
    return Rendered(
        files=files,
        answers=_dump_json(answers),
        id_map=answers["id_map"],
        group_map=answers["group_map"],
    )


# ---------------------------------------------------------------------------------------------- author checks

_STOPWORDS_TEXT = (
    "a an and the of in on at for to from by with without into via as or is are be its their this "
    "that between among using under over than study studies"
)
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_NOT_SURNAMES_TEXT = (
    "And The Et Al Journal Table Supplementary Press University Edition Handbook Vol Chem Phys Soc Am "
    "Nat Nature Science Proc Natl Acad Sci Commun Lett Rev Biochem Biol Mol Des Data Comput Aided Med "
    "Org Inorg Anal Int Acta Angew Ed Eng Res Mater Appl Eur Phys Ind Bioorg Pharm Rep Sci"
)
_NOT_SURNAMES = frozenset(_NOT_SURNAMES_TEXT.split())
_GENERIC_TOKENS_TEXT = (
    "csv tsv pdf xlsx xls txt json html doi url api pdb pka pkb logp logd ph kcat km si table row "
    "rows file files version data set dataset supplementary information"
)
_GENERIC_TOKENS = frozenset(_GENERIC_TOKENS_TEXT.split())
_DOI_RE = re.compile(r"\b10\.\d{4,9}/[^\s,;\"'<>]+", re.IGNORECASE)
_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['\u2019-][A-Za-z0-9]+)*")


def _title_of(citation: str | dict[str, Any]) -> str:
    if isinstance(citation, dict):
        return str(citation.get("title") or "")
    match = re.search(r"[\"\u201c\u201d]([^\"\u201c\u201d]{8,})[\"\u201c\u201d]", citation) or re.search(
        r"(?:^|[\s,(])['\u2018]([^'\u2018\u2019]{8,}?)['\u2019](?=[\s,.;)]|$)", citation
    )
    return match.group(1) if match else ""


def _surnames(citation: str | dict[str, Any]) -> list[str]:
    if isinstance(citation, dict):
        authors = citation.get("authors") or []
        authors = authors if isinstance(authors, list) else re.split(r";|,| and ", str(authors))
        names = []
        for author in authors:
            words = [w for w in _WORD_RE.findall(str(author)) if len(w) > 1 or not w.isupper()]
            # "Surname, Given" or "Given Surname": take the longest capitalised word without a dot
            if "," in str(author):
                words = words[:1]
            elif words:
                words = words[-1:]
            names += words
        return sorted({n for n in names if len(n) >= 2})
    found: set[str] = set()
    patterns = (
        r"\b([A-Z][\w'\u2019-]+),?\s+(?:[A-Z]\.?-?\s?){1,3}(?=[,;.]|\s|$)",  # Surname DL / Surname, D. L.
        r"(?:\b[A-Z]\.\s?(?:-?[A-Z]\.\s?)*)([A-Z][\w'\u2019-]+)",  # D. L. Surname
        r"\b([A-Z][\w'\u2019-]+)\s+et\s+al\b",  # Surname et al
    )
    for pattern in patterns:
        for match in re.finditer(pattern, citation):
            name = match.group(1).strip("'\u2019-")
            if len(name) >= 2 and name not in _NOT_SURNAMES and not name.isupper():
                found.add(name)
    return sorted(found)


def _source_tokens(text: str) -> list[str]:
    tokens: set[str] = set()
    for url in re.findall(r"https?://[^\s,;)]+", text):
        tokens.add(url.rstrip("."))
    for word in re.findall(r"[A-Za-z0-9][\w.-]*[A-Za-z0-9]", text):
        if word.lower() in _GENERIC_TOKENS or _DOI_RE.fullmatch(word):
            continue
        mixed = re.search(r"[a-z][A-Z]", word) and len(word) >= 4  # FreeSolv, PubChem, ChEMBL
        acronym = word.isupper() and word.isalpha() and len(word) >= 3  # NIST, ESOL
        filename = re.fullmatch(r"[\w-]+\.(?:csv|tsv|txt|xlsx?|json|sdf|zip|pdf|dat)", word, re.IGNORECASE)
        ident = re.search(r"[A-Za-z]", word) and re.search(r"\d", word) and len(word) >= 5  # SAMPL6, v0.52x
        if mixed or acronym or filename or ident:
            tokens.add(word)
    return sorted(tokens)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def source_identifiers(spec: Spec) -> list[tuple[str, str]]:
    """(kind, text) of every identifier of the source the agent must not see."""
    out: list[tuple[str, str]] = []
    citation_text = spec.citation_text
    for doi in sorted(set(_DOI_RE.findall(citation_text + " " + spec.data_source))):
        out.append(("DOI", doi.rstrip(".)")))
    title = _title_of(spec.citation)
    words = _words(title)
    for i in range(len(words) - TITLE_RUN + 1):
        gram = words[i : i + TITLE_RUN]
        if sum(w not in _STOPWORDS for w in gram) >= 2:
            out.append(("title words", " ".join(gram)))
    out += [("author surname", name) for name in _surnames(spec.citation)]
    out += [("data source", tok) for tok in _source_tokens(spec.data_source)]
    return list(dict.fromkeys(out))


def _find(kind: str, term: str, text: str, words_joined: str) -> bool:
    if kind == "title words":
        return f" {term} " in words_joined
    if kind == "author surname":
        return re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text) is not None
    return re.search(rf"(?<![\w.-]){re.escape(term)}(?![\w-])", text, re.IGNORECASE) is not None


def _spearman(x: list[float], y: list[float]) -> float:
    import numpy as np

    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt((rx @ rx) * (ry @ ry)))
    return float(rx @ ry) / denom if denom > 0 else 0.0


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def author_checks(spec: Spec, rendered: Rendered) -> list[AuthorWarning]:
    """The warnings an author should look at before publishing a task built from ``spec``."""
    warnings: list[AuthorWarning] = []
    built_of = {author: new for new, author in rendered.group_map.items()}
    for group in spec.groups:
        gid, built = group.group_id, built_of.get(group.group_id)
        rows = [spec.rows[k] for k in group.members]
        values = [r.value for r in rows]
        for name in spec.setup_fields:
            numbers = [_number(r.cells[name]) for r in rows]
            if any(n is None for n in numbers) or len(set(numbers)) < 2:
                continue
            rho = _spearman(numbers, values)
            if abs(abs(rho) - 1.0) < 1e-9:
                warnings.append(
                    AuthorWarning(
                        "follows-one-field",
                        f"the measured order follows the setup field {name!r} exactly "
                        f"(Spearman rho = {rho:+.0f} over {len(rows)} experiments): ranking by that field "
                        "alone scores 1",
                        gid,
                        built,
                    )
                )
        by_value = sorted(rows, key=lambda r: r.value)
        ties: dict[float, list[str]] = {}
        for r in by_value:
            ties.setdefault(r.value, []).append(r.key)
        for value, keys in ties.items():
            if len(keys) > 1:
                warnings.append(
                    AuthorWarning(
                        "tie",
                        f"{', '.join(keys)} share the value {_fmt(value)} (tied values share average ranks)",
                        gid,
                        built,
                    )
                )
        if spec.noise_band is not None:
            close = [
                (a, b) for a, b in itertools.pairwise(by_value) if 0 < b.value - a.value < spec.noise_band
            ]
            if close:
                pairs = "; ".join(
                    f"{a.key} ({_fmt(a.value)}) and {b.key} ({_fmt(b.value)})" for a, b in close
                )
                warnings.append(
                    AuthorWarning(
                        "within-noise",
                        f"{len(close)} adjacent pair(s) closer than the noise band {_fmt(spec.noise_band)} "
                        f"{group.unit}: {pairs}",
                        gid,
                        built,
                    )
                )
    contract = json.loads(rendered.files["contract.json"])
    for built in contract["groups"]:
        ids = built["experiment_ids"]
        author = rendered.group_map[built["group_id"]]
        values = [spec.rows[rendered.id_map[e]].value for e in ids]
        if len(ids) >= 3 and _spearman(list(range(len(ids))), values) > 1 - 1e-9:
            warnings.append(
                AuthorWarning(
                    "presented-in-order",
                    "the shuffled order shown to the agent is already the measured order: submitting it "
                    "unchanged scores 1 (raise task_version to draw another order)",
                    author,
                    built["group_id"],
                )
            )
    texts = rendered.agent_text()
    identifiers = source_identifiers(spec)
    for name, text in sorted(texts.items()):
        joined = " " + " ".join(_words(text)) + " "
        for kind, term in identifiers:
            if _find(kind, term, text, joined):
                warnings.append(
                    AuthorWarning("source-identifier", f"{kind} {term!r} of the source appears in {name}")
                )
        for doi in sorted(set(_DOI_RE.findall(text))):
            if not any(
                kind == "DOI" and term.lower() == doi.rstrip(".)").lower() for kind, term in identifiers
            ):
                warnings.append(AuthorWarning("source-identifier", f"a DOI ({doi}) appears in {name}"))
    warnings += [AuthorWarning(*w) for w in prior_screen.author_warnings(rendered.files, rendered.answers)]
    if spec.unused_keys:
        warnings.append(
            AuthorWarning(
                "unused-rows",
                f"{len(spec.unused_keys)} row(s) of {spec.experiments_file} are in no group "
                "and are left out: "
                + ", ".join(spec.unused_keys[:10])
                + (" ..." if len(spec.unused_keys) > 10 else ""),
            )
        )
    return warnings


def notes(spec: Spec) -> list[str]:
    """Things the checks could not look at (not warnings)."""
    out = []
    if spec.noise_band is None:
        out.append("no noise_band given: the within-noise check was skipped")
    if not _title_of(spec.citation):
        out.append("no quoted title in the citation: the title-words check was skipped")
    return out


# ---------------------------------------------------------------------------------------------- building


@dataclass
class BuildResult:
    task_id: str
    task_version: str
    task_dir: str
    answers: str
    experiments: int
    groups: int
    warnings: list[AuthorWarning]
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["warnings"] = [{**asdict(w), "text": str(w)} for w in self.warnings]
        return data


def _out_problem(out: Path, message: str, hint: str = "") -> SpecError:
    return SpecError([SpecProblem("bad-output", str(out), message, hint=hint)])


def build_task(spec_dir: str | Path, out_dir: str | Path, *, force: bool = False) -> BuildResult:
    """Build ``OUT_DIR/task/`` and ``OUT_DIR/answers.json`` from a spec, check them, return the warnings.

    An existing ``OUT_DIR/task`` is replaced only when it is a built task of the same task id (or with
    ``force``); the new files are written beside it first, so a failed build leaves the old one intact.
    """
    spec = load_spec(spec_dir)
    rendered = render(spec)
    out = Path(out_dir)
    task_dir = out / "task"
    answers_path = out / "answers.json"
    if out.exists() and not out.is_dir():
        raise _out_problem(out, "is a file, not a directory")
    if spec.root.resolve().is_relative_to(task_dir.resolve()):
        raise _out_problem(out, "the task directory would replace the spec", "build into another directory")
    if task_dir.exists() and not force:
        contract = task_dir / "contract.json"
        try:
            existing = json.loads(contract.read_text(encoding="utf-8")).get("task_id")
        except (OSError, ValueError, AttributeError):
            existing = None
        if existing != spec.task_id:
            raise _out_problem(
                out,
                f"{task_dir} exists and is not a built task of {spec.task_id!r}",
                "choose another OUT_DIR, or pass --force to replace it",
            )
    try:
        _write_build(rendered, out, task_dir, answers_path)
    except OSError as exc:
        raise _out_problem(out, f"cannot write the build: {exc}") from None
    except SpecError:
        raise
    except TaskError as exc:
        # the builder's own output failed the task checks: a spec the checks above let through
        raise SpecError(
            [SpecProblem("task-check", str(out), f"the built task fails the task checks: {exc}")]
        ) from None
    return BuildResult(
        task_id=spec.task_id,
        task_version=spec.task_version,
        task_dir=str(task_dir),
        answers=str(answers_path),
        experiments=len(rendered.id_map),
        groups=len(spec.groups),
        warnings=author_checks(spec, rendered),
        notes=notes(spec),
    )


def _write_build(rendered: Rendered, out: Path, task_dir: Path, answers_path: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".task-build-", dir=out))
    try:
        new_task = staging / "task"
        for rel, data in rendered.files.items():
            target = new_task / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (staging / "answers.json").write_bytes(rendered.answers)
        check_answers(load_task(new_task), load_answers(staging / "answers.json"))
        if task_dir.exists():
            shutil.rmtree(task_dir)
        os.replace(new_task, task_dir)
        os.replace(staging / "answers.json", answers_path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def compare_with_build(spec_dir: str | Path, out_dir: str | Path) -> list[str]:
    """Files under ``out_dir`` (``task/`` and ``answers.json``) that differ from a fresh build of the spec."""
    rendered = render(load_spec(spec_dir))
    out = Path(out_dir)
    expected = {f"task/{rel}": data for rel, data in rendered.files.items()}
    expected["answers.json"] = rendered.answers
    task_dir = out / "task"
    present = (
        {f"task/{p.relative_to(task_dir).as_posix()}" for p in task_dir.rglob("*") if p.is_file()}
        if task_dir.is_dir()
        else set()
    )
    if (out / "answers.json").is_file():
        present.add("answers.json")
    differ = []
    for rel in sorted(set(expected) | present):
        path = out / rel
        if rel not in expected or not path.is_file() or path.read_bytes() != expected[rel]:
            differ.append(rel)
    return differ


def spec_of_task(task_dir: str | Path) -> Path | None:
    """The spec a built task came from, when it lies in the suite layout (``<dir>/spec/spec.yaml``)."""
    candidate = Path(task_dir).resolve().parent / "spec"
    return candidate if (candidate / SPEC_FILE).is_file() else None


def check_built_task(task_dir: str | Path, spec_dir: str | Path) -> dict[str, Any]:
    """Author warnings of a built task from its spec, and whether the task matches a fresh build."""
    spec = load_spec(spec_dir)
    rendered = render(spec)
    return {
        "spec": str(spec_dir),
        "warnings": author_checks(spec, rendered),
        "notes": notes(spec),
        "differs_from_build": compare_with_build(spec_dir, Path(task_dir).resolve().parent),
    }
