"""The screen's descriptor families: every number a prior could rank by, computed from the setup alone.

Each column of ``targets.csv`` is read as one kind (:func:`column_kind`) and gives the entries of its
families, named ``"<column>: <descriptor>"``:

* numeric condition columns: the column itself; text conditions holding one number each (``"25 °C"``):
  that number; other text conditions whose values repeat (a solvent, a host): one indicator per value;
* molecules (a column named ``*smiles*``, or whose every cell parses as SMILES), with RDKit: molecular
  weight, heavy atoms, Crippen logP, TPSA, H-bond donors and acceptors, rotatable bonds, aromatic rings,
  formal charge, fraction sp3, and the number of R and of S stereocentres (CIP); and when the molecules
  form a **series** (:mod:`environment.prior_screen.series`), per-position substituent descriptors;
* compositions (``Ti0.5Zr0.5Nb1``, ``Li1.2Sc0.2Ti1.8(PO4)3``; a column of element symbols too), with
  ``mendeleev``: **per element** its atomic fraction and its amount in the formula; valence-electron
  concentration (``nvalence``), mean Slater radius and its mismatch ``sqrt(Σ cᵢ (1 - rᵢ/r̄)²)``, mean
  Pauling electronegativity and its mismatch ``sqrt(Σ cᵢ (χᵢ - χ̄)²)``;
* amino-acid sequences (a column named ``*sequence*``, or one-letter strings of 8 or more), with
  Biopython: length, net charge at pH 7, GRAVY, isoelectric point; and when the sequences are variants of
  one construct (equal length, at most ``MAX_SITES`` differing positions), **per mutated site** the
  residue's volume, Kyte-Doolittle hydrophobicity, side-chain charge at pH 7 and its BLOSUM62 score
  against the residue most common there (:mod:`environment.prior_screen.residues`);
* substitution lists (``V39F/D40C/G41L/V54A``): the same per-site entries, the BLOSUM62 score against
  the wild type they name.

An entry's value may be None for an experiment whose input cannot be read (an empty cell, a SMILES RDKit
rejects): a group holding such an experiment is left out of that entry (it contributes 0, what a random
order scores on average) and the other groups keep it. Computed values are rounded to 10 significant
digits, so values equal but for the order of a floating-point sum tie.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from environment.prior_screen import residues, series
from spu_common.task import Task

#: One entry: a value per experiment id (None where it cannot be computed).
Column = dict[str, float | None]

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
    "r_centres": "R stereocentres",
    "s_centres": "S stereocentres",
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
#: Most differing positions for sequences to count as variants of one construct (per-site entries).
MAX_SITES = 30
#: Most distinct values of a text condition screened as indicators.
MAX_LEVELS = 12

_AMINO = re.compile(r"[ACDEFGHIKLMNPQRSTVWY]{8,}")
_FORMULA_TOKEN = re.compile(r"([A-Z][a-z]?)(\d*\.?\d*)|(\()|(\))(\d*\.?\d*)")
_SUBSTITUTION = re.compile(r"([ACDEFGHIKLMNPQRSTVWY])(\d+)([ACDEFGHIKLMNPQRSTVWY])")
_SUBSTITUTIONS = re.compile(
    rf"(?:wt|wild[ -]?type|{_SUBSTITUTION.pattern}(?:[/,;:+ ]+{_SUBSTITUTION.pattern})*)", re.IGNORECASE
)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def settled(value: float) -> float:
    """A computed descriptor rounded to 10 significant digits, so that values equal but for the order of
    a floating-point sum (GRAVY of two arrangements of the same residues, the weight of two isomers) tie,
    as the screen's expectation over tie-breaks requires."""
    return float(f"{value:.10g}")


# -------------------------------------------------------------------------------------------- molecules


def molecule_descriptors(smiles: str) -> dict[str, float] | None:
    """The molecule panel for one SMILES (RDKit), or None when RDKit cannot parse it."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Crippen, Descriptors, rdMolDescriptors

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles) if smiles else None
    if mol is None:
        return None
    centres = Counter(label for _, label in Chem.FindMolChiralCenters(mol, useLegacyImplementation=False))
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
        "r_centres": float(centres["R"]),
        "s_centres": float(centres["S"]),
    }


def _looks_like_smiles(cells: list[str]) -> bool:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    return all(Chem.MolFromSmiles(c) is not None for c in cells)


# ----------------------------------------------------------------------------------------- compositions


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
    if not all(symbol in _element_table() for symbol in stack[0]):
        return None  # "V39G" is a substitution, not vanadium and a "G"
    return stack[0]


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
    """The composition panel for one formula, or None when it names an unknown element or lacks data.

    Per element ``fraction_<El>`` (atomic fraction) and ``amount_<El>`` (atoms per formula unit as
    written), then the alloy descriptors of the module docstring."""
    counts = parse_formula(formula)
    if counts is None:
        return None
    table = _element_table()
    total = sum(counts.values())
    frac = {el: n / total for el, n in counts.items()}
    out = {f"fraction_{el}": c for el, c in frac.items()}
    out |= {f"amount_{el}": n for el, n in counts.items()}
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


# -------------------------------------------------------------------------------------------- sequences


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


def parse_substitutions(text: str) -> dict[int, tuple[str, str]] | None:
    """``{site: (wild type, residue)}`` of a substitution list (``V39F/D40C``; ``WT`` is empty), or None."""
    text = text.strip()
    if not _SUBSTITUTIONS.fullmatch(text):
        return None
    out: dict[int, tuple[str, str]] = {}
    for wild, site, residue in _SUBSTITUTION.findall(text.upper()):
        if int(site) in out:
            return None
        out[int(site)] = (wild, residue)
    return out


def _site_columns(
    column: str, residues_at: dict[str, dict[int, str] | None], reference: dict[int, str], against: str
) -> dict[str, Column]:
    """Per site, each residue property of the residue there (:mod:`residues`; the BLOSUM62 score against
    ``reference``, described by ``against``), None where unknown."""
    out: dict[str, Column] = {}
    for site in sorted(reference):
        for key, label in residues.PROPERTIES.items():
            values: Column = {}
            for eid, at in residues_at.items():
                residue = None if at is None else at.get(site, reference[site])
                values[eid] = None if residue is None else residues.value(key, residue, reference[site])
            out[f"{column}: site {site} {label}{against if key == 'blosum62' else ''}"] = values
    return out


def _sequence_sites(column: str, cells: dict[str, str], notes: list[str]) -> dict[str, Column]:
    """Per-site entries of sequences that are variants of one construct (equal length, few sites)."""
    seqs = {e: c.strip().upper() for e, c in cells.items() if c}
    if len(seqs) < 2 or len({len(s) for s in seqs.values()}) != 1:
        return {}
    length = len(next(iter(seqs.values())))
    sites = [i for i in range(length) if len({s[i] for s in seqs.values()}) > 1]
    if not sites:
        return {}
    if len(sites) > MAX_SITES:
        notes.append(
            f"{column}: {len(sites)} differing positions, more than {MAX_SITES}: no per-site entries"
        )
        return {}
    # the reference at a site: its most common residue (ties: the first in alphabetical order)
    common = {
        i + 1: min(Counter(s[i] for s in seqs.values()).most_common(), key=lambda x: (-x[1], x[0]))[0]
        for i in sites
    }
    at = {e: ({i + 1: seqs[e][i] for i in sites} if e in seqs else None) for e in cells}
    return _site_columns(column, at, common, " against the most common residue")


def _substitution_sites(column: str, cells: dict[str, str]) -> dict[str, Column]:
    """Per-site entries of substitution lists, numbered as the lists number them (an empty cell: None)."""
    parsed = {e: parse_substitutions(c) if c else None for e, c in cells.items()}
    wild = {site: w for p in parsed.values() if p for site, (w, _) in p.items()}
    at = {e: ({s: r for s, (_, r) in p.items()} if p is not None else None) for e, p in parsed.items()}
    return _site_columns(column, at, wild, " against the wild type")


# ------------------------------------------------------------------------------------------- conditions


def _condition_columns(column: str, cells: dict[str, str]) -> dict[str, Column]:
    """A text condition as numbers: its one number per cell, or an indicator per repeated value."""
    present = {e: c.strip() for e, c in cells.items() if c and c.strip()}
    if not present:
        return {}
    numbers = {e: _NUMBER.findall(c) for e, c in present.items()}
    if all(len(v) == 1 for v in numbers.values()):
        return {f"{column} (number)": {e: float(numbers[e][0]) if e in numbers else None for e in cells}}
    levels = Counter(present.values())
    if not 1 < len(levels) <= MAX_LEVELS or max(levels.values()) < 2:
        return {}
    return {
        f"{column} = {level}": {e: (float(present[e] == level) if e in present else None) for e in cells}
        for level in sorted(levels)
    }


# -------------------------------------------------------------------------------------------- the panel


def column_kind(name: str, cells: list[str]) -> str | None:
    """``molecule``, ``sequence``, ``substitutions``, ``composition`` or None for a text column."""
    if not cells:
        return None
    lowered = name.lower()
    if "smiles" in lowered:
        return "molecule"
    if "sequence" in lowered or all(_AMINO.fullmatch(c) for c in cells):
        return "sequence"
    if all(parse_substitutions(c) is not None for c in cells) and any(_SUBSTITUTION.search(c) for c in cells):
        return "substitutions"
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
    if kind == "composition" and key.startswith("amount_"):
        return f"{key.removeprefix('amount_')} amount"
    return _PANELS[kind][1].get(key, key)


def _panel_columns(
    task: Task, column: str, kind: str, cells: dict[str, str], notes: list[str]
) -> dict[str, Column]:
    """The whole-input panel of one column, with None where an input cannot be read."""
    compute, panel = _PANELS[kind]
    computed = {e: (compute(c) if c else None) for e, c in cells.items()}
    _note_missing(task, column, kind, computed, notes)
    keys = list(panel) + sorted({k for v in computed.values() if v for k in v if k not in panel})
    out: dict[str, Column] = {}
    for key in keys:
        per_element = key.startswith(("fraction_", "amount_"))
        if not per_element and not any(v and key in v for v in computed.values()):
            continue
        values: Column = {}
        for e, v in computed.items():
            if v is None or (key not in v and not per_element):
                values[e] = None
            else:  # an element absent from a formula: fraction and amount 0
                values[e] = settled(v.get(key, 0.0))
        out[f"{column}: {_label(kind, key)}"] = values
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
                columns |= {
                    name: {e: settled(v) if v is not None else None for e, v in values.items()}
                    for name, values in found.items()
                }
                notes += series_notes
            elif kind == "sequence":
                columns |= _sequence_sites(column, cells, notes)
            elif kind == "substitutions":
                columns |= _substitution_sites(column, cells)
            elif kind is None:
                columns |= _condition_columns(column, cells)
        except ImportError as exc:
            notes.append(f"{column} ({kind}): {exc.name} is not installed, panel skipped")
    return columns, notes
