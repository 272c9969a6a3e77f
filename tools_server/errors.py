"""Stable error codes and the one exception type tools raise.

A tool raises :class:`ToolError` where it detects a problem; the server turns it into an MCP error
result in one place (``tools_server.server``). Codes are part of the public interface (see
``INTERFACES.md``): extend the table, never rename an entry.
"""

from __future__ import annotations

from typing import Any

#: code -> default recovery hint shown to the model when the raiser gives none.
ERROR_CODES: dict[str, str] = {
    "invalid_input": "Check the arguments against the tool's input schema and try again.",
    "invalid_smiles": "Check the SMILES string (valences, ring closures, brackets) or pass a molblock.",
    "invalid_sequence": "Use the 20 standard one-letter amino-acid codes, without gaps or spaces.",
    "invalid_mutation": "Write mutations as <wild-type residue><1-based position><new residue>, e.g. A23V, "
    "and check the wild-type residue at that position.",
    "charge_multiplicity_mismatch": "Check the total charge and the spin multiplicity (2S+1): an even number "
    "of electrons needs an odd multiplicity and vice versa.",
    "unsupported_element": "Use a method that supports this element (GFN2-xTB covers H-Rn) or a basis set "
    "that defines it.",
    "too_large": "Split the input into smaller batches or shorten it.",
    "too_large_for_cpu": "Use xTB instead of DFT, a smaller basis set, or run on a machine with a GPU.",
    "weights_missing": "Place the model weights in SPU_WEIGHTS_DIR (see docs/weights.md) or allow the download.",
    "engine_unavailable": "Install the missing engine (see `spu doctor`) or choose another method.",
    "engine_crashed": "The engine process died; the server is fine. Retry with smaller input, fewer "
    "threads, or another method.",
    "timeout": "Raise time_limit_s, shrink the job, or choose a cheaper method.",
    "cancelled": "The job was cancelled; submit it again if it is still needed.",
    "not_converged": "Retry with looser thresholds, more iterations or a different starting geometry.",
    "url_refused": "Only public http(s) addresses are allowed.",
    "http_error": "Check the URL or try again later.",
    "provider_key_missing": "Set the provider's API key in the environment or choose another provider.",
    "rate_limited": "Wait a little and try again.",
    "policy_blocked": "The information policy forbids this; stop and record the step in your report.",
    "job_not_found": "List jobs with the `jobs` tool; job ids are printed when a job starts.",
    "unknown_tool": "List the available tools; the name may be misspelled.",
    "internal_error": "This is a bug in the tool server; report it with the job id.",
}


class ToolError(Exception):
    """An error with a stable code, a message for the model and a recovery hint.

    ``details`` carries structured extras (per-item errors, the stderr tail of a crashed worker).
    """

    def __init__(self, code: str, message: str, hint: str | None = None, **details: Any) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}; add it to ERROR_CODES")
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
