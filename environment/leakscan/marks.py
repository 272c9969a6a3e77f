"""What identifies a task's answers, read from its ``answers.json`` and what lies beside it (the card, the
spec): the marks the scanner looks for (:mod:`environment.leakscan`).

- **values**: each experiment's measured value, with its experiment id and the task's presented order;
- **author keys**: the builder's key of each experiment (``id_map`` in the answers, ``members`` in the card;
  the spec's rows of these keys add their ``source``);
- **source identifiers**: what tells one experiment's source record from another's (the parts of the
  ``source`` texts that differ between the task's experiments: a line or reaction number with the word
  before it, a compound or plate id), the study's own identifiers (DOIs, and words mixing letters and
  digits such as a supplement or accession id, from the citation, the data source and the sources), the
  study's title as the citation quotes it, and each whole source text of at least :data:`MIN_SOURCE_CHARS`
  characters.

A key or identifier is a sequence of *atoms*, the maximal runs of ASCII letters and digits of the lowercased
text (``kin4-lig-90211`` is ``kin4 lig 90211``); it is **strong**, and found alone, when it is unlikely
by chance (:func:`is_strong`: ``mol8802``, ``trp999ala``, ``pka-w-sm99``, ``id 99887766``); any other is
**weak** (``r9701``, ``e9000``, ``cb9-g6``, ``line 88888``) and found only beside other weak marks of the same
task (:mod:`environment.leakscan.scan`).
A mark that the task itself shows is none: an author key or identifier equal to a condition the task's
``targets.csv`` gives (a substitution written as the data set writes it) is left out, and the words of the
conditions make no mark strong (``c99-cyp3a4`` is as weak as ``c99`` where the task names CYP3A4).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from spu_common.task import Task, TaskError, load_task

MIN_SOURCE_CHARS = 24
#: a key or identifier at least this unlikely by chance (bits, as :func:`bits` counts) is found alone
STRONG_BITS = 24
#: an atom held by at most this share of a task's sources identifies a source record
ROW_SHARE = 0.1
STUDY_CHARS = 7
STUDY_DIGITS = 4
#: keys and identifiers shorter than this (in letters and digits) are left out (``e0``)
MIN_GRAM_CHARS = 3
#: the precisions (decimals; negative: tens, hundreds ...) at which a value may be written
DECIMALS = range(-12, 13)

LETTER_BITS = math.log2(26)
DIGIT_BITS = math.log2(10)

_ATOM = re.compile(r"[a-z0-9]+")
_DOI = re.compile(r"\b10\.\d{4,9}/[^\s,;\"'<>\]]+", re.IGNORECASE)
#: a title as citations quote it
_TITLE = re.compile(r'"([^"]+)"')
_DECIMAL_NUMBER = re.compile(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?", re.IGNORECASE)


def atoms(text: str) -> tuple[str, ...]:
    """The runs of ASCII letters and digits of ``text``, lowercased."""
    return tuple(_ATOM.findall(text.lower()))


def _mixed(atom: str) -> bool:
    return any(c.isdigit() for c in atom) and any(c.isalpha() for c in atom)


def bits(gram: tuple[str, ...]) -> float:
    """How unlikely ``gram`` is by chance, roughly: log2(26) for each letter of an atom with digits, log2(10)
    for each digit, and log2(26) for a word of letters alone (words repeat: ``line``, ``lig``, ``cast``)."""
    return sum(
        LETTER_BITS if atom.isalpha() else sum(LETTER_BITS if c.isalpha() else DIGIT_BITS for c in atom)
        for atom in gram
    )


def is_strong(gram: tuple[str, ...]) -> bool:
    """Whether a key or identifier is specific enough to be found alone: :data:`STRONG_BITS` or more, not a
    bare number (``mol8802``, ``pka-w-sm99``, ``id 99887766``; not ``e9000``, ``line 88888``, ``998877``)."""
    return not (len(gram) == 1 and gram[0].isdigit()) and bits(gram) >= STRONG_BITS


@dataclass(frozen=True)
class Gram:
    """An author key or source identifier as atoms; ``what`` says which, for a finding."""

    atoms: tuple[str, ...]
    what: str
    strong: bool
    #: the atoms the task does not show: what tells this mark from another
    core: tuple[str, ...]
    #: what finding it tells, in bits (:func:`evidence`)
    evidence: float = 0.0


@dataclass
class TaskMarks:
    """The marks of one task."""

    task_id: str
    #: experiment id -> measured value
    values: dict[str, float]
    #: the experiment ids in the order the task presents them (targets.csv), when the task is known
    presented: list[str]
    grams: list[Gram]
    #: DOIs, titles and whole source texts (found in any letter case)
    texts: list[str]
    #: the keys and identifiers the task shows among its conditions (as it writes them): no marks, but what
    #: lets a model recall the source data set (the card's ``recall_risk``)
    shown: list[str] = field(default_factory=list)
    #: (decimals, value x 10^decimals rounded) -> experiment ids: the value at each precision written
    written: dict[tuple[int, int], set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for eid, value in self.values.items():
            for decimals, scaled in written_forms(value):
                self.written.setdefault((decimals, scaled), set()).add(eid)


def written_forms(value: float) -> list[tuple[int, int]]:
    """``(decimals, n)`` for each way of writing ``value`` with at least two significant digits: ``n`` x
    10^-decimals is the value rounded to that many decimals (both neighbours on a tie); zero as written."""
    if value == 0:  # zero at any precision: no evidence, but it keeps its place in a run of values
        return [(decimals, 0) for decimals in DECIMALS if decimals >= 0]
    forms = []
    exact = Decimal(repr(value))
    for decimals in DECIMALS:
        scaled = exact.scaleb(decimals)
        half = Decimal("0.5") * (1 + Decimal("1e-9"))
        low, high = math.ceil(scaled - half), math.floor(scaled + half)
        for n in range(low, high + 1):
            if n != 0 and len(str(abs(n))) >= 2:
                forms.append((decimals, n))
    return forms


def _condition_grams(task: Task | None) -> dict[tuple[str, ...], str]:
    """The atoms of each non-numeric condition the task's targets.csv gives, with the condition as written."""
    if task is None:
        return {}
    return {
        atoms(row[column]): row[column]
        for row in task.targets
        for column in task.condition_columns()
        if isinstance(row.get(column), str)
    }


def _spec_rows(spec_dir: Path) -> list[dict[str, str]]:
    path = spec_dir / "experiments.csv"
    if not path.is_file():
        return []
    try:
        return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TaskError(f"{path}: {exc}") from None


def _card_keys(card_path: Path) -> list[str]:
    if not card_path.is_file():
        return []
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskError(f"{card_path}: {exc}") from None
    return [
        str(key)
        for group in card.get("groups") or []
        if isinstance(group, dict)
        for key in (group.get("members") or {}).values()
    ]


def _source_grams(sources: list[str]) -> set[tuple[str, ...]]:
    """The identifiers in ``sources`` that tell one source record from another: each atom with a digit that
    at most :data:`ROW_SHARE` of the sources hold (a row's number or id), alone when it is strong, else with
    the word before it (``line 88888``, ``reaction no 9707``)."""
    split = [atoms(_DECIMAL_NUMBER.sub(" ", _DOI.sub(" ", s))) for s in sources]
    held: dict[str, int] = {}
    for parts in split:
        for atom in set(parts):
            held[atom] = held.get(atom, 0) + 1
    rare = max(2, int(ROW_SHARE * len(split)))
    grams: set[tuple[str, ...]] = set()
    for parts in split:
        for i, atom in enumerate(parts):
            if held[atom] > rare or not any(c.isdigit() for c in atom):
                continue
            if is_strong((atom,)):
                grams.add((atom,))
            elif i > 0 and parts[i - 1].isalpha():
                grams.add((parts[i - 1], atom))
    return grams


def _study_grams(texts: list[str]) -> set[tuple[str, ...]]:
    """The study's identifiers in the citation, the data source and the sources: atoms of letters and at
    least :data:`STUDY_DIGITS` digits, :data:`STUDY_CHARS` characters or more (a supplement's, accession's or
    commit's id such as ``abc1234`` or ``chembl9999999``, not a word of the field such as ``pic50``)."""
    return {
        (a,)
        for text in texts
        for a in atoms(_DOI.sub(" ", text))
        if _mixed(a) and len(a) >= STUDY_CHARS and sum(c.isdigit() for c in a) >= STUDY_DIGITS
    }


def shape(gram: tuple[str, ...]) -> tuple[str, ...]:
    """A gram with each digit as ``#``: ``r9701`` is ``r####``, ``line 88888`` is ``line #####``."""
    return tuple(re.sub(r"\d", "#", atom) for atom in gram)


def _with_evidence(grams: list[Gram]) -> list[Gram]:
    """Each gram with what finding it tells, in bits: for a key or identifier numbered like others of the
    task (``r9701`` among ``r9697`` ... ``r9707``), -log2 of the share of its shape's numbers the task holds
    (30 of the 10,000 ``r####``: 8.4 bits; an ``e##`` where it holds 25 of 100: 2 bits); else :func:`bits`."""
    per_shape: dict[tuple[str, ...], int] = {}
    for gram in grams:
        per_shape[shape(gram.core)] = per_shape.get(shape(gram.core), 0) + 1
    out = []
    for gram in grams:
        numbers = sum(atom.count("#") for atom in shape(gram.core))
        told = -math.log2(min(1.0, per_shape[shape(gram.core)] / 10**numbers)) if numbers else bits(gram.core)
        out.append(Gram(gram.atoms, gram.what, gram.strong, gram.core, min(told, bits(gram.core))))
    return out


def task_marks(
    answers: dict[str, Any], task: Task | None = None, card: Path | None = None, spec: Path | None = None
) -> TaskMarks:
    """The marks of one task from its parsed ``answers.json``, with its loaded task directory (the
    presented order; the conditions it shows), its card and its spec folder where known."""
    values: dict[str, float] = {}
    sources: list[str] = []
    for group in answers.get("groups") or []:
        for eid, value in (group.get("values") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                values[str(eid)] = float(value)
        sources += [s for s in (group.get("sources") or {}).values() if isinstance(s, str)]
    keys = [str(k) for k in (answers.get("id_map") or {}).values()]
    keys += _card_keys(card) if card else []
    # the spec's rows of the task's experiments (a spec may hold rows its design left out)
    rows = [row for row in (_spec_rows(spec) if spec else []) if row.get("key") in keys]
    sources += [row["source"] for row in rows if row.get("source")]
    shown = _condition_grams(task)
    shown_atoms = {a for gram in shown for a in gram}
    study_texts = [str(answers.get("citation") or ""), str(answers.get("data_source") or ""), *sources]
    grams = {atoms(k): "author key" for k in keys}
    for gram in _source_grams(sources) | _study_grams(study_texts):
        grams.setdefault(gram, "source identifier")
    texts = {doi.rstrip(".)").lower() for text in study_texts for doi in _DOI.findall(text)}
    texts |= {s for s in sources if len(s) >= MIN_SOURCE_CHARS}
    texts |= {t for t in _TITLE.findall(str(answers.get("citation") or "")) if len(t) >= MIN_SOURCE_CHARS}
    return TaskMarks(
        task_id=str(answers.get("task_id") or ""),
        values=values,
        presented=[e for g in task.groups for e in g.experiment_ids] if task else [],
        grams=_with_evidence(
            [
                Gram(gram, what, is_strong(core), core)
                for gram, what in sorted(grams.items())
                if (core := tuple(a for a in gram if a not in shown_atoms))
                and sum(map(len, gram)) >= MIN_GRAM_CHARS
                and gram not in shown
            ]
        ),
        texts=sorted(texts),
        shown=sorted({shown[gram] for gram in grams if gram in shown}),
    )


def marks_beside(answers_path: Path, task: Task | None = None) -> TaskMarks:
    """The marks of the answers file ``answers_path``, with the card (``card.json``), the spec (``spec/``)
    and the task directory (``task/``) beside it where they are, or ``task`` as given."""
    from spu_common.jsonfiles import load_json_strict

    try:
        answers = load_json_strict(answers_path)
    except (OSError, ValueError) as exc:
        raise TaskError(f"{answers_path}: {exc}") from None
    folder = answers_path.parent
    if task is None and (folder / "task" / "contract.json").is_file():
        task = load_task(folder / "task")
    return task_marks(answers, task, folder / "card.json", folder / "spec")


def marks_under(root: Path) -> list[TaskMarks]:
    """The marks of every answers file at or below ``root`` (:mod:`environment.finder`'s rules)."""
    from environment.finder import find_answers

    return [marks_beside(found.path) for found in find_answers(root).values()]
