"""Significant figures of published values and predictions, and nested digit matches at 1, 2 and 3 figures.

A number is read from its decimal text (``"-1.50"``, ``"0.0347"``, ``"1.2e3"``), never through a binary
float, so the figures a label was published with are the figures it is audited on. Its *key* is the triple
(sign, decimal exponent of the leading significant digit, first three significant digits) after rounding to
three significant figures, half away from zero. A prediction matches a label at k figures when the signs,
the exponents and the first k digits of the two keys agree; matches are therefore nested (a match at 3
implies one at 2 and at 1) and retentions are ratios of nested counts: R12 = m2 / m1, R23 = m3 / m2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction

FIGURES = 3  # the audit compares 1, 2 and 3 significant figures


@dataclass(frozen=True)
class DigitKey:
    """A non-zero number rounded to three significant figures: sign, exponent and digits.

    ``exponent`` is the power of ten of the leading digit (``-1.52`` -> 0, ``0.0347`` -> -2, ``373`` -> 2);
    ``digits`` has exactly three entries, zero-padded (``-1.5`` -> (1, 5, 0)).
    """

    negative: bool
    exponent: int
    digits: tuple[int, int, int]

    def prefix(self, k: int) -> tuple:
        """The part of the key that a match at ``k`` figures compares: sign, exponent, first k digits."""
        return (self.negative, self.exponent, *self.digits[:k])


def parse_decimal(value: object) -> Decimal | None:
    """The finite decimal written in ``value``, or None (empty, text, NaN, infinity).

    Strings are read as written; floats through their shortest round-trip ``repr``; ints exactly.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None
        number = Decimal(repr(value))
    elif isinstance(value, Fraction):
        raise TypeError("a Fraction has no written significant figures; pass its decimal text")
    else:
        text = str(value).strip().replace("\u2212", "-")  # accept the typographic minus sign
        if not text:
            return None
        try:
            number = Decimal(text)
        except InvalidOperation:
            return None
    return number if number.is_finite() else None


def written_figures(value: object) -> int:
    """How many significant figures ``value`` is written with; 0 for zero or anything not a number.

    Leading zeros never count; trailing zeros do, also in integers (``"1.50"`` -> 3, ``"0.0150"`` -> 3,
    ``"1500"`` -> 4, ``"1.5e3"`` -> 2).
    """
    number = parse_decimal(value)
    if number is None or number.is_zero():
        return 0
    digits = number.as_tuple().digits
    leading = next(i for i, d in enumerate(digits) if d != 0)
    return len(digits) - leading


def digit_key(value: object) -> DigitKey | None:
    """The three-figure key of ``value``, or None for zero and anything that is not a finite number."""
    number = parse_decimal(value)
    if number is None or number.is_zero():
        return None
    magnitude = abs(number)
    exponent = magnitude.adjusted()
    rounded = magnitude.quantize(Decimal(1).scaleb(exponent - FIGURES + 1), rounding=ROUND_HALF_UP)
    if rounded.adjusted() != exponent:  # 9.996 -> 10.0: one more power of ten, digits stay exact
        exponent = rounded.adjusted()
        rounded = rounded.quantize(Decimal(1).scaleb(exponent - FIGURES + 1), rounding=ROUND_HALF_UP)
    digits = rounded.as_tuple().digits
    leading = next(i for i, d in enumerate(digits) if d != 0)
    kept = (tuple(digits[leading:]) + (0,) * FIGURES)[:FIGURES]
    return DigitKey(negative=number.is_signed(), exponent=exponent, digits=kept)  # type: ignore[arg-type]


def match_depth(prediction: DigitKey | None, label: DigitKey | None) -> int:
    """The number of leading figures (0 to 3) on which ``prediction`` and ``label`` agree."""
    if prediction is None or label is None:
        return 0
    if prediction.negative != label.negative or prediction.exponent != label.exponent:
        return 0
    depth = 0
    for mine, theirs in zip(prediction.digits, label.digits, strict=True):
        if mine != theirs:
            break
        depth += 1
    return depth


@dataclass(frozen=True)
class NestedMatches:
    """Nested match counts over ``n`` items: m1 >= m2 >= m3, and the retentions between them."""

    n: int
    m1: int
    m2: int
    m3: int

    @property
    def r12(self) -> float:
        """Share of first-figure matches that also match at two figures (NaN when m1 is 0)."""
        return self.m2 / self.m1 if self.m1 else math.nan

    @property
    def r23(self) -> float:
        """Share of two-figure matches that also match at three figures (NaN when m2 is 0)."""
        return self.m3 / self.m2 if self.m2 else math.nan

    def hit(self, k: int) -> float:
        """Share of the ``n`` items matched at ``k`` figures."""
        count = (self.m1, self.m2, self.m3)[k - 1]
        return count / self.n if self.n else math.nan


def nested_matches(predictions: list[DigitKey | None], labels: list[DigitKey | None]) -> NestedMatches:
    """Count matches at 1, 2 and 3 figures between paired predictions and labels."""
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    depths = [match_depth(p, y) for p, y in zip(predictions, labels, strict=True)]
    return NestedMatches(
        n=len(depths),
        m1=sum(d >= 1 for d in depths),
        m2=sum(d >= 2 for d in depths),
        m3=sum(d >= 3 for d in depths),
    )


def first_figure_value(key: DigitKey) -> float:
    """The first-figure reference prediction: the right leading figure, the middle of its interval below.

    ``-1.52`` -> ``-1.5``, ``0.0347`` -> ``0.035``, ``373`` -> ``350``: it knows the first significant figure
    exactly and nothing below it, so it emits the centre of the interval that figure leaves open.
    """
    magnitude = (key.digits[0] + 0.5) * 10.0**key.exponent
    return -magnitude if key.negative else magnitude


def format_figures(value: float, figures: int = FIGURES) -> str:
    """``value`` written with exactly ``figures`` significant figures, trailing zeros kept (``-1.5`` ->
    ``"-1.50"``), rounding half away from zero."""
    number = parse_decimal(value)
    if number is None:
        raise ValueError(f"not a finite number: {value!r}")
    if number.is_zero():
        return "0"
    exponent = number.adjusted()
    rounded = number.quantize(Decimal(1).scaleb(exponent - figures + 1), rounding=ROUND_HALF_UP)
    if rounded.adjusted() != exponent:
        rounded = rounded.quantize(
            Decimal(1).scaleb(rounded.adjusted() - figures + 1), rounding=ROUND_HALF_UP
        )
    return str(rounded)
