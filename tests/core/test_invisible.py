"""The refused-character table is the Unicode properties Default_Ignorable_Code_Point and Bidi_Control,
regenerated here from the ``regex`` package's Unicode database; every one of them is refused in
arguments, and ordinary non-ASCII text is not."""

from __future__ import annotations

import pytest

from tools_server.core.errors import ToolError
from tools_server.core.invisible import INVISIBLE_RE, REFUSED_RANGES
from tools_server.core.limits import check_arguments


def _ranges_of(pattern) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or not pattern.match(chr(cp)):
            continue
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def test_the_table_is_the_unicode_properties():
    regex = pytest.importorskip("regex")
    derived = _ranges_of(regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]"))
    assert list(REFUSED_RANGES) == derived


def test_the_compiled_class_matches_the_table_exactly():
    table = {cp for a, b in REFUSED_RANGES for cp in range(a, b + 1)}
    matched = {cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and INVISIBLE_RE.match(chr(cp))}
    assert matched == table and len(table) == 4174


@pytest.mark.parametrize(
    "ch",
    [
        "\u034f",  # combining grapheme joiner
        "\ufe0f",  # variation selector 16
        "\U000e0041",  # tag LATIN CAPITAL LETTER A
        "\U000e0001",  # language tag
        "\U000e0100",  # variation selector 17
        "\u2065",  # unassigned, default ignorable
        "\u3164",  # Hangul filler
        "\u180f",  # Mongolian free variation selector four
        "\u061c",  # Arabic letter mark
        "\u2067",  # right-to-left isolate
        "\U0001d173",  # musical symbol begin beam
    ],
)
def test_each_kind_is_refused_in_values_and_keys(ch):
    for arguments in ({"molecules": [f"CC{ch}O"]}, {f"k{ch}": 1}):
        with pytest.raises(ToolError) as err:
            check_arguments(arguments)
        assert err.value.code == "invalid_input"
        assert f"U+{ord(ch):04X}" in err.value.message


def test_ordinary_text_passes():
    check_arguments({"query": "Ångström naïve 日本語 кислота 🧪 مرحبا", "n": [1, 2.5, None]})
