"""What a tool package imports from the server: the one public surface for plugins.

::

    from tools_server.plugin import DoctorCheck, Domain, Engine, ToolContext, ToolError, ToolResult, tool

A plugin (a third-party package named in the ``spu.tools`` entry points, or a module named in
``SPU_TOOL_MODULES``) imports only this module, so the server's core can change beneath it.
``docs/adding-a-tool.md`` walks through one; ``examples/spu-example-plugin`` is the finished example.

* :func:`tool` makes a function an MCP tool (its name, resource class, annotations, engines, limits);
* :class:`ToolContext`, the tool's view of the server (progress, artifacts, warnings, engine facts);
* :class:`ToolResult`, the base of a tool's declared result type (its ``outputSchema``);
* :class:`ToolError`, the one exception a tool raises (a stable code, a message, a recovery hint);
  :data:`ERROR_CODES`, the codes known so far with their hints;
* :class:`Domain`, :class:`Engine` and :class:`DoctorCheck`, what a package declares: its tool modules,
  the engines it computes with, its ``spu doctor`` checks and its own error codes;
* :data:`InputPath` and :data:`InputDir`, the types of an input field that names a file or a folder: the
  server resolves and confines it (under the allowed roots, links resolved, never ``/proc``, ``/sys`` or a
  device, one hard link) and sizes a file against its kind's cap before the tool runs, and a cluster
  executor ships its content with the job; :data:`StructurePath`, :data:`TrajectoryPath` and
  :func:`input_file` (``input_file("molecule")``) name files of a kind with its own cap.
"""

from __future__ import annotations

from tools_server.core.context import ToolContext
from tools_server.core.domain import DoctorCheck, Domain, Engine
from tools_server.core.errors import ERROR_CODES, ToolError
from tools_server.core.paths import InputDir, InputPath, StructurePath, TrajectoryPath, input_file
from tools_server.core.registry import Resource, tool
from tools_server.core.results import ToolResult

__all__ = [
    "ERROR_CODES",
    "DoctorCheck",
    "Domain",
    "Engine",
    "InputDir",
    "InputPath",
    "Resource",
    "StructurePath",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "TrajectoryPath",
    "input_file",
    "tool",
]
