"""Latency of spu tools over stdio against a bare MCPServer echo server, measured in the same run.

    .venv/bin/python bench/mcp_overhead.py [--calls 200] [--baseline DIR]

Prints p50 and p95 per call for: the bare SDK echo server (baseline), an instant spu tool (bench_echo,
and system_info), and a trivial `cpu` job that runs in a worker process (bench_noop_job), each with its
ratio to the baseline. The servers run side by side and the calls are interleaved (one call to each in
turn), so a shared machine's changing load falls on every case alike; the ratios are of the medians.
With ``--baseline DIR`` (a checkout of an earlier commit: ``git worktree add DIR <commit>``), a server of
that checkout runs beside them with the same three calls, and its job dispatch overhead is printed too:
old and new code measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent


async def measure(rows: list[tuple[str, StdioServerParameters, str, dict]], calls: int) -> list[list[float]]:
    """Open one session per row, then call each row's tool in turn ``calls`` times."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for _, params, tool, args in rows:
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            for _ in range(5):  # warm-up: first job starts a worker process
                await session.call_tool(tool, args)
            sessions.append(session)
        times: list[list[float]] = [[] for _ in rows]
        for _ in range(calls):
            for k, (session, (_, _, tool, args)) in enumerate(zip(sessions, rows, strict=True)):
                start = time.perf_counter()
                result = await session.call_tool(tool, args)
                times[k].append(time.perf_counter() - start)
                assert not result.is_error, result.content
        return times


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit to compare with")
    opts = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spu-bench-")
    env = {
        **os.environ,
        "SPU_WORKDIR": work,
        "SPU_CACHE_DIR": work + "/cache",
        "SPU_TOOL_MODULES": "_bench_tools",
        # no warm-up imports in the background while dispatch is measured (bench/warm.py measures them)
        "SPU_WARM_WORKERS": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    bare = StdioServerParameters(command=sys.executable, args=[str(HERE / "_bare_echo_server.py")], env=env)
    spu = StdioServerParameters(command=sys.executable, args=["-m", "spu", "serve"], env=env)
    rows = [
        ("bare MCPServer echo (baseline)", bare, "echo", {"text": "hi"}),
        ("spu instant tool (bench_echo)", spu, "bench_echo", {"text": "hi"}),
        ("spu system_info", spu, "system_info", {}),
        ("spu cpu job in a worker (bench_noop_job)", spu, "bench_noop_job", {"text": "hi"}),
    ]
    if opts.baseline is not None:
        old_env = {**env, "PYTHONPATH": os.pathsep.join([str(opts.baseline.resolve()), env["PYTHONPATH"]])}
        old_env["SPU_WORKDIR"] = work + "/baseline"
        old = StdioServerParameters(
            command=sys.executable, args=["-m", "spu", "serve"], env=old_env, cwd=str(opts.baseline.resolve())
        )
        rows += [  # the same three calls in the same order, so each server sees the same sequence
            ("earlier checkout: instant tool", old, "bench_echo", {"text": "hi"}),
            ("earlier checkout: system_info", old, "system_info", {}),
            ("earlier checkout: cpu job", old, "bench_noop_job", {"text": "hi"}),
        ]
    baseline = None
    print(f"{'case':44s} {'p50 ms':>8s} {'p95 ms':>8s} {'p50/base':>9s} {'p95/base':>9s}")
    all_times = asyncio.run(measure(rows, opts.calls))
    for (label, *_), times in zip(rows, all_times, strict=True):
        p50, p95 = pct(times, 50), pct(times, 95)
        if baseline is None:
            baseline = (p50, p95)
        print(f"{label:44s} {p50:8.2f} {p95:8.2f} {p50 / baseline[0]:9.2f} {p95 / baseline[1]:9.2f}")
    job, instant = pct(all_times[3], 50), pct(all_times[1], 50)
    print(f"job dispatch overhead (cpu job p50 - instant tool p50): {job - instant:.2f} ms")
    if opts.baseline is not None:
        old_overhead = pct(all_times[6], 50) - pct(all_times[4], 50)
        print(f"earlier checkout's job dispatch overhead: {old_overhead:.2f} ms")


if __name__ == "__main__":
    main()
