"""Characters refused in any text a tool receives: every Default_Ignorable_Code_Point and every
Bidi_Control character of the Unicode Character Database.

Engines drop or honour them silently (RDKit reads ``"CCO\\u200b"`` as ethanol; a bidi override or a tag
character hides text from a human reader), so they are refused, never guessed at. The table below is
generated from the two properties (``tests/core/test_invisible.py`` regenerates it with the ``regex``
package's Unicode tables and fails when it differs); it holds soft hyphen, combining grapheme joiner,
Arabic letter mark, Hangul fillers, Khmer inherent vowels, Mongolian selectors, zero-width characters,
LRM/RLM, bidi embeddings, overrides and isolates, invisible operators, variation selectors, BOM, the
shorthand format controls, musical symbol format controls and the whole tag block (U+E0000 to U+E0FFF).
"""

from __future__ import annotations

import re

#: Inclusive code-point ranges of Default_Ignorable_Code_Point and Bidi_Control (Unicode 16).
REFUSED_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)

#: One character class of every refused character.
REFUSED_CLASS = "".join(f"{chr(a)}-{chr(b)}" if a != b else chr(a) for a, b in REFUSED_RANGES)
INVISIBLE_RE = re.compile(f"[{REFUSED_CLASS}]")

#: ``str.translate`` table that deletes every refused character (for matching text, not for input).
DELETE_INVISIBLE = {cp: None for a, b in REFUSED_RANGES for cp in range(a, b + 1)}
