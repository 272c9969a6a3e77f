"""A long-lived worker process: reads jobs as JSON lines on stdin, answers on a private pipe.

Started by the local executor as ``python -m tools_server.core.worker`` in its own session (process group), so
a timeout or cancellation kills the worker and everything it started. Engines print to stdout freely:
the protocol stream is a duplicate of the original stdout, and fd 1 is pointed at stderr, which the
executor keeps in a log file whose tail explains a crash.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

from tools_server.core.errors import ToolError, storage_error


def die_with_parent() -> None:
    """End this worker and everything it started when the server goes, whatever the job is doing.

    On Linux the kernel sends SIGKILL when the parent dies (``PR_SET_PDEATHSIG``; only when the server
    started us from its main thread, since the signal follows the spawning thread). A heartbeat thread
    also checks every second that the parent is still the server (a dead server's workers are re-parented)
    and then kills the worker's process group, which takes the engine's own child processes along.
    """
    parent = int(os.environ.get("SPU_WORKER_PARENT") or os.getppid())
    if sys.platform == "linux" and os.environ.get("SPU_WORKER_PDEATHSIG") == "1":
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)  # the server died before the signal was armed

    def heartbeat() -> None:
        import signal

        while os.getppid() == parent:
            time.sleep(1.0)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=heartbeat, name="parent-heartbeat", daemon=True).start()


def main() -> None:
    die_with_parent()
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr)
    from tools_server.core.context import artifact_dir_for
    from tools_server.core.execute import resolve, run_tool
    from tools_server.core.fanout import use_cluster

    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        line = json.dumps(message, default=str) + "\n"
        with lock:  # the warm-up thread reports too
            proto.write(line)
            proto.flush()

    send({"type": "ready", "pid": os.getpid()})
    warm = [m for m in os.environ.get("SPU_WORKER_WARM", "").split(",") if m]
    idle = threading.Event()  # set while no job runs
    idle.set()
    jobs_seen = [0]
    if warm:  # after "ready", and only while no job runs: warming must not slow a job down
        warmer = threading.Thread(target=_warm, args=(warm, send, idle, jobs_seen), daemon=True)
        warmer.start()
    specs: dict[tuple[str, str], Any] = {}
    for line in sys.stdin:
        job = json.loads(line)
        job_id = job["job_id"]
        idle.clear()
        jobs_seen[0] += 1
        print(f"--- job {job_id} ({job['tool']})", file=sys.stderr, flush=True)

        def progress(fraction: float, message: str | None, _job_id: str = job_id) -> None:
            send({"type": "progress", "job_id": _job_id, "fraction": fraction, "message": message})

        try:
            spec = specs.get((job["tool"], job["module"]))
            if spec is None:
                spec = specs[job["tool"], job["module"]] = resolve(job["tool"], job["module"])
            cluster = job.get("cluster")  # a Dask job's batch may fan out (the artifact folder is for that)
            artifacts = str(artifact_dir_for(job["tool"], job_id)) if cluster else None
            with use_cluster(cluster, artifacts, job.get("cancel_key"), job.get("items_memory_limit_mb")):
                out = run_tool(
                    spec,
                    job["params"],
                    job_id,
                    progress_sink=progress,
                    threads=job["threads"],
                    gpu=job["gpu"],
                    memory_limit_mb=job.get("memory_limit_mb"),
                )
            send({"type": "result", "job_id": job_id, **out})
        except ToolError as exc:
            send({"type": "error", "job_id": job_id, "error": exc.to_dict()})
        except MemoryError:
            send(
                {
                    "type": "error",
                    "job_id": job_id,
                    "error": ToolError(
                        "engine_crashed", "The job ran out of memory inside the worker."
                    ).to_dict(),
                }
            )
        except Exception as exc:
            # a full disk, a quota or a read-only folder is the disk's fault, not a bug in the tool
            error = storage_error(exc) if isinstance(exc, OSError) else None
            if error is None:
                tb = traceback.format_exc()
                print(tb, file=sys.stderr, flush=True)
                error = ToolError("internal_error", f"{type(exc).__name__}: {exc}", traceback_tail=tb[-2000:])
            send({"type": "error", "job_id": job_id, "error": error.to_dict()})
        finally:
            idle.set()


def _warm(modules: list[str], send: Any, idle: threading.Event, jobs_seen: list[int]) -> None:
    """Import the engines of the tools routed to this worker, so their first call does not pay for it,
    one module at a time and only while the worker has no job; reports what each import took (a missing
    engine is skipped)."""
    import time

    took: dict[str, float | None] = {}
    for name in modules:
        while True:  # wait for a quiet moment: no job running, and none started in the last 0.3 s
            idle.wait()
            seen = jobs_seen[0]
            time.sleep(0.3)
            if idle.is_set() and jobs_seen[0] == seen:
                break
        start = time.perf_counter()
        try:
            importlib.import_module(name)
            took[name] = round(time.perf_counter() - start, 3)
        except Exception:  # an engine that is not installed, or fails to import, is the tool's business
            took[name] = None
    print(f"--- warm imports: {took}", file=sys.stderr, flush=True)
    send({"type": "warm", "imported": took})


if __name__ == "__main__":
    main()
