"""The trivial-descriptor screen: can one obvious number, computed from the setup alone, solve a task?

A benchmark task should reward judgment, not a shared monotone prior. The screen ranks every group of a
task by each descriptor of a fixed, documented panel, in both directions, and scores each as the *exact
expected* task score over random tie-breaks (:func:`environment.rank_agreement.expected_spearman`: a
tied block of the descriptor takes its average submitted rank; this is not Spearman's rho between the
tied descriptor and the values, which overstates the expectation). One descriptor in one direction is
applied to every group of the task, as a prior would be. The task is **prior-solvable** when the best
entry reaches the chance threshold (score >= threshold).

The panel, per kind of input column in ``targets.csv`` (docs/analysis.md lists it for users):

* numeric condition columns: the column's value itself (temperature, concentration, x, at.% ...);
* molecules (a column named ``*smiles*``, or whose every cell parses as SMILES), with RDKit: molecular
  weight, heavy atoms, Crippen logP, TPSA, H-bond donors, H-bond acceptors, rotatable bonds, aromatic
  rings, formal charge, fraction sp3;
* compositions (formulas such as ``Ti0.5Zr0.5Nb1`` or ``Li1.2Sc0.2Ti1.8(PO4)3``), with element data from
  ``mendeleev``: each element's atomic fraction, valence-electron concentration (VEC, ``nvalence``),
  mean atomic radius and its mismatch ``delta = sqrt(sum c_i (1 - r_i / r_mean)^2)`` (Slater's empirical
  atomic radii), mean Pauling electronegativity and its mismatch ``sqrt(sum c_i (chi_i - chi_mean)^2)``;
* protein or peptide sequences (a column named ``*sequence*``, or one-letter amino-acid strings of 8 or
  more), with Biopython: length, net charge at pH 7, hydrophobicity (GRAVY, Kyte-Doolittle), isoelectric
  point.

The chance threshold is calibrated for one ranking, while the screen keeps the best of many, so values
unrelated to every descriptor still make a task prior-solvable often (about 30% of within-group shuffles
of the suite's tasks). ``panel_threshold`` is the matching threshold for the best of the panel (the 95th
percentile of the best entry over seeded shuffles of the measured values); ``beats_panel_threshold``
says whether the best entry reaches it, a prior the panel's size does not explain.

A descriptor that cannot be computed for some experiment (a SMILES RDKit rejects, an unknown element) is
left out of the panel for that column, with a note.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from environment.chance import chance_threshold
from environment.rank_agreement import average_ranks, centered_measured_ranks, expected_spearman
from environment.task import Answers, Task, parse_answers, parse_contract, parse_targets

DIRECTIONS = ("ascending", "descending")
#: Shuffles behind :func:`panel_threshold`.
PANEL_DRAWS = 1000

MOLECULE_DESCRIPTORS = {
    "molecular_weight": "molecular weight",
    "heavy_atoms": "heavy atoms",
    "logp_crippen": "Crippen logP",
    "tpsa": "TPSA",
    "hbd": "H-bond donors",
    "hba": "H-bond acceptors",
    "rotatable_bonds": "rotatable bonds",
    "aromatic_rings": "aromatic rings",
    "formal_charge": "formal charge",
    "fraction_sp3": "fraction sp3",
}
COMPOSITION_DESCRIPTORS = {
    "vec": "valence-electron concentration",
    "radius_mean": "mean atomic radius",
    "radius_mismatch": "atomic-radius mismatch",
    "electronegativity_mean": "mean electronegativity",
    "electronegativity_mismatch": "electronegativity mismatch",
}
SEQUENCE_DESCRIPTORS = {
    "length": "length",
    "net_charge": "net charge at pH 7",
    "hydrophobicity": "hydrophobicity (GRAVY)",
    "isoelectric_point": "isoelectric point",
}

_AMINO = re.compile(r"[ACDEFGHIKLMNPQRSTVWY]{8,}")
_FORMULA_TOKEN = re.compile(r"([A-Z][a-z]?)(\d*\.?\d*)|(\()|(\))(\d*\.?\d*)")


# ------------------------------------------------------------------------------------------ descriptors


def molecule_descriptors(smiles: str) -> dict[str, float] | None:
    """The molecule panel for one SMILES (RDKit), or None when RDKit cannot parse it."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Crippen, Descriptors, rdMolDescriptors

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles) if smiles else None
    if mol is None:
        return None
    return {
        "molecular_weight": Descriptors.MolWt(mol),
        "heavy_atoms": float(mol.GetNumHeavyAtoms()),
        "logp_crippen": Crippen.MolLogP(mol),
        "tpsa": rdMolDescriptors.CalcTPSA(mol),
        "hbd": float(rdMolDescriptors.CalcNumHBD(mol)),
        "hba": float(rdMolDescriptors.CalcNumHBA(mol)),
        "rotatable_bonds": float(rdMolDescriptors.CalcNumRotatableBonds(mol)),
        "aromatic_rings": float(rdMolDescriptors.CalcNumAromaticRings(mol)),
        "formal_charge": float(Chem.GetFormalCharge(mol)),
        "fraction_sp3": rdMolDescriptors.CalcFractionCSP3(mol),
    }


def parse_formula(text: str) -> dict[str, float] | None:
    """Atom counts of a formula (``Li1.2Sc0.2Ti1.8(PO4)3`` -> Li 1.2, Sc 0.2, Ti 1.8, P 3, O 12), or None."""
    text = text.replace(" ", "")
    if not text or (not text[0].isupper() and text[0] != "("):
        return None
    stack: list[dict[str, float]] = [{}]
    pos = 0
    for match in _FORMULA_TOKEN.finditer(text):
        if match.start() != pos:
            return None
        pos = match.end()
        element, amount, opening, closing, multiplier = match.groups()
        if element:
            stack[-1][element] = stack[-1].get(element, 0.0) + (float(amount) if amount else 1.0)
        elif opening:
            stack.append({})
        elif closing:
            if len(stack) < 2:
                return None
            inner = stack.pop()
            factor = float(multiplier) if multiplier else 1.0
            for el, n in inner.items():
                stack[-1][el] = stack[-1].get(el, 0.0) + n * factor
    if pos != len(text) or len(stack) != 1 or not stack[0] or any(v <= 0 for v in stack[0].values()):
        return None
    if not all(_is_element(symbol) for symbol in stack[0]):
        return None  # "V39G" is a substitution, not vanadium and a "G"
    return stack[0]


def _is_element(symbol: str) -> bool:
    return symbol in _element_table()


@functools.cache
def _element_table() -> dict[str, dict[str, float | None]]:
    """Per element: Slater radius (pm), Pauling electronegativity, group (mendeleev; None if absent)."""
    from mendeleev.fetch import fetch_table

    def known(x: Any) -> float | None:
        return None if x != x else float(x)  # NaN marks a missing value

    return {
        row.symbol: {
            "radius": known(row.atomic_radius),
            "electronegativity": known(row.en_pauling),
            "group": known(row.group_id),
        }
        for row in fetch_table("elements").itertuples()
    }


@functools.cache
def _valence_electrons(symbol: str) -> float:
    """Valence electrons as VEC counts them: mendeleev's ``nvalence`` (s + d electrons in the d block).

    For groups 1-18 that is the group number, less 10 in the p block; only f-block elements (no group)
    ask mendeleev's slower per-element lookup.
    """
    group = _element_table()[symbol]["group"]
    if group is not None and symbol != "He":  # helium sits in group 18 with two electrons
        return group - 10 if group > 12 else group
    from mendeleev import element

    return float(element(symbol).nvalence())


def composition_descriptors(formula: str) -> dict[str, float] | None:
    """The composition panel for one formula, or None when it names an unknown element or lacks data."""
    counts = parse_formula(formula)
    if counts is None:
        return None
    table = _element_table()
    if any(el not in table for el in counts):
        return None
    total = sum(counts.values())
    frac = {el: n / total for el, n in counts.items()}
    out = {f"fraction_{el}": c for el, c in frac.items()}
    out["vec"] = sum(c * _valence_electrons(el) for el, c in frac.items())
    for name, key in (("radius", "radius"), ("electronegativity", "electronegativity")):
        values = {el: table[el][key] for el in frac}
        if any(v is None for v in values.values()):
            continue
        mean = sum(c * values[el] for el, c in frac.items())
        out[f"{name}_mean"] = mean
        if name == "radius":
            out["radius_mismatch"] = sum(c * (1 - values[el] / mean) ** 2 for el, c in frac.items()) ** 0.5
        else:
            out["electronegativity_mismatch"] = (
                sum(c * (values[el] - mean) ** 2 for el, c in frac.items()) ** 0.5
            )
    return out


def sequence_descriptors(sequence: str) -> dict[str, float] | None:
    """The sequence panel for one amino-acid sequence (Biopython), or None for other letters."""
    from Bio.SeqUtils.IsoelectricPoint import IsoelectricPoint
    from Bio.SeqUtils.ProtParam import ProteinAnalysis

    seq = sequence.strip().upper()
    if not seq or not re.fullmatch(r"[ACDEFGHIKLMNPQRSTVWY]+", seq):
        return None
    return {
        "length": float(len(seq)),
        "net_charge": float(IsoelectricPoint(seq).charge_at_pH(7.0)),
        "hydrophobicity": float(ProteinAnalysis(seq).gravy()),
        "isoelectric_point": float(IsoelectricPoint(seq).pi()),
    }


def _looks_like_smiles(cells: list[str]) -> bool:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    return all(Chem.MolFromSmiles(c) is not None for c in cells)


def column_kind(name: str, cells: list[str]) -> str | None:
    """``molecule``, ``sequence``, ``composition`` or None for a text column of ``targets.csv``."""
    if not cells:
        return None
    lowered = name.lower()
    if "smiles" in lowered:
        return "molecule"
    if "sequence" in lowered or all(_AMINO.fullmatch(c) for c in cells):
        return "sequence"
    if all(parse_formula(c) is not None for c in cells):
        # "CCO" reads as a formula too: a column that parses as SMILES throughout is molecules
        return "molecule" if _looks_like_smiles(cells) else "composition"
    if _looks_like_smiles(cells):
        return "molecule"
    return None


_PANELS: dict[str, tuple[Callable[[str], dict[str, float] | None], dict[str, str]]] = {
    "molecule": (molecule_descriptors, MOLECULE_DESCRIPTORS),
    "composition": (composition_descriptors, COMPOSITION_DESCRIPTORS),
    "sequence": (sequence_descriptors, SEQUENCE_DESCRIPTORS),
}


def _label(kind: str, key: str) -> str:
    if kind == "composition" and key.startswith("fraction_"):
        return f"{key.removeprefix('fraction_')} fraction"
    return _PANELS[kind][1].get(key, key)


def _settled(value: float) -> float:
    """A computed descriptor rounded to 10 significant digits, so that values equal but for the order of
    a floating-point sum (GRAVY of two arrangements of the same residues, the weight of two isomers) tie,
    as the screen's expectation over tie-breaks requires."""
    return float(f"{value:.10g}")


def descriptor_columns(task: Task) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Every screened descriptor as ``{name: {experiment_id: value}}``, and notes on what was skipped."""
    columns: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for column in task.condition_columns():
        if column in task.numeric_columns:
            values = {r["experiment_id"]: r[column] for r in task.targets if r[column] is not None}
            if len(values) == len(task.targets):
                columns[column] = values
            else:
                notes.append(f"{column}: empty cells, left out of the screen")
            continue
        cells = [r[column] for r in task.targets]
        kind = column_kind(column, [c for c in cells if c])
        if kind is None:
            continue
        compute, panel = _PANELS[kind]
        try:
            computed = {r["experiment_id"]: compute(r[column]) for r in task.targets}
        except ImportError as exc:
            notes.append(f"{column} ({kind}): {exc.name} is not installed, panel skipped")
            continue
        failed = sorted(e for e, v in computed.items() if v is None)
        if failed:
            notes.append(
                f"{column} ({kind}): cannot compute the panel for {', '.join(failed[:5])}; column skipped"
            )
            continue
        keys = list(panel) + sorted(
            {k for v in computed.values() for k in v if k not in panel}, key=lambda k: k
        )
        for key in keys:
            if all(key in v for v in computed.values()):
                columns[f"{column}: {_label(kind, key)}"] = {e: _settled(v[key]) for e, v in computed.items()}
            elif key.startswith("fraction_"):  # an element absent from some formulas: fraction 0
                columns[f"{column}: {_label(kind, key)}"] = {
                    e: _settled(v.get(key, 0.0)) for e, v in computed.items()
                }
    return columns, notes


# ---------------------------------------------------------------------------------------------- scoring


def score_proxy(
    task: Task, answers: Answers, values: dict[str, float], direction: str
) -> tuple[float, list[dict[str, Any]]]:
    """Expected task score of ranking each group by ``values`` in ``direction``, with per-group rhos."""
    sign = 1.0 if direction == "ascending" else -1.0
    total = 0.0
    groups = []
    for group in task.groups:
        measured = answers.group(group.group_id).values
        ids = group.experiment_ids
        rho = expected_spearman([sign * values[e] for e in ids], [measured[e] for e in ids])
        total += group.weight * rho
        groups.append({"group_id": group.group_id, "expected_rho": rho})
    return total, groups


def panel_threshold(
    task: Task,
    answers: Answers,
    columns: dict[str, dict[str, float]],
    draws: int = PANEL_DRAWS,
    seed: int = 0,
) -> float | None:
    """95th percentile of the screen's *best* expected score when the measured values are shuffled.

    The chance threshold is calibrated for one ranking; the screen tries every descriptor in both
    directions and keeps the best, so even values unrelated to every descriptor reach the chance
    threshold often (about 30% of shuffles on the suite's tasks). This threshold is the same quantile
    for the best of the panel: ``draws`` seeded within-group shuffles of the measured values, each scored
    against every descriptor exactly as :func:`score_proxy` does. None when nothing is screened.
    """
    if not columns:
        return None
    rng = np.random.default_rng(seed)
    names = list(columns)
    scores = np.zeros((draws, len(names)))
    for group in task.groups:
        ids = group.experiment_ids
        measured = answers.group(group.group_id).values
        centered, denominator = centered_measured_ranks([measured[e] for e in ids])
        if denominator == 0.0:
            continue
        ranks = np.array([average_ranks([columns[name][e] for e in ids]) for name in names])
        shuffled = rng.permuted(np.tile(centered, (draws, 1)), axis=1)
        scores += group.weight * (shuffled @ ranks.T) / denominator
    best = np.abs(scores).max(axis=1)  # a descending entry scores the negation of its ascending twin
    return float(np.quantile(best, 0.95))


def screen(task: Task, answers: Answers, threshold: float) -> dict[str, Any]:
    """The screen of one task against its chance threshold (module docstring).

    Returns ``entries`` (best first: ``name``, ``direction``, ``expected_score``, ``reaches_chance``
    (``expected_score >= threshold``), ``groups``), ``best`` (the first entry or None),
    ``prior_solvable``, ``panel_threshold`` (:func:`panel_threshold`), ``beats_panel_threshold`` (the best
    entry is above 0 and reaches it: a prior that the panel's size does not explain) and ``notes``.
    """
    columns, notes = descriptor_columns(task)
    entries = []
    for name, values in columns.items():
        for direction in DIRECTIONS:
            score, groups = score_proxy(task, answers, values, direction)
            entries.append(
                {
                    "name": name,
                    "direction": direction,
                    "expected_score": score,
                    "reaches_chance": score >= threshold,
                    "groups": groups,
                }
            )
    entries.sort(key=lambda e: (-e["expected_score"], e["name"], e["direction"]))
    best = entries[0] if entries else None
    corrected = panel_threshold(task, answers, columns)
    return {
        "entries": entries,
        "best": best,
        "prior_solvable": bool(best is not None and best["reaches_chance"]),
        "panel_threshold": corrected,
        # a panel that ties within every group scores 0 on every shuffle too: nothing is beaten then
        "beats_panel_threshold": bool(
            best is not None and best["expected_score"] > 0 and best["expected_score"] >= corrected
        ),
        "notes": notes,
    }


# ------------------------------------------------------------------------------------ author warnings


def task_from_files(files: dict[str, bytes], answers: bytes) -> tuple[Task, Answers]:
    """A built task and its answers from their bytes (``contract.json`` and ``targets.csv`` suffice)."""
    fields = parse_contract(json.loads(files["contract.json"]), Path("."))
    rows, columns, numeric = parse_targets(files["targets.csv"].decode("utf-8-sig"), fields["groups"])
    task = Task(**fields, targets=rows, target_columns=columns, numeric_columns=numeric)
    return task, parse_answers(json.loads(answers))


def author_warnings(files: dict[str, bytes], answers: bytes) -> list[tuple[str, str]]:
    """``(code, message)`` warnings for ``spu task build``: prior-solvable, and a presented order that wins.

    ``prior-solvable``: the best trivial descriptor reaches the chance threshold. ``presented-order``:
    submitting the presented order, or its reverse, reaches it (the seeded shuffle leaks the answer).
    """
    task, loaded = task_from_files(files, answers)
    chance = chance_threshold(task, loaded)
    threshold = chance["chance_threshold"]
    out = []
    result = screen(task, loaded, threshold)
    if result["prior_solvable"]:
        best = result["best"]
        out.append(
            (
                "prior-solvable",
                f"the trivial descriptor {best['name']} ({best['direction']}) scores "
                f"{best['expected_score']:+.3f} in expectation, at or above the chance threshold "
                f"{threshold:.3f}: the task is prior-solvable (spu baselines lists the screen)",
            )
        )
    presented = chance["presented_order_score"]
    for label, score in (("the presented order", presented), ("the reversed presented order", -presented)):
        if score >= threshold:
            out.append(
                (
                    "presented-order",
                    f"{label} scores {score:+.3f}, at or above the chance threshold {threshold:.3f} "
                    "(raise task_version to draw another order)",
                )
            )
    return out
