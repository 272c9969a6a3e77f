"""The agent's tools: the built-in ones and the spu MCP tools behind one ``call(name, arguments)``."""

from __future__ import annotations

from typing import Any

from scaffold.agent.models.base import ToolDef
from scaffold.agent.tools.output import ToolResult, cut_middle

__all__ = ["ToolResult", "Toolbox", "cut_middle"]


class Toolbox:
    """Built-in tools first, then the MCP tools sorted by name: a fixed order keeps request prefixes
    stable."""

    def __init__(self, builtin: Any, mcp: Any | None = None, *, mcp_required: bool = False) -> None:
        self.builtin = builtin
        self.mcp = mcp
        self.mcp_required = mcp_required
        self.mcp_error: str | None = None
        self._defs: list[ToolDef] = builtin.definitions()
        self._mcp_names: set[str] = set()

    def start(self) -> None:
        """Connect the MCP tools. If that fails the run goes on with the built-in tools (the error is kept
        in ``mcp_error``) unless ``mcp_required``."""
        if self.mcp is None:
            return
        try:
            self.mcp.start()
        except Exception as exc:
            if self.mcp_required:
                raise
            self.mcp_error = str(exc)
            self.mcp = None
            return
        builtin_names = {t.name for t in self._defs}
        mcp_defs = [t for t in self.mcp.definitions() if t.name not in builtin_names]
        self._defs = [*self._defs, *mcp_defs]
        self._mcp_names = {t.name for t in mcp_defs}

    def definitions(self) -> list[ToolDef]:
        return list(self._defs)

    @property
    def mcp_names(self) -> list[str]:
        return sorted(self._mcp_names)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self._defs]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name in self._mcp_names:
            return self.mcp.call(name, arguments)
        if name in self.builtin.names:
            return self.builtin.call(name, arguments)
        return ToolResult(
            f"There is no tool named {name!r}. Available tools: {', '.join(self.names)}.", is_error=True
        )

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
