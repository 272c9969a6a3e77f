"""Non-finite numbers: refused in a tool's arguments, never let out in its result.

JSON has no NaN or infinity, yet Python's parser reads the bare tokens ``NaN`` and ``Infinity`` and
pydantic turns the strings ``"nan"`` and ``"inf"`` into floats; engines then compute on them. So the
validated arguments of every call are walked once for floats that are not finite (``invalid_input``),
and so is every result a tool returns: a non-finite number there means the engine failed
(``engine_error``), and a reply must stay strict JSON for any client.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from tools_server.core.errors import ToolError


def non_finite_path(value: Any) -> str | None:
    """Where the first float that is not finite sits in ``value`` (``a.b.0``), or None; iterative."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return ".".join(str(p) for p in path) or "(value)"
        elif isinstance(item, BaseModel):
            stack.extend((getattr(item, k), (*path, k)) for k in type(item).model_fields)
        elif isinstance(item, dict):
            stack.extend((v, (*path, k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, (*path, i)) for i, v in enumerate(item))
    return None


def check_finite_arguments(args: Any) -> None:
    """Raise ``invalid_input`` when a validated argument holds NaN or infinity."""
    where = non_finite_path(args)
    if where is not None:
        raise ToolError(
            "invalid_input",
            f"{where}: NaN and infinity are not numbers a tool can use",
            hint="Give finite numbers (JSON has no NaN or Infinity).",
        )


def check_finite_result(tool: str, result: Any) -> None:
    """Raise ``engine_error`` when a tool's result holds NaN or infinity."""
    where = non_finite_path(result)
    if where is not None:
        raise ToolError("engine_error", f"{tool} produced a non-finite number (NaN or infinity) at {where}")
