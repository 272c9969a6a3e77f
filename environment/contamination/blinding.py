"""Blinding a property dataset at six levels: label transform, property-name masking, SMILES substitution.

The six levels (specific, specific-transformed, generic, generic-transformed, agnostic,
agnostic-transformed) progressively remove what a model could use to recall published values:

- the **label transform** negates the labels and rescales them to [0, 100]
  (``t = 100 (y_max - y) / (y_max - y_min)``); its parameters are kept as exact decimals, so the inverse
  ``y = y_max - t (y_max - y_min) / 100`` is exact in rational arithmetic and exact to rounding in floats;
- **property-name masking** fills a prompt template's placeholders with each level's vocabulary and
  replaces literal mentions of the property (and any other masked term) in the template's own text;
- the **SMILES substitution** maps every SMILES token (atom symbols, bracket contents, bonds, branches,
  ring-closure digits) to its own single substitute character, so branches and ring closures keep their
  structure while the string becomes unrecognisable; the map is a bijection and decoding is exact.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from environment.contamination.digits import parse_decimal

# ---------------------------------------------------------------------------------------------------------
# label transform

TRANSFORM_SCALE = Fraction(100)


def _exact(value: object) -> Fraction:
    if isinstance(value, Fraction):
        return value
    number = parse_decimal(value)
    if number is None:
        raise ValueError(f"not a finite number: {value!r}")
    return Fraction(number)


def decimal_text(value: Fraction) -> str:
    """A Fraction with a terminating decimal expansion, written exactly (labels are decimals, and so is
    the inverse transform of a decimal)."""
    number = Decimal(value.numerator) / Decimal(value.denominator)
    if Fraction(number) != value:
        raise ValueError(f"{value} has no short exact decimal form")
    return str(number.normalize()) if number != number.to_integral_value() else str(number.quantize(1))


@dataclass(frozen=True)
class LabelTransform:
    """Negate and rescale to [0, 100]: ``t = 100 (label_max - y) / (label_max - label_min)``.

    ``label_min`` and ``label_max`` are exact (Fractions of the decimal labels), so ``inverse_exact``
    undoes ``forward_exact`` exactly; the float methods agree with them to rounding.
    """

    label_min: Fraction
    label_max: Fraction

    @classmethod
    def fit(cls, labels: Iterable[object]) -> LabelTransform:
        """Fit on the dataset's labels (decimal text, ints or floats); they must not all be equal."""
        values = [_exact(y) for y in labels]
        if not values:
            raise ValueError("no labels to fit the transform on")
        low, high = min(values), max(values)
        if low == high:
            raise ValueError(f"all labels equal {float(low)}: the [0, 100] rescaling is undefined")
        return cls(label_min=low, label_max=high)

    @property
    def _span(self) -> Fraction:
        return self.label_max - self.label_min

    def forward_exact(self, label: object) -> Fraction:
        return TRANSFORM_SCALE * (self.label_max - _exact(label)) / self._span

    def inverse_exact(self, transformed: object) -> Fraction:
        return self.label_max - _exact(transformed) * self._span / TRANSFORM_SCALE

    def forward(self, label: float) -> float:
        high, span = float(self.label_max), float(self._span)
        return 100.0 * (high - label) / span

    def inverse(self, transformed: float) -> float:
        high, span = float(self.label_max), float(self._span)
        return high - transformed * span / 100.0

    def as_dict(self) -> dict:
        return {
            "kind": "negate_rescale_0_100",
            "label_min": decimal_text(self.label_min),
            "label_max": decimal_text(self.label_max),
            "forward": "t = 100 * (label_max - y) / (label_max - label_min)",
            "inverse": "y = label_max - t * (label_max - label_min) / 100",
        }

    @classmethod
    def from_dict(cls, data: dict) -> LabelTransform:
        if data.get("kind") != "negate_rescale_0_100":
            raise ValueError(f"unknown label transform {data.get('kind')!r}")
        return cls(label_min=_exact(data["label_min"]), label_max=_exact(data["label_max"]))


def format_transformed(value: Fraction, decimals: int) -> str:
    """A transformed label written with ``decimals`` decimals (half away from zero)."""
    number = Decimal(value.numerator) / Decimal(value.denominator)
    return str(number.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP))


# ---------------------------------------------------------------------------------------------------------
# SMILES token substitution

_ELEMENT_SYMBOLS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr "
    "Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb "
    "Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf "
    "Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og"
)
ELEMENTS = tuple(_ELEMENT_SYMBOLS.split())
AROMATIC = ("b", "c", "n", "o", "p", "s", "se", "as", "te", "si")
CHIRAL_CLASSES = ("TH", "AL", "SP", "TB", "OH")  # after '@' inside brackets: @TH1, @SP2, @OH12 ...
SYNTAX = tuple("()[].=#-+\\/:~@%$*") + tuple("0123456789")

# Frequent tokens get ASCII letters; rare bracket-only elements get Greek and Cyrillic letters.
_COMMON = (
    "B",
    "C",
    "N",
    "O",
    "P",
    "S",
    "F",
    "Cl",
    "Br",
    "I",
    "H",
    "b",
    "c",
    "n",
    "o",
    "p",
    "s",
    *SYNTAX,
    "Na",
    "K",
    "Li",
    "Mg",
    "Zn",
    "Si",
    "Se",
    "se",
)
VOCABULARY = _COMMON + tuple(t for t in (*ELEMENTS, *AROMATIC, *CHIRAL_CLASSES) if t not in _COMMON)
_ASCII_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_EXTRA_LETTERS = (
    "αβγδεζηθικλμνξοπρστυφχψω"
    "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ"
    "абвгдежзийклмнопрстуфхцчшщъыьэюя"
    "АБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ"
)
_BRACKET_TWO_LETTER = frozenset(t for t in (*ELEMENTS, *AROMATIC) if len(t) == 2)
_BRACKET_ONE_LETTER = frozenset(t for t in (*ELEMENTS, *AROMATIC) if len(t) == 1)
_OUTSIDE = re.compile(r"Cl|Br|[BCNOPSFIbcnops*()=#\-+\\/:~.$@%0-9]")


def tokenize_smiles(smiles: str) -> list[str]:
    """Split a SMILES string into tokens whose concatenation is the string.

    Outside brackets: organic-subset atoms (Cl and Br as one token), bonds, branches, ring-closure
    digits and ``%``. Inside brackets: isotope digits, the element (any of the 118, or aromatic b c n o p s
    se as te si), chirality ``@`` and its classes (TH, AL, SP, TB, OH), H, charge signs and counts, and
    ``:`` atom classes. Raises ValueError at the first character that fits none of these.
    """
    tokens: list[str] = []
    i = 0
    while i < len(smiles):
        if smiles[i] == "[":
            end = smiles.find("]", i)
            if end < 0:
                raise ValueError(f"unclosed bracket at position {i} in {smiles!r}")
            tokens.append("[")
            tokens.extend(_tokenize_bracket(smiles, i + 1, end))
            tokens.append("]")
            i = end + 1
            continue
        match = _OUTSIDE.match(smiles, i)
        if match is None:
            raise ValueError(f"unsupported character {smiles[i]!r} at position {i} in {smiles!r}")
        tokens.append(match.group())
        i = match.end()
    return tokens


def _tokenize_bracket(smiles: str, start: int, end: int) -> list[str]:
    tokens: list[str] = []
    i = start
    element_seen = False
    while i < end:
        pair, char = smiles[i : i + 2] if i + 2 <= end else "", smiles[i]
        if tokens and tokens[-1] == "@" and pair in CHIRAL_CLASSES:
            token = pair
        elif not element_seen and pair in _BRACKET_TWO_LETTER:
            token, element_seen = pair, True
        elif not element_seen and (char in _BRACKET_ONE_LETTER or char == "*"):
            token, element_seen = char, True
        elif char in "0123456789@+-:H":
            token = char
        else:
            raise ValueError(f"unsupported bracket content {smiles[start:end]!r} in {smiles!r}")
        tokens.append(token)
        i += len(token)
    return tokens


def _hash_order(chars: str, seed: int, attempt: int) -> list[str]:
    return sorted(chars, key=lambda c: hashlib.sha256(f"{seed}:{attempt}:{c}".encode()).hexdigest())


@dataclass(frozen=True)
class SmilesSubstitution:
    """A bijection from SMILES tokens to single substitute characters, fixed by ``seed``.

    The map covers the whole token vocabulary (not only the tokens of one dataset), so the same seed
    gives the same substitute for a token in every dataset; no token maps to its own text.
    """

    mapping: dict[str, str]

    @classmethod
    def from_seed(cls, seed: int = 0) -> SmilesSubstitution:
        common, rare = VOCABULARY[: len(_COMMON)], VOCABULARY[len(_COMMON) :]
        for attempt in range(1000):
            mapping = dict(zip(common, _hash_order(_ASCII_LETTERS, seed, attempt), strict=False))
            mapping.update(zip(rare, _hash_order(_EXTRA_LETTERS, seed, attempt), strict=False))
            if all(token != sub for token, sub in mapping.items()):
                return cls(mapping)
        raise RuntimeError("no substitution without fixed points found")  # pragma: no cover

    @property
    def inverse_mapping(self) -> dict[str, str]:
        return {sub: token for token, sub in self.mapping.items()}

    def encode(self, smiles: str) -> str:
        """The blinded string: each token of ``smiles`` replaced by its substitute."""
        tokens = tokenize_smiles(smiles)
        missing = sorted({token for token in tokens if token not in self.mapping})
        if missing:
            raise ValueError(f"no substitute for token(s) {', '.join(missing)} of {smiles!r}")
        return "".join(self.mapping[token] for token in tokens)

    def decode(self, blinded: str) -> str:
        """The original SMILES of a blinded string (exact inverse of ``encode``)."""
        inverse = self.inverse_mapping
        try:
            return "".join(inverse[char] for char in blinded)
        except KeyError as exc:
            raise ValueError(f"{exc.args[0]!r} is not a substitute character") from None

    def as_dict(self) -> dict:
        return {"kind": "token_substitution", "mapping": dict(self.mapping)}

    @classmethod
    def from_dict(cls, data: dict) -> SmilesSubstitution:
        mapping = dict(data["mapping"])
        if len(set(mapping.values())) != len(mapping) or any(len(v) != 1 for v in mapping.values()):
            raise ValueError("a substitution map must send every token to its own single character")
        return cls(mapping)


# ---------------------------------------------------------------------------------------------------------
# levels and prompt templates


@dataclass(frozen=True)
class Level:
    """One blinding level: which inputs are transformed and how the task is described."""

    index: int
    name: str
    transformed_labels: bool
    transformed_structures: bool
    framing: str  # "specific", "generic" or "agnostic"

    @property
    def slug(self) -> str:
        return f"{self.index}-{self.name}"


LEVELS = (
    Level(1, "specific", False, False, "specific"),
    Level(2, "specific-transformed", True, False, "specific"),
    Level(3, "generic", False, False, "generic"),
    Level(4, "generic-transformed", True, False, "generic"),
    Level(5, "agnostic", False, True, "agnostic"),
    Level(6, "agnostic-transformed", True, True, "agnostic"),
)

DEFAULT_TEMPLATE = (
    "You are a {role} with expert knowledge in {expertise}. You are given the {representation} of a "
    "{entity}. Your task is to predict the {property} of that {entity}. Provide only the numerical value "
    "as output, without any additional text.\n\nInput ({representation}): {structure}\n"
)
PLACEHOLDERS = (
    "property",
    "role",
    "expertise",
    "entity",
    "entities",
    "representation",
    "features",
    "structure",
    "name",
)
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
MASK = "[masked]"

# Chemistry wording that agnostic levels replace in a template's own text (longest phrases first).
AGNOSTIC_WORDING = (
    ("professional chemist", "professional machine learning model"),
    ("expert chemist", "expert machine learning model"),
    ("physical chemistry", "regression"),
    ("chemists", "machine learning models"),
    ("chemist", "machine learning model"),
    ("chemistry", "regression"),
    ("chemical", "structural"),
    ("smiles strings", "string based structure representations"),
    ("smiles string", "string based structure representation"),
    ("smiles", "string based structure representation"),
    ("molecular property", "sample property"),
    ("molecular properties", "sample properties"),
    ("molecules", "samples"),
    ("molecule", "sample"),
    ("molecular", "sample"),
    ("functional groups", "structural features"),
    ("functional group", "structural feature"),
    ("iupac names", "identifiers"),
    ("iupac name", "identifier"),
    ("compounds", "samples"),
    ("compound", "sample"),
)


def level_vocabulary(level: Level, property_name: str, property_hint: str) -> dict[str, str]:
    """What each placeholder says at ``level`` (all but ``structure`` and ``name``)."""
    chemistry = level.framing != "agnostic"
    if level.framing == "specific":
        prop = (
            property_name
            if not level.transformed_labels
            else f"molecular property related to {property_hint}"
        )
        expertise = f"physical chemistry and {property_hint} prediction"
    elif level.framing == "generic":
        prop, expertise = "molecular property", "physical chemistry"
    else:
        prop, expertise = "sample property", "regression"
    return {
        "property": prop,
        "role": "professional chemist" if chemistry else "professional machine learning model",
        "expertise": expertise,
        "entity": "molecule" if chemistry else "sample",
        "entities": "molecules" if chemistry else "samples",
        "representation": "SMILES string" if chemistry else "string based structure representation",
        "features": "functional groups" if chemistry else "structural features",
    }


def _replace_terms(text: str, replacements: Sequence[tuple[str, str]]) -> str:
    ordered = sorted((r for r in replacements if r[0].strip()), key=lambda r: -len(r[0]))
    if not ordered:
        return text
    pattern = re.compile("|".join(re.escape(term) for term, _ in ordered), re.IGNORECASE)
    lookup = {term.lower(): sub for term, sub in ordered}

    def substitute(match: re.Match) -> str:
        found, replacement = match.group(), lookup[match.group().lower()]
        # "Molecule:" at the start of a line stays capitalised as "Sample:"
        return (
            replacement[:1].upper() + replacement[1:]
            if found[:1].isupper() and found[1:2].islower()
            else replacement
        )

    return pattern.sub(substitute, text)


def mask_template(
    template: str, level: Level, property_name: str, property_hint: str, mask_terms: Sequence[str] = ()
) -> str:
    """The template's literal text masked for ``level``; placeholders are left for ``fill_template``.

    Level 1 masks nothing. Level 2 replaces the exact property name by its vague description and every
    extra masked term by ``[masked]``. Levels 3-6 also replace the property hint; levels 5-6 also replace
    chemistry wording (chemist, SMILES, molecule, functional groups ...) by domain-free words.
    """
    if level.index == 1:
        return template
    prop = level_vocabulary(level, property_name, property_hint)["property"]
    replacements = [(property_name, prop)] + [(term, MASK) for term in mask_terms]
    if level.framing != "specific":
        replacements.append((property_hint, prop))
    if level.framing == "agnostic":
        replacements.extend(AGNOSTIC_WORDING)
    parts = _PLACEHOLDER.split(template)  # even indices: literal text; odd: placeholder names
    for i in range(0, len(parts), 2):
        parts[i] = _replace_terms(parts[i], replacements)
    for i in range(1, len(parts), 2):
        parts[i] = "{" + parts[i] + "}"
    return "".join(parts)


def fill_template(template: str, values: dict[str, str]) -> str:
    """Replace the known ``{placeholder}``s in ``template``; other braces are left as they are."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group()), template)


# ---------------------------------------------------------------------------------------------------------
# datasets


@dataclass(frozen=True)
class Item:
    """One dataset row: identifier, SMILES, label as written, and an optional name."""

    item_id: str
    smiles: str
    label: str
    name: str = ""


@dataclass
class BlindedLevel:
    level: Level
    template: str
    rows: list[dict[str, str]]
    prompts: list[dict[str, str]]


@dataclass
class Blinding:
    """Every level's dataset and prompts, and the parameters that undo the transforms."""

    levels: list[BlindedLevel]
    transform: LabelTransform
    substitution: SmilesSubstitution
    property_name: str
    property_hint: str
    mask_terms: list[str]
    decimals: int
    seed: int

    def parameters(self) -> dict:
        return {
            "property": self.property_name,
            "property_hint": self.property_hint,
            "masked_terms": list(self.mask_terms),
            "n_items": len(self.levels[0].rows) if self.levels else 0,
            "levels": [
                {
                    "index": b.level.index,
                    "name": b.level.name,
                    "dir": b.level.slug,
                    "labels": "transformed" if b.level.transformed_labels else "original",
                    "structures": "substituted" if b.level.transformed_structures else "smiles",
                    "property_phrase": level_vocabulary(b.level, self.property_name, self.property_hint)[
                        "property"
                    ],
                }
                for b in self.levels
            ],
            "label_transform": {**self.transform.as_dict(), "decimals": self.decimals},
            "smiles_substitution": {**self.substitution.as_dict(), "seed": self.seed},
        }


def blind(
    items: Sequence[Item],
    property_name: str,
    property_hint: str | None = None,
    template: str = DEFAULT_TEMPLATE,
    mask_terms: Sequence[str] = (),
    seed: int = 0,
    decimals: int = 2,
) -> Blinding:
    """Build the six levels for ``items``. Raises ValueError listing every item whose SMILES or label
    cannot be used (nothing is dropped silently)."""
    if not items:
        raise ValueError("no items to blind")
    if not property_name.strip():
        raise ValueError("the property name must not be empty")
    hint = property_hint or property_name
    substitution = SmilesSubstitution.from_seed(seed)
    problems, encoded = [], {}
    for item in items:
        try:
            encoded[item.item_id] = substitution.encode(item.smiles)
        except ValueError as exc:
            problems.append(f"{item.item_id}: {exc}")
        if parse_decimal(item.label) is None:
            problems.append(f"{item.item_id}: label {item.label!r} is not a number")
    if len({item.item_id for item in items}) != len(items):
        problems.append("item ids are not unique")
    if problems:
        raise ValueError(
            "; ".join(problems[:10]) + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else "")
        )
    transform = LabelTransform.fit(item.label for item in items)

    has_names = any(item.name for item in items)
    levels = []
    for level in LEVELS:
        vocabulary = level_vocabulary(level, property_name, hint)
        masked = mask_template(template, level, property_name, hint, mask_terms)
        level_template = fill_template(masked, vocabulary)
        rows, prompts = [], []
        for item in items:
            structure = encoded[item.item_id] if level.transformed_structures else item.smiles
            label = (
                format_transformed(transform.forward_exact(item.label), decimals)
                if level.transformed_labels
                else item.label
            )
            row = {"id": item.item_id, "structure": structure, "label": label}
            name = item.name if level.framing != "agnostic" else ""  # names identify molecules
            if has_names and level.framing != "agnostic":
                row["name"] = name
            rows.append(row)
            prompts.append(
                {
                    "id": item.item_id,
                    "prompt": fill_template(level_template, {"structure": structure, "name": name}),
                }
            )
        levels.append(BlindedLevel(level=level, template=level_template, rows=rows, prompts=prompts))
    return Blinding(
        levels=levels,
        transform=transform,
        substitution=substitution,
        property_name=property_name,
        property_hint=hint,
        mask_terms=list(mask_terms),
        decimals=decimals,
        seed=seed,
    )
