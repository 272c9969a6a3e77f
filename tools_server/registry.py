"""The tool registry: how a function becomes an MCP tool.

A tool is a plain function taking a pydantic input model (and optionally a :class:`ToolContext`) and
returning a JSON-serialisable ``dict``::

    class AddInput(BaseModel):
        a: float = Field(description="first addend")
        b: float = Field(description="second addend")

    @tool(name="demo_add", resource="instant", read_only=True, idempotent=True)
    def demo_add(args: AddInput) -> dict:
        \"\"\"Add two numbers. Written for the model: say what it returns, with units.\"\"\"
        return {"sum": args.a + args.b}

The server adds ``provenance``, caching, jobs and error handling. Tools are found in the project's own
domain modules (``DOMAIN_MODULES``) and in any installed package that declares a module in the
entry-point group ``spu.tools``. Domain modules must stay cheap to import: engines are imported inside the
tool function, which runs in a worker process for ``cpu`` and ``gpu`` tools.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

from pydantic import BaseModel

log = logging.getLogger(__name__)

Resource = Literal["instant", "cpu", "gpu", "net"]
ENTRY_POINT_GROUP = "spu.tools"
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")

#: The project's own tool modules, imported by :func:`load_tools`.
DOMAIN_MODULES: tuple[str, ...] = (
    "tools_server.core_tools",
    "tools_server.chem.tools",
    "tools_server.qc.tools",
    "tools_server.web.tools",
    "tools_server.md.tools",
    "tools_server.protein.tools",
    "tools_server.ranking.tools",
)


@dataclass(frozen=True)
class ToolSpec:
    """Everything the server needs to know about one tool."""

    name: str
    fn: Callable[..., Any]
    input_model: type[BaseModel]
    description: str
    resource: Resource
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    version: str
    time_limit_s: float
    memory_limit_mb: int | None
    cacheable: bool
    engines: tuple[str, ...]
    module: str
    wants_context: bool
    title: str | None = None
    canonicalize: Callable[[BaseModel], dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_job(self) -> bool:
        """``cpu`` and ``gpu`` tools run as jobs in worker processes."""
        return self.resource in ("cpu", "gpu")

    def input_schema(self) -> dict[str, Any]:
        schema = self.input_model.model_json_schema()
        if self.is_job:
            schema = dict(schema)
            props = dict(schema.get("properties", {}))
            props["wait_s"] = {
                "type": "number",
                "minimum": 0,
                "maximum": 600,
                "default": 40,
                "description": "Seconds to wait for the result before returning {status: running, job_id}; "
                "poll with job_wait.",
            }
            schema["properties"] = props
        return schema


REGISTRY: dict[str, ToolSpec] = {}


def tool(
    *,
    name: str,
    resource: Resource = "instant",
    read_only: bool = True,
    destructive: bool = False,
    idempotent: bool = True,
    open_world: bool = False,
    version: str = "1",
    time_limit_s: float = 3600.0,
    memory_limit_mb: int | None = None,
    cacheable: bool | None = None,
    engines: tuple[str, ...] = (),
    title: str | None = None,
    canonicalize: Callable[[BaseModel], dict[str, Any]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as an MCP tool.

    ``resource``: ``instant`` runs in the server and must return within a second; ``net`` runs in the
    server's thread pool (web I/O); ``cpu`` and ``gpu`` run as jobs in worker processes (``gpu`` tools
    queue on the GPU when one is present and fall back to the CPU slots otherwise).
    ``engines`` names the distributions whose versions enter the cache key and provenance.
    ``cacheable`` defaults to True for ``cpu``/``gpu`` tools. ``canonicalize`` maps the validated input to
    the dict hashed for the cache key (e.g. canonical SMILES), defaulting to ``model_dump()``.
    """
    if not _NAME_RE.match(name) or len(name) >= 40:
        raise ValueError(f"tool name {name!r} must be snake_case and shorter than 40 characters")

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(fn).parameters.values())
        if not params:
            raise TypeError(f"tool {name}: the function must take the input model as first argument")
        model = fn.__annotations__.get(params[0].name)
        if isinstance(model, str):
            model = fn.__globals__.get(model)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"tool {name}: first parameter must be annotated with a pydantic model")
        doc = inspect.cleandoc(fn.__doc__ or "")
        if not doc:
            raise TypeError(f"tool {name}: write a docstring for the model")
        spec = ToolSpec(
            name=name,
            fn=fn,
            input_model=model,
            description=doc,
            resource=resource,
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            version=version,
            time_limit_s=time_limit_s,
            memory_limit_mb=memory_limit_mb,
            cacheable=(resource in ("cpu", "gpu")) if cacheable is None else cacheable,
            engines=engines,
            module=fn.__module__,
            wants_context=len(params) > 1,
            title=title,
            canonicalize=canonicalize,
        )
        existing = REGISTRY.get(name)
        if existing is not None and existing.module != spec.module:
            raise ValueError(f"tool {name!r} is defined twice: in {existing.module} and {spec.module}")
        REGISTRY[name] = spec
        fn.__spu_tool__ = spec  # type: ignore[attr-defined]
        return fn

    return decorator


def load_tools(*, entry_points: bool = True) -> dict[str, ToolSpec]:
    """Import the project's domain modules, the modules named in ``SPU_TOOL_MODULES`` (comma-separated)
    and every ``spu.tools`` entry point; return the registry.

    A plugin that fails to import is logged and skipped so one broken package cannot take the server down.
    """
    for module in DOMAIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise  # a missing dependency inside the module is a bug, not an absent domain
    for module in filter(None, os.environ.get("SPU_TOOL_MODULES", "").split(",")):
        importlib.import_module(module.strip())
    if entry_points:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception:
                log.exception("could not load spu.tools entry point %s", ep.value)
    return REGISTRY


def get_tool(name: str) -> ToolSpec:
    from tools_server.errors import ToolError

    spec = REGISTRY.get(name)
    if spec is None:
        raise ToolError("unknown_tool", f"There is no tool named {name!r}.")
    return spec


def engine_versions(engines: tuple[str, ...]) -> dict[str, str | None]:
    """Installed versions of the named distributions, read from metadata without importing them."""
    out: dict[str, str | None] = {}
    for dist in engines:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out
