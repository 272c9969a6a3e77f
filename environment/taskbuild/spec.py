"""A spec folder read and checked: ``spec.yaml`` (identity, texts, setup fields, groups, citation, data
source, licence) and its experiments CSV. :func:`load_spec` reports every problem at once."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from environment.taskbuild import design as design_mod
from environment.taskbuild import paths, safeyaml
from environment.taskbuild import sources as sources_mod
from environment.taskbuild.problems import SPEC_FILE, Problems, SpecError, spec_error
from environment.taskbuild.rows import RESERVED_FIELDS, SpecRow, read_rows
from spu_common.contract import DEFAULT_DIRECTION, TASK_FILES, as_id, weight_problem, weights_problem

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
OPTIONAL_KEYS = ("inputs", "noise_band", "design", "selection", "source_files")
GROUP_REQUIRED = ("group_id", "endpoint", "unit", "members")
GROUP_OPTIONAL = ("direction", "weight")
CITATION_KEYS = ("authors", "title", "journal", "year", "doi", "url")
#: Licence texts that do not allow redistribution.
NON_REDISTRIBUTABLE = ("all rights reserved", "proprietary", "unknown", "none", "no licence", "no license")
_DESCENDING_RE = re.compile(r"highest\s+to\s+(?:the\s+)?lowest|descending|decreasing")


@dataclass
class SpecGroup:
    group_id: str
    endpoint: str
    unit: str
    direction: str
    weight: float | None
    members: list[str]


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
    #: every input file, relative to the spec folder (files of input folders listed one by one)
    input_files: list[str] = field(default_factory=list)
    #: how the members are drawn from the CSV (:mod:`environment.taskbuild.design`), and the selection record
    design: design_mod.Design | None = None
    selection: dict[str, Any] | None = None
    #: the pinned source files (:mod:`environment.taskbuild.sources`) and where each row's value was read
    source_files: dict[str, sources_mod.SourceFile] = field(default_factory=dict)
    source_refs: dict[str, sources_mod.SourceRef] = field(default_factory=dict)

    @property
    def citation_text(self) -> str:
        if isinstance(self.citation, dict):
            parts = [self.citation.get(k) for k in CITATION_KEYS]
            return ", ".join(
                "; ".join(map(str, p)) if isinstance(p, list) else str(p)
                for p in parts
                if p not in (None, "")
            )
        return self.citation


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def load_spec(spec_dir: str | Path) -> Spec:
    """Read and check a spec folder (or its ``spec.yaml``); raise :class:`SpecError` listing every problem."""
    path = Path(spec_dir)
    root = path.parent if path.is_file() else path
    spec_path = path if path.is_file() else path / SPEC_FILE
    if not spec_path.is_file():
        raise spec_error(
            "spec-missing",
            str(spec_path),
            "no spec file here",
            hint=f"a spec is a folder holding {SPEC_FILE} and a CSV of experiments",
        )
    text = safeyaml.read_text(spec_path)
    data = safeyaml.load(text)
    if not isinstance(data, dict):
        raise spec_error("spec-not-mapping", SPEC_FILE, "must hold a mapping of keys (task_id: ..., ...)")
    problems = Problems()
    _check_keys(data, problems)
    identity = _identity(data, problems)
    setup_fields = _setup_fields(data.get("setup_fields"), problems)
    inputs, input_files = _inputs(root, data, problems)
    rows: dict[str, SpecRow] = {}
    csv_name = _text(data.get("experiments"))
    if csv_name:
        problem = paths.outside_problem(root, csv_name)
        if problem:
            problems.add("bad-experiments", problem, field="experiments")
        elif not (root / csv_name).is_file():
            problems.add("missing-csv", f"{csv_name!r} does not exist beside spec.yaml", field="experiments")
        else:
            try:  # once, from the checked descriptor
                raw = paths.read_bytes(root, csv_name)
            except ValueError as exc:
                problems.add("bad-experiments", str(exc), field="experiments")
            else:
                rows = read_rows(raw, csv_name, setup_fields or [], problems)
    source_files = sources_mod.parse_source_files(data.get("source_files"), problems)
    source_refs = sources_mod.parse_refs(rows, source_files, csv_name or "", problems)
    design = design_mod.parse_design(data.get("design"), rows, identity["noise_band"], problems)
    selection = design_mod.parse_selection(data.get("selection"), problems)
    drawn = _drawn(design, rows, identity["task_id"], problems)
    groups, member_of = _groups(data.get("groups"), rows, csv_name, problems, drawn)
    if design is not None and sorted(g.group_id for g in design.groups) != sorted(g.group_id for g in groups):
        problems.add(
            "design-mismatch",
            "the design's groups are not the spec's groups",
            field="design.groups",
            hint="give the design one entry per group, with the same group_id",
        )
    if problems:
        lines = safeyaml.key_lines(text)
        for item in problems:
            if item.file == SPEC_FILE and item.row is None and item.field:
                item.row = safeyaml.line_of(item.field, lines)
        raise SpecError(problems)
    return Spec(
        root=root,
        **identity,
        experiments_file=csv_name,
        setup_fields=list(setup_fields),
        inputs=inputs,
        groups=groups,
        rows=rows,
        unused_keys=[k for k in rows if k not in member_of],
        input_files=input_files,
        design=design,
        selection=selection,
        source_files=source_files,
        source_refs=source_refs,
    )


def _drawn(
    design: design_mod.Design | None, rows: dict[str, SpecRow], task_id: Any, problems: Problems
) -> dict[str, list[str]]:
    """The members the design's own seed draws, by group id (empty without a design seed or rows)."""
    if design is None or design.seed is None or not rows or not isinstance(task_id, str):
        return {}
    try:
        return design_mod.draw(design, rows, task_id, design.seed)
    except design_mod.DrawError as exc:
        problems.add("design-draw", str(exc), field="design", hint="widen the design's where, or lower size")
        return {}


def _check_keys(data: dict, problems: Problems) -> None:
    for key in data:
        if key not in REQUIRED_KEYS + OPTIONAL_KEYS:
            problems.add(
                "unknown-key",
                f"unknown key {str(key)[:80]!r}",
                field=str(key)[:80],
                hint=f"allowed keys: {', '.join(REQUIRED_KEYS + OPTIONAL_KEYS)}",
            )
    for key in REQUIRED_KEYS:
        if key not in data or data[key] is None:
            problems.add("missing-field", "is missing", field=key)
    for key in ("title", "instruction", "procedure", "data_source", "license", "experiments"):
        if data.get(key) is not None and not _text(data.get(key)):
            problems.add("bad-type", "must be non-empty text", field=key)


def _identity(data: dict, problems: Problems) -> dict[str, Any]:
    """The spec's identity and texts (task id, version, domain, licence, citation, noise band)."""
    task_id = data.get("task_id")
    if task_id is not None and (not isinstance(task_id, str) or not TASK_ID_RE.match(task_id)):
        problems.add(
            "bad-task-id",
            f"{task_id!r} is not a task id",
            field="task_id",
            hint="lowercase letters, digits and single hyphens, e.g. chem-hydration-free-energy",
        )
    version = data.get("task_version")
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if data.get("task_version") is not None and not _text(version):
        problems.add(
            "bad-version",
            f"must be a non-empty string, not {data.get('task_version')!r}",
            field="task_version",
            hint='quote it: task_version: "1"',
        )
    domain = data.get("domain")
    if domain is not None and domain not in DOMAINS:
        problems.add(
            "bad-domain", f"{domain!r} is not a domain", field="domain", hint=f"one of {', '.join(DOMAINS)}"
        )
    _check_license(data.get("license"), problems)
    _check_citation(data.get("citation"), problems)
    noise = _noise_band(data.get("noise_band"), problems)
    citation = data.get("citation")
    return {
        "task_id": task_id,
        "task_version": version,
        "title": (data.get("title") or "").strip(),
        "domain": domain,
        "instruction": data.get("instruction"),
        "procedure": data.get("procedure"),
        "noise_band": float(noise) if noise is not None else None,
        "citation": citation if isinstance(citation, dict) else (citation or "").strip(),
        "data_source": (data.get("data_source") or "").strip(),
        "license": (data.get("license") or "").strip(),
    }


def _check_license(licence: Any, problems: Problems) -> None:
    if not _text(licence):
        return
    lowered = licence.strip().lower()
    if any(lowered == bad or bad in lowered for bad in NON_REDISTRIBUTABLE[:2]):
        problems.add(
            "license-not-redistributable",
            f"{licence!r} does not allow redistribution",
            field="license",
            hint="use a source whose licence allows redistribution (CC0, CC-BY, public domain, ...)",
        )
    elif lowered in NON_REDISTRIBUTABLE[2:]:
        problems.add(
            "license-unknown",
            f"{licence!r} says nothing about redistribution",
            field="license",
            hint="state the data source's licence; leave out sources you may not redistribute",
        )


def _check_citation(citation: Any, problems: Problems) -> None:
    if citation is None:
        return
    if isinstance(citation, dict):
        unknown = sorted(str(k) for k in set(citation) - set(CITATION_KEYS))
        if unknown:
            problems.add("bad-citation", f"unknown citation keys {unknown}", field="citation")
        if not _text(citation.get("title")):
            problems.add("bad-citation", "a citation mapping needs a 'title'", field="citation")
    elif not _text(citation):
        problems.add(
            "bad-citation", "must be text or a mapping (authors, title, journal, year, doi)", field="citation"
        )


def _noise_band(noise: Any, problems: Problems) -> float | None:
    if noise is None:
        return None
    if (
        isinstance(noise, bool)
        or not isinstance(noise, int | float)
        or not math.isfinite(noise)
        or noise <= 0
    ):
        problems.add("bad-noise-band", f"must be a positive number, not {noise!r}", field="noise_band")
        return None
    return noise


def _setup_fields(setup_fields: Any, problems: Problems) -> list[str] | None:
    if setup_fields is None:
        return None
    if not isinstance(setup_fields, list) or not all(_text(f) for f in setup_fields):
        problems.add("bad-type", "must be a list of CSV column names", field="setup_fields")
        return None
    for name in setup_fields:
        if name in RESERVED_FIELDS:
            problems.add(
                "reserved-setup-field",
                f"{name!r} cannot be shown to the agent",
                field="setup_fields",
                hint="key, value and source stay hidden; the builder writes experiment_id and group_id",
            )
    twice = sorted({f for f in setup_fields if setup_fields.count(f) > 1})
    if twice:
        problems.add("repeated-setup-field", f"lists {twice} more than once", field="setup_fields")
    return setup_fields


def _inputs(root: Path, data: dict, problems: Problems) -> tuple[list[str], list[str]]:
    """The checked ``inputs`` entries, and every file they name (relative to the spec folder)."""
    inputs = data.get("inputs") or []
    if not isinstance(inputs, list):
        problems.add("bad-type", "must be a list of paths relative to spec.yaml", field="inputs")
        return [], []
    checked: list[str] = []
    files: list[str] = []
    for item in inputs:
        if not _text(item):
            problems.add("bad-input", f"{item!r} is not a path", field="inputs")
            continue
        rel = PurePosixPath(item)
        outside = paths.outside_problem(root, item)
        if outside:
            problems.add("bad-input", outside, field="inputs")
        elif not (root / item).exists():
            problems.add("missing-input", f"{item!r} does not exist beside spec.yaml", field="inputs")
        elif rel.parts[0] in (*TASK_FILES, "answers.json", SPEC_FILE) or item == data.get("experiments"):
            problems.add(
                "bad-input",
                f"{item!r} would replace a file the builder writes, or hand over the spec",
                field="inputs",
            )
        else:
            found, bad = paths.files_under(root, item)
            for message in bad:
                problems.add("bad-input", message, field="inputs")
            checked.append(rel.as_posix())
            files += [p.relative_to(root).as_posix() for p in found]
    return checked, files


def _groups(
    raw_groups: Any,
    rows: dict[str, SpecRow],
    csv_name: str | None,
    problems: Problems,
    drawn: dict[str, list[str]],
) -> tuple[list[SpecGroup], dict[str, str]]:
    """The checked groups, and which group each experiment key belongs to. A group may leave out its
    members when the design's seed draws them (``drawn``); listed members must then be the drawn ones."""
    if raw_groups is not None and (not isinstance(raw_groups, list) or not raw_groups):
        problems.add("bad-groups", "must be a non-empty list of groups", field="groups")
        raw_groups = []
    groups: list[SpecGroup] = []
    seen: set[str] = set()
    member_of: dict[str, str] = {}
    for index, raw in enumerate(raw_groups or []):
        group = _group(index, raw, seen, problems, drawn)
        if group is None:
            continue
        where = f"groups[{index}]" + (f" ({group.group_id})" if group.group_id else "")
        members = raw.get("members")
        if group.group_id in drawn:
            if members is not None and sorted(map(str, members)) != sorted(drawn[group.group_id]):
                problems.add(
                    "design-mismatch",
                    f"members differ from the design's draw {sorted(drawn[group.group_id])}",
                    field=f"{where}.members",
                    hint="leave members out to take the draw, or change the design's seed",
                )
            members = drawn[group.group_id]
        group.members = _members(members, where, group.group_id, rows, csv_name, member_of, problems)
        groups.append(group)
    problem = weights_problem([g.weight for g in groups])
    if problem:
        code = "weights-sum" if "sum" in problem else "partial-weights"
        problems.add(code, problem, field="groups")
    return groups, member_of


def _group(
    index: int, raw: Any, seen: set[str], problems: Problems, drawn: dict[str, list[str]]
) -> SpecGroup | None:
    where = f"groups[{index}]"
    if not isinstance(raw, dict):
        problems.add("bad-group", "must be a mapping (group_id, endpoint, unit, members, ...)", field=where)
        return None
    for key in raw:
        if key not in GROUP_REQUIRED + GROUP_OPTIONAL:
            problems.add(
                "unknown-key",
                f"unknown group key {str(key)[:80]!r}",
                field=f"{where}.{str(key)[:80]}",
                hint=f"allowed: {', '.join(GROUP_REQUIRED + GROUP_OPTIONAL)}",
            )
    for key in GROUP_REQUIRED:
        if raw.get(key) is None and not (key == "members" and as_id(raw.get("group_id")) in drawn):
            problems.add("missing-field", "is missing", field=f"{where}.{key}")
    gid = as_id(raw.get("group_id"))
    if raw.get("group_id") is not None and gid is None:
        problems.add("bad-type", "must be text", field=f"{where}.group_id")
    if gid is not None:
        if gid in seen:
            problems.add("repeated-group", f"group id {gid!r} is used twice", field=f"{where}.group_id")
        seen.add(gid)
        where = f"groups[{index}] ({gid})"
    for key in ("endpoint", "unit"):
        if raw.get(key) is not None and not _text(raw.get(key)):
            problems.add("bad-type", "must be non-empty text", field=f"{where}.{key}")
    weight = raw.get("weight")
    problem = weight_problem(weight)
    if problem:
        problems.add("bad-weight", problem, field=f"{where}.weight")
        weight = None
    return SpecGroup(
        group_id=gid or "",
        endpoint=str(raw.get("endpoint") or ""),
        unit=str(raw.get("unit") or ""),
        direction=_direction(raw.get("direction", DEFAULT_DIRECTION), where, problems),
        weight=float(weight) if weight is not None else None,
        members=[],
    )


def _direction(direction: Any, where: str, problems: Problems) -> str:
    if not _text(direction):
        problems.add("bad-type", "must be non-empty text", field=f"{where}.direction")
        return DEFAULT_DIRECTION
    if _DESCENDING_RE.search(direction.lower()):
        problems.add(
            "bad-direction",
            f"{direction!r}: groups are always ranked from the lowest to the highest measured value",
            field=f"{where}.direction",
            hint="negate the values (and say so in the endpoint) to rank the other way",
        )
    return direction.strip()


def _members(
    members: Any,
    where: str,
    gid: str,
    rows: dict[str, SpecRow],
    csv_name: str | None,
    member_of: dict[str, str],
    problems: Problems,
) -> list[str]:
    if members is None:
        return []
    field_name = f"{where}.members"
    if not isinstance(members, list):
        problems.add("bad-members", "must be a list of experiment keys", field=field_name)
        members = []
    clean: list[str] = []
    for m in members:
        key = str(m) if isinstance(m, int | str) and not isinstance(m, bool) else None
        if key is None:
            problems.add("bad-members", f"{m!r} is not an experiment key", field=field_name)
            continue
        if key in clean:
            problems.add("repeated-member", f"lists {key!r} twice", field=field_name)
            continue
        if csv_name and rows and key not in rows:
            problems.add("unknown-member", f"{key!r} is not a key of {csv_name}", field=field_name)
        elif key in member_of:
            problems.add(
                "member-in-two-groups",
                f"{key!r} is already a member of group {member_of[key]!r}",
                field=field_name,
                hint="a row has one measured value: give each group its own rows",
            )
        else:
            member_of[key] = gid or where
        clean.append(key)
    if len(clean) < 2:
        problems.add("group-too-small", "a group needs at least two members", field=field_name)
    elif rows and all(k in rows for k in clean) and len({rows[k].value for k in clean}) < 2:
        problems.add(
            "group-all-equal", "all members have the same value, so no order can be scored", field=field_name
        )
    return clean
