"""Run one tool function on validated input: the same code path in the server, a worker or a Dask task."""

from __future__ import annotations

import importlib
import time
from typing import Any

from pydantic import ValidationError

from tools_server.core.context import ProgressSink, ToolContext
from tools_server.core.errors import ToolError
from tools_server.core.paths import recording_reads
from tools_server.core.registry import ToolSpec, tools_in_module


def validation_error(exc: ValidationError) -> ToolError:
    """Turn pydantic's report into an ``invalid_input`` error the model can act on."""
    problems = []
    for err in exc.errors()[:10]:
        where = ".".join(str(p) for p in err["loc"]) or "(input)"
        problems.append(f"{where}: {err['msg']}")
    return ToolError("invalid_input", "Invalid arguments: " + "; ".join(problems), problems=problems)


def resolve(tool: str, module: str) -> ToolSpec:
    """Find a tool by name in the module that defines it (workers import only what their jobs need)."""
    for spec in tools_in_module(importlib.import_module(module)):
        if spec.name == tool:
            return spec
    raise ToolError("unknown_tool", f"Module {module} does not define tool {tool!r}.")


def run_tool(
    spec: ToolSpec,
    params: dict[str, Any],
    job_id: str,
    *,
    progress_sink: ProgressSink | None = None,
    threads: int = 1,
    gpu: bool = False,
    memory_limit_mb: int | None = None,
) -> dict[str, Any]:
    """Validate ``params``, call the tool and return ``{result, warnings, engine, wall_s, inputs_sha256}``
    (the digests of the input files the tool read, which its cache key must cover).

    Raises :class:`ToolError` for anything the caller should see as an error result.
    """
    try:
        args = spec.input_model.model_validate(params)
    except ValidationError as exc:
        raise validation_error(exc) from None
    ctx = ToolContext(
        spec.name,
        job_id,
        progress_sink=progress_sink,
        threads=threads,
        gpu=gpu,
        memory_limit_mb=memory_limit_mb,
        time_limit_s=spec.time_limit_s,
    )
    start = time.perf_counter()
    with recording_reads() as reads:
        result = spec.call(args, ctx)
    wall_s = time.perf_counter() - start
    return {
        "result": result,
        "warnings": ctx.warnings,
        "engine": ctx.engine,
        "wall_s": wall_s,
        "inputs_sha256": sorted(set(reads.digests)),
    }
