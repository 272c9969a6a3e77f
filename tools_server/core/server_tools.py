"""The server's own tools: ``system_info`` and the job tools (``job_wait``, ``job_cancel``, ``jobs``).

They belong to no domain: :class:`~tools_server.core.server.SpuServer` registers them explicitly, and the
:class:`~tools_server.core.dispatch.Dispatcher` passes itself to them (they read the job table and the
registry). They are never cached; the job tools
return the job's own result as it is.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, Field

from tools_server import __version__
from tools_server.core import hardware, settings
from tools_server.core.registry import ToolSpec
from tools_server.core.results import OpenResult, ToolResult
from tools_server.core.waits import WAIT_S_DEFAULT, WaitSeconds

if TYPE_CHECKING:
    from tools_server.core.dispatch import Dispatcher


def _server_tool(
    name: str,
    fn: Any,
    model: type[BaseModel],
    result: type[BaseModel],
    *,
    passthrough: bool = True,
    job_answer: bool = False,
    **flags: bool,
) -> ToolSpec:
    """``result``: the declared result type, which ``fn`` returns. ``passthrough``: the result is sent without
    provenance (the job tools); ``job_answer``: it is another tool's result (``job_wait``: the job's own,
    already in the form the server sends) or the answer of a job still running."""
    return ToolSpec(
        name=name,
        fn=fn,
        input_model=model,
        description=" ".join((fn.__doc__ or "").split()),
        resource="instant",
        read_only=flags.get("read_only", True),
        destructive=flags.get("destructive", False),
        idempotent=True,
        open_world=False,
        version="1",
        time_limit_s=60.0,
        memory_limit_mb=None,
        cacheable=False,
        engines=(),
        module=__name__,
        context_param=None,
        server_tool=True,
        extra={"passthrough": passthrough, "job_answer": job_answer},
        output_model=result,
    )


class NoInput(BaseModel):
    pass


class SystemInfo(ToolResult):
    server_version: str
    python: str
    platform: str
    cpu_cores: int
    memory_total_mb: int | None
    gpus: list[dict[str, Any]]
    cuda_available: bool
    cuda_visible_devices: str | None
    engines: dict[str, dict[str, Any]]
    domains: list[str]
    plugin_errors: list[dict[str, str]] = Field(
        description="Plugins that failed to load and were skipped: source, plugin, error."
    )
    workdir: str
    cache_dir: str
    weights_dir: str


class JobCancelResult(ToolResult):
    job_id: str
    status: str
    cancelled: bool


class JobList(ToolResult):
    jobs: list[dict[str, Any]]


async def system_info(args: NoInput, dispatcher: Dispatcher) -> SystemInfo:
    """Describe the machine the tools run on: CPU cores, memory (MiB), GPUs and CUDA presence, which
    compute engines are installed (with versions), the loaded tool domains and any plugin that failed to
    load, and the work and cache directories. Call it first to decide what is affordable (DFT on a GPU,
    ESMFold memory, MD length)."""
    gpus = hardware.gpus()
    registry = dispatcher.registry
    return SystemInfo(
        server_version=__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        cpu_cores=hardware.cpu_count(),
        memory_total_mb=hardware.memory_total_mb(),
        gpus=gpus,
        cuda_available=bool(gpus),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        engines=registry.engine_table(),
        domains=sorted(registry.domains),
        plugin_errors=registry.load_errors,
        workdir=str(settings.workdir()),
        cache_dir=str(settings.cache_dir()),
        weights_dir=str(settings.weights_dir()),
    )


class JobWaitInput(BaseModel):
    job_id: str = Field(
        description="The job_id returned by a tool that answered {status: queued} or {status: running}."
    )
    wait_s: WaitSeconds = WAIT_S_DEFAULT


async def job_wait(args: JobWaitInput, dispatcher: Dispatcher) -> dict[str, Any]:
    """Wait up to wait_s seconds for a job and return its result, or {status, job_id, progress, eta_s} with
    status queued or running while it is not finished. Works for jobs started before a server restart
    (their stored result)."""
    job = await anyio.to_thread.run_sync(dispatcher.jobs.lookup, args.job_id)  # may read its record
    return await dispatcher.await_job(job, args.wait_s)


class JobIdInput(BaseModel):
    job_id: str = Field(description="The job to cancel.")


async def job_cancel(args: JobIdInput, dispatcher: Dispatcher) -> JobCancelResult:
    """Cancel a queued or running job; its worker process and everything it started are killed."""
    job = await anyio.to_thread.run_sync(dispatcher.jobs.lookup, args.job_id)  # may read its record
    if job.done:
        note = "The job had already finished."
        return JobCancelResult(job_id=args.job_id, status=job.status, cancelled=False, note=note)
    await anyio.to_thread.run_sync(dispatcher.jobs.cancel, args.job_id)
    await dispatcher.jobs.wait(job, 10)
    return JobCancelResult(job_id=args.job_id, status=job.status, cancelled=job.status == "cancelled")


async def jobs(args: NoInput, dispatcher: Dispatcher) -> JobList:
    """List recent jobs (newest first) with status, progress and timing; results are fetched with job_wait."""
    # the records are read off the event loop
    listing = await anyio.to_thread.run_sync(dispatcher.jobs.listing)
    return JobList(**listing)


SERVER_TOOLS: tuple[ToolSpec, ...] = (
    _server_tool("system_info", system_info, NoInput, SystemInfo, passthrough=False),
    _server_tool("job_wait", job_wait, JobWaitInput, OpenResult, job_answer=True),
    _server_tool("job_cancel", job_cancel, JobIdInput, JobCancelResult, read_only=False, destructive=True),
    _server_tool("jobs", jobs, NoInput, JobList),
)
