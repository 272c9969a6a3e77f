"""How a screen entry's values are had, and how values become an order.

A screen entry is named ``"<column>"`` (a numeric condition), ``"<column> (number)"``, ``"<column> =
<level>"`` (a text condition) or ``"<column>: <descriptor>"`` (:mod:`environment.prior_screen.families`).
A whole-molecule descriptor of a molecule column is computed by the tool server's ``chem_descriptors``, as
any model would compute it (:func:`molecule_request`); everything else (conditions, composition statistics,
sequence and substitution scales, substituents of a series) by the screen's own code on that one column
(:func:`local_values`), since no server tool computes them.

Values are settled as the screen settles them (10 significant digits), so the order is the screen's.
"""

from __future__ import annotations

from typing import Any

from spu_common.task import Task

#: The screen's readable molecule entries (``environment.prior_screen.MOLECULE_DESCRIPTORS`` keys) and the
#: ``chem_descriptors`` ``physchem`` field computing each (the rest of the panel is RDKit's list by name).
PHYSCHEM_FIELDS = {
    "molecular_weight": "mol_weight_g_mol",
    "heavy_atoms": "heavy_atoms",
    "logp_crippen": "logp_crippen",
    "tpsa": "tpsa_a2",
    "hbd": "hbd",
    "hba": "hba",
    "rotatable_bonds": "rotatable_bonds",
    "aromatic_rings": "aromatic_rings",
    "formal_charge": "formal_charge",
    "fraction_sp3": "fraction_csp3",
    "r_centres": "stereocenters_r",
    "s_centres": "stereocenters_s",
}


def entry_column(task: Task, name: str) -> str | None:
    """The ``targets.csv`` column an entry of the screen is computed from (the longest that fits)."""
    fits = [
        c
        for c in task.condition_columns()
        if name in (c, f"{c} (number)") or name.startswith((f"{c}: ", f"{c} = "))
    ]
    return max(fits, key=len, default=None)


def column_cells(task: Task, column: str) -> dict[str, str]:
    """Each experiment's cell of a text column, stripped."""
    return {r["experiment_id"]: (r[column] or "").strip() for r in task.targets}


def molecule_request(task: Task, column: str, name: str) -> tuple[dict[str, Any], str] | None:
    """For a whole-molecule descriptor of a molecule column: the ``chem_descriptors`` arguments beside
    ``molecules`` and the field of each item's ``descriptors`` holding the value; None for any other
    entry."""
    from environment.prior_screen import MOLECULE_DESCRIPTORS, column_kind
    from environment.prior_screen.molecules import rdkit_descriptor_names

    if column in task.numeric_columns or not name.startswith(f"{column}: "):
        return None
    cells = column_cells(task, column)
    if column_kind(column, [c for c in cells.values() if c]) != "molecule":
        return None
    label = name.removeprefix(f"{column}: ")
    readable = {v: k for k, v in MOLECULE_DESCRIPTORS.items()}
    if label in readable:
        return {"preset": "physchem"}, PHYSCHEM_FIELDS[readable[label]]
    if label in rdkit_descriptor_names():
        return {"names": [label]}, label
    return None  # a substituent of a series: the screen's own code


def local_values(task: Task, column: str, name: str) -> dict[str, float | None] | None:
    """The entry ``name`` computed by the screen's code on ``column`` alone (None: it computes no such
    entry, for a card made by another version of the panel)."""
    from environment.prior_screen import descriptor_columns

    keep = ["experiment_id", "group_id", column]
    alone = task.model_copy(
        update={
            "targets": [{k: row[k] for k in keep} for row in task.targets],
            "target_columns": keep,
            "numeric_columns": [c for c in task.numeric_columns if c == column],
        }
    )
    columns, _ = descriptor_columns(alone)
    return columns.get(name)


def settled(value: float | None) -> float | None:
    """A descriptor as the screen compares it (:func:`environment.prior_screen.families.settled`)."""
    from environment.prior_screen.families import settled as screen_settled

    return None if value is None else screen_settled(value)


def ranked(
    task: Task, values: dict[str, float | None], direction: str, groups: list[str] | None
) -> dict[str, tuple[list[str], bool]]:
    """Each group's order by ``values`` in ``direction``; the documented tie-break: equal values keep the
    contract's (presented) order, and a group where an experiment has no value, or that ``groups`` leaves
    out, keeps its presented order whole (the screen counts such a group as 0, a random order's
    expectation). Returns ``{group_id: (order, tied)}`` where ``tied`` says whether the order rests on the
    tie-break (some equal or missing values)."""
    sign = 1.0 if direction == "ascending" else -1.0
    out = {}
    for group in task.groups:
        ids = list(group.experiment_ids)
        got = [values.get(e) for e in ids]
        if (groups is not None and group.group_id not in groups) or any(v is None for v in got):
            out[group.group_id] = (ids, len(ids) > 1)
            continue
        keyed = sorted(range(len(ids)), key=lambda i: sign * got[i])  # a stable sort: ties keep their order
        out[group.group_id] = ([ids[i] for i in keyed], len(set(got)) < len(got))
    return out
