"""Stable error codes and the one exception type tools raise.

A tool raises :class:`ToolError` where it detects a problem; the server turns it into an MCP error
result in one place (``tools_server.core.server``). Codes are part of the public interface (listed in
``docs/server.md``): add codes, never rename one. The codes shared by the core and several domains are
declared once in :mod:`spu_common.error_codes`; each domain declares its own in its
:class:`~tools_server.core.domain.Domain`.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Mapping
from typing import Any

from spu_common.error_codes import SHARED_ERROR_CODES

#: code -> default recovery hint shown to the model when the raiser gives none: the shared codes, then
#: each domain's own, added by its :class:`~tools_server.core.domain.Domain` declaration.
ERROR_CODES: dict[str, str] = dict(SHARED_ERROR_CODES)
_OWNERS: dict[str, str] = dict.fromkeys(ERROR_CODES, "spu_common.error_codes")
_CODE_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def register_error_codes(codes: Mapping[str, str], *, owner: str) -> None:
    """Add a domain's own codes (code -> default recovery hint). Every code has one hint, whatever loads
    first: declaring a known code again is accepted only with the same hint (a shared code is raised without
    declaring it; a raise site with better advice passes ``hint=``)."""
    for code, hint in codes.items():
        if not _CODE_RE.match(code) or not hint:
            raise ValueError(f"error code {code!r} of {owner}: snake_case name and a recovery hint required")
        if code in ERROR_CODES and ERROR_CODES[code] != hint:
            raise ValueError(
                f"error code {code!r} of {owner} is already declared by {_OWNERS[code]} with another hint; "
                "raise it without declaring it, or give the better hint where it is raised"
            )
    for code, hint in codes.items():
        ERROR_CODES.setdefault(code, hint)
        _OWNERS.setdefault(code, owner)


class ToolError(Exception):
    """An error with a stable code, a message for the model and a recovery hint.

    ``details`` carries structured extras (per-item errors, the stderr tail of a crashed worker).
    A code no domain declares is accepted when the raiser gives its hint (a plugin module's own code); without
    a hint it is refused, so a misspelt shared code cannot reach the model.
    """

    def __init__(self, code: str, message: str, hint: str | None = None, **details: Any) -> None:
        if code not in ERROR_CODES and not (hint and _CODE_RE.match(code)):
            raise ValueError(
                f"unknown error code {code!r}: declare it in the domain's error_codes or raise it with a hint"
            )
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint or ERROR_CODES[code]
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled between processes (the error of an item run as a Dask task): rebuilt from its fields, as
        # Exception's own pickling would call ToolError(message) and fail
        return (_rebuild_tool_error, (type(self), self.code, self.message, self.hint, self.details))

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


def _rebuild_tool_error(cls: type, code: str, message: str, hint: str, details: dict[str, Any]) -> ToolError:
    return cls(code, message, hint, **details)


def storage_warning(what: str, path: object, reason: object, consequence: str) -> str:
    """The warning a result carries when ``what`` (a job record, a cache entry) could not be written:
    ``storage_error: <what> could not be written to <path> (<reason>); <consequence>``."""
    if isinstance(reason, OSError):
        reason = reason.strerror or reason
    return f"storage_error: {what} could not be written to {path} ({reason}); {consequence}"


#: What a file write that failed for want of room or permission says: the disk, not the tool.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def storage_error(exc: OSError) -> ToolError | None:
    """``storage_error`` for a write that failed on a full disk, a quota or a read-only folder (a tool's
    own files); None for any other ``OSError`` (a bug report)."""
    if exc.errno not in STORAGE_ERRNOS:
        return None
    where = f" ({exc.filename})" if exc.filename else ""
    return ToolError("storage_error", f"The tool could not write its files{where}: {exc.strerror}.")
