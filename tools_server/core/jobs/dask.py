"""The cluster executor: the same jobs on a Dask ``distributed`` cluster (which reaches SLURM/PBS through
dask-jobqueue); no progress reports, and a timed-out task is cancelled rather than killed."""

from __future__ import annotations

import threading
import time
from typing import Any

from tools_server.core.errors import ToolError
from tools_server.core.jobs.model import Finisher, Job


def _dask_task(tool: str, module: str, params: dict[str, Any], job_id: str) -> dict[str, Any]:
    from tools_server.core.execute import resolve, run_tool

    try:
        return run_tool(resolve(tool, module), params, job_id, threads=1)
    except ToolError as exc:
        return {"error": exc.to_dict()}


class DaskExecutor:
    """Jobs on a Dask ``distributed`` cluster: ``DaskExecutor(address)`` or ``DaskExecutor(client=...)``."""

    def __init__(self, address: str | None = None, client: Any = None) -> None:
        from distributed import Client

        self.client = client or Client(address)

    def submit(self, job: Job, finish: Finisher) -> None:
        job.device = "dask"
        future = self.client.submit(
            _dask_task, job.tool, job.module, job.params, job.job_id, pure=False, key=f"spu-{job.job_id}"
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
