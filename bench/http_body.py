"""What one large request body costs ``spu serve --transport http``: the server's peak memory and the time.

    .venv/bin/python bench/http_body.py [--mib 15] [--requests 5] [--baseline DIR]

Starts the HTTP server, opens an MCP session and posts ``tools/call`` frames whose one string argument
makes the body ``--mib`` MiB (the frame limit is 16 MiB), to a tool name no server has, so the request
ends once the body is read, checked and parsed and the reply is a small error. For every request: the
server's resident memory just before it, its peak while serving it (Linux ``VmHWM``, reset before each
request through ``/proc/PID/clear_refs``) and the wall time. With ``--baseline DIR`` (a checkout of an
earlier commit: ``git worktree add DIR <commit>``) a server of that checkout runs beside this one and the
requests alternate between the two, so a shared machine's load falls on both alike; the last lines are
the ratios this checkout / baseline of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


class Server:
    """One ``spu serve --transport http`` of ``checkout``, with an MCP session opened."""

    def __init__(self, checkout: Path, work: Path, token: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = {
            **os.environ,
            "SPU_WORKDIR": str(work),
            "SPU_CACHE_DIR": str(work / "cache"),
            "SPU_WARM_WORKERS": "0",
            "PYTHONPATH": str(checkout),
            # large blocks come from mmap and go back to the system when freed, so the resident size
            # follows what the server holds (else glibc keeps freed blocks and a peak hides in them)
            "MALLOC_MMAP_THRESHOLD_": "65536",
        }
        command = [sys.executable, "-m", "spu", "serve", "--transport", "http", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*command, "--token", token],
            cwd=checkout,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.headers = {**HEADERS, "authorization": f"Bearer {token}"}
        self.client = httpx.Client(timeout=120)
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                self.client.get(self.url, timeout=0.5)
                break
            time.sleep(0.1)
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
        reply = self.client.post(self.url, json=init, headers=self.headers)
        reply.raise_for_status()
        self.headers["mcp-session-id"] = reply.headers["mcp-session-id"]
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        self.client.post(self.url, content=note, headers=self.headers)

    def post(self, body: bytes) -> tuple[float, float, float] | None:
        """(resident MiB before, peak MiB above it while serving ``body``, seconds), or None when the
        server refused the body as too large (before its body limit was set to the 16 MiB frame limit,
        the SDK's own 4 MiB limit answered)."""
        pid = self.proc.pid
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = _kib(pid, "VmRSS")
        start = time.perf_counter()
        reply = self.client.post(self.url, content=body, headers=self.headers)
        took = time.perf_counter() - start
        if reply.status_code == 413:
            return None
        assert reply.status_code == 200 and b"bench_absent" in reply.content, reply.text[:300]
        return before / 1024, (_kib(pid, "VmHWM") - before) / 1024, took

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def frame(mib: float, i: int) -> bytes:
    head = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "bench_absent"}}
    text = json.dumps(head)[:-2] + ', "arguments": {"text": "'
    pad = int(mib * 2**20) - len(text) - 4
    return (text + "x" * pad + '"}}}').encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=15.0)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit to compare with")
    opts = parser.parse_args()
    token = secrets.token_urlsafe(32)
    rows = [("this checkout", ROOT)]
    if opts.baseline is not None:
        rows.append(("baseline", opts.baseline.resolve()))
    with tempfile.TemporaryDirectory(prefix="spu-bench-") as tmp:
        servers = [Server(path, Path(tmp) / label.replace(" ", "-"), token) for label, path in rows]
        try:
            body = frame(opts.mib, 1)
            for server in servers:  # warm-up: first parse of each kind
                server.post(body)
            figures: list[list[tuple[float, float, float] | None]] = [[] for _ in servers]
            for i in range(opts.requests):
                for k, server in enumerate(servers):
                    figures[k].append(server.post(frame(opts.mib, i + 2)))
        finally:
            for server in servers:
                server.close()
    print(f"{len(body) / 2**20:.1f} MiB body, {opts.requests} requests each (medians)")
    print(f"{'server':16s} {'resident MiB':>13s} {'peak above MiB':>15s} {'ms per request':>15s}")
    medians = []
    for (label, _), rows_of in zip(rows, figures, strict=True):
        if None in rows_of:
            print(f"{label:16s} refused the body: HTTP 413 (compare with --mib 3.5)")
            continue
        med = [statistics.median(col) for col in zip(*rows_of, strict=True)]
        medians.append(med)
        print(f"{label:16s} {med[0]:13.1f} {med[1]:15.1f} {med[2] * 1e3:15.1f}")
    if len(medians) == 2:
        new, old = medians
        print(f"peak above resident: {new[1] / old[1]:.2f}x baseline; time: {new[2] / old[2]:.2f}x baseline")


if __name__ == "__main__":
    main()
