"""Tools every server has: system_info and the job tools (job_wait, job_cancel, jobs).

The job tools are coroutines: the dispatcher passes itself as their second argument.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import sys
from importlib import metadata
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from tools_server import __version__, hardware, settings
from tools_server.registry import tool

if TYPE_CHECKING:
    from tools_server.dispatch import Dispatcher

#: import name -> distribution name, for the engines system_info reports.
ENGINES: dict[str, str] = {
    "rdkit": "rdkit",
    "xtb": "xtb",
    "tblite": "tblite",
    "pyscf": "pyscf",
    "gpu4pyscf": "gpu4pyscf-cuda12x",
    "geometric": "geometric",
    "openmm": "openmm",
    "pdbfixer": "pdbfixer",
    "mdtraj": "mdtraj",
    "torch": "torch",
    "esm": "fair-esm",
    "transformers": "transformers",
    "Bio": "biopython",
    "abnumber": "abnumber",
    "trafilatura": "trafilatura",
    "pypdfium2": "pypdfium2",
    "distributed": "distributed",
}


@functools.cache
def engine_table() -> dict[str, dict[str, Any]]:
    """Which engines are importable, and their versions, found without importing them (once per process)."""
    out = {}
    for module, dist in ENGINES.items():
        present = importlib.util.find_spec(module) is not None
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = None
        out[module] = {"importable": present, "version": version if present else None}
    return out


class NoInput(BaseModel):
    pass


@tool(name="system_info", resource="instant", read_only=True, idempotent=True, cacheable=False)
def system_info(args: NoInput) -> dict:
    """Describe the machine the tools run on: CPU cores, memory (MiB), GPUs and CUDA presence, which
    compute engines are installed (with versions), and the work and cache directories. Call it first to
    decide what is affordable (DFT on a GPU, ESMFold memory, MD length)."""
    gpus = hardware.gpus()
    return {
        "server_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_cores": hardware.cpu_count(),
        "memory_total_mb": hardware.memory_total_mb(),
        "gpus": gpus,
        "cuda_available": bool(gpus),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "engines": engine_table(),
        "workdir": str(settings.workdir()),
        "cache_dir": str(settings.cache_dir()),
        "weights_dir": str(settings.weights_dir()),
    }


class JobWaitInput(BaseModel):
    job_id: str = Field(description="The job_id returned by a tool that answered {status: running}.")
    wait_s: float = Field(40, ge=0, le=600, description="Seconds to wait before answering with the status.")


@tool(name="job_wait", resource="instant", read_only=True, idempotent=True, cacheable=False)
async def job_wait(args: JobWaitInput, dispatcher: Dispatcher) -> dict:
    """Wait up to wait_s seconds for a job and return its result, or {status: running, progress, eta_s}
    if it is still running. Works for jobs started before a server restart (their stored result)."""
    found = dispatcher.jobs.lookup(args.job_id)
    if isinstance(found, dict):
        return dispatcher.job_outcome(found)
    return await dispatcher.await_job(found, args.wait_s)


class JobIdInput(BaseModel):
    job_id: str = Field(description="The job to cancel.")


@tool(
    name="job_cancel", resource="instant", read_only=False, destructive=True, idempotent=True, cacheable=False
)
async def job_cancel(args: JobIdInput, dispatcher: Dispatcher) -> dict:
    """Cancel a queued or running job; its worker process and everything it started are killed."""
    found = dispatcher.jobs.cancel(args.job_id)
    if isinstance(found, dict):
        return {
            "job_id": args.job_id,
            "status": found["status"],
            "cancelled": False,
            "note": "The job had already finished.",
        }
    await dispatcher.jobs.wait(found, 10)
    return {"job_id": args.job_id, "status": found.status, "cancelled": found.status == "cancelled"}


@tool(name="jobs", resource="instant", read_only=True, idempotent=True, cacheable=False)
async def jobs(args: NoInput, dispatcher: Dispatcher) -> dict:
    """List recent jobs (newest first) with status, progress and timing; results are fetched with job_wait."""
    return {"jobs": dispatcher.jobs.listing()}
