"""The screen's panel: every number a prior could rank by, computed from the setup alone.

Each column of ``targets.csv`` is read as one kind (:func:`column_kind`) and gives the entries of its
families, named ``"<column>: <descriptor>"``:

* numeric condition columns: the column itself; text conditions holding one number each (``"25 °C"``):
  that number; every other text condition: one indicator per value (a solvent, a host, a ligand);
* molecules (a column named ``*smiles*``, or whose every cell parses as SMILES): RDKit's whole 2D
  descriptor list besides the readable families (:mod:`environment.prior_screen.molecules`), and when the
  molecules form a **series** (:mod:`environment.prior_screen.series`), per-position substituent
  descriptors;
* compositions (``Ti0.5Zr0.5Nb1``, ``Li1.2Sc0.2Ti1.8(PO4)3``; a column of element symbols too): per
  element fraction and amount, and statistics of tabulated elemental properties
  (:mod:`environment.prior_screen.compositions`);
* amino-acid sequences (a column named ``*sequence*``, or one-letter strings of 8 or more) and
  substitution lists (``V39F/D40C/G41L/V54A``): whole-sequence descriptors, per mutated site and per
  substitution every published residue scale (:mod:`environment.prior_screen.sequences`,
  :mod:`environment.prior_screen.residues`).

An entry's value may be None for an experiment whose input cannot be read (an empty cell, a SMILES RDKit
rejects): a group holding such an experiment is left out of that entry (it contributes 0, what a random
order scores on average) and the other groups keep it. Computed values are rounded to 10 significant
digits, so values equal but for the order of a floating-point sum tie. Entries that rank every group
alike, or that are constant in every group, are folded by the screen
(:meth:`environment.prior_screen.familywise.Panel.distinct`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from environment.prior_screen import series
from environment.prior_screen.compositions import (
    COMPOSITION_DESCRIPTORS,
    composition_descriptors,
    composition_label,
    parse_formula,
)
from environment.prior_screen.molecules import MOLECULE_DESCRIPTORS, looks_like_smiles, molecule_descriptors
from environment.prior_screen.sequences import (
    AMINO,
    names_a_substitution,
    parse_substitutions,
    sequence_descriptors,
    sequence_label,
    sequence_sites,
    substitution_sites,
)
from spu_common.task import Task

#: One entry: a value per experiment id (None where it cannot be computed).
Column = dict[str, float | None]

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def settled(value: float) -> float:
    """A computed descriptor rounded to 10 significant digits, so that values equal but for the order of
    a floating-point sum (GRAVY of two arrangements of the same residues, the weight of two isomers) tie,
    as the screen's expectation over tie-breaks requires."""
    return float(f"{value:.10g}")


# ------------------------------------------------------------------------------------------- conditions


def _condition_columns(column: str, cells: dict[str, str]) -> dict[str, Column]:
    """A text condition as numbers: its one number per cell, else an indicator per value (an empty cell:
    None)."""
    present = {e: c.strip() for e, c in cells.items() if c and c.strip()}
    if not present:
        return {}
    numbers = {e: _NUMBER.findall(c) for e, c in present.items()}
    if all(len(v) == 1 for v in numbers.values()):
        return {f"{column} (number)": {e: float(numbers[e][0]) if e in numbers else None for e in cells}}
    return {
        f"{column} = {level}": {e: (float(present[e] == level) if e in present else None) for e in cells}
        for level in sorted(set(present.values()))
    }


# -------------------------------------------------------------------------------------------- the panel


def column_kind(name: str, cells: list[str]) -> str | None:
    """``molecule``, ``sequence``, ``substitutions``, ``composition`` or None for a text column."""
    if not cells:
        return None
    lowered = name.lower()
    if "smiles" in lowered:
        return "molecule"
    if "sequence" in lowered or all(AMINO.fullmatch(c) for c in cells):
        return "sequence"
    if all(parse_substitutions(c) is not None for c in cells) and any(names_a_substitution(c) for c in cells):
        return "substitutions"
    if all(parse_formula(c) is not None for c in cells):
        # "CCO" reads as a formula too: a column that parses as SMILES throughout is molecules
        return "molecule" if looks_like_smiles(cells) else "composition"
    if looks_like_smiles(cells):
        return "molecule"
    return None


_PANELS: dict[str, tuple[Callable[[str], dict[str, Any] | None], Callable[[str], str]]] = {
    "molecule": (molecule_descriptors, lambda key: MOLECULE_DESCRIPTORS.get(key, key)),
    "composition": (composition_descriptors, composition_label),
    "sequence": (sequence_descriptors, sequence_label),
}
#: Keys of one element of a formula: 0 for a formula without that element.
_PER_ELEMENT = ("fraction_", "amount_")


def _panel_columns(
    task: Task, column: str, kind: str, cells: dict[str, str], notes: list[str]
) -> dict[str, Column]:
    """The whole-input panel of one column, with None where an input cannot be read or a descriptor not
    computed: the descriptors in the order computed, then the per-element ones sorted."""
    compute, label = _PANELS[kind]
    computed = {e: (compute(c) if c else None) for e, c in cells.items()}
    _note_missing(task, column, kind, computed, notes)
    fixed: dict[str, None] = {}
    per_element: set[str] = set()
    for values in computed.values():
        for key in values or {}:
            if key.startswith(_PER_ELEMENT):
                per_element.add(key)
            else:
                fixed[key] = None
    out: dict[str, Column] = {}
    for key in [*fixed, *sorted(per_element)]:
        absent = 0.0 if key.startswith(_PER_ELEMENT) else None
        entry: Column = {}
        for e, v in computed.items():
            found = None if v is None else v.get(key, absent)
            entry[e] = None if found is None else settled(found)
        out[f"{column}: {label(key)}"] = entry
    return out


def _note_missing(task: Task, column: str, kind: str, computed: dict[str, Any], notes: list[str]) -> None:
    for group in task.groups:
        failed = [e for e in group.experiment_ids if computed.get(e) is None]
        if failed:
            shown = ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else "")
            notes.append(
                f"{column} ({kind}): no {kind} for {shown} in {group.group_id}; that group is left out of "
                "this column's entries"
            )


def descriptor_columns(task: Task) -> tuple[dict[str, Column], list[str]]:
    """Every screened entry as ``{name: {experiment_id: value or None}}``, and notes on what was left out."""
    columns: dict[str, Column] = {}
    notes: list[str] = []
    for column in task.condition_columns():
        if column in task.numeric_columns:
            columns[column] = {r["experiment_id"]: r[column] for r in task.targets}
            continue
        cells = {r["experiment_id"]: (r[column] or "").strip() for r in task.targets}
        kind = column_kind(column, [c for c in cells.values() if c])
        try:
            if kind in _PANELS:
                columns |= _panel_columns(task, column, kind, cells, notes)
            if kind == "molecule":
                found, series_notes = series.series_columns(column, cells)
                columns |= _settled(found)
                notes += series_notes
            elif kind == "sequence":
                columns |= _settled(sequence_sites(column, cells, notes))
            elif kind == "substitutions":
                columns |= _settled(substitution_sites(column, cells, notes))
            elif kind is None:
                columns |= _condition_columns(column, cells)
        except ImportError as exc:
            notes.append(f"{column} ({kind}): {exc.name} is not installed, panel skipped")
    return columns, notes


def _settled(columns: dict[str, Column]) -> dict[str, Column]:
    return {
        name: {e: settled(v) if v is not None else None for e, v in values.items()}
        for name, values in columns.items()
    }


__all__ = [
    "COMPOSITION_DESCRIPTORS",
    "MOLECULE_DESCRIPTORS",
    "Column",
    "column_kind",
    "descriptor_columns",
    "settled",
]
