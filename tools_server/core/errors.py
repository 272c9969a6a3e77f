"""Stable error codes and the one exception type tools raise.

A tool raises :class:`ToolError` where it detects a problem; the server turns it into an MCP error
result in one place (``tools_server.core.server``). Codes are part of the public interface (listed in
``docs/server.md``): add codes, never rename one. The core defines the generic codes below; each domain
declares its own in its :class:`~tools_server.core.domain.Domain`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: code -> default recovery hint shown to the model when the raiser gives none. The core's own codes;
#: each domain adds its codes through its :class:`~tools_server.core.domain.Domain` declaration.
ERROR_CODES: dict[str, str] = {
    "invalid_input": "Check the arguments against the tool's input schema and try again.",
    "too_large": "Split the input into smaller batches or shorten it.",
    "engine_unavailable": "Install the missing engine (see `spu doctor`) or choose another method.",
    "engine_crashed": "The engine process died; the server is fine. Retry with smaller input, fewer "
    "threads, or another method.",
    "timeout": "Raise time_limit_s, shrink the job, or choose a cheaper method.",
    "cancelled": "The job was cancelled; submit it again if it is still needed.",
    "not_converged": "Retry with looser thresholds, more iterations or a different starting geometry.",
    "engine_error": "The engine returned an unusable result (NaN or infinity): check the structure (no "
    "atoms on top of each other, sensible distances), optimise it with a cheaper method first, or use "
    "another method.",
    "job_not_found": "List jobs with the `jobs` tool; job ids are printed when a job starts.",
    "unknown_tool": "List the available tools; the name may be misspelled.",
    "internal_error": "This is a bug in the tool server; report it with the job id.",
}
_OWNERS: dict[str, str] = dict.fromkeys(ERROR_CODES, "core")
_CODE_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def register_error_codes(codes: Mapping[str, str], *, owner: str) -> None:
    """Add a domain's codes (code -> default recovery hint). A code already known keeps its first hint:
    codes are shared vocabulary (``not_converged`` means the same in every domain)."""
    for code, hint in codes.items():
        if not _CODE_RE.match(code) or not hint:
            raise ValueError(f"error code {code!r} of {owner}: snake_case name and a recovery hint required")
        if code not in ERROR_CODES:
            ERROR_CODES[code] = hint
            _OWNERS[code] = owner


class ToolError(Exception):
    """An error with a stable code, a message for the model and a recovery hint.

    ``details`` carries structured extras (per-item errors, the stderr tail of a crashed worker).
    """

    def __init__(self, code: str, message: str, hint: str | None = None, **details: Any) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}: declare it in the domain's error_codes")
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint or ERROR_CODES[code]
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "hint": self.hint}
        if self.details:
            out["details"] = self.details
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolError:
        return cls(data["code"], data["message"], data.get("hint"), **(data.get("details") or {}))

    def __str__(self) -> str:
        return f"[{self.code}] {self.message} Hint: {self.hint}"
