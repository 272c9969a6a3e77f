"""Finding a task's marks (:mod:`environment.leakscan.marks`) in one document's bytes, whatever its format.

The bytes are read as text (UTF-8, else one character per byte) and lowercased, then as atoms (runs of
ASCII letters and digits) and numbers. A document holds a task's answers when it holds

- a **strong** author key or source identifier, its atoms in order with at most :data:`GAP_CHARS` other
  characters (no line break) between them (``kin4-lig-90211``, ``kin4_lig_90211``);
- **weak** ones: :data:`WEAK_RUN` or more different weak keys or identifiers of one task within
  :data:`WEAK_WINDOW_CHARS` characters that tell :data:`WEAK_BITS` in all (``r9701 ... r9704 ... r9700``),
  where they are at least half of what the document holds of their shapes (:func:`_stand_out`);
- a DOI of the study or a whole source text;
- in text (no NUL byte), the task's **values at their written precision** (a number written with ``d``
  decimals matches a value within half a unit of its last digit; at least two significant digits). Each
  match counts its significant digits beyond the first (those the value carries: :func:`_carried`), at
  most -log10 of the chance that a number in the range of the task's values matches it by luck
  (:func:`_by_luck`), and a document holds values when the matches of one kind count enough digits:
    - *beside their ids* (:data:`WITH_IDS_DIGITS`): an experiment id, then at most :data:`BESIDE_CHARS`
      separators (spaces, quotes, ``: = , ; | ( ) [ ] { }``), then its value; or the value, separators
      without a line break, the id (``e7f2: 4.20``, ``| e7f2 | 4.2 |``, ``"e7f2": 4.2``, ``4.2,e7f2``);
    - *in their records* (:data:`WITH_IDS_DIGITS`, and for at least half the ids the document names): the
      value among the numbers between its id and the ids before and after it, within :data:`RECORD_CHARS`
      characters (rows of a CSV or TSV in any column order and delimiter, JSON records, aligned tables);
    - *in the order of the ids*: numbers, each within :data:`MAX_STRIDE` numbers of the one before (other
      columns between), that are the values of consecutive ids, in the order the document names them (a JSON
      ``split`` orient, a transposed table): at least :data:`ORDER_RUN` values worth :data:`ORDER_DIGITS`;
      or, without any id, in the order the task presents them (a column beside ``targets.csv``): at least
      :data:`PRESENTED_RUN` values worth :data:`PRESENTED_DIGITS`.

Why these bounds: one value written with three significant digits beside its id (2 digits) may well be a
chance in a file of numbers, six digits' worth are not (about one in a million); a short weak key (a letter
and two digits) occurs by chance in binaries and code tables, several of one task close together do not.
The figures measured on this repository, the suite's exports and the images are in ``docs/harbor.md``.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from environment.leakscan.marks import DECIMALS, Gram, TaskMarks, shape

GAP_CHARS = 4
WEAK_RUN = 3
WEAK_BITS = 20
WEAK_WINDOW_CHARS = 2000
BESIDE_CHARS = 8
WITH_IDS_DIGITS = 6
RECORD_CHARS = 512
MAX_STRIDE = 8
ORDER_RUN = 3
ORDER_DIGITS = 6
PRESENTED_RUN = 4
PRESENTED_DIGITS = 8
#: a number written with more significant digits than this is read at this many: a float's last digits are
#: noise (9.2 written as 9.199999999999999)
FLOAT_DIGITS = 12

_ATOM = re.compile(r"[a-z0-9]+")
#: a number as data writes it, between separators (spaces, quotes, brackets, ``,;:=|<>~*$``; ``.%`` after):
#: not a digit of a name, a formula or a SMILES ring bond (``c1``, ``Zr2O12``, ``]2(``, ``4-bromo``)
_NUMBER = re.compile(
    r"(?<![^\s\"'`,;:=|\[{(<>~*$])[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?(?![^\s\"'`,;:|\]})<>.*$%])(?!\.\d)"
)
_GAP = rf"[^a-z0-9\n]{{1,{GAP_CHARS}}}"
_FOLLOW = re.compile(rf"{_GAP}([a-z0-9]+)")
_BESIDE = re.compile(rf"[\s\"':=,;|()\[\]{{}}]{{1,{BESIDE_CHARS}}}")
_BESIDE_BEFORE_END = re.compile(rf"[ \t\"':=,;|()\[\]{{}}]{{1,{BESIDE_CHARS}}}$")


@dataclass(frozen=True)
class Finding:
    """One task's answers found in one document: where, whose, and what (the first of each kind)."""

    where: str
    task_id: str
    what: str


@dataclass(frozen=True)
class _Number:
    """A number of a document that is some task's value at the precision written."""

    start: int
    end: int
    text: str


def form_string(decimals: int, scaled: int) -> str:
    """How ``scaled`` x 10^-decimals is written with exactly ``decimals`` decimals (``(2, 409)``: 4.09)."""
    sign, digits = ("-" if scaled < 0 else ""), str(abs(scaled))
    if decimals <= 0:
        return sign + digits + "0" * -decimals
    digits = digits.rjust(decimals + 1, "0")
    return f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"


def _normal(token: str) -> str | None:
    """A number token as :func:`form_string` writes it, or None when it has no digits."""
    token = token.lstrip("+").rstrip(".")
    if "e" in token:
        mantissa, exponent = token.split("e")
        if not any(c.isdigit() for c in mantissa):
            return None
        sign = -1 if mantissa.startswith("-") else 1
        whole, _, frac = mantissa.lstrip("-").partition(".")
        decimals = len(frac) - int(exponent)
        if decimals not in DECIMALS:
            return None  # no value is written so
        return form_string(decimals, sign * int(whole + frac or "0"))
    if token.startswith(("-.", ".")):
        token = token.replace(".", "0.", 1)
    return token if any(c.isdigit() for c in token) else None


def _noise_free(form: str) -> str:
    """A number written with a float's noise (9.199999999999999) as its shortest round-tripping decimal
    (9.2), or rounded to FLOAT_DIGITS significant digits when that is still longer."""
    shortest = _normal(repr(float(form))) or form
    if _significant(shortest) <= FLOAT_DIGITS:
        return shortest
    number = Decimal(shortest)
    return format(number.quantize(Decimal(1).scaleb(number.adjusted() - FLOAT_DIGITS + 1)), "f")


def _significant(form: str) -> int:
    return len(form.lstrip("-").replace(".", "").lstrip("0"))


def _by_luck(span: float, decimals: int) -> float:
    """-log10 of the chance that a number written with ``decimals`` decimals, anywhere in the range of a
    task's values (``span`` wide), is one given value at that precision: a narrow range written coarsely
    (-12 to -5 in whole numbers) matches by luck one time in seven."""
    unit = 10.0**-decimals
    return math.log10(span / unit) if span > unit else 0.0


def _carried(values: dict[str, float]) -> dict[str, int]:
    """The significant digits each value carries, at the precision most of the task's values are recorded
    at (the commonest count of decimals; a float's ``.0`` is how it is printed, not a decimal): a task of
    whole percentages carries two digits in 10.0, as in 10, though a few of its values have a decimal; a
    pIC50 task's 5.0 carries two."""
    forms = {eid: _noise_free(_normal(repr(v)) or "0") for eid, v in values.items()}
    counts = Counter(len(f.removesuffix(".0").partition(".")[2]) for f in forms.values())
    decimals = max(counts, key=lambda d: (counts[d], -d)) if counts else 0
    return {
        eid: _significant(form_string(decimals, round(Decimal(f).scaleb(decimals))))
        for eid, f in forms.items()
    }


class Scanner:
    """Finds the marks of ``marks`` (one entry per task) in documents; built once, used for many."""

    def __init__(self, marks: list[TaskMarks]) -> None:
        self.marks = marks
        #: a gram's atoms -> (task, gram); a first atom -> (its grams' other atoms, their longest length)
        self._grams: dict[tuple[str, ...], list[tuple[int, Gram]]] = defaultdict(list)
        self._firsts: dict[str, list[tuple[set[str], int]]] = defaultdict(list)
        for index, task in enumerate(marks):
            for gram in task.grams:
                self._grams[gram.atoms].append((index, gram))
                self._firsts[gram.atoms[0]].append((set(gram.atoms[1:]), len(gram.atoms)))
        self._ids: dict[str, list[int]] = defaultdict(list)
        for index, task in enumerate(marks):
            for eid in task.values:
                self._ids[eid.lower()].append(index)
        self._id_pattern = _words(frozenset(self._ids))
        #: the longest atom of each DOI or source text -> (task, text)
        self._texts: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for index, task in enumerate(marks):
            for text in task.texts:
                self._texts[max(_ATOM.findall(text.lower()) or [""], key=len)].append((index, text))
        #: a value written at some precision -> (task, experiment id, what a match is worth: the digits beyond
        #: the first of the number as written, at most as many as the value itself carries: _carried)
        self._forms: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
        for index, task in enumerate(marks):
            own = {eid: digits - 1 for eid, digits in _carried(task.values).items()}
            span = max(task.values.values(), default=0.0) - min(task.values.values(), default=0.0)
            for (decimals, scaled), eids in task.written.items():
                form = form_string(decimals, scaled)
                luck = _by_luck(span, decimals)
                for eid in eids:
                    self._forms[form].append(
                        (index, eid.lower(), max(0.0, min(_significant(form) - 1, own[eid], luck)))
                    )

    def scan(self, where: str, data: bytes) -> list[Finding]:
        """Every task whose marks ``data`` holds, one finding per task and kind of mark."""
        try:
            text = data.decode("utf-8")
            is_text = "\0" not in text
        except UnicodeDecodeError:
            text, is_text = data.decode("latin-1"), False
        low = text.lower()
        present = set(_ATOM.findall(low))
        found: dict[int, list[str]] = defaultdict(list)
        self._find_grams(text if len(text) == len(low) else low, low, present, found)
        for atom in present & self._texts.keys():
            for index, needle in self._texts[atom]:
                kind = "DOI" if needle.startswith("10.") else "source"
                if needle.lower() in low and not any(f.startswith(f"the {kind} ") for f in found[index]):
                    found[index].append(f"the {kind} {needle[:60]!r}")
        if is_text:
            self._find_values(low, present, found)
        return [
            Finding(where, self.marks[index].task_id, what)
            for index, whats in sorted(found.items())
            for what in whats
        ]

    def _find_grams(self, text: str, low: str, present: set[str], found: dict[int, list[str]]) -> None:
        firsts: dict[str, int] = {}
        for first in present & self._firsts.keys():
            lengths = [n for rest, n in self._firsts[first] if rest <= present]
            if lengths:
                firsts[first] = max(lengths)
        if not firsts:
            return
        weak: dict[int, list[tuple[int, Gram]]] = defaultdict(list)
        for occurrence in _words(frozenset(firsts)).finditer(low):
            following, ends = [occurrence.group(0)], [occurrence.end()]
            while len(following) < firsts[following[0]] and (step := _FOLLOW.match(low, ends[-1])):
                following.append(step.group(1))
                ends.append(step.end())
            for n in range(1, len(following) + 1):
                for index, gram in self._grams.get(tuple(following[:n]), ()):
                    if not gram.strong:
                        weak[index].append((occurrence.start(), gram))
                    elif not any(f.startswith(f"the {gram.what} ") for f in found[index]):
                        found[index].append(f"the {gram.what} {text[occurrence.start() : ends[n - 1]]!r}")
        for index, hits in weak.items():
            run = _weak_run(hits)
            if run and _stand_out(low, hits, run):
                shown = ", ".join(repr(" ".join(g.atoms)) for g in run)
                found[index].append(f"{len(run)} weak keys or identifiers close together ({shown})")

    def _find_values(self, low: str, present: set[str], found: dict[int, list[str]]) -> None:
        #: a number as written -> the tasks and experiments whose value it is, with the digits it is worth
        forms: dict[str, list[tuple[int, str, float]]] = {}
        for token in set(_NUMBER.findall(low)):
            form = token if token in self._forms else _normal(token)
            if (
                form
                and form not in self._forms
                and len(form) > FLOAT_DIGITS
                and _significant(form) > FLOAT_DIGITS
            ):
                form = _noise_free(form)
            if form in self._forms:
                forms[token] = self._forms[form]
        if not forms:
            return
        ids: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        if present & self._ids.keys():
            for m in self._id_pattern.finditer(low):
                for index in self._ids[m.group(0)]:
                    ids[index].append((m.start(), m.end(), m.group(0)))
        forms = _worth_a_look(forms, ids.keys())
        numbers: dict[int, _Number] = {}
        #: task -> index of a number among all the document's numbers -> experiment id -> digits worth
        values: dict[int, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        count = 0
        for i, match in enumerate(_NUMBER.finditer(low)):
            count = i + 1
            if match.group(0) in forms:
                numbers[i] = _Number(match.start(), match.end(), match.group(0))
                for index, eid, digits in forms[match.group(0)]:
                    values[index][i][eid] = digits
        doc = _Numbers(low, numbers, count)
        for index, task_values in values.items():
            own = ids.get(index, [])
            what = (
                doc.with_ids(task_values, own)
                or doc.in_order(task_values, [eid for _, _, eid in own], ORDER_RUN, ORDER_DIGITS, False)
                or doc.in_order(
                    task_values,
                    [e.lower() for e in self.marks[index].presented],
                    PRESENTED_RUN,
                    PRESENTED_DIGITS,
                    True,
                )
            )
            if what:
                found[index].append(what)


@functools.lru_cache(maxsize=256)
def _words(words: frozenset[str]) -> re.Pattern[str]:
    """A pattern for any of ``words`` as whole atoms, written as a trie: Python's engine tries the branches
    of a flat alternation one by one at every position (0.4 MB/s for 3,000 words), a trie's in one pass."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def branch(node: dict[str, dict]) -> str:
        options = [re.escape(char) + branch(child) for char, child in sorted(node.items()) if char]
        if not options:
            return ""
        body = options[0] if len(options) == 1 else f"(?:{'|'.join(options)})"
        return f"(?:{body})?" if "" in node else body

    return re.compile(rf"(?<![a-z0-9])(?:{branch(trie) or '(?!)'})(?![a-z0-9])")


@functools.lru_cache(maxsize=1024)
def _shape_pattern(shape: tuple[str, ...]) -> re.Pattern[str]:
    """Any gram of ``shape``, its atoms apart as a gram's may be."""
    atoms = [re.sub(r"#+", lambda m: rf"\d{{{len(m.group(0))}}}", atom) for atom in shape]
    return re.compile(r"(?<![a-z0-9])" + _GAP.join(atoms) + r"(?![a-z0-9])")


def _stand_out(low: str, hits: list[tuple[int, Gram]], run: list[Gram]) -> bool:
    """Whether the task's weak marks are at least half of what the document holds of their shapes: a
    document listing ``r0`` to ``r200`` (variables, a table of codes) holds ``r97 r99 r100`` by chance."""
    shapes = {shape(gram.atoms) for gram in run}
    theirs = {gram.atoms for _, gram in hits if shape(gram.atoms) in shapes}
    every = {
        tuple(_ATOM.findall(m.group(0))) for shape in shapes for m in _shape_pattern(shape).finditer(low)
    }
    return 2 * len(theirs) >= len(every)


def _worth_a_look(
    forms: dict[str, list[tuple[int, str, float]]], named: Iterable[int]
) -> dict[str, list[tuple[int, str, float]]]:
    """The matches of the tasks whose distinct matching numbers could reach a rule's bounds at all: those
    the document names ids of worth WITH_IDS_DIGITS, the others PRESENTED_RUN values worth
    PRESENTED_DIGITS (a PDB file's integers match many tasks' values written to the unit, little more)."""
    eids: dict[int, set[str]] = defaultdict(set)
    digits: dict[int, float] = defaultdict(float)
    for hits in forms.values():
        for index, eid, worth in hits:
            eids[index].add(eid)
            digits[index] += worth
    named = set(named)
    keep = {
        index
        for index in eids
        if (index in named and digits[index] >= WITH_IDS_DIGITS)
        or (len(eids[index]) >= PRESENTED_RUN and digits[index] >= PRESENTED_DIGITS)
    }
    kept = {token: [h for h in hits if h[0] in keep] for token, hits in forms.items()}
    return {token: hits for token, hits in kept.items() if hits}


def _next_within(places: list[int], after: int) -> int | None:
    """The first of the sorted ``places`` after ``after`` and within MAX_STRIDE of it, if any."""
    i = bisect.bisect_right(places, after)
    return places[i] if i < len(places) and places[i] <= after + MAX_STRIDE else None


def _weak_run(hits: list[tuple[int, Gram]]) -> list[Gram]:
    """The first :data:`WEAK_RUN` or more different grams within :data:`WEAK_WINDOW_CHARS` characters that
    tell :data:`WEAK_BITS` in all, if any."""
    hits.sort(key=lambda h: h[0])
    for i, (start, _) in enumerate(hits):
        distinct: dict[tuple[str, ...], Gram] = {}
        for position, gram in hits[i:]:
            if position - start > WEAK_WINDOW_CHARS:
                break
            distinct.setdefault(gram.core, gram)
            if len(distinct) >= WEAK_RUN and sum(g.evidence for g in distinct.values()) >= WEAK_BITS:
                return list(distinct.values())
    return []


class _Numbers:
    """The numbers of one document that are values of some task, by their index among all its numbers."""

    def __init__(self, low: str, numbers: dict[int, _Number], count: int) -> None:
        self.low, self.numbers = low, numbers
        #: where a run without ids may start by luck: at any of the document's numbers
        self.starts_by_luck = math.log10(max(count, 1))
        self.starts = {n.start: i for i, n in numbers.items()}
        self.ends = {n.end: i for i, n in numbers.items()}
        self.order = sorted(numbers, key=lambda i: numbers[i].start)
        self.positions = [numbers[i].start for i in self.order]

    def _adjacent(self, start: int, end: int) -> list[int]:
        """The numbers right after an id (separators between), or right before it on its line."""
        after = _BESIDE.match(self.low, end)
        before = _BESIDE_BEFORE_END.search(self.low, max(0, start - BESIDE_CHARS), start)
        found = [
            self.starts.get(after.end()) if after else None,
            self.ends.get(before.start()) if before else None,
        ]
        return [i for i in found if i is not None]

    def _in_record(self, ids: list[tuple[int, int, str]], k: int) -> list[int]:
        """The numbers between the id ``ids[k]`` and the ids before and after it, within RECORD_CHARS."""
        start, end, _ = ids[k]
        first = max(ids[k - 1][1] if k else 0, start - RECORD_CHARS)
        last = min(ids[k + 1][0] if k + 1 < len(ids) else len(self.low), end + RECORD_CHARS)
        return self.order[
            bisect.bisect_left(self.positions, first) : bisect.bisect_left(self.positions, last)
        ]

    def with_ids(self, values: dict[int, dict[str, float]], ids: list[tuple[int, int, str]]) -> str:
        """Values beside their ids, or among the numbers of their records, worth WITH_IDS_DIGITS in all."""
        beside: dict[str, tuple[float, int]] = {}
        in_record: dict[str, tuple[float, int]] = {}
        for k, (start, end, eid) in enumerate(ids):
            for best, places in ((beside, self._adjacent(start, end)), (in_record, self._in_record(ids, k))):
                for i in places:
                    if eid in values.get(i, ()) and values[i][eid] >= best.get(eid, (-1, 0))[0]:
                        best[eid] = (values[i][eid], i)
        named = {eid for _, _, eid in ids}
        for best, how in ((beside, "beside their ids"), (in_record, "in their records")):
            if sum(digits for digits, _ in best.values()) < WITH_IDS_DIGITS:
                continue
            if best is in_record and 2 * len(best) < len(named):
                continue
            sample = ", ".join(f"{e} {self.numbers[i].text}" for e, (_, i) in list(best.items())[:3])
            return (
                f"the measured values of {len(best)} of the {len(named)} experiments named {how} ({sample})"
            )
        return ""

    def in_order(
        self,
        values: dict[int, dict[str, float]],
        order: list[str],
        min_run: int,
        min_digits: int,
        presented: bool,
    ) -> str:
        """A run of the values of consecutive ids of ``order`` among the numbers, each within MAX_STRIDE
        numbers of the one before (other columns between: conditions, names with locants)."""
        sequence = [e for i, e in enumerate(order) if i == 0 or e != order[i - 1]]
        places: dict[str, list[int]] = defaultdict(list)
        for i in sorted(values):
            for eid in values[i]:
                places[eid].append(i)
        if len(places) < min_run or len(sequence) < min_run:
            return ""
        for t, eid in enumerate(sequence):
            for p in places.get(eid, ()):
                run, digits, at = 1, values[p][eid], [p]
                while t + run < len(sequence):
                    nxt = _next_within(places.get(sequence[t + run], []), at[-1])
                    if nxt is None:
                        break
                    digits += values[nxt][sequence[t + run]]
                    at.append(nxt)
                    run += 1
                # without ids to anchor it, a run may start at any number of the document: a table of
                # 10,000 distances holds runs of one-decimal values by luck
                if presented:
                    digits -= self.starts_by_luck
                if run >= min_run and digits >= min_digits:
                    shown = " ".join(self.numbers[q].text for q in at[:4])
                    how = "the order the task presents them" if presented else "the order of their ids"
                    return f"the measured values of {run} experiments in {how} ({shown} ...)"
        return ""
