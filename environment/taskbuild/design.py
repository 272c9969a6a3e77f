"""A spec's design and selection record, the draws of a design, and the design's prior rate.

``design`` says how the groups' members are drawn from the experiments CSV (the pool): per group its
size and the rows it may take (``where``: a CSV column within an inclusive ``[low, high]`` range, or equal
to a text), members at least ``spacing`` apart in value (default: the spec's ``noise_band``). A draw with
seed ``s`` shuffles each group's candidates (CSV rows not drawn by an earlier group) with a generator
seeded by the task id and ``s``, and takes them in that order, skipping a row closer than ``spacing`` to
one already taken, until the group has its size; when the rows run out first it shuffles again, up to
``ATTEMPTS`` times (values that cluster, as at an assay's limits, leave few spaced sets). With ``seed``
the design fixes the task: groups may leave out ``members`` (the draw fills them) or must list exactly the
drawn ones.

``selection`` records how the kept task was chosen among several tried (draws or designs): ``tried``,
``kept`` and the ``rule``. A task picked from draws by the screen's own verdict carries its record into
its card, where ``spu baselines`` shows it.

:func:`environment.taskbuild.screening.design_screen` re-draws a design ``n`` times (seeds 0 .. n-1),
builds each draw in memory and runs the screen on it: the share of draws that are prior-solvable is the
design's **prior rate**. The same share over within-group shuffles of each draw's values is its control
(about the test's 5%).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from environment.taskbuild.problems import Problems
from environment.taskbuild.rows import SpecRow
from spu_common.contract import parse_number

#: Shuffles a draw tries per group before it gives up.
ATTEMPTS = 200


class DrawError(ValueError):
    """A draw that cannot fill a group (too few rows match, or too few are ``spacing`` apart)."""


@dataclass
class DesignGroup:
    group_id: str
    size: int
    where: dict[str, Any]


@dataclass
class Design:
    groups: list[DesignGroup]
    seed: int | None
    spacing: float
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _matches(row: SpecRow, where: dict[str, Any]) -> bool:
    for column, wanted in where.items():
        cell = row.cells.get(column, "")
        if isinstance(wanted, list):
            number = parse_number(cell)
            if number is None or not wanted[0] <= number <= wanted[1]:
                return False
        elif cell != str(wanted):
            return False
    return True


def draw_seed(task_id: str, seed: int) -> int:
    digest = hashlib.sha256(f"spu-design\0{task_id}\0{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def draw(design: Design, rows: dict[str, SpecRow], task_id: str, seed: int) -> dict[str, list[str]]:
    """The members of each group in the draw ``seed`` (module docstring); raises :class:`DrawError`."""
    rng = random.Random(draw_seed(task_id, seed))
    used: set[str] = set()
    out: dict[str, list[str]] = {}
    for group in design.groups:
        candidates = [k for k, r in rows.items() if k not in used and _matches(r, group.where)]
        for _ in range(ATTEMPTS):
            rng.shuffle(candidates)
            taken: list[str] = []
            for key in candidates:
                if all(abs(rows[key].value - rows[t].value) >= design.spacing for t in taken):
                    taken.append(key)
                    if len(taken) == group.size:
                        break
            if len(taken) == group.size:
                break
        else:
            raise DrawError(
                f"draw {seed}: group {group.group_id!r} finds no {group.size} members spaced "
                f"{design.spacing:g} apart in {ATTEMPTS} shuffles of its {len(candidates)} rows"
            )
        used.update(taken)
        out[group.group_id] = taken
    return out


def parse_design(
    raw: Any, rows: dict[str, SpecRow], noise_band: float | None, problems: Problems
) -> Design | None:
    """The checked ``design`` of a spec (None when absent or wrong; problems go to ``problems``)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.add("bad-design", "must be a mapping (groups, optional seed, spacing, rule)", field="design")
        return None
    found = len(problems)
    unknown = sorted(str(k) for k in set(raw) - {"groups", "seed", "spacing", "rule"})
    if unknown:
        problems.add(
            "bad-design", f"unknown keys {unknown}", field="design", hint="keys: groups, seed, spacing, rule"
        )
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        problems.add("bad-design", f"seed {seed!r} must be a whole number of 0 or more", field="design.seed")
    spacing = raw.get("spacing", noise_band if noise_band is not None else 0.0)
    if isinstance(spacing, bool) or not isinstance(spacing, int | float) or spacing < 0:
        problems.add(
            "bad-design", f"spacing {spacing!r} must be a number of 0 or more", field="design.spacing"
        )
    rule = raw.get("rule", "")
    if not isinstance(rule, str):
        problems.add("bad-design", "rule must be text", field="design.rule")
    groups = []
    raw_groups = raw.get("groups")
    if not isinstance(raw_groups, list) or not raw_groups:
        problems.add("bad-design", "needs a list of groups (group_id, size, where)", field="design.groups")
        raw_groups = []
    columns = set(next(iter(rows.values())).cells) if rows else set()
    for i, item in enumerate(raw_groups):
        where_field = f"design.groups[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("group_id"), str | int):
            problems.add("bad-design", "must be a mapping with group_id, size and where", field=where_field)
            continue
        size = item.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            problems.add(
                "bad-design",
                f"size {size!r} must be a whole number of 2 or more",
                field=f"{where_field}.size",
            )
        where = item.get("where") or {}
        if not isinstance(where, dict):
            problems.add(
                "bad-design",
                "where must map CSV columns to a [low, high] range or a text",
                field=f"{where_field}.where",
            )
            where = {}
        for column, wanted in where.items():
            if rows and column not in columns:
                problems.add(
                    "bad-design",
                    f"{column!r} is not a column of the experiments CSV",
                    field=f"{where_field}.where",
                )
            ranged = isinstance(wanted, list) and len(wanted) == 2
            if ranged and not all(isinstance(x, int | float) and not isinstance(x, bool) for x in wanted):
                ranged = False
            if not ranged and not isinstance(wanted, str | int | float):
                problems.add(
                    "bad-design",
                    f"{column}: {wanted!r} is neither [low, high] nor a text",
                    field=f"{where_field}.where",
                )
        extra = sorted(str(k) for k in set(item) - {"group_id", "size", "where"})
        if extra:
            problems.add("bad-design", f"unknown keys {extra}", field=where_field)
        groups.append(DesignGroup(str(item["group_id"]), size if isinstance(size, int) else 0, where))
    if len(problems) > found:
        return None
    return Design(groups, seed, float(spacing), rule)


def parse_selection(raw: Any, problems: Problems) -> dict[str, Any] | None:
    """The checked ``selection`` record: ``tried`` and ``kept`` counts and the ``rule`` that kept it."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"tried", "kept", "rule"}:
        problems.add(
            "bad-selection",
            "must be a mapping of exactly tried, kept and rule",
            field="selection",
            hint="tried: draws or designs tried; kept: how many were kept; rule: the rule that kept them",
        )
        return None
    counts = [raw["tried"], raw["kept"]]
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts) or counts[1] > counts[0]:
        problems.add(
            "bad-selection", "tried and kept must be whole numbers with 1 <= kept <= tried", field="selection"
        )
        return None
    if not isinstance(raw["rule"], str) or not raw["rule"].strip():
        problems.add("bad-selection", "rule must be non-empty text", field="selection.rule")
        return None
    return {"tried": raw["tried"], "kept": raw["kept"], "rule": raw["rule"].strip()}


def design_digest(design: Design, rows: dict[str, SpecRow], task_id: str) -> str:
    """A hash of what a design screen depends on: the design, the task id, every row of the pool and the
    screen's panel (its ``PANEL_VERSION``)."""
    from environment.prior_screen import PANEL_VERSION

    data = {
        "panel": PANEL_VERSION,
        "task_id": task_id,
        "design": {**design.to_dict(), "seed": None},
        "rows": {k: [r.cells, r.value] for k, r in rows.items()},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
