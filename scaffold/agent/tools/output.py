"""What a tool call gives back to the loop, and how oversized output is cut."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolResult:
    """``content`` is what the model reads; ``data`` (structured) and ``final`` are for the loop.

    ``final`` is set by ``submit_rankings(final=true)`` once a valid ranking is written: the loop ends
    the run after recording the turn.
    """

    content: str
    is_error: bool = False
    data: dict[str, Any] | None = None
    final: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def cut_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail of ``text`` (60/40) with a note saying how much was cut from the middle."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    head = int(max_chars * 0.6)
    tail = max_chars - head
    omitted = len(text) - head - tail
    note = (
        f"\n\n[... {omitted} characters omitted from the middle of a {len(text)}-character output; "
        "write large results to a file and read the parts you need ...]\n\n"
    )
    return text[:head] + note + text[len(text) - tail :]
