"""What a tool package imports from the server: the one public surface for plugins and for the project's
own domains alike.

::

    from tools_server.plugin import Domain, Engine, ToolContext, ToolError, ToolResult, map_items, tool

A plugin (a third-party package named in the ``spu.tools`` entry points, or a module named in
``SPU_TOOL_MODULES``) imports only this module, so the server's core can change beneath it; the nine
domains in ``tools_server/`` are written the same way (a test fails on a domain that imports
``tools_server.core``). ``docs/adding-a-tool.md`` walks through one; ``examples/spu-example-plugin`` is
the finished example.

Declaring tools and a domain:

* :func:`tool` makes a function an MCP tool (its name, resource class (:data:`Resource`), annotations,
  engines, limits, and ``items=``, the field whose items :func:`map_items` may spread over a cluster);
* :class:`Domain`, :class:`Engine` and :class:`DoctorCheck`, what a package declares: its tool modules,
  the engines it computes with, its ``spu doctor`` checks and its own error codes;
  :func:`distribution_version`, the installed version of a distribution (None when absent);
  :data:`ENTRY_POINT_GROUP`, the entry-point group domains register in.

Running:

* :class:`ToolContext`, the tool's view of the server (progress, artifacts, warnings, engine facts, threads);
* :class:`ToolError`, the one exception a tool raises (a stable code, a message, a recovery hint);
  :data:`ERROR_CODES`, the codes known so far with their hints; :func:`storage_warning`, the warning a
  result carries when a file it meant to keep could not be written.

Results (a tool returns an instance of its declared type; strict: plain Python values, declared keys,
finite numbers):

* :class:`ToolResult`, the base of a tool's declared result type (its ``outputSchema``);
  :class:`ResultModel`, the base of any model nested in a result (a report, a row);
  :data:`FiniteOrNull`, a float field that carries ``null`` where the value is NaN or infinite;
* :class:`ItemsResult` and :class:`BatchResult` (a batch: one :class:`Item` subclass per tool, naming its
  keys, each item ``ok`` or failed with its :class:`ItemError`, ``Item.failed(index, exc)``), the result
  types of tools that take many inputs at once; :func:`table_result`, a batch's items inline or, when
  large, as a CSV artifact and a preview.

Batches and cost:

* :func:`map_items` runs a batch's independent items on the job's cores, or as tasks on a Dask cluster
  for a tool that declared ``items=``; :data:`ONE_TASK_EACH`, the batch size up to which each item is one
  cluster task (a tool that groups its own work keeps to it);
* :class:`CostModel`, a scaling law's estimate of a job's time corrected by what this machine took, for a
  tool that refuses work it cannot finish; :func:`first_in_process`, whether a run paid one-time costs.

Files, folders, weights and the machine:

* :data:`InputPath` and :data:`InputDir`, the types of an input field that names a file or a folder: the
  server confines it (under the allowed roots, no link followed in any component, never ``/proc``,
  ``/sys`` or a device, one hard link) and sizes a file against its kind's cap before the tool runs, and a
  cluster executor ships its content with the job; :data:`StructurePath`, :data:`TrajectoryPath`,
  :data:`SubmissionPath` and :func:`input_file` (``input_file("molecule")``) name files of a kind with its
  own cap; :func:`file_reference` types a text argument that may name a file; :func:`readable_file`
  applies the same check to a file named some other way (below :func:`allowed_roots`, with hard links
  as :func:`hard_links_allowed` says). A tool reads a file with :func:`read_input` (its
  bytes, from the descriptor that was checked) or :func:`private_copy` (a private copy for an engine that
  opens files by name), never by opening the path itself, and keys a file by :func:`file_key` (the
  SHA-256 of its bytes);
* :func:`workdir`, the server's work directory; :func:`weights_dir`, where model weights live;
  :func:`download_allowed`, whether a loader may fetch missing weights (``SPU_WEIGHTS_DOWNLOAD``), and
  :func:`weights_missing`, the error to raise when it may not;
* :func:`gpus`, the CUDA GPUs of this machine.

Text and HTTP, for a domain that reads text or serves HTTP of its own:

* :data:`INVISIBLE_RE` (one refused character) and :data:`DELETE_INVISIBLE` (a ``str.translate`` table
  deleting them all): the invisible and direction-control characters the server refuses in arguments;
* :func:`guard_requests` and :func:`uvicorn_options`, the request and connection checks ``spu serve``
  runs behind (Host, bearer token, body size and time, requests in flight); :func:`token_problem` and
  :data:`TOKEN_ADVICE`, the token-strength rule for a public bind; :func:`is_loopback`.
"""

from __future__ import annotations

from tools_server.core.bind import is_loopback
from tools_server.core.calibration import CostModel, first_in_process
from tools_server.core.context import ToolContext
from tools_server.core.domain import DoctorCheck, Domain, Engine, distribution_version
from tools_server.core.errors import ERROR_CODES, ToolError, storage_warning
from tools_server.core.fanout import ONE_TASK_EACH, map_items
from tools_server.core.hardware import gpus
from tools_server.core.http_guard import TOKEN_ADVICE, guard_requests, token_problem, uvicorn_options
from tools_server.core.invisible import DELETE_INVISIBLE, INVISIBLE_RE
from tools_server.core.paths import (
    InputDir,
    InputPath,
    StructurePath,
    SubmissionPath,
    TrajectoryPath,
    allowed_roots,
    file_key,
    file_reference,
    hard_links_allowed,
    input_file,
    private_copy,
    read_input,
    readable_file,
)
from tools_server.core.registry import ENTRY_POINT_GROUP, Resource, tool
from tools_server.core.results import (
    BatchResult,
    FiniteOrNull,
    Item,
    ItemError,
    ItemsResult,
    ResultModel,
    ToolResult,
)
from tools_server.core.settings import download_allowed, weights_dir, weights_missing, workdir
from tools_server.core.tables import table_result

__all__ = [
    "DELETE_INVISIBLE",
    "ENTRY_POINT_GROUP",
    "ERROR_CODES",
    "INVISIBLE_RE",
    "ONE_TASK_EACH",
    "TOKEN_ADVICE",
    "BatchResult",
    "CostModel",
    "DoctorCheck",
    "Domain",
    "Engine",
    "FiniteOrNull",
    "InputDir",
    "InputPath",
    "Item",
    "ItemError",
    "ItemsResult",
    "Resource",
    "ResultModel",
    "StructurePath",
    "SubmissionPath",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "TrajectoryPath",
    "allowed_roots",
    "distribution_version",
    "download_allowed",
    "file_key",
    "file_reference",
    "first_in_process",
    "gpus",
    "guard_requests",
    "hard_links_allowed",
    "input_file",
    "is_loopback",
    "map_items",
    "private_copy",
    "read_input",
    "readable_file",
    "storage_warning",
    "table_result",
    "token_problem",
    "tool",
    "uvicorn_options",
    "weights_dir",
    "weights_missing",
    "workdir",
]
