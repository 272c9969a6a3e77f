"""The cluster executor: the same jobs on a Dask ``distributed`` cluster (which reaches SLURM/PBS through
dask-jobqueue); no progress reports, and a timed-out task is cancelled rather than killed.

CPU reservations: a job gets the cores its tool declares (``threads=``), capped at the threads of the Dask
worker that runs it (``"all"`` is all of them). Dask runs as many tasks at once on a worker as it has
threads, whatever each task uses; start the workers with a ``cores`` resource (``dask worker
--nthreads 8 --resources cores=8``) and each job also reserves its cores there, so a worker never runs more
threads than it has cores.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tools_server.core.errors import ToolError
from tools_server.core.jobs.model import Finisher, Job


def _dask_task(
    tool: str, module: str, params: dict[str, Any], job_id: str, threads: int | str
) -> dict[str, Any]:
    from distributed import get_worker

    from tools_server.core.execute import resolve, run_tool

    try:
        available = max(1, int(get_worker().state.nthreads))
    except (ValueError, AttributeError):  # not inside a Dask worker
        available = 1
    cores = available if threads == "all" else max(1, min(int(threads), available))
    try:
        return run_tool(resolve(tool, module), params, job_id, threads=cores)
    except ToolError as exc:
        return {"error": exc.to_dict()}


class DaskExecutor:
    """Jobs on a Dask ``distributed`` cluster: ``DaskExecutor(address)`` or ``DaskExecutor(client=...)``."""

    def __init__(self, address: str | None = None, client: Any = None) -> None:
        from distributed import Client

        self.client = client or Client(address)
        workers = self.client.scheduler_info().get("workers", {}).values()
        declared = [w.get("resources", {}).get("cores") for w in workers]
        #: the most ``cores`` one worker declares, or None when the workers declare none
        self.max_cores: int | None = max((int(c) for c in declared if c), default=None)

    def submit(self, job: Job, finish: Finisher) -> None:
        job.device = "dask"
        extra: dict[str, Any] = {}
        if self.max_cores:
            wanted = self.max_cores if job.threads == "all" else min(int(job.threads), self.max_cores)
            extra["resources"] = {"cores": wanted}
        future = self.client.submit(
            _dask_task,
            job.tool,
            job.module,
            job.params,
            job.job_id,
            job.threads,
            pure=False,
            key=f"spu-{job.job_id}",
            **extra,
        )
        job.status = "running"
        job.started = time.time()
        job._notify()
        job._future = future  # type: ignore[attr-defined]

        def watch() -> None:
            from distributed import TimeoutError as DaskTimeout

            deadline = time.monotonic() + job.time_limit_s
            while True:
                try:
                    finish(job, future.result(timeout=0.2))
                    return
                except (DaskTimeout, TimeoutError):
                    if job.cancel_requested or time.monotonic() > deadline:
                        future.cancel()
                        code = "cancelled" if job.cancel_requested else "timeout"
                        finish(job, {"error": ToolError(code, f"The Dask task was {code}.").to_dict()})
                        return
                except Exception as exc:
                    finish(job, {"error": ToolError("engine_crashed", f"Dask task failed: {exc}").to_dict()})
                    return

        threading.Thread(target=watch, daemon=True).start()

    def cancel(self, job: Job) -> None:
        job.cancel_requested = True

    def shutdown(self) -> None:
        self.client.close()
