"""What every tool's result shares, how a result becomes what the server sends, and the answer of a job
still running.

A tool declares its result type by its return annotation, a subclass of :class:`ToolResult` listing its
keys (units in their names), and returns an instance of it::

    class AddResult(ToolResult):
        sum: float

    @tool(name="demo_add")
    def demo_add(args: AddInput) -> AddResult:
        return AddResult(sum=args.a + args.b)

Result types are strict (:class:`ResultModel`): a value is taken only as the type it is declared with, so
``"yes"`` is no bool, a NumPy integer no ``int`` (``int(x)`` is), a tuple no list; a key the type does not
declare is refused; and a float must be finite, unless its field is :data:`FiniteOrNull`, which carries
``null`` in place of NaN or infinity (JSON has neither). A value that does not fit fails where the
result is built: a :class:`~tools_server.core.errors.ToolError`, ``engine_error`` for a number that is
not finite (the engine failed), ``internal_error`` for anything else (the tool's bug). A batch built item
by item in a ``try`` thus turns an engine's NaN into that item's error.

The server sends :func:`wire_form`: the result written as JSON and read back in strict mode, so what was
changed after the result was built is checked too, then the fields that were set. The server adds
``provenance`` (and, for a result over the size budget, ``result_artifact`` and ``note``) and publishes
the type's JSON schema as the tool's ``outputSchema`` (:func:`output_schema`); for a ``cpu``/``gpu`` tool
the schema also admits the :class:`JobStatus` of a job not finished within ``wait_s``.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticSerializationError

from tools_server.core.errors import ToolError
from tools_server.core.finite import check_finite_result


def _non_finite_as_none(value: Any) -> Any:
    if isinstance(value, float) or (hasattr(value, "dtype") and hasattr(value, "item")):
        try:
            if not math.isfinite(value):
                return None
        except (TypeError, ValueError):
            return value
    return value


#: A float field where "not a number" is a possible answer (a descriptor RDKit cannot compute, the
#: correlation of a constant series): NaN and infinity become ``null``, any other value must be a float.
FiniteOrNull = Annotated[
    float | None,
    BeforeValidator(_non_finite_as_none),
    WithJsonSchema(
        {"type": ["number", "null"], "description": "null where the value is not a finite number"}
    ),
]


class ResultModel(BaseModel):
    """The base of every model in a result (a tool's result type, a batch's item, a nested report): strict,
    closed, finite. Building one with a value that does not fit raises :class:`ToolError` (see the module's
    docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, ser_json_inf_nan="constants")

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # the model a tool builds; the models inside it are checked with it
            raise misfit(type(self).__name__, exc) from None


def misfit(type_name: str, exc: ValidationError) -> ToolError:
    """The error of a result that does not fit its type ``type_name``: ``engine_error`` when every problem
    is a number that is not finite, else ``internal_error``; the message names the fields."""
    errors = exc.errors(include_url=False)
    problems = "; ".join(_problem(e) for e in errors[:5])
    if all(e["type"] == "finite_number" for e in errors):
        return ToolError(
            "engine_error", f"{type_name}: the engine gave a number that is not finite: {problems}"
        )
    return ToolError(
        "internal_error",
        f"the result does not fit its declared type {type_name}: {problems}",
        hint="A bug in the tool: build results from plain Python values (int(x), float(x), list(x)) with the "
        "keys the type declares; report it with the job id.",
    )


def _problem(error: Any) -> str:
    where = ".".join(map(str, error["loc"])) or "(result)"
    got = type(error["input"])
    given = f" (got {got.__module__}.{got.__qualname__})" if error["type"].endswith("_type") else ""
    return f"{where}: {error['msg']}{given}"


class ToolResult(ResultModel):
    """The base of every tool's result type."""

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


class ItemError(ResultModel):
    """Why one item of a batch failed: a stable error code, a message, the recovery hint."""

    code: str
    message: str
    hint: str | None = None
    details: dict[str, Any] | None = None

    @classmethod
    def of(cls, exc: BaseException) -> ItemError:
        """The error of a :class:`ToolError` (or of any exception: ``engine_crashed`` with its type)."""
        if isinstance(exc, ToolError):
            return cls.model_validate(exc.to_dict())
        error = ToolError("engine_crashed", f"{type(exc).__name__}: {exc}")
        return cls(code=error.code, message=error.message, hint=error.hint)


class Item(ResultModel):
    """One item of a batch: ``ok`` with the item's own keys, or ``ok: false`` with its ``error``. A batch
    tool declares its items' keys in a subclass (every key optional: a failed item has only ``index``,
    ``ok`` and ``error``)."""

    index: int
    ok: bool
    error: ItemError | None = None
    warnings: list[str] | None = None

    @classmethod
    def failed(cls, index: int, exc: BaseException, **keys: Any) -> Any:
        """The item of input ``index`` that failed with ``exc`` (``keys``: what the item still says, such
        as the input it was given)."""
        return cls(index=index, ok=False, error=ItemError.of(exc), **keys)


class ItemsResult(ToolResult):
    """A batch's items: inline when small, else a CSV artifact and a preview
    (:func:`tools_server.core.tables.table_result`). A subclass names its item type: ``items:
    list[MyItem]``."""

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


def wire_form(result: ResultModel) -> dict[str, Any]:
    """What the server sends of ``result``: its JSON, read back in strict mode (a value changed after the
    result was built, or a model built without validation, is checked like the rest), as a dict of the
    fields that were set. Raises :class:`ToolError` (see :func:`misfit`; a non-finite number where a
    field's type is open, ``dict[str, Any]``, is ``engine_error`` too)."""
    model = type(result)
    try:
        text = result.model_dump_json(exclude_unset=True, warnings="error")
    except PydanticSerializationError as exc:
        raise ToolError(
            "internal_error", f"the result of type {model.__name__} cannot be written as JSON: {exc}"
        ) from None
    try:
        checked = model.model_validate_json(text, strict=True)
    except ValidationError as exc:  # a result type that is no ResultModel raises pydantic's own error
        raise misfit(model.__name__, exc) from None
    out = checked.model_dump(mode="json", exclude_unset=True)
    if "NaN" in text or "Infinity" in text:  # the JSON of a non-finite float (or such text in a string)
        check_finite_result(model.__name__, out)  # where no field's type covers it (a dict[str, Any])
    return {key: out[key] for key in _reading_order(model) if key in out} | out


@cache
def _reading_order(model: type[BaseModel]) -> tuple[str, ...]:
    """A result's keys summary first: the tool's own fields (counts, energies ...), then a batch's items,
    then what every result carries (warnings, note, provenance). pydantic lists a base class's fields first,
    which put the items before the counts: a reader of a long result, or an agent that keeps only its head
    and tail, lost the counts."""
    carried = list(ToolResult.model_fields)
    later = [*(name for name in ItemsResult.model_fields if name not in carried), *carried]
    own = [name for name in model.model_fields if name not in later]
    return (*own, *(name for name in later if name in model.model_fields))


#: Keys of a result that the server may leave out: ``fit_budget`` moves large fields to an artifact.
BUDGET_KEY = "result_artifact"


def output_schema(model: type[BaseModel], *, job: bool) -> dict[str, Any]:
    """The ``outputSchema`` of a tool returning ``model``: the model's JSON schema, its required keys
    waived for a result moved to an artifact (``result_artifact``), and for a job (``job``) also the
    :class:`JobStatus` of a job still running; compact, and with every nested model written in place
    (:func:`inline_refs`)."""
    schema = inline_refs(model.model_json_schema(mode="serialization", schema_generator=_ResultJsonSchema))
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
    return compact_schema(schema)


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``$ref`` to its ``$defs`` replaced by the definition itself (a model that
    contains itself keeps its reference). A client validates every result against the tool's schema; the
    Python SDK's validator (``jsonschema``) resolves each reference at each use, and on an ``xtb_run``
    result the schema with references took three times as long to check as the same schema written out
    (``docs/performance.md``)."""
    defs = schema.get("$defs", {})
    kept: set[str] = set()

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.rsplit("/", 1)[-1]
            if name in seen or name not in defs:
                kept.add(name)
                return node
            return walk({**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}, (*seen, name))
        return {k: walk(v, seen) for k, v in node.items() if k != "$defs"}

    out = walk(schema, ())
    if kept:
        out["$defs"] = {name: walk(defs[name], (name,)) for name in sorted(kept) if name in defs}
    return out


class _ResultJsonSchema(GenerateJsonSchema):
    """A result's JSON schema without its fields' defaults: a client checks a result against it and never
    fills a default in, and encoding the defaults took a quarter of the time building the tool list did."""

    def default_schema(self, schema: Any) -> dict[str, Any]:
        return self.generate_inner(schema["schema"])


@cache
def _job_status_schema() -> dict[str, Any]:
    return JobStatus.model_json_schema(mode="serialization", schema_generator=_ResultJsonSchema)


def compact_schema(node: Any, root: bool = True) -> Any:
    """A JSON schema without what only repeats the key (pydantic's per-field ``title``), says nothing
    (``"default": null``) or speaks to the code's readers (a model's docstring, kept only at the root), and
    an optional scalar as ``{"type": ["string", "null"]}`` rather than an ``anyOf`` of two schemas: the tool
    list is sent to every client at start, and a client validates every result against it (an ``anyOf``
    per optional field made that twice as slow). Field descriptions stay: they are for the model."""
    if isinstance(node, list):
        return [compact_schema(v, False) for v in node]
    if not isinstance(node, dict):
        return node
    is_model = "properties" in node and not root
    out: dict[str, Any] = {}
    for key, value in node.items():
        if (key == "properties" and isinstance(value, dict)) or (key == "$defs" and isinstance(value, dict)):
            out[key] = {name: compact_schema(sub, False) for name, sub in value.items()}
        elif (
            (key == "title" and not root and isinstance(value, str))
            or (key == "default" and value is None)
            or (key == "description" and is_model)
        ):
            continue
        else:
            out[key] = compact_schema(value, False)
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
