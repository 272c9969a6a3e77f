"""The one definition of ``wait_s``: how long a call waits for a job before answering ``{status: running}``.

Compute tools (``cpu``/``gpu``) accept it beside their own arguments and ``job_wait`` takes it; both are
validated here, the same way: a number of seconds in [0, 600], 40 when absent.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from tools_server.core.errors import ToolError

WAIT_S_DEFAULT = 40.0
WAIT_S_MAX = 600.0
WAIT_S_DESCRIPTION = (
    "Seconds to wait for the result before returning {status: running, job_id}; poll with job_wait."
)

WaitSeconds = Annotated[
    float, Field(ge=0, le=WAIT_S_MAX, allow_inf_nan=False, description=WAIT_S_DESCRIPTION)
]
_ADAPTER: TypeAdapter[float] = TypeAdapter(WaitSeconds)

#: The JSON schema of ``wait_s`` added to every job tool's input schema.
WAIT_S_SCHEMA: dict[str, Any] = {**_ADAPTER.json_schema(), "default": WAIT_S_DEFAULT}


def parse_wait_s(value: Any) -> float:
    """``value`` as seconds, or :class:`ToolError` ``invalid_input`` (never silently clamped)."""
    if value is None:
        return WAIT_S_DEFAULT
    if isinstance(value, bool):
        value = "not a number"
    try:
        return float(_ADAPTER.validate_python(value))
    except ValidationError:
        raise ToolError(
            "invalid_input",
            f"wait_s must be a number of seconds between 0 and {WAIT_S_MAX:g}; got {value!r}.",
            f"Pass wait_s between 0 and {WAIT_S_MAX:g} (default {WAIT_S_DEFAULT:g}); poll longer jobs with "
            "job_wait.",
        ) from None
