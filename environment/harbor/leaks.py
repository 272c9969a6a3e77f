"""What in a file would give a task's answers away: the check ``spu harbor export`` runs on every file it
ships outside ``tests/`` and ``solution/``, and the strings the container tests search whole images for.

From an ``answers.json`` (read as plain JSON, so any answers file can be checked):

- **a measured value beside its experiment id**: the id, up to eight separator characters (spaces, quotes,
  ``: = , ; | ( ) [ ]``), then a number equal to the value at the precision written (``e7f2: 4.20`` for 4.2,
  ``| e7f2 | 4.2 |``, ``"e7f2": 4.2``, ``e7f2,4.2``), at least two significant digits;
- **a source**: the text given as an experiment's source, when it has at least :data:`MIN_SOURCE_CHARS`
  characters;
- **a DOI** named in the citation, the data source or any source (case-insensitive);
- **an author key**: the builder's original key of an experiment (``id_map``), when it has at least five
  characters with a letter and a digit (a data set's molecule id such as ``logd-mol017``), as a whole word.

A whole image is searched for the plain strings of :attr:`Fingerprints.fixed` (``grep -F``): the values beside
their ids, the sources and the DOIs. Author keys are left out there: the package's own code and examples may
name one (a compound's name), which gives no value away; in a task's folder one points to the source.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

MIN_SOURCE_CHARS = 24
_DOI_RE = re.compile(r"\b10\.\d{4,9}/[^\s,;\"'<>]+", re.IGNORECASE)
_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_SEPARATORS = r"[\s\"':=,;|()\[\]]{1,8}"


@dataclass(frozen=True)
class Fingerprints:
    """The marks of one answers file."""

    values: dict[str, int | float]
    sources: list[str]
    dois: list[str]
    author_keys: list[str]

    @property
    def fixed(self) -> list[str]:
        """Plain strings for a fast search (``grep -F``) of a whole filesystem: each value beside its id as
        JSON and as CSV, each source, each DOI."""
        beside = [
            form for eid, v in self.values.items() for form in (f'"{eid}": {json.dumps(v)}', f"{eid},{v}")
        ]
        return sorted({*beside, *self.sources, *self.dois})


def fingerprints(answers: dict[str, Any]) -> Fingerprints:
    """The fingerprints of a parsed ``answers.json``."""
    values: dict[str, int | float] = {}
    sources: set[str] = set()
    texts: list[str] = [json.dumps(answers.get("citation") or ""), str(answers.get("data_source") or "")]
    for group in answers.get("groups") or []:
        for eid, value in (group.get("values") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                values[str(eid)] = value
        for source in (group.get("sources") or {}).values():
            if isinstance(source, str):
                texts.append(source)
                if len(source) >= MIN_SOURCE_CHARS:
                    sources.add(source)
    dois = {doi.rstrip(".)") for text in texts for doi in _DOI_RE.findall(text)}
    keys = {
        str(key)
        for key in (answers.get("id_map") or {}).values()
        if len(str(key)) >= 5 and re.search(r"[A-Za-z]", str(key)) and re.search(r"\d", str(key))
    }
    return Fingerprints(values=values, sources=sorted(sources), dois=sorted(dois), author_keys=sorted(keys))


def _same_at_written_precision(written: str, value: float) -> bool:
    digits = written.lstrip("+-").split("e")[0].split("E")[0]
    significant = len(digits.replace(".", "").lstrip("0"))
    if significant < 2:
        return False
    number = float(written)
    if "e" in written.lower():
        return math.isclose(number, value, rel_tol=0.5 * 10 ** (1 - significant))
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return abs(number - value) <= 0.5 * 10**-decimals * (1 + 1e-9)


def find_leaks(text: str, prints: Fingerprints) -> list[str]:
    """What of ``prints`` the text holds, one description each (the first of each kind of mark)."""
    found: list[str] = []
    if prints.values:
        ids = "|".join(re.escape(e) for e in sorted(prints.values, key=len, reverse=True))
        pattern = re.compile(rf"(?<![\w-])({ids}){_SEPARATORS}({_NUMBER})(?![\w.])")
        for match in pattern.finditer(text):
            eid, written = match.groups()
            if _same_at_written_precision(written, float(prints.values[eid])):
                found.append(f"the measured value of {eid} beside its id ({match.group(0).strip()!r})")
                break
    found += [f"the source {s[:60]!r}" for s in prints.sources if s in text][:1]
    lowered = text.lower()
    found += [f"the DOI {doi}" for doi in prints.dois if doi.lower() in lowered][:1]
    for key in prints.author_keys:
        if re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text):
            found.append(f"the author key {key!r}")
            break
    return found
