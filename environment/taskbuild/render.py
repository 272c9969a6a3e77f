"""Laying out a built task in memory: anonymized ids, a seeded shuffled order, one neutral template.

Same spec, same bytes: ids and order are drawn from a generator seeded with the task id and version."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from environment.anonymize import new_ids
from environment.taskbuild import paths
from environment.taskbuild.problems import SPEC_FILE, spec_error
from environment.taskbuild.spec import Spec, SpecGroup
from spu_common.contract import looks_like_formula
from spu_common.task import Group

MAX_TEXT_INPUT = 5_000_000

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


@dataclass
class _Layout:
    """The drawn layout: built group ids with their spec groups, new ids, the presented order, weights."""

    built: list[tuple[str, SpecGroup]]
    new_of: dict[str, str]
    presented: dict[str, list[str]]
    weights: dict[str, float]

    @property
    def key_of(self) -> dict[str, str]:
        return {new: key for key, new in self.new_of.items()}


def seed_of(task_id: str, task_version: str) -> int:
    """The generator seed of a task: from its id and version only, so a rebuild gives the same bytes."""
    digest = hashlib.sha256(f"spu-task-build\0{task_id}\0{task_version}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def safe_cell(text: str) -> str:
    """A setup cell as written to ``targets.csv``: a cell a spreadsheet would run as a formula gets a
    leading apostrophe (the common CSV-injection guard), everything else stays as it is."""
    return "'" + text if looks_like_formula(text) else text


_ALNUM = re.compile(r"[A-Za-z0-9]+")


def _alnum_at(text: str, index: int) -> bool:
    return 0 <= index < len(text) and text[index].isascii() and text[index].isalnum()


KeyIndex = dict[str, list[tuple[int, str]]]


def _key_index(keys: list[str]) -> KeyIndex:
    """Keys by their first run of letters and digits (with its offset in the key), longest key first."""
    index: KeyIndex = {}
    for key in sorted(keys, key=len, reverse=True):
        if run := _ALNUM.search(key):
            index.setdefault(run.group(0), []).append((run.start(), key))
    return index


def _replace_keys(text: str, index: KeyIndex, new_of: dict[str, str]) -> str:
    """``text`` with every key that stands in it on its own (no letter or digit right before or after it:
    ``alpha.pdb``, ``alpha_bravo.pdb``, ``site-alpha/x.pdb``) replaced by its new id, the longest first
    where two start at one place. The cost grows with the text, not with the number of keys."""
    out, pos = [], 0
    for run in _ALNUM.finditer(text):
        for offset, key in index.get(run.group(0), ()):
            start, end = run.start() - offset, run.start() - offset + len(key)
            on_its_own = not _alnum_at(text, start - 1) and not _alnum_at(text, end)
            if start >= pos and on_its_own and text.startswith(key, start):
                out += [text[pos:start], new_of[key]]
                pos = end
                break
    return "".join(out) + text[pos:]


def _layout(spec: Spec) -> _Layout:
    rng = random.Random(seed_of(spec.task_id, spec.task_version))
    order = list(range(len(spec.groups)))
    rng.shuffle(order)
    built = [(f"g{i + 1}", spec.groups[j]) for i, j in enumerate(order)]
    new_of = new_ids([k for g in spec.groups for k in g.members], rng)
    presented: dict[str, list[str]] = {}
    for gid, group in built:
        ids = [new_of[k] for k in group.members]
        rng.shuffle(ids)
        presented[gid] = ids
    weights = {gid: (g.weight if g.weight is not None else 1.0 / len(spec.groups)) for gid, g in built}
    return _Layout(built, new_of, presented, weights)


def _input_names(spec: Spec, new_of: dict[str, str]) -> tuple[dict[str, Path], dict[str, str]]:
    """Input files under their new names (every key in a name, folders included, becomes its new id), and
    the renames that setup cells naming an input follow."""
    index = _key_index(list(new_of))
    input_files: dict[str, Path] = {}
    renamed: dict[str, str] = {}
    for rel in spec.input_files:
        new_rel = _replace_keys(rel, index, new_of)
        if new_rel in input_files:
            raise spec_error(
                "bad-input", SPEC_FILE, f"{rel} and another input both become {new_rel}", field="inputs"
            )
        input_files[new_rel] = spec.root / rel
        if new_rel != rel:
            renamed[rel] = new_rel
            renamed.setdefault(PurePosixPath(rel).name, PurePosixPath(new_rel).name)
    return input_files, renamed


def _contract(spec: Spec, layout: _Layout) -> dict[str, Any]:
    groups = [
        Group(
            group_id=gid,
            endpoint=g.endpoint,
            unit=g.unit,
            direction=g.direction,
            weight=layout.weights[gid],
            experiment_ids=layout.presented[gid],
        )
        for gid, g in layout.built
    ]
    return {
        "task_id": spec.task_id,
        "task_version": spec.task_version,
        "title": spec.title,
        "groups": [g.model_dump() for g in groups],
    }


def _targets(spec: Spec, layout: _Layout, renamed: dict[str, str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["experiment_id", "group_id", *spec.setup_fields])
    key_of = layout.key_of
    for gid, _ in layout.built:
        for new in layout.presented[gid]:
            cells = spec.rows[key_of[new]].cells
            writer.writerow(
                [new, gid, *(safe_cell(renamed.get(cells[f], cells[f])) for f in spec.setup_fields)]
            )
    return out.getvalue()


def _instruction(spec: Spec, layout: _Layout, input_names: list[str]) -> str:
    group_lines = "\n".join(
        f"- `{gid}`: {g.endpoint}, in {g.unit} ({len(g.members)} experiments); {g.direction}."
        for gid, g in layout.built
    )
    shown = ", ".join(f"`{f}`" for f in spec.setup_fields)
    file_lines = [
        "- `experiment.md`: the shared procedure and the definition of each endpoint",
        "- `protocol.json`: the same information in machine-readable form",
        f"- `targets.csv`: one row per experiment: `experiment_id`, `group_id`, then its settings ({shown})",
        "- `contract.json`: the machine-readable contract "
        "(task id and version, groups, weights, experiment ids)",
    ]
    if input_names:
        file_lines.append("- input files: " + ", ".join(f"`{name}`" for name in sorted(input_names)))
    example = ", ".join(
        f'{{"group_id": "{gid}", "order": ["<lowest id>", "...", "<highest id>"]}}' for gid, _ in layout.built
    )
    return (
        f"# {spec.title}\n\n{spec.instruction.strip()}\n\n## Comparison groups\n\n{group_lines}\n\n"
        f"## Files\n\n" + "\n".join(file_lines) + "\n\n"
        f"## Information policy\n\n{INFORMATION_POLICY}\n\n"
        "## Submission\n\n"
        "Write `rankings.json` in your output directory: UTF-8 JSON, at most 1 MiB, "
        "each key once per object:\n\n"
        f'```json\n{{"task_id": "{spec.task_id}", "task_version": "{spec.task_version}",\n'
        f' "rankings": [{example}]}}\n```\n\n{SUBMISSION_RULES}\n'
    )


def _experiment(spec: Spec, layout: _Layout) -> str:
    endpoint_lines = "\n".join(f"- Group `{gid}`: {g.endpoint}, in {g.unit}." for gid, g in layout.built)
    shown = ", ".join(f"`{f}`" for f in spec.setup_fields)
    return (
        f"# Experiment\n\n{spec.procedure.strip()}\n\n## Endpoints\n\n{endpoint_lines}\n\n"
        f"`targets.csv` gives each experiment's settings: {shown}.\n"
    )


def _answers(spec: Spec, layout: _Layout) -> dict[str, Any]:
    new_of = layout.new_of
    return {
        "task_id": spec.task_id,
        "task_version": spec.task_version,
        "groups": [
            {
                "group_id": gid,
                "weight": layout.weights[gid],
                "unit": g.unit,
                "endpoint": g.endpoint,
                "values": {new_of[k]: spec.rows[k].value for k in g.members},
                "sources": {new_of[k]: spec.rows[k].source for k in g.members},
            }
            for gid, g in layout.built
        ],
        "citation": spec.citation,
        "data_source": spec.data_source,
        "license": spec.license,
        "id_map": {new: key for key, new in new_of.items()},
        "group_map": {gid: g.group_id for gid, g in layout.built},
        "built_by": "spu task build",
    }


def render(spec: Spec) -> Rendered:
    """Lay out the task files and the answers of ``spec`` in memory (seeded by task id and version)."""
    layout = _layout(spec)
    input_files, renamed = _input_names(spec, layout.new_of)
    protocol = {
        "domain": spec.domain,
        "procedure": spec.procedure.strip(),
        "setup_fields": spec.setup_fields,
        "groups": {
            gid: {"endpoint": g.endpoint, "unit": g.unit, "direction": g.direction} for gid, g in layout.built
        },
        "input_files": sorted(input_files),
    }
    files = {
        "contract.json": dump_json(_contract(spec, layout)),
        "instruction.md": _instruction(spec, layout, list(input_files)).encode("utf-8"),
        "experiment.md": _experiment(spec, layout).encode("utf-8"),
        "protocol.json": dump_json(protocol),
        "targets.csv": _targets(spec, layout, renamed).encode("utf-8"),
    }
    for new_rel, p in sorted(input_files.items()):
        try:  # once, from the checked descriptor: a link swapped in since the spec was checked is refused
            files[new_rel] = paths.read_bytes(spec.root, p.relative_to(spec.root).as_posix())
        except ValueError as exc:
            raise spec_error(
                "bad-input", SPEC_FILE, f"cannot read {new_rel}: {exc}", field="inputs"
            ) from None
    answers = _answers(spec, layout)
    return Rendered(
        files=files, answers=dump_json(answers), id_map=answers["id_map"], group_map=answers["group_map"]
    )
