"""Significant figures, three-figure keys and nested matches (environment/contamination/digits.py).

Expected values are worked by hand from the definitions in docs/contamination.md: figures are counted on
the decimal text, leading zeros never count, trailing zeros do; keys round half away from zero to three
figures; a match at k figures needs the same sign, the same exponent and the same first k digits.
"""

from __future__ import annotations

import math

import pytest

from environment.contamination.digits import (
    DigitKey,
    digit_key,
    first_figure_value,
    format_figures,
    match_depth,
    nested_matches,
    parse_decimal,
    written_figures,
)


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        ("-1.52", 3),
        ("-1.50", 3),  # trailing zero after the point counts
        ("-1.5", 2),
        ("0.0150", 3),  # leading zeros never count
        ("0.0347", 3),
        ("1500", 4),  # trailing zeros of an integer count as written
        ("1.5e3", 2),
        ("1.50E+3", 3),
        ("373", 3),
        ("0", 0),
        ("-0.000", 0),
        ("", 0),
        ("n/a", 0),
        ("nan", 0),
        ("inf", 0),
        (0.1, 1),  # floats through their shortest repr
        (12, 2),
    ],
)
def test_written_figures(text, figures):
    assert written_figures(text) == figures


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("-1.52", (True, 0, (1, 5, 2))),
        ("0.0347", (False, -2, (3, 4, 7))),
        ("373", (False, 2, (3, 7, 3))),
        ("-1.5", (True, 0, (1, 5, 0))),  # zero-padded: -1.5 is the number -1.50
        ("1.2345", (False, 0, (1, 2, 3))),
        ("1.2350", (False, 0, (1, 2, 4))),  # half away from zero
        ("-1.2350", (True, 0, (1, 2, 4))),
        ("1.2349999", (False, 0, (1, 2, 3))),
        ("9.996", (False, 1, (1, 0, 0))),  # rounds up into the next power of ten
        ("-0.09996", (True, -1, (1, 0, 0))),
        ("1.5e-30", (False, -30, (1, 5, 0))),
        (" 2.00 ", (False, 0, (2, 0, 0))),
        ("\u22121.52", (True, 0, (1, 5, 2))),  # typographic minus
        ("+4.1", (False, 0, (4, 1, 0))),
    ],
)
def test_digit_key(text, key):
    negative, exponent, digits = key
    assert digit_key(text) == DigitKey(negative=negative, exponent=exponent, digits=digits)


@pytest.mark.parametrize("text", ["0", "0.00", "", "abc", "nan", "-inf", None])
def test_digit_key_none_for_zero_and_text(text):
    assert digit_key(text) is None


def test_parse_decimal_keeps_written_form():
    assert str(parse_decimal("-1.50")) == "-1.50"
    assert parse_decimal(True) is None
    with pytest.raises(TypeError):
        from fractions import Fraction

        parse_decimal(Fraction(1, 3))


@pytest.mark.parametrize(
    ("prediction", "label", "depth"),
    [
        ("-1.53", "-1.52", 2),
        ("-1.52", "-1.52", 3),
        ("-1.524", "-1.52", 3),  # rounded to three figures first
        ("-1.526", "-1.52", 2),
        ("-1.5", "-1.52", 2),  # -1.50 vs -1.52
        ("-1.5", "-1.50", 3),
        ("1.52", "-1.52", 0),  # the sign is part of every prefix
        ("15.2", "1.52", 0),  # so is the exponent
        ("0.999", "1.00", 0),
        ("2.52", "1.52", 0),
        ("1.62", "1.52", 1),
        ("1.52", "1.520", 3),
        ("abc", "1.52", 0),
        ("0", "1.52", 0),
    ],
)
def test_match_depth(prediction, label, depth):
    assert match_depth(digit_key(prediction), digit_key(label)) == depth


def test_nested_counts_and_retentions():
    labels = ["-1.52", "-1.52", "-1.52", "-1.52", "3.07", "3.07", "250", "0.0481"]
    predictions = ["-1.52", "-1.53", "-1.61", "-2.52", "3.07", "3.00", "251", "x"]
    counts = nested_matches([digit_key(p) for p in predictions], [digit_key(y) for y in labels])
    # depths: 3, 2, 1, 0, 3, 2, 2, 0
    assert (counts.n, counts.m1, counts.m2, counts.m3) == (8, 6, 5, 2)
    assert counts.r12 == pytest.approx(5 / 6)
    assert counts.r23 == pytest.approx(2 / 5)
    assert counts.hit(3) == pytest.approx(2 / 8)


def test_retentions_nan_without_matches():
    counts = nested_matches([digit_key("5.00")], [digit_key("1.00")])
    assert counts.m1 == 0 and math.isnan(counts.r12) and math.isnan(counts.r23)
    with pytest.raises(ValueError):
        nested_matches([None], [])


@pytest.mark.parametrize(
    ("label", "value"), [("-1.52", -1.5), ("0.0347", 0.035), ("373", 350.0), ("9.99", 9.5)]
)
def test_first_figure_reference_value(label, value):
    assert first_figure_value(digit_key(label)) == pytest.approx(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [(-1.5, "-1.50"), (0.034749, "0.0347"), (9.996, "10.0"), (373.4, "373"), (1234.0, "1.23E+3")],
)
def test_format_figures(value, text):
    assert format_figures(value) == text
    assert written_figures(text) == 3
