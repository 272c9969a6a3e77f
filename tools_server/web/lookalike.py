"""Words as a reader sees them: Unicode confusable skeletons (Unicode TS #39), case and diacritics folded.

Two spellings of a word that a reader cannot tell apart, whatever their case, get the same key
(:func:`word_key`): ``cytochrome`` written with a Cyrillic ``с`` or ``о``, a Greek ``ο``, in capitals with
Cyrillic or Greek capitals (``СYTOCHROME``), with combining accents, or in fullwidth letters (NFKC, applied
by the caller). The key is the TS #39 skeleton of the case-folded word, with diacritics then removed and
case folded again. Case folding first keeps ``ISOZYME`` and ``isozyme`` together (the skeleton of ``I`` is
``l``); so that letters of other scripts survive it, each one whose skeleton is basic Latin is first
replaced by it, a capital by the capital it looks like (Cyrillic ``Н`` and Greek ``Η`` look like ``H``, but
their lower cases ``н`` and ``η`` do not look like ``h``; Cherokee small letters fold to capitals).
Skeletons come from ICU's ``SpoofChecker`` (PyICU, installed from the ``pyicu-wheels`` distribution, which
bundles ICU and its copy of Unicode's ``confusables.txt``): the reference implementation of TS #39, not a
table kept here. As a capital ``I`` looks like ``l`` and case folding makes ``i`` of it, ``i`` and ``l`` are
one letter in a key. Keys are for comparing, not for showing: ``m`` becomes ``rn`` and ``1`` becomes ``l``,
in the title and the page alike.

:func:`mixed_script_problem` says why a policy title must not be used as written: a word mixing scripts
(TS #39 §5.1: its resolved script set is empty) one of whose letters reads as a basic Latin letter (``С``
in ``Сytochrome``), or a word of two or more letters written wholly in another script whose every letter
reads as a Latin one (``АСЕ2`` in Cyrillic) in a title of Latin words. Greek letters used as symbols stay
allowed (``α-helix``, ``NF-κB``, ``Aβ42``: ``β`` reads as ``ß``, not as a basic Latin letter).

ICU is imported on first use, so a server with no policy never loads it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

_WORD = re.compile(r"[^\W_]+")
_LATIN_LETTERS = re.compile(r"[A-Za-z]+")


@functools.cache
def _delete_marks() -> dict[int, None]:
    """The nonspacing and enclosing marks (diacritics), a ``str.translate`` table that deletes them."""
    return {cp: None for cp in range(0x110000) if unicodedata.category(chr(cp)) in ("Mn", "Me")}


@functools.cache
def _icu() -> Any:
    import icu

    return icu


@functools.cache
def _checker() -> Any:
    return _icu().SpoofChecker()


def skeleton(text: str) -> str:
    """The TS #39 skeleton of ``text`` (ICU's ``SpoofChecker.getSkeleton``)."""
    return _checker().getSkeleton(0, text)


def strip_marks(text: str) -> str:
    """``text`` decomposed (NFKD) with its diacritics (nonspacing and enclosing marks) removed."""
    return text if text.isascii() else unicodedata.normalize("NFKD", text).translate(_delete_marks())


@functools.cache
def _capitals() -> dict[str, str]:
    """The skeleton of each basic Latin capital, mapped to the capital (``l`` to ``I``, ``H`` to ``H``)."""
    return {skeleton(c): c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}


def _as_basic_latin(char: str) -> str:
    """``char`` itself, or, outside ASCII, the basic Latin letters or digits it looks like: a capital that
    looks like a capital gives that capital (Cyrillic ``Н`` and Greek ``Η`` give ``H``; Greek ``Ι`` gives
    ``I``, not the ``l`` of its skeleton), any other letter its skeleton (``Ƨ`` gives ``2``)."""
    if char.isascii():
        return char
    shape = skeleton(char)
    if char.isupper() and shape in _capitals():
        return _capitals()[shape]
    return shape if shape.isascii() and shape.isalnum() else char


def _key(word: str) -> str:
    if not word.isascii():
        word = "".join(map(_as_basic_latin, word))
    # a capital I looks like l, and case folding makes i of it: i and l are one letter in a key
    return strip_marks(skeleton(word.casefold())).casefold().replace("i", "l")


@functools.cache
def _ascii_keys() -> dict[int, str]:
    """The key of every ASCII character: a word of them is keyed with one ``str.translate``, without ICU
    (the skeleton maps one code point at a time, and ASCII is its own decomposition)."""
    return {cp: _key(chr(cp)) for cp in range(128)}


def word_key(word: str) -> str:
    """The key two look-alike spellings of ``word`` share (see the module docstring)."""
    if word.isascii():
        return word.translate(_ascii_keys())
    return _key(word)


def _script(char: str) -> str:
    icu = _icu()
    return icu.Script.getScript(char).getName()


def _script_set(char: str) -> set[str] | None:
    """The scripts ``char`` is used with (Unicode Script_Extensions); None for Common and Inherited, which
    go with every script (TS #39's augmented script set)."""
    icu = _icu()
    names = {icu.Script(code).getName() for code in icu.Script.getScriptExtensions(char)}
    return None if names & {"Common", "Inherited"} else names


def _reads_as_latin(char: str) -> str | None:
    """The basic Latin letters ``char`` reads as (its skeleton, when that is made of them), or None."""
    shape = skeleton(char)
    return shape if _LATIN_LETTERS.fullmatch(shape) else None


def _in_latin(word: str) -> str:
    """``word`` with each letter that reads as basic Latin letters written as them."""
    return "".join(c if c.isascii() else (_reads_as_latin(c) or c) for c in word)


def _name(char: str) -> str:
    return unicodedata.name(char, f"U+{ord(char):04X}")


def mixed_script_problem(title: str) -> str | None:
    """Why ``title`` (NFKC, invisible characters already refused or removed) mixes scripts the way a
    look-alike spelling does, in one sentence; None when it does not (see the module docstring)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", title))
    latin_words = 0
    foreign: list[tuple[str, set[str]]] = []
    for word in words:
        letters = [c for c in strip_marks(word) if c.isalpha()]
        sets = [s for s in map(_script_set, letters) if s is not None]
        if not sets:
            continue
        common = set.intersection(*sets)
        if not common:
            counts: dict[str, int] = {}
            for c in letters:
                counts[_script(c)] = counts.get(_script(c), 0) + 1
            main = max(counts, key=lambda s: (counts[s], s == "Latin"))
            for c in letters:
                if _script(c) != main and (latin := _reads_as_latin(c)) is not None:
                    return (
                        f"the word {word!r} mixes scripts: {c!r} ({_name(c)}) looks like the Latin "
                        f"{latin!r}; write it in one script ({_in_latin(word)!r}): look-alike letters are "
                        "matched as the letters they look like, so pages that write it either way are flagged"
                    )
        elif "Latin" in common:
            latin_words += 1
        else:
            foreign.append((word, common))
    if latin_words:
        for word, scripts in foreign:
            letters = [c for c in word if c.isalpha()]
            if len(letters) >= 2 and all(_reads_as_latin(c) for c in letters):
                script = sorted(scripts)[0]
                return (
                    f"the word {word!r} is written in {script} letters that look like the Latin "
                    f"{_in_latin(word)!r}; write it in Latin letters: look-alike letters are matched as the "
                    "letters they look like, so pages that write it either way are flagged"
                )
    return None
