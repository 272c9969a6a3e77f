"""The tool registry: how a function becomes an MCP tool.

A tool is a plain function taking a pydantic input model (and optionally a :class:`ToolContext`) and
returning an instance of its declared result type, a :class:`~tools_server.core.results.ToolResult`::

    class AddInput(BaseModel):
        a: float = Field(description="first addend")
        b: float = Field(description="second addend")

    class AddResult(ToolResult):
        sum: float

    @tool(name="demo_add", resource="instant", read_only=True, idempotent=True)
    def demo_add(args: AddInput) -> AddResult:
        \"\"\"Add two numbers. Written for the model: say what it returns, with units.\"\"\"
        return AddResult(sum=args.a + args.b)

The return annotation becomes the tool's ``outputSchema``, and the server sends the result's strict
:func:`~tools_server.core.results.wire_form`; a tool annotated ``-> dict`` has neither.

A tool that wants the server's help (progress, artifacts, warnings, engine facts) declares a parameter
annotated :class:`~tools_server.core.context.ToolContext`; it is found by its annotation, whatever its name.

The server adds ``provenance``, caching, jobs and error handling. A :class:`Registry` collects tools by
domain: every domain, the project's own and third-party ones alike, is a
:class:`~tools_server.core.domain.Domain` named in the ``spu.tools`` entry-point group (an entry point may
also name a bare module of tools). Tool modules must stay cheap to import: engines are imported inside the
tool function, which runs in a worker process for ``cpu`` and ``gpu`` tools.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel

from tools_server.core.domain import DoctorCheck, Domain, Engine
from tools_server.core.errors import ToolError
from tools_server.core.finite import check_finite_result
from tools_server.core.results import (
    Item,
    ItemsResult,
    ToolResult,
    compact_schema,
    inline_refs,
    output_schema,
    wire_form,
)
from tools_server.core.waits import WAIT_S_SCHEMA

log = logging.getLogger(__name__)

Resource = Literal["instant", "cpu", "gpu", "net"]
#: How many cores a job reserves: ``"single"``, ``"all"`` (every core of the executor), a number, or a
#: function of the validated input returning one of those (e.g. one core for one molecule, all for a batch).
Threads = Literal["single", "all"] | int | Callable[[BaseModel], "Literal['single', 'all'] | int"]
ENTRY_POINT_GROUP = "spu.tools"
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


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
    context_param: str | None
    title: str | None = None
    canonicalize: Callable[[BaseModel], dict[str, Any]] | None = None
    threads: Threads = "single"
    #: the input field listing independent items (molecules, ligands, sequences) that the tool spreads with
    #: :func:`tools_server.core.fanout.map_items`, or the count field of items it generates (conformers);
    #: on a cluster each batch becomes many tasks
    items: str | None = None
    #: the server's own tools (system_info, job tools): called with the dispatcher, results passed through
    server_tool: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: the declared result type (the return annotation), a :class:`~tools_server.core.results.ToolResult`
    output_model: type[BaseModel] | None = None

    @property
    def is_job(self) -> bool:
        """``cpu`` and ``gpu`` tools run as jobs in worker processes."""
        return self.resource in ("cpu", "gpu")

    def input_schema(self) -> dict[str, Any]:
        """The ``inputSchema`` sent in ``tools/list``: the input model's JSON schema, nested models written
        in place and compact (:func:`~tools_server.core.results.compact_schema`), with ``wait_s`` for a
        job."""
        schema = compact_schema(inline_refs(self.input_model.model_json_schema()))
        if self.is_job:
            schema["properties"] = {**schema.get("properties", {}), "wait_s": WAIT_S_SCHEMA}
        return schema

    def output_schema(self) -> dict[str, Any] | None:
        """The ``outputSchema`` sent in ``tools/list``: the result type's JSON schema (for a job, or
        ``job_wait``, also the answer of a job still running); None for a tool that declares none."""
        if self.output_model is None:
            return None
        return output_schema(self.output_model, job=self.is_job or bool(self.extra.get("job_answer")))

    def threads_for(self, args: BaseModel) -> int | str:
        """The reservation of one call: ``"all"`` or a number of cores (1 for ``"single"``)."""
        value = self.threads(args) if callable(self.threads) else self.threads
        return _check_threads(self.name, value)

    def call(self, args: BaseModel, context: Any = None) -> Any:
        """Call the function, passing ``context`` to the parameter annotated for it, if any; returns what
        the server sends (:meth:`conform`)."""
        if self.context_param is None:
            result = self.fn(args)
        else:
            result = self.fn(args, **{self.context_param: context})
        return self.conform(result)

    def conform(self, result: Any) -> Any:
        """``result`` as the dict the server sends: an instance of :attr:`output_model` in its
        :func:`~tools_server.core.results.wire_form` (validated strictly); a tool without a declared type
        (``-> dict``) returns a dict, sent as it is. Anything else, a dict from a tool that declares a type
        included, is an ``internal_error`` saying what to return; a result that does not fit its type is a
        :class:`ToolError` naming the fields."""
        declared = self.output_model
        if declared is not None and isinstance(result, declared):
            return wire_form(result)
        if declared is None and isinstance(result, dict):
            check_finite_result(self.name, result)
            return result
        if declared is not None:
            hint = f"A bug in the tool: build its result type and return it: return {declared.__name__}(...)."
        else:
            hint = "A bug in the tool: return a dict, or declare a result type (a ToolResult subclass)."
        raise ToolError(
            "internal_error",
            f"tool {self.name} is declared to return {declared.__name__ if declared else 'a dict'} but "
            f"returned {type(result).__name__}",
            hint=hint,
        )


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
    threads: Threads = "single",
    items: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as an MCP tool.

    ``resource``: ``instant`` runs in the server and must return within a second; ``net`` runs in the
    server's thread pool (web I/O); ``cpu`` and ``gpu`` run as jobs in worker processes (``gpu`` tools
    queue on the GPU when one is present and fall back to the CPU slots otherwise).
    ``engines`` names the engines whose versions enter the cache key and provenance: an import name the
    domain declares as an :class:`~tools_server.core.domain.Engine` (whose distributions give the version),
    or a distribution name.
    ``cacheable`` defaults to True for ``cpu``/``gpu`` tools. ``canonicalize`` maps the validated input to
    the dict hashed for the cache key (e.g. canonical SMILES), defaulting to ``model_dump()``.
    ``threads`` is the CPU reservation of a ``cpu``/``gpu`` job: ``"single"`` (one core, the default),
    ``"all"`` (every core the executor has), a number of cores, or a function of the validated input
    returning one of those. The local executor never runs jobs whose reservations add up to more than its
    cores; the tool reads its share from ``ctx.threads``.
    ``items`` names the input field that lists the batch's independent items, when the tool spreads them
    with :func:`tools_server.core.fanout.map_items`: the Dask executor then runs them as many cluster tasks.
    For a tool that generates its items from one input (conformers of one molecule), it names the integer
    field that counts them (``items="n_conformers"``): the call fans out when it is above one.
    """
    if not _NAME_RE.match(name) or len(name) >= 40:
        raise ValueError(f"tool name {name!r} must be snake_case and shorter than 40 characters")

    if not callable(threads):
        _check_threads(name, threads)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(fn).parameters.values())
        if not params:
            raise TypeError(f"tool {name}: the function must take the input model as first argument")
        hints = _annotations(fn)
        model = hints.get(params[0].name)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"tool {name}: first parameter must be annotated with a pydantic model")
        context_params = [p.name for p in params[1:] if _is_context(hints.get(p.name))]
        others = [p.name for p in params[1:] if p.name not in context_params and p.default is p.empty]
        if others or len(context_params) > 1:
            raise TypeError(
                f"tool {name}: besides the input model, a tool takes at most one parameter, annotated "
                f"ToolContext (got {', '.join(others + context_params[1:])})"
            )
        doc = inspect.cleandoc(fn.__doc__ or "")
        if not doc:
            raise TypeError(f"tool {name}: write a docstring for the model")
        returns = hints.get("return")
        output_model = returns if isinstance(returns, type) and issubclass(returns, BaseModel) else None
        if output_model is not None and not issubclass(output_model, ToolResult):
            raise TypeError(
                f"tool {name}: the result type {output_model.__name__} must subclass ToolResult "
                "(from tools_server.plugin), which carries the keys the server adds (provenance, warnings)"
            )
        if output_model is not None and issubclass(output_model, ItemsResult):
            item_type = typing.get_args(output_model.model_fields["items"].annotation)[0]
            if item_type is Item:
                raise TypeError(
                    f"tool {name}: {output_model.__name__} does not declare its items: subclass Item with "
                    f"the keys of one item and declare `items: list[MyItem]` in {output_model.__name__}"
                )
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
            context_param=context_params[0] if context_params else None,
            title=title,
            canonicalize=canonicalize,
            threads=threads,
            items=items,
            output_model=output_model,
        )
        if items is not None and items not in model.model_fields:
            raise TypeError(f"tool {name}: items={items!r} is not a field of {model.__name__}")
        fn.__spu_tool__ = spec  # type: ignore[attr-defined]
        return fn

    return decorator


def _check_threads(name: str, value: Any) -> int | str:
    if value == "single":
        return 1
    if value == "all" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"tool {name}: threads must be 'single', 'all' or a whole number >= 1, not {value!r}")


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """Resolved annotations; a name that cannot be resolved (a TYPE_CHECKING import) stays a string."""
    try:
        return typing.get_type_hints(fn)
    except (NameError, TypeError):
        out = dict(fn.__annotations__)
        for key, value in out.items():
            if isinstance(value, str):
                out[key] = fn.__globals__.get(value, value)
        return out


def _is_context(annotation: Any) -> bool:
    from tools_server.core.context import ToolContext

    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "ToolContext"
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def tools_in_module(module: ModuleType) -> list[ToolSpec]:
    """The ``@tool`` functions a module defines (not those it imports from elsewhere)."""
    return [
        spec
        for value in vars(module).values()
        if (spec := getattr(value, "__spu_tool__", None)) is not None and spec.module == module.__name__
    ]


class Registry:
    """The tools one server offers, by name, and the domains they came from. ``load_errors`` lists the
    plugins that could not be loaded (each skipped whole, so the other tools work)."""

    def __init__(self) -> None:
        self.tools: dict[str, ToolSpec] = {}
        self.domains: dict[str, Domain] = {}
        self.domain_of: dict[str, str] = {}
        self.load_errors: list[dict[str, str]] = []
        self._versions: dict[tuple[str, ...], dict[str, str | None]] = {}

    def add(self, spec: ToolSpec, domain: str = "core") -> None:
        self._check_new(spec)
        self.tools[spec.name] = spec
        self.domain_of[spec.name] = domain

    def add_module(self, module_name: str, domain: str = "plugins") -> None:
        self._add_all([(spec, domain) for spec in tools_in_module(importlib.import_module(module_name))])

    def add_named_module(self, module_name: str) -> None:
        """A module named in ``SPU_TOOL_MODULES``: one that defines a ``DOMAIN`` loads as that domain (its
        tools, engines, doctor checks and error codes), any other as a bare module of tools."""
        module = importlib.import_module(module_name)
        domain = getattr(module, "DOMAIN", None)
        if isinstance(domain, Domain):
            specs = self._domain_specs(domain)
            if module_name not in domain.tool_modules:
                specs += [(spec, domain.name) for spec in tools_in_module(module)]
            self._add_all(specs)
            self.domains[domain.name] = domain
            return
        self.add_module(module_name, "plugins")

    def add_domain(self, domain: Domain) -> None:
        """All of the domain's tool modules, or (one failing to import, or naming a tool already known)
        none of them: the error is raised and the registry is as it was."""
        self._add_all(self._domain_specs(domain))
        self.domains[domain.name] = domain

    @staticmethod
    def _domain_specs(domain: Domain) -> list[tuple[ToolSpec, str]]:
        return [
            (spec, domain.name)
            for module_name in domain.tool_modules
            for spec in tools_in_module(importlib.import_module(module_name))
        ]

    def _check_new(self, spec: ToolSpec) -> None:
        existing = self.tools.get(spec.name)
        if existing is not None and existing.module != spec.module:
            raise ValueError(f"tool {spec.name!r} is defined twice: in {existing.module} and {spec.module}")

    def _add_all(self, specs: list[tuple[ToolSpec, str]]) -> None:
        for spec, _ in specs:  # checked first, so a clash adds nothing
            self._check_new(spec)
        for spec, domain in specs:
            self.add(spec, domain)

    def load(
        self,
        source: str,
        name: str,
        load: Callable[[], None],
        distribution: Callable[[], str | None] | None = None,
    ) -> None:
        """Run ``load`` (adding one plugin); when it fails, skip the plugin and keep the error (``source``:
        where it was named, ``name``: what, ``distribution()``: the installed package that declares an entry
        point, asked only then: reading it parses the package's metadata, about 0.4 ms a plugin at every
        start) for ``system_info`` and ``spu doctor``, and log it."""
        try:
            load()
        except (Exception, SystemExit) as exc:  # a plugin's import may raise anything, even SystemExit
            log.error("skipping the plugin %s (%s): %s: %s", name, source, type(exc).__name__, exc)
            error = {"source": source, "plugin": name, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            dist = distribution() if distribution is not None else None
            if dist:
                error["distribution"] = dist
            self.load_errors.append(error)

    def get(self, name: str) -> ToolSpec:
        spec = self.tools.get(name)
        if spec is None:
            raise ToolError("unknown_tool", f"There is no tool named {name!r}.")
        return spec

    def engines(self) -> dict[str, Engine]:
        """Every engine the loaded domains declare, by import name."""
        return {e.module: e for d in self.domains.values() for e in d.engines}

    def doctor_checks(self) -> list[DoctorCheck]:
        return [c for d in self.domains.values() for c in d.doctor_checks]

    def engine_versions(self, names: tuple[str, ...]) -> dict[str, str | None]:
        """Installed versions of a tool's engines, read from package metadata without importing them."""
        key = tuple(names)
        if key not in self._versions:
            declared = self.engines()
            self._versions[key] = {
                name: (declared[name] if name in declared else Engine(name, name)).version() for name in names
            }
        return self._versions[key]

    def warm_modules(self, resources: tuple[str, ...]) -> list[str]:
        """What a worker running the tools of ``resources`` imports ahead of the first job: each tool's
        module and the import names of its engines."""
        declared = self.engines()
        by_dist = {d: e.module for e in declared.values() for d in e.names}
        out: dict[str, None] = {}
        for spec in self.tools.values():
            if spec.resource not in resources or spec.server_tool:
                continue
            out[spec.module] = None
            for name in spec.engines:
                module = name if name in declared else by_dist.get(name, name)
                if module.replace(".", "_").isidentifier():
                    out[module] = None
        return list(out)

    def engine_table(self) -> dict[str, dict[str, Any]]:
        """Which declared engines are importable, and their versions (for system_info)."""
        out = {}
        for module, engine in sorted(self.engines().items()):
            present = engine.importable()
            out[module] = {"importable": present, "version": engine.version() if present else None}
        return out


def load_registry(*, entry_points: bool = True) -> Registry:
    """A registry holding every domain of the ``spu.tools`` entry points and the modules named in
    ``SPU_TOOL_MODULES`` (comma-separated; see :meth:`Registry.add_named_module`).

    A plugin that fails to load (its import raises, it names a tool already known, an entry point that is
    neither a domain nor a module) is skipped whole and recorded in ``Registry.load_errors``: one broken
    package cannot take the other tools down.
    """
    registry = Registry()
    if entry_points:
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):

            def add(ep: metadata.EntryPoint = ep) -> None:
                found = ep.load()
                if isinstance(found, Domain):
                    registry.add_domain(found)
                elif isinstance(found, ModuleType):
                    registry.add_module(found.__name__, ep.name)
                else:
                    raise TypeError(f"{ep.value} is neither a Domain nor a module")

            def distribution(ep: metadata.EntryPoint = ep) -> str | None:
                dist = getattr(ep, "dist", None)
                return dist.name if dist else None

            registry.load(f"{ENTRY_POINT_GROUP} entry point {ep.name}", ep.value, add, distribution)
    for module in filter(None, (m.strip() for m in os.environ.get("SPU_TOOL_MODULES", "").split(","))):
        registry.load("SPU_TOOL_MODULES", module, lambda module=module: registry.add_named_module(module))
    return registry
