"""The source-identifier detector: does a text contain an identifier of the forbidden source study?

Text is normalized before matching, so the identifiers are found however a page or API spells them:

* up to three rounds of JSON ``\\uXXXX`` escapes, escaped slashes (``\\/``), HTML entities (named,
  decimal, hex) and percent-encoding (``%2F``, double-encoded ``%252F``);
* Unicode NFKC (fullwidth digits and solidus), every dash and slash look-alike mapped to ASCII, soft
  hyphens and zero-width characters removed, case folded; a line break right after ``/ . - _`` (how PDF
  extractors split long DOIs) is closed up.

Matching rules (each returns the *kind* of identifier, never its value):

* ``doi`` / ``preprint_doi``: the DOI as a whole: the character after it must not be a letter or digit,
  so ``10.1021/jacs.5b012345`` does not match ``10.1021/jacs.5b01234`` but a supplementary-file DOI
  ``10.1021/jacs.5b01234.s001`` does (supplementary material is forbidden too).
* ``pmid``: the number standing alone (no adjacent digit) right after a PubMed label, separated from it
  only by punctuation or a tag's attributes (``PMID: n``, ``pubmed/n``, ``"pmid":"n"``, ``MED/n``,
  ``"uid":"n"``, ``<Id>n``, ``ext_id=n``), followed by ``[uid]``/``[pmid]``, or inside an E-utilities
  ``idlist``/``uids`` array. A bare number, or one that merely appears near a label, is not flagged.
* ``pmcid``: ``PMC`` followed by the number, no further digit.
* ``title`` / ``preprint_title``: on whole words as a reader sees them (each word keyed by
  :func:`~tools_server.web.lookalike.word_key`: its Unicode confusable skeleton, case and accents folded, so
  Cyrillic, Greek or fullwidth look-alike letters, combining marks and invisible characters change nothing),
  British spellings and plurals folded, the longest run of consecutive title words found in the text must
  cover at least 70% of the title's letters and at least four words (the whole title when it has four words
  or fewer). A truncated title (``First words of the title …``) is found; a title with one word changed in
  the middle, or words found inside longer words, is not. A partial run counts only where the text breaks
  off there (an ellipsis, punctuation, a tag, a line end or the end of the text): a title with its first or
  last word replaced by another word (another study's title) is not flagged. The text is also read with
  words hyphenated across a line break joined (``Enantio-\nselective``) and with CamelCase split
  (``EnantioselectiveSynthesisOf...`` in a URL slug).

DOIs are also found with white space around the ``/``, broken across lines anywhere, percent-encoded up
to eight times, and, inside a URL, as the DOI's suffix alone forming a path segment or query value
(``nature.com/articles/s41586-...`` for ``10.1038/s41586-...``) when that suffix is distinctive (at least
six characters with a digit and a letter).
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote

from tools_server.plugin import DELETE_INVISIBLE
from tools_server.web.lookalike import strip_marks, word_key
from tools_server.web.policy import Policy

FLAG_MESSAGE = (
    "The information policy requires you to stop: this result was withheld because it contains an "
    "identifier of the study this task comes from, which you must not use. Stop this line of inquiry, "
    "do not try to retrieve the item another way, and record this step (the tool and the query or URL) "
    "in your report."
)

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d\u2043"), "-")
_SLASHES = dict.fromkeys(map(ord, "\u2215\u2044\uff0f\u29f8"), "/")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_PCT = re.compile(r"%[0-9a-fA-F]{2}")
_TAG = re.compile(r"<[^<>]{0,300}>")
_BROKEN_AFTER_PUNCT = re.compile(r"([/.\-_])\s+")
_SPACED_SLASH = re.compile(r"\s*/\s*")
_LINE_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*")
_PMID_BEFORE = re.compile(
    r"(?:pmid|pubmed(?:[\s_]*id)?|medline|\bmed|\buids?|<id|ext_id|nih\.gov/(?:pubmed/)?)"
    r"(?:\s+[a-z_]+=\"[^\"]*\")*[^a-z0-9]{0,8}$"
)
_PMID_AFTER = re.compile(r"^\s*\[(?:uid|pmid|pubmed)\]")
_ID_ARRAYS = re.compile(r"\"(?:idlist|uids)\"\s*:\s*\[([^\]]*)\]")
_WORD = re.compile(r"[^\W_]+")
_SPELLING = {
    "sulphur": "sulfur",
    "sulphate": "sulfate",
    "aluminium": "aluminum",
    "caesium": "cesium",
    "haem": "heme",
    "oestrogen": "estrogen",
    "foetal": "fetal",
    "anaemia": "anemia",
}


def _decode_round(text: str) -> str:
    if "\\u" in text:
        text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    text = text.replace("\\/", "/")
    if "&" in text:
        text = html.unescape(text)
    if "%" in text and _PCT.search(text):
        text = unquote(text, errors="replace")
    return text


def decode_text(text: str) -> str:
    """Decode escapes and fold Unicode (NFKC, dashes, slashes, invisible characters), keeping case."""
    for _ in range(8):
        decoded = _decode_round(text)
        if decoded == text:
            break
        text = decoded
    text = unicodedata.normalize("NFKC", text)
    return text.translate(_DASHES).translate(_SLASHES).translate(DELETE_INVISIBLE)


def normalize_text(text: str) -> str:
    """Decode escapes and fold Unicode and case: the form every identifier but a title is matched in."""
    return decode_text(text).casefold()


_BRITISH = (
    ("isation", "ization"),
    ("ising", "izing"),
    ("ised", "ized"),
    ("ysed", "yzed"),
    ("ysing", "yzing"),
    ("yse", "yze"),
    ("ise", "ize"),
    ("our", "or"),
    ("tre", "ter"),
)


@functools.cache
def _keyed_spellings() -> tuple[dict[str, str], tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The spelling and suffix tables, and the endings that are no plural, in look-alike keys
    (``aluminium`` is keyed ``alurnlnlurn``)."""
    return (
        {word_key(k): word_key(v) for k, v in _SPELLING.items()},
        tuple((word_key(b), word_key(a)) for b, a in _BRITISH),
        tuple(word_key(e) for e in ("ss", "us", "is")),
    )


def _stem(key: str) -> str:
    spellings, suffixes, singular = _keyed_spellings()
    key = spellings.get(key, key)
    if len(key) > 5:
        for british, american in suffixes:
            if key.endswith(british):
                key = key[: -len(british)] + american
                break
    if len(key) > 3 and key.endswith("s") and not key.endswith(singular):
        key = key[:-1]
    return key


@functools.lru_cache(maxsize=1 << 16)
def _title_word(word: str) -> str:
    """A word as titles are compared: its look-alike key (:func:`word_key`), British spellings and plurals
    folded."""
    return _stem(word_key(word))


def title_words(text: str) -> list[str]:
    """Whole words as a reader sees them: look-alike letters, case and accents folded (:mod:`lookalike`),
    British spellings and plurals folded."""
    return [_title_word(w) for w in _WORD.findall(strip_marks(decode_text(text)))]


def _contains_doi(text: str, doi: str) -> bool:
    start = 0
    while True:
        i = text.find(doi, start)
        if i < 0:
            return False
        before = text[i - 1] if i else " "
        after = text[i + len(doi)] if i + len(doi) < len(text) else " "
        if not (before.isdigit() or before == ".") and not after.isalnum():
            return True
        start = i + 1


def _contains_pmid(text: str, pmid: str) -> bool:
    for m in re.finditer(rf"(?<!\d){re.escape(pmid)}(?!\d)", text):
        if _PMID_BEFORE.search(text[max(0, m.start() - 60) : m.start()]) or _PMID_AFTER.match(
            text[m.end() : m.end() + 12]
        ):
            return True
    for arr in _ID_ARRAYS.finditer(text):
        if re.search(rf"(?<!\d){re.escape(pmid)}(?!\d)", arr.group(1)):
            return True
    return False


def _contains_pmcid(text: str, pmcid: str) -> bool:
    return re.search(rf"(?<![a-z0-9])pmc[\s:#_-]*0*{re.escape(pmcid)}(?!\d)", text) is not None


@dataclass(frozen=True)
class _Title:
    words: tuple[str, ...]
    weights: tuple[int, ...]

    @classmethod
    def of(cls, title: str) -> _Title:
        words = tuple(title_words(title))
        return cls(words, tuple(len(w) for w in words))


_TITLE_TOKEN = re.compile(r"[^\W_]+|(\.\.\.|[|;:!?,\"()\[\]\n\r]|\.(?=\s|$)|<[^<>]{0,300}>)")
_HYPHEN_BREAK = re.compile(r"-[ \t]*\r?\n[ \t]*")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_URL = re.compile(r"https?://[^\s\"'<>]+")


def text_title_words(text: str) -> tuple[list[str], list[bool]]:
    """The words of a text (:func:`decode_text`) as :func:`title_words` folds them, and for each word whether
    the text breaks off after it (punctuation, an ellipsis, a tag, a line end, the end of the text)."""
    words: list[str] = []
    breaks: list[bool] = []
    for m in _TITLE_TOKEN.finditer(strip_marks(text)):
        if m.group(1) is not None:
            if breaks:
                breaks[-1] = True
            continue
        words.append(_title_word(m.group()))
        breaks.append(False)
    if breaks:
        breaks[-1] = True
    return words, breaks


def _title_found(
    text_words: list[str], index: dict[str, list[int]], title: _Title, breaks: list[bool] | None = None
) -> bool:
    n = len(title.words)
    if n == 0:
        return False
    total = sum(title.weights)
    min_words = min(n, 4)
    positions: dict[str, list[int]] = {}
    for j, w in enumerate(title.words):
        positions.setdefault(w, []).append(j)
    best = 0
    for w, js in positions.items():
        for i in index.get(w, ()):
            for j in js:
                if i and j and text_words[i - 1] == title.words[j - 1]:
                    continue  # not the start of a run
                k = 0
                weight = 0
                while j + k < n and i + k < len(text_words) and text_words[i + k] == title.words[j + k]:
                    weight += title.weights[j + k]
                    k += 1
                if k >= min_words and weight > best and weight >= 0.7 * total:
                    if breaks is not None and k < n:
                        # a partial run must end where the text breaks off, not run into another word
                        cut_after = j + k < n and i + k < len(text_words) and not breaks[i + k - 1]
                        cut_before = j > 0 and i > 0 and not breaks[i - 1]
                        if cut_after or cut_before:
                            continue
                    return True
    return False


def _doi_suffix_in_urls(text: str, doi: str) -> bool:
    """The DOI's suffix alone as a path segment or query value of a URL in ``text``."""
    suffix = doi.split("/", 1)[1] if "/" in doi else ""
    if len(suffix) < 6 or not re.search(r"\d", suffix) or not re.search(r"[a-z]", suffix):
        return False
    pattern = re.compile(rf"[/=]{re.escape(suffix)}(?![a-z0-9])")
    return any(pattern.search(url) for url in _URL.findall(text))


class Detector:
    """Scans texts for the policy's identifiers; :meth:`scan` returns the kinds found, sorted."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._titles = [("title", _Title.of(t)) for t in policy.titles]
        self._titles += [("preprint_title", _Title.of(t)) for t in policy.preprint_titles]

    def scan(self, *texts: str | bytes | None) -> list[str]:
        found: set[str] = set()
        for text in texts:
            if text:
                found |= self._scan_one(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
        return sorted(found)

    def _scan_one(self, raw: str) -> set[str]:
        p = self.policy
        found: set[str] = set()
        decoded = decode_text(raw)
        norm = decoded.casefold()
        stripped = _TAG.sub(" ", norm)
        untagged = _TAG.sub("", norm)
        variants = [norm, _BROKEN_AFTER_PUNCT.sub(r"\1", untagged)]
        if "/" in norm:
            variants.append(_SPACED_SLASH.sub("/", untagged))
        if "\n" in norm:
            variants.append(_SPACED_SLASH.sub("/", _LINE_BREAK.sub("", untagged)))
        for kind, dois in (("doi", p.dois), ("preprint_doi", p.preprint_dois)):
            if any(_contains_doi(v, d) for d in dois for v in variants) or any(
                _doi_suffix_in_urls(norm, d) for d in dois
            ):
                found.add(kind)
        if any(_contains_pmid(norm, x) for x in p.pmids):
            found.add("pmid")
        if any(_contains_pmcid(v, x) for x in p.pmcids for v in (norm, stripped)):
            found.add("pmcid")
        if self._titles:
            texts = [decoded]
            if _HYPHEN_BREAK.search(decoded):
                texts.append(_HYPHEN_BREAK.sub("", decoded))
            if _CAMEL.search(raw):
                texts.append(decode_text(_CAMEL.sub(" ", raw)))
            for text in texts:
                words, breaks = text_title_words(text)
                index: dict[str, list[int]] = {}
                for i, w in enumerate(words):
                    index.setdefault(w, []).append(i)
                for kind, title in self._titles:
                    if kind not in found and _title_found(words, index, title, breaks):
                        found.add(kind)
        return found
