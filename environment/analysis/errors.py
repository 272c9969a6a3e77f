"""The error every reader here raises: a stable code, a message naming the file (and line), a hint."""

from __future__ import annotations


class AnalysisError(ValueError):
    """Input that cannot be analysed as given. ``code`` is stable; ``hint`` says what to do."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}" + (f" Hint: {self.hint}" if self.hint else "")
