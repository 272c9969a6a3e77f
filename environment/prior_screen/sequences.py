"""The screen's sequence families: whole sequences, their mutated sites and their substitutions.

* Whole sequences (Biopython): length, net charge at pH 7, isoelectric point, molecular weight,
  aromaticity, instability index, the helix, turn and sheet fractions, the two molar extinction
  coefficients, and the mean over the sequence of every one-residue scale of
  :mod:`environment.prior_screen.residues` (the mean Kyte-Doolittle value is GRAVY).
* Variants of one construct (equal length, at most ``MAX_SITES`` differing positions): **per mutated
  site** every residue property of :mod:`residues` of the residue there, the BLOSUM62 score against the
  residue most common at the site; and **per substitution**, over the positions where a sequence departs
  from those common residues, the sums of each property of the wild-type residues, of the substituted
  residues and of their change, the summed BLOSUM62 score and the number of substitutions.
* Substitution lists (``V39F/D40C/G41L/V54A``, ``WT``): the same per-site and per-substitution entries,
  numbered as the lists number them, against the wild type the lists name.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from environment.prior_screen import residues

#: Most differing positions for sequences to count as variants of one construct (per-site entries).
MAX_SITES = 30
#: Residues over which a scale is averaged around a substituted site (Kyte & Doolittle 1982 used 7 to 11).
WINDOW = 9
#: Whole-sequence entries before the scale means: key -> label.
SEQUENCE_DESCRIPTORS = {
    "length": "length",
    "net_charge": "net charge at pH 7",
    "hydrophobicity": "hydrophobicity (GRAVY)",
    "isoelectric_point": "isoelectric point",
    "molecular_weight": "molecular weight",
    "aromaticity": "aromaticity",
    "instability_index": "instability index",
    "helix_fraction": "helix fraction",
    "turn_fraction": "turn fraction",
    "sheet_fraction": "sheet fraction",
    "extinction_reduced": "molar extinction coefficient (reduced cysteines)",
    "extinction_oxidised": "molar extinction coefficient (cystines)",
}
AMINO = re.compile(r"[ACDEFGHIKLMNPQRSTVWY]{8,}")
_SUBSTITUTION = re.compile(r"([ACDEFGHIKLMNPQRSTVWY])(\d+)([ACDEFGHIKLMNPQRSTVWY])")
_SUBSTITUTIONS = re.compile(
    rf"(?:wt|wild[ -]?type|{_SUBSTITUTION.pattern}(?:[/,;:+ ]+{_SUBSTITUTION.pattern})*)", re.IGNORECASE
)

Column = dict[str, float | None]


def sequence_descriptors(sequence: str) -> dict[str, float] | None:
    """The whole-sequence panel of one amino-acid sequence (module docstring), or None for other letters.
    Keys: ``SEQUENCE_DESCRIPTORS`` and ``mean:<scale>`` for each of ``residues.SCALES``."""
    seq = sequence.strip().upper()
    if not seq or not re.fullmatch(r"[ACDEFGHIKLMNPQRSTVWY]+", seq):
        return None
    return dict(_sequence(seq))


@functools.lru_cache(maxsize=4096)
def _sequence(seq: str) -> tuple[tuple[str, float], ...]:
    from Bio.SeqUtils.IsoelectricPoint import IsoelectricPoint
    from Bio.SeqUtils.ProtParam import ProteinAnalysis

    analysis = ProteinAnalysis(seq)
    helix, turn, sheet = analysis.secondary_structure_fraction()
    reduced, oxidised = analysis.molar_extinction_coefficient()
    out = {
        "length": float(len(seq)),
        "net_charge": float(IsoelectricPoint(seq).charge_at_pH(7.0)),
        "hydrophobicity": float(analysis.gravy()),
        "isoelectric_point": float(IsoelectricPoint(seq).pi()),
        "molecular_weight": float(analysis.molecular_weight()),
        "aromaticity": float(analysis.aromaticity()),
        "instability_index": float(analysis.instability_index()),
        "helix_fraction": float(helix),
        "turn_fraction": float(turn),
        "sheet_fraction": float(sheet),
        "extinction_reduced": float(reduced),
        "extinction_oxidised": float(oxidised),
    }
    for key in residues.SCALES:
        table = residues.scale(key)
        out[f"mean:{key}"] = sum(table[r] for r in seq) / len(seq)
    return tuple(out.items())


def sequence_label(key: str) -> str:
    if key.startswith("mean:"):
        return f"mean {residues.SCALES[key.removeprefix('mean:')][0]}"
    return SEQUENCE_DESCRIPTORS.get(key, key)


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


def names_a_substitution(text: str) -> bool:
    return _SUBSTITUTION.search(text) is not None


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


def _substitution_columns(
    column: str,
    residues_at: dict[str, dict[int, str] | None],
    reference: dict[int, str],
    wild_type: str | None = None,
) -> dict[str, Column]:
    """Per substitution (a site whose residue differs from ``reference``): sums over each experiment's
    substitutions of every property of the wild-type residue, of the substituted one and of the change,
    the summed BLOSUM62 score and the count; with the ``wild_type`` sequence, also of each scale's mean over
    the ``WINDOW`` wild-type residues centred on the site (Kyte and Doolittle's hydropathy window)."""
    changed: dict[str, list[tuple[str, str]] | None] = {
        eid: None if at is None else [(reference[s], r) for s, r in sorted(at.items()) if r != reference[s]]
        for eid, at in residues_at.items()
    }
    out: dict[str, Column] = {
        f"{column}: substitutions": {e: None if c is None else float(len(c)) for e, c in changed.items()}
    }
    if wild_type is not None:
        sites = {
            eid: None if at is None else [s for s, r in sorted(at.items()) if r != reference[s]]
            for eid, at in residues_at.items()
        }
        for key in residues.SCALES:
            label = residues.PROPERTIES[key]
            out[f"{column}: {label} over {WINDOW} wild-type residues around the substitution"] = {
                e: None if found is None else sum(_window_mean(wild_type, s, key) for s in found)
                for e, found in sites.items()
            }
    for key, label in residues.PROPERTIES.items():
        if key == "blosum62":
            out[f"{column}: BLOSUM62 score of the substitutions"] = _summed(
                changed, lambda w, r: residues.value("blosum62", r, w)
            )
            continue
        out[f"{column}: wild-type {label}"] = _summed(changed, lambda w, r, k=key: residues.value(k, w, w))
        out[f"{column}: substituted {label}"] = _summed(changed, lambda w, r, k=key: residues.value(k, r, w))
        out[f"{column}: change in {label}"] = _summed(
            changed, lambda w, r, k=key: _difference(residues.value(k, r, w), residues.value(k, w, w))
        )
    return out


def _window_mean(sequence: str, site: int, key: str) -> float:
    """The mean of scale ``key`` over the ``WINDOW`` residues centred on ``site`` (1-based; shorter at the
    ends of the sequence)."""
    table = residues.scale(key)
    half = WINDOW // 2
    window = sequence[max(0, site - 1 - half) : site + half]
    return sum(table[r] for r in window) / len(window)


def _difference(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _summed(changed: dict[str, list[tuple[str, str]] | None], of) -> Column:
    out: Column = {}
    for eid, pairs in changed.items():
        values = None if pairs is None else [of(w, r) for w, r in pairs]
        out[eid] = None if values is None or None in values else float(sum(values))  # type: ignore[arg-type]
    return out


def sequence_sites(column: str, cells: dict[str, str], notes: list[str]) -> dict[str, Column]:
    """Per-site and per-substitution entries of sequences that are variants of one construct (equal
    length), against the residue most common at each site (ties: the first in alphabetical order); no
    per-site entries past ``MAX_SITES`` differing positions."""
    seqs = {e: c.strip().upper() for e, c in cells.items() if c}
    if len(seqs) < 2 or len({len(s) for s in seqs.values()}) != 1:
        return {}
    length = len(next(iter(seqs.values())))
    sites = [i for i in range(length) if len({s[i] for s in seqs.values()}) > 1]
    if not sites:
        return {}
    common = {
        i + 1: min(Counter(s[i] for s in seqs.values()).most_common(), key=lambda x: (-x[1], x[0]))[0]
        for i in sites
    }
    at = {e: ({i + 1: seqs[e][i] for i in sites} if e in seqs else None) for e in cells}
    template = next(iter(seqs.values()))
    wild_type = "".join(common.get(i + 1, template[i]) for i in range(length))
    out = _substitution_columns(column, at, common, wild_type)
    if len(sites) > MAX_SITES:
        notes.append(
            f"{column}: {len(sites)} differing positions, more than {MAX_SITES}: no per-site entries"
        )
        return out
    return _site_columns(column, at, common, " against the most common residue") | out


def substitution_sites(column: str, cells: dict[str, str], notes: list[str]) -> dict[str, Column]:
    """Per-site and per-substitution entries of substitution lists, numbered as the lists number them, against
    the wild type they name (an empty cell: None); no per-site entries past ``MAX_SITES`` sites."""
    parsed = {e: parse_substitutions(c) if c else None for e, c in cells.items()}
    wild = {site: w for p in parsed.values() if p for site, (w, _) in p.items()}
    at = {e: ({s: r for s, (_, r) in p.items()} if p is not None else None) for e, p in parsed.items()}
    out = _substitution_columns(column, at, wild)
    if len(wild) > MAX_SITES:
        notes.append(f"{column}: {len(wild)} substituted sites, more than {MAX_SITES}: no per-site entries")
        return out
    return _site_columns(column, at, wild, " against the wild type") | out
