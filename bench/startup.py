"""Start-up time: from launching the server process to its answer to ``initialize``, over stdio.

    .venv/bin/python bench/startup.py [--runs 7]

Measures, in the same run and alternating between them, a bare MCPServer from the official SDK with one
echo tool (the baseline) and ``spu serve``; prints min and median of each, their ratio, and whether
``spu serve`` met the 0.5 s target at its min and median. A second timing per run, ``first call``, adds the
first ``tools/list`` after ``initialize`` (what a client does next).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
TARGET_S = 0.5


async def _once(params: StdioServerParameters) -> tuple[float, float]:
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ready = time.perf_counter() - start
        await session.list_tools()
        listed = time.perf_counter() - start
    return ready, listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    opts = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spu-bench-startup-")
    env = {**os.environ, "SPU_WORKDIR": work, "SPU_CACHE_DIR": work + "/cache"}
    cases = {
        "bare MCPServer echo (baseline)": StdioServerParameters(
            command=sys.executable, args=[str(HERE / "_bare_echo_server.py")], env=env
        ),
        "spu serve": StdioServerParameters(command=sys.executable, args=["-m", "spu", "serve"], env=env),
    }
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
    for params in cases.values():  # one unmeasured start each: the OS file cache
        asyncio.run(_once(params))
    for _ in range(opts.runs):
        for label, params in cases.items():
            times[label].append(asyncio.run(_once(params)))
    heads = ("init min", "init med", "list min", "list med", "med/base")
    print(f"{'case':32s} " + " ".join(f"{h:>9s}" for h in heads))
    base = None
    for label, rows in times.items():
        ready = [r for r, _ in rows]
        listed = [lst for _, lst in rows]
        med = statistics.median(ready)
        base = base or med
        print(
            f"{label:32s} {min(ready):9.3f} {med:9.3f} {min(listed):9.3f} {statistics.median(listed):9.3f} "
            f"{med / base:9.2f}"
        )
    spu = [r for r, _ in times["spu serve"]]
    print(
        f"spu serve answers initialize in {min(spu):.3f} s (min) / {statistics.median(spu):.3f} s (median) "
        f"of {opts.runs} runs; target {TARGET_S} s: "
        + ("met" if statistics.median(spu) < TARGET_S else "NOT met")
    )


if __name__ == "__main__":
    main()
