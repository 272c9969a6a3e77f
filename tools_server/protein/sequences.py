"""Protein sequence validation and point-mutation notation (``A23V``, multi-point ``A23V:G45D``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tools_server.plugin import ToolError

STANDARD_AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
#: Letters a language model also accepts: X unknown, B/Z/J ambiguous, U selenocysteine, O pyrrolysine.
EXTENDED_AMINO_ACIDS = STANDARD_AMINO_ACIDS + "XBZJUO"
_MUTATION_RE = re.compile(r"^([A-Z])(\d+)([A-Z])$")
_SEPARATORS = re.compile(r"[:,;+/\s]+")


@dataclass(frozen=True)
class Mutation:
    wild_type: str
    position: int  # 1-based
    mutant: str

    def __str__(self) -> str:
        return f"{self.wild_type}{self.position}{self.mutant}"

    def reversed(self) -> Mutation:
        return Mutation(self.mutant, self.position, self.wild_type)


def clean_sequence(
    sequence: str,
    *,
    name: str = "sequence",
    max_length: int | None = None,
    alphabet: str = STANDARD_AMINO_ACIDS,
) -> str:
    """Upper-case ``sequence``, drop whitespace and a trailing stop '*', check alphabet and length.

    Raises ``invalid_sequence`` naming the first offending characters and their 1-based positions, or
    ``too_large`` when longer than ``max_length``.
    """
    seq = re.sub(r"\s+", "", sequence).upper()
    seq = seq.removesuffix("*")
    if not seq:
        raise ToolError("invalid_sequence", f"The {name} is empty.")
    bad = [(i + 1, c) for i, c in enumerate(seq) if c not in alphabet]
    if bad:
        shown = ", ".join(f"{c!r} at {i}" for i, c in bad[:5])
        raise ToolError(
            "invalid_sequence",
            f"The {name} has {len(bad)} character(s) outside the allowed alphabet ({alphabet}): {shown}.",
            positions=[i for i, _ in bad[:50]],
        )
    if max_length is not None and len(seq) > max_length:
        raise ToolError(
            "too_large",
            f"The {name} has {len(seq)} residues; the limit here is {max_length}.",
            hint="Split the protein into domains or score a window around the region of interest.",
        )
    return seq


def parse_mutations(text: str, wild_type: str) -> list[Mutation]:
    """Parse ``'A23V'`` or ``'A23V:G45D'`` (also ',', ';', '+', space) against the wild-type sequence.

    Positions are 1-based. The wild-type letter must match the sequence; one position may appear once.
    ``'WT'`` or an empty string is the wild type itself (no mutations).
    """
    stripped = text.strip()
    if stripped.upper() in ("", "WT", "WILDTYPE", "WILD-TYPE"):
        return []
    muts: list[Mutation] = []
    seen: set[int] = set()
    for token in _SEPARATORS.split(stripped):
        if not token:
            continue
        m = _MUTATION_RE.match(token.upper())
        if not m:
            raise ToolError(
                "invalid_mutation",
                f"{token!r} is not a point mutation like A23V (wild-type letter, 1-based position, new "
                "letter).",
            )
        wt, pos, mt = m.group(1), int(m.group(2)), m.group(3)
        if mt not in STANDARD_AMINO_ACIDS or wt not in STANDARD_AMINO_ACIDS:
            raise ToolError("invalid_mutation", f"{token}: use the 20 standard one-letter amino-acid codes.")
        if not 1 <= pos <= len(wild_type):
            raise ToolError(
                "invalid_mutation", f"{token}: position {pos} is outside the sequence (1..{len(wild_type)})."
            )
        if wild_type[pos - 1] != wt:
            raise ToolError(
                "invalid_mutation",
                f"{token}: the wild type has {wild_type[pos - 1]} at position {pos}, not {wt}.",
                hint=f"Did you mean {wild_type[pos - 1]}{pos}{mt}? Positions are 1-based in the given "
                "sequence.",
            )
        if pos in seen:
            raise ToolError("invalid_mutation", f"{token}: position {pos} is mutated twice in one variant.")
        seen.add(pos)
        muts.append(Mutation(wt, pos, mt))
    return sorted(muts, key=lambda x: x.position)


def apply_mutations(wild_type: str, mutations: list[Mutation]) -> str:
    seq = list(wild_type)
    for mut in mutations:
        seq[mut.position - 1] = mut.mutant
    return "".join(seq)


def format_mutations(mutations: list[Mutation]) -> str:
    return ":".join(str(m) for m in mutations) if mutations else "WT"


def substitutions_between(reference: str, other: str) -> list[Mutation]:
    """Point substitutions turning ``reference`` into ``other`` (same length, no gaps)."""
    if len(reference) != len(other):
        raise ValueError("sequences differ in length")
    return [Mutation(a, i + 1, b) for i, (a, b) in enumerate(zip(reference, other, strict=True)) if a != b]
