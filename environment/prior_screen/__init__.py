"""The trivial-descriptor screen: can one obvious number, computed from the setup alone, solve a task?

A benchmark task should reward judgment, not a shared monotone prior. The screen ranks every group of a
task by each entry of a panel built by principle (:mod:`environment.prior_screen.families`): every
descriptor a scientist could compute from the setup without the answers, from maintained sources (RDKit's
whole 2D descriptor list, statistics of mendeleev's elemental properties, Biopython's residue scales per
site and per substitution, every condition column and every level of a text condition), in both
directions, and scores each as the *exact expected* task score over random tie-breaks
(:func:`spu_common.rank_agreement.expected_spearman`: a tied block of the descriptor takes its average
submitted rank). One entry in one direction is applied to every group of the task, as a prior would be.
Entries constant within every group, or ranking every group as an earlier entry does, are folded into it.

The verdict is family-wise (:mod:`environment.prior_screen.familywise`): the best entry of the whole panel
is compared with the panel's own null, the best entry over within-group shuffles of the measured values,
giving a p-value with its Monte Carlo interval and a verdict ``prior-solvable``, ``not-prior-solvable``
or ``undecided``. A task is prior-solvable when that p-value is below 0.05, not when some entry passes the
single-ranking chance threshold: the best of many entries passes that threshold by chance alone (about a
third of shuffled-value controls did). Each entry's comparison with the chance threshold
(``above_chance``, strictly above) stays as information. A tool proxy is judged by the same standard
(:func:`tool_evidence`): the panel with the proxy as one more entry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from environment.prior_screen.compositions import (
    COMPOSITION_DESCRIPTORS,
    composition_descriptors,
    parse_formula,
)
from environment.prior_screen.families import Column, column_kind, descriptor_columns
from environment.prior_screen.familywise import build_panel, familywise_p, familywise_test, shuffled_answers
from environment.prior_screen.molecules import MOLECULE_DESCRIPTORS, molecule_descriptors
from environment.prior_screen.sequences import SEQUENCE_DESCRIPTORS, parse_substitutions, sequence_descriptors
from spu_common.task import Answers, Task, parse_answers, parse_contract, parse_targets

__all__ = [
    "COMPOSITION_DESCRIPTORS",
    "DIRECTIONS",
    "MOLECULE_DESCRIPTORS",
    "PANEL_VERSION",
    "SEQUENCE_DESCRIPTORS",
    "build_panel",
    "column_kind",
    "composition_descriptors",
    "descriptor_columns",
    "entry_of",
    "familywise_p",
    "molecule_descriptors",
    "parse_formula",
    "parse_substitutions",
    "prior_warnings",
    "score_proxy",
    "screen",
    "sequence_descriptors",
    "shuffled_answers",
    "task_from_files",
    "tool_evidence",
]

DIRECTIONS = ("ascending", "descending")
#: The panel's version: a card's design screen is carried over a rebuild only while it is unchanged (the panel
#: by principle of issue 47 is 2). Raise it with every change to the families.
PANEL_VERSION = 2


def score_proxy(
    task: Task, answers: Answers, values: Column, direction: str
) -> tuple[float, list[dict[str, Any]]]:
    """Expected task score of ranking each group by ``values`` in ``direction``, with per-group rhos (a
    group with an experiment lacking a value is left out: rho 0)."""
    panel = build_panel(task, answers, {"entry": values})
    sign = 1.0 if direction == "ascending" else -1.0
    rhos = panel.group_rhos(0)
    groups = [
        {"group_id": g.group_id, "expected_rho": sign * r} for g, r in zip(task.groups, rhos, strict=True)
    ]
    return sign * float(panel.scores()[0]), groups


def screen(
    task: Task,
    answers: Answers,
    threshold: float | None = None,
    *,
    seed: int = 0,
    columns: dict[str, Column] | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """The screen of one task (module docstring).

    ``threshold`` is the single-ranking chance threshold each entry is compared with (``above_chance``);
    ``columns`` and ``notes`` a panel already computed by :func:`descriptor_columns` (the screens of
    shuffled or re-drawn copies of one task reuse it). Returns ``entries``, the distinct entries in both
    directions (best first: ``name``, ``direction``, ``expected_score``, ``above_chance``,
    ``same_ranking``: the names of the constant-free entries folded into it, per-group ``expected_rho``),
    ``best`` (the first entry or None), the family-wise ``prior_verdict``, ``prior_p_value``,
    ``prior_p_interval``, ``prior_draws``, ``prior_seed``, ``panel_entries`` (entries computed),
    ``distinct_entries`` (after folding), ``prior_solvable`` (the verdict is prior-solvable) and ``notes``.
    """
    from environment.chance import is_above

    if columns is None:
        columns, notes = descriptor_columns(task)
    full = build_panel(task, answers, columns)
    panel, folds = full.folded()
    ascending = panel.scores()
    entries = []
    for i, name in enumerate(panel.names):
        rhos = panel.group_rhos(i)
        for sign, direction in ((1.0, "ascending"), (-1.0, "descending")):
            score = sign * float(ascending[i])
            entries.append(
                {
                    "name": name,
                    "direction": direction,
                    "expected_score": score,
                    "above_chance": threshold is not None and is_above(score, threshold),
                    "same_ranking": folds[name],
                    "groups": [
                        {"group_id": g.group_id, "expected_rho": sign * r}
                        for g, r in zip(task.groups, rhos, strict=True)
                    ],
                }
            )
    entries.sort(key=lambda e: (-e["expected_score"], e["name"], e["direction"]))
    test = familywise_test(full, seed)
    return {
        "entries": entries,
        "best": entries[0] if entries else None,
        **test,
        "panel_entries": len(columns),
        "prior_solvable": test["prior_verdict"] == "prior-solvable",
        "notes": list(notes or []),
    }


def tool_evidence(
    task: Task,
    answers: Answers,
    proxies: dict[str, Column],
    threshold: float,
    *,
    seed: int = 0,
    columns: dict[str, Column] | None = None,
) -> dict[str, dict[str, Any]]:
    """Whether each measured proxy solves the task by the panel's own standard.

    ``proxies`` maps a proxy's name to its values per experiment, oriented so that ascending is the declared
    direction (None where it has none: its group is left out, as in the panel). The family is the panel
    (``columns``, else :func:`descriptor_columns`) with every proxy as one more entry; a proxy's p-value is
    the chance that the best absolute score of that family over within-group shuffles reaches the proxy's
    expected score (:func:`environment.prior_screen.familywise.familywise_p`, seeded by ``seed``). A proxy
    is **tool-solvable** when its score is above the chance ``threshold``, above the best panel entry, and
    that p-value's whole interval is below 0.05.

    Returns per proxy: ``score``, ``best_panel_score``, ``beats_panel``, ``p_value``, ``p_interval``,
    ``p_draws``, ``p_side`` (``below``, ``above`` or ``undecided`` against 0.05) and ``tool_solvable``.
    """
    from environment.chance import is_above

    if columns is None:
        columns, _ = descriptor_columns(task)
    panel = build_panel(task, answers, columns)
    scores = panel.distinct().scores()
    best_panel = float(np.abs(scores).max()) if scores.size else 0.0
    family = build_panel(task, answers, {**columns, **{f"proxy: {n}": v for n, v in proxies.items()}})
    out = {}
    for i, name in enumerate(proxies):
        score = float(family.scores()[len(columns) + i])
        found = familywise_p(family, score, seed)
        beats = is_above(score, best_panel)  # a proxy that only ties the best entry does not beat it
        out[name] = {
            "score": score,
            "best_panel_score": best_panel,
            "beats_panel": beats,
            "p_value": found["p_value"],
            "p_interval": found["p_interval"],
            "p_draws": found["draws"],
            "p_side": found["side"],
            "tool_solvable": bool(is_above(score, threshold) and beats and found["side"] == "below"),
        }
    return out


def entry_of(result: dict[str, Any], name: str, direction: str) -> dict[str, Any] | None:
    """The entry of a :func:`screen` result that ranks as ``name`` in ``direction`` does: the entry itself,
    or the entry it was folded into (in the other direction when folded as a mirror image); None when the
    panel has no such entry or it was constant."""
    other = "descending" if direction == "ascending" else "ascending"
    for entry in result["entries"]:
        if entry["name"] == name and entry["direction"] == direction:
            return entry
        if entry["direction"] == direction and name in entry["same_ranking"]:
            return entry
        if entry["direction"] == other and f"{name} (reversed)" in entry["same_ranking"]:
            return entry
    return None


def task_from_files(files: dict[str, bytes], answers: bytes) -> tuple[Task, Answers]:
    """A built task and its answers from their bytes (``contract.json`` and ``targets.csv`` suffice)."""
    fields = parse_contract(json.loads(files["contract.json"]), Path("."))
    rows, columns, numeric = parse_targets(files["targets.csv"].decode("utf-8-sig"), fields["groups"])
    task = Task(**fields, targets=rows, target_columns=columns, numeric_columns=numeric)
    return task, parse_answers(json.loads(answers))


def prior_warnings(result: dict[str, Any], threshold: float) -> list[tuple[str, str]]:
    """``(code, message)`` author warnings from a :func:`screen` result: ``prior-solvable`` and
    ``prior-undecided``."""
    best = result["best"]
    if best is None or result["prior_verdict"] == "not-prior-solvable":
        return []
    low, high = result["prior_p_interval"]
    said = (
        f"the best trivial descriptor {best['name']} ({best['direction']}) scores "
        f"{best['expected_score']:+.3f} in expectation (chance threshold {threshold:.3f}); against the best "
        f"of {result['distinct_entries']} distinct entries over shuffled values p = "
        f"{result['prior_p_value']:.4f} [{low:.4f}, {high:.4f}]"
    )
    if result["prior_verdict"] == "prior-solvable":
        return [("prior-solvable", f"{said}: the task is prior-solvable (spu baselines lists the screen)")]
    return [("prior-undecided", f"{said}: too close to 0.05 to decide within the screen's draws")]
