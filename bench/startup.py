"""Start-up time: from launching the server process to its answer to ``initialize``, over stdio.

    .venv/bin/python bench/startup.py [--runs 7] [--baseline DIR] [--source]

Measures, in the same run and alternating between them, a bare MCPServer from the official SDK with one
echo tool (the baseline) and ``spu serve``; prints min and median of each, their ratio, and whether
``spu serve`` met the 0.5 s target at its min and median. A second timing per run adds the first
``tools/list`` after ``initialize`` (what a client does next), with its ratio to the baseline's (target
1.1x). ``spu serve`` runs twice per round: with the cache folder it keeps between starts (the tool list its
last start stored, as for a user's restarted server) and with an empty one (a first start, which builds the
list from the registry). With ``--baseline DIR`` (a checkout of an earlier commit), that checkout's server is
started in turn too, both ways: old and new code in the same run.

Every server runs with its modules' bytecode, as an installed package has it (pip compiles it at install):
``PYTHONDONTWRITEBYTECODE`` is dropped and ``PYTHONPYCACHEPREFIX`` names a folder of this run, which one
unmeasured start of each case fills first. Without it, a checkout used with ``PYTHONDONTWRITEBYTECODE=1``
compiles every module of ``spu serve`` from source at every start, while the SDK the bare server imports
comes compiled from its wheel: ``--source`` measures that way (compiled bytecode for nobody's checkout).
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
LIST_TARGET = 1.1


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
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit, started in turn too")
    parser.add_argument(
        "--source", action="store_true", help="keep the environment's bytecode setting (see the docstring)"
    )
    opts = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spu-bench-startup-")
    env = {**os.environ, "SPU_WORKDIR": work, "SPU_CACHE_DIR": work + "/cache"}
    if not opts.source:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = work + "/bytecode"
    spu = ["-m", "spu", "serve"]
    cases = {
        "bare MCPServer echo (baseline)": StdioServerParameters(
            command=sys.executable, args=[str(HERE / "_bare_echo_server.py")], env=env
        ),
        "spu serve": StdioServerParameters(command=sys.executable, args=spu, env=env),
    }
    first_start = "spu serve, first start (empty cache folder)"
    firsts = {first_start: (env, None)}
    if opts.baseline is not None:
        root = str(opts.baseline.resolve())
        old = {**env, "SPU_CACHE_DIR": work + "/cache-baseline"}
        old["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        cases["baseline checkout: spu serve"] = StdioServerParameters(
            command=sys.executable, args=spu, env=old, cwd=root
        )
        firsts["baseline checkout: first start"] = (old, root)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in [*cases, *firsts]}
    for params in cases.values():  # one unmeasured start each: the OS file cache, the bytecode
        asyncio.run(_once(params))
    for k, (base_env, cwd) in enumerate(firsts.values()):  # a first start imports every domain's modules
        empty = {**base_env, "SPU_CACHE_DIR": f"{work}/empty-cache-warm-{k}"}
        asyncio.run(_once(StdioServerParameters(command=sys.executable, args=spu, env=empty, cwd=cwd)))
    for run in range(opts.runs):
        for label, params in cases.items():
            times[label].append(asyncio.run(_once(params)))
        for k, (label, (base_env, cwd)) in enumerate(firsts.items()):
            empty = {**base_env, "SPU_CACHE_DIR": f"{work}/empty-cache-{run}-{k}"}
            params = StdioServerParameters(command=sys.executable, args=spu, env=empty, cwd=cwd)
            times[label].append(asyncio.run(_once(params)))
    heads = ("init min", "init med", "list min", "list med", "list/base")
    print(f"{'case':44s} " + " ".join(f"{h:>9s}" for h in heads))
    base = None
    for label, rows in times.items():
        ready, lists = [r for r, _ in rows], [lst for _, lst in rows]
        listed = statistics.median(lists)
        base = base or listed
        print(
            f"{label:44s} {min(ready):9.3f} {statistics.median(ready):9.3f} {min(lists):9.3f} "
            f"{listed:9.3f} {listed / base:9.2f}"
        )
    spu_times = [r for r, _ in times["spu serve"]]
    median = statistics.median(spu_times)
    print(
        f"spu serve answers initialize in {min(spu_times):.3f} s (min) / {median:.3f} s "
        f"(median) of {opts.runs} runs; target {TARGET_S} s: " + ("met" if median < TARGET_S else "NOT met")
    )
    for label in ("spu serve", first_start):
        ratio = statistics.median(lst for _, lst in times[label]) / base
        print(
            f"first tools/list, {label}: {ratio:.2f}x the bare server's (median); target {LIST_TARGET}x: "
            + ("met" if ratio <= LIST_TARGET else "NOT met")
        )


if __name__ == "__main__":
    main()
