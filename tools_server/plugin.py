"""What a tool package imports from the server: the one public surface for plugins.

::

    from tools_server.plugin import DoctorCheck, Domain, Engine, ToolContext, ToolError, tool

A plugin (a third-party package named in the ``spu.tools`` entry points, or a module named in
``SPU_TOOL_MODULES``) imports only this module, so the server's core can change beneath it.
``docs/adding-a-tool.md`` walks through one; ``examples/spu-example-plugin`` is the finished example.

* :func:`tool` makes a function an MCP tool (its name, resource class, annotations, engines, limits);
* :class:`ToolContext`, the tool's view of the server (progress, artifacts, warnings, engine facts);
* :class:`ToolError`, the one exception a tool raises (a stable code, a message, a recovery hint);
  :data:`ERROR_CODES`, the codes known so far with their hints;
* :class:`Domain`, :class:`Engine` and :class:`DoctorCheck`, what a package declares: its tool modules,
  the engines it computes with, its ``spu doctor`` checks and its own error codes.
"""

from __future__ import annotations

from tools_server.core.context import ToolContext
from tools_server.core.domain import DoctorCheck, Domain, Engine
from tools_server.core.errors import ERROR_CODES, ToolError
from tools_server.core.registry import Resource, tool

__all__ = [
    "ERROR_CODES",
    "DoctorCheck",
    "Domain",
    "Engine",
    "Resource",
    "ToolContext",
    "ToolError",
    "tool",
]
