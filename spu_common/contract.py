"""The rules of a task contract, shared by the task loader (``task.py``) and the spec builder
(``environment.taskbuild``): identifiers, weights, members, and the numbers a CSV cell may hold.

Each rule returns the problem as text (or ``None``); the loader raises it as a :class:`TaskError`, the
builder collects it as a :class:`SpecProblem` with the file, line and field it came from.
"""

from __future__ import annotations

import math
import re
from typing import Any

DEFAULT_DIRECTION = "order from lowest to highest measured value"
WEIGHT_TOLERANCE = 1e-6
#: Files of a task directory that are not input files.
TASK_FILES = ("contract.json", "instruction.md", "experiment.md", "protocol.json", "targets.csv")
REQUIRED_FILES = ("contract.json", "instruction.md", "targets.csv")

# ASCII decimal notation only: Python's float() also takes "1_480", non-ASCII digits ("١٢") and
# surrounding whitespace, which a spreadsheet or another reader would not read as the same number.
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Cells a spreadsheet would run as a formula when the CSV is opened (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def parse_number(text: str) -> float | None:
    """The finite number a cell holds in plain ASCII decimal notation, else ``None``."""
    if not _NUMBER_RE.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def looks_like_formula(text: str) -> bool:
    """True for a cell a spreadsheet would evaluate (``=SUM(..)``, ``@cmd``); numbers like -1.5 are not."""
    return text.startswith(_FORMULA_START) and parse_number(text) is None


def as_id(value: Any) -> str | None:
    """An identifier (a non-empty string or an integer, as text), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text if text.strip() else None


def weight_problem(weight: Any) -> str | None:
    """What is wrong with one group weight (``None`` is allowed: groups then weigh equally)."""
    if weight is None:
        return None
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not math.isfinite(weight)
        or weight < 0
    ):
        return f"weight must be a non-negative number, not {weight!r}"
    return None


def weights_problem(weights: list[float | None]) -> str | None:
    """What is wrong with a contract's weights taken together: some missing, or a sum other than one."""
    given = [w for w in weights if w is not None]
    if given and len(given) != len(weights):
        return (
            f"{len(given)} of {len(weights)} groups have a weight: give a weight for every group or for none "
            "(then groups weigh equally)"
        )
    if given and abs(sum(given) - 1.0) > WEIGHT_TOLERANCE:
        return f"group weights sum to {sum(given):.6g}, not 1"
    return None


def filled_weights(weights: list[float | None]) -> list[float]:
    """The weights with equal shares filled in when none is given (call after :func:`weights_problem`)."""
    if all(w is None for w in weights):
        return [1.0 / len(weights)] * len(weights)
    return [float(w) for w in weights if w is not None]


def repeated(items: list[str]) -> list[str]:
    """The items listed more than once, sorted."""
    return sorted({x for x in items if items.count(x) > 1})
