"""Acknowledged jobs after a SIGKILL: how many records are on disk, and what ``job_wait`` answers after a
restart.

    .venv/bin/python bench/durability.py [--jobs 1000] [--drop-caches]

Starts ``spu serve`` over stdio, sends ``--jobs`` ``xtb_run`` calls with ``wait_s: 0`` (distinct
molecules, so each is a job that waits for one of the CPU slots), reads every acknowledgement (a job id),
then kills the server with SIGKILL. With ``--drop-caches`` (root only) it then runs
``echo 3 > /proc/sys/vm/drop_caches``: the kernel drops clean pages only, so what a killed process wrote
stays readable; a power cut that loses written but unsynced data is what the ``lost`` answer for a
missing record covers. It counts the job
records on disk, restarts the server and calls ``job_wait`` on every acknowledged id, and prints how many
ids resolved to each status (``job_not_found`` must be 0).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "bench-durability", "version": "1"},
}


class Server:
    """``spu serve`` over stdio, driven with raw frames so many calls can be in flight at once."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spu", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.buf = b""
        self.replies: dict[int, dict[str, Any]] = {}
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        self.wait_for([0])
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def call_all(self, calls: list[tuple[int, str, dict[str, Any]]]) -> None:
        """Send the calls from a thread while replies are read (else both pipes fill and both sides wait)."""
        frames = [
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}
            for rid, tool, args in calls
        ]
        sender = threading.Thread(target=lambda: [self.send(f) for f in frames], daemon=True)
        sender.start()
        self.wait_for([rid for rid, _, _ in calls])
        sender.join()

    def wait_for(self, ids: list[int], timeout: float = 600) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        missing = set(ids) - set(self.replies)
        while missing:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"{len(missing)} replies missing")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError("the server closed its output")
            self.buf += chunk
            *lines, self.buf = self.buf.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "id" in message:
                    self.replies[message["id"]] = message
                    missing.discard(message["id"])

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


def _molecule(i: int) -> str:
    """A distinct molecule per call (an amino ether), so no two calls share a cache entry."""
    return "C" * (1 + i % 25) + "O" + "C" * (i // 25) + "N"


def _outcome(reply: dict[str, Any]) -> str:
    result = reply.get("result") or {}
    structured = result.get("structuredContent") or {}
    if result.get("isError"):
        error = structured.get("error") or {}
        status = (error.get("details") or {}).get("status")
        return status or error.get("code") or "error"
    return structured.get("status") or "done"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache after the kill")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spu-bench-durability-"))
    try:
        run(work, opts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, opts: argparse.Namespace) -> None:
    env = {**os.environ, "SPU_WORKDIR": str(work), "SPU_CACHE_DIR": str(work / "cache")}
    server = Server(env)
    started = time.perf_counter()
    ids = list(range(1, opts.jobs + 1))
    server.call_all([(i, "xtb_run", {"molecules": [_molecule(i)], "wait_s": 0}) for i in ids])
    acked_s = time.perf_counter() - started
    job_ids = []
    for i in ids:
        structured = server.replies[i]["result"].get("structuredContent") or {}
        job_ids.append(structured.get("job_id") or (structured.get("provenance") or {}).get("job_id"))
    server.kill()
    if opts.drop_caches:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    on_disk = {p.stem for p in (work / "jobs").glob("*.json")}
    recorded = sum(job_id in on_disk for job_id in job_ids)
    server = Server(env)
    try:
        waits = [(100_000 + k, "job_wait", {"job_id": j, "wait_s": 0}) for k, j in enumerate(job_ids, 1)]
        server.call_all(waits)
        answers = collections.Counter(_outcome(server.replies[rid]) for rid, _, _ in waits)
    finally:
        server.kill()
    dropped = ", page cache dropped" if opts.drop_caches else ""
    print(f"{opts.jobs} jobs acknowledged in {acked_s:.2f} s; SIGKILL{dropped}")
    print(f"records on disk for acknowledged ids: {recorded} of {len(job_ids)}")
    print("job_wait after restart: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())))


if __name__ == "__main__":
    main()
