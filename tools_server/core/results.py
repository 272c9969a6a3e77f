"""What every tool's result shares, and the answer of a job still running.

A tool declares its result type by its return annotation: a subclass of :class:`ToolResult` listing its
keys (units in their names)::

    class AddResult(ToolResult):
        sum: float

    @tool(name="demo_add")
    def demo_add(args: AddInput) -> AddResult:
        return AddResult(sum=args.a + args.b)

The server publishes the type's JSON schema as the tool's ``outputSchema``
(:meth:`~tools_server.core.registry.ToolSpec.output_schema`) and sends ``structuredContent`` that
validates against it: the result itself (the fields the server adds, ``provenance``, ``warnings`` and,
for a result over the size budget, ``result_artifact`` and ``note``, are part of every type), or for a
``cpu``/``gpu`` tool the :class:`JobStatus` of a job not finished within ``wait_s``.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ToolResult(BaseModel):
    """The base of every tool's result type. A key the type does not declare is refused (a result that
    drifts from its declaration fails where it is made, not in the client)."""

    model_config = ConfigDict(extra="forbid")

    #: quality warnings (SCF not converged, imaginary modes, a record or cache write that failed ...)
    warnings: list[str] | None = None
    #: added by the server (docs/server.md): tool and version, engines and versions, device, parameters,
    #: input hash, wall time, cache hit or miss, job id; one function writes it for every tool
    provenance: dict[str, Any] | None = Field(
        None, description="Added by the server: what computed the result, from which inputs, how fast."
    )
    #: set when the result was over the size budget: the whole result is in this JSON file
    result_artifact: str | None = None
    note: str | None = None


class ItemError(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    hint: str | None = None


class Item(BaseModel):
    """One item of a batch: ``ok`` with the item's own keys, or ``ok: false`` with its ``error``."""

    model_config = ConfigDict(extra="allow")

    index: int
    ok: bool
    error: ItemError | None = None


class ItemsResult(ToolResult):
    """A batch's items: inline when small, else a CSV artifact and a preview (``chem.tables``)."""

    items: list[Item]
    table_csv: str | None = None
    items_truncated: str | None = None


class BatchResult(ItemsResult):
    n_molecules: int
    n_ok: int
    n_failed: int


class OpenResult(ToolResult):
    """A result whose keys are another tool's (``job_wait`` returns the job's own result)."""

    model_config = ConfigDict(extra="allow")


class JobStatus(BaseModel):
    """The answer of a ``cpu``/``gpu`` tool whose job is not finished within ``wait_s``."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["queued", "running"]
    job_id: str
    tool: str
    progress: float
    message: str | None = None
    eta_s: float | None = None
    hint: str
    warnings: list[str] | None = None  # e.g. the job record could not be written (storage_error)


#: Keys of a result that the server may leave out: ``fit_budget`` moves large fields to an artifact.
BUDGET_KEY = "result_artifact"


def output_schema(model: type[BaseModel], *, job: bool) -> dict[str, Any]:
    """The ``outputSchema`` of a tool returning ``model``: the model's JSON schema, its required keys
    waived for a result moved to an artifact (``result_artifact``), and for a job (``job``) also the
    :class:`JobStatus` of a job still running."""
    schema = model.model_json_schema(mode="serialization")
    defs = schema.pop("$defs", {})
    required = schema.pop("required", [])
    if required:
        schema["anyOf"] = [{"required": required}, {"required": [BUDGET_KEY]}]
    if job:
        status = _job_status_schema()
        schema = {
            "type": "object",
            "title": schema.get("title"),
            "description": schema.get("description"),
            "anyOf": [schema, status],
        }
        schema = {k: v for k, v in schema.items() if v is not None}
    if defs:
        schema["$defs"] = defs
    return _compact(schema, root=True)


@cache
def _job_status_schema() -> dict[str, Any]:
    return JobStatus.model_json_schema(mode="serialization")


def _compact(node: Any, root: bool = False) -> Any:
    """The schema without what only repeats the key (pydantic's per-field ``title``) or says nothing
    (``"default": null``), and an optional scalar as ``{"type": ["string", "null"]}`` rather than an
    ``anyOf`` of two schemas: the tool list is sent to every client at start, and a client validates every
    result against it (an ``anyOf`` per optional field made that twice as slow)."""
    if isinstance(node, list):
        return [_compact(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _compact(sub) for name, sub in value.items()}
        elif (key == "title" and not root and isinstance(value, str)) or (key == "default" and value is None):
            continue
        else:
            out[key] = _compact(value)
    branches = out.get("anyOf")
    if isinstance(branches, list) and branches and all(set(b) == {"type"} for b in branches):
        del out["anyOf"]
        out["type"] = [b["type"] for b in branches]
    elif isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        other = branches[0] if branches[1] == {"type": "null"} else branches[1]
        if isinstance(other.get("type"), str) and not {"$ref", "anyOf", "enum", "const"} & set(other):
            del out["anyOf"]
            out.update({**other, "type": [other["type"], "null"]})
    return out
