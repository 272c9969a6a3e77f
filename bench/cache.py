"""Result cache: time of a cache hit against a miss on a real computation, over the real MCP client.

    .venv/bin/python bench/cache.py [--repeats 5]

The computation is an ETKDG + MMFF conformer search of a drug-size molecule (chem_conformers) and an xTB
(GFN2) optimisation (xtb_run); each miss uses a fresh cache directory, each hit repeats the same call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

IMATINIB = "Cc1ccc(NC(=O)c2ccc(CN3CCN(C)CC3)cc2)cc1Nc1nccc(-c2cccnc2)n1"
CASES = [
    ("chem_conformers", {"molecules": [IMATINIB], "n_conformers": 20}),
    ("xtb_run", {"molecules": ["CN1C=NC2=C1C(=O)N(C(=O)N2C)C"], "task": "optimize"}),
]


async def timed_calls(tool: str, args: dict, repeats: int, fresh_cache_each: bool) -> list[float]:
    times = []
    for _i in range(repeats if fresh_cache_each else 1):
        work = tempfile.mkdtemp(prefix="spu-bench-cache-")
        env = {**os.environ, "SPU_WORKDIR": work, "SPU_CACHE_DIR": os.path.join(work, "cache")}
        params = StdioServerParameters(command=sys.executable, args=["-m", "spu", "serve"], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("system_info", {})
            rounds = 1 if fresh_cache_each else repeats + 1
            for r in range(rounds):
                start = time.perf_counter()
                result = await session.call_tool(tool, {**args, "wait_s": 600})
                elapsed = time.perf_counter() - start
                if result.is_error:
                    raise SystemExit(f"{tool} failed: {result.content[0].text}")
                state = result.structured_content["provenance"]["cache"]
                if fresh_cache_each:
                    assert state == "miss"
                    times.append(elapsed)
                elif r > 0:
                    assert state == "hit"
                    times.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()
    print(f"{'tool':18s} {'miss median s':>14s} {'hit median s':>13s} {'miss/hit':>10s}")
    for tool, args in CASES:
        miss = asyncio.run(timed_calls(tool, args, opts.repeats, fresh_cache_each=True))
        hit = asyncio.run(timed_calls(tool, args, opts.repeats, fresh_cache_each=False))
        m, h = statistics.median(miss), statistics.median(hit)
        print(f"{tool:18s} {m:14.3f} {h:13.4f} {m / h:10.0f}")


if __name__ == "__main__":
    main()
