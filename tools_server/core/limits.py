"""Sanity limits on tool arguments, checked in pure Python before validation, caching or any engine.

* nesting at most :data:`MAX_DEPTH` levels, lists at most :data:`MAX_LIST_ITEMS` items, strings together at
  most :data:`MAX_TOTAL_CHARS` characters: else ``too_large``;
* no lone surrogate and no default-ignorable or bidirectional-control character (zero-width characters,
  variation selectors, tag characters ...: :mod:`tools_server.core.invisible`) in any string or key: else
  ``invalid_input``, naming the argument and the code point. Such characters are dropped silently by some
  engines (RDKit reads ``"CCO\\u200b"`` as ethanol), so they are refused instead of guessed at.
"""

from __future__ import annotations

import re
from typing import Any

from tools_server.core.errors import ToolError
from tools_server.core.invisible import REFUSED_CLASS

MAX_DEPTH = 16
MAX_LIST_ITEMS = 100_000
MAX_TOTAL_CHARS = 20_000_000

#: every Default_Ignorable_Code_Point and Bidi_Control character (tools_server.core.invisible), and lone
#: surrogates.
_REFUSED = re.compile(f"[{REFUSED_CLASS}\ud800-\udfff]")


def _where(path: list[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "arguments"


def _check_text(text: str, path: list[str | int]) -> None:
    if text.isascii():
        return
    m = _REFUSED.search(text)
    if m is None:
        return
    ch = m.group()
    kind = "a lone surrogate" if "\ud800" <= ch <= "\udfff" else "an invisible or text-direction control"
    raise ToolError(
        "invalid_input",
        f"{_where(path)} holds {kind} character (U+{ord(ch):04X}) at position {m.start()}",
        hint="Remove invisible, zero-width and bidirectional control characters and send the text again.",
    )


def check_arguments(arguments: Any) -> None:
    """Raise :class:`ToolError` when ``arguments`` break a limit above; iterative, so deep input is safe.

    A fast pass without paths runs first; only when it finds a problem does a second pass name the
    argument (a list of 10,000 SMILES costs about as much as parsing its JSON)."""
    if _fast_problem(arguments):
        _explain(arguments)


def _text_refused(text: str) -> bool:
    return not text.isascii() and _REFUSED.search(text) is not None


def _fast_problem(arguments: Any) -> bool:
    total = 0
    stack: list[tuple[Any, int]] = [(arguments, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(value, dict):
            children: Any = value.values()
            if any(isinstance(k, str) and _text_refused(k) for k in value):
                return True
        elif isinstance(value, list | tuple):
            if len(value) > MAX_LIST_ITEMS:
                return True
            children = value
        elif isinstance(value, str):
            total += len(value)
            if total > MAX_TOTAL_CHARS or _text_refused(value):
                return True
            continue
        else:
            continue
        for child in children:
            if isinstance(child, str):
                total += len(child)
                if total > MAX_TOTAL_CHARS or (not child.isascii() and _REFUSED.search(child)):
                    return True
            elif isinstance(child, dict | list | tuple):
                stack.append((child, depth + 1))
    return False


def _explain(arguments: Any) -> None:
    total = 0
    stack: list[tuple[Any, list[str | int]]] = [(arguments, [])]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ToolError("too_large", f"{_where(path)}: arguments nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            total += len(value)
            if total > MAX_TOTAL_CHARS:
                raise ToolError("too_large", f"the arguments hold more than {MAX_TOTAL_CHARS} characters")
            _check_text(value, path)
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    _check_text(k, path)
                stack.append((v, [*path, str(k)]))
        elif isinstance(value, list | tuple):
            if len(value) > MAX_LIST_ITEMS:
                where = _where(path)
                raise ToolError("too_large", f"{where} has {len(value)} items (limit {MAX_LIST_ITEMS})")
            stack.extend((v, [*path, i]) for i, v in enumerate(value))
