"""First-call latency with and without warm workers, over MCP stdio.

    .venv/bin/python bench/warm.py [--runs 2] [--settle 30]

For each setting (``SPU_WARM_WORKERS=0``: workers start on the first job; ``1``: they start after start-up
and import their engines in the background) it starts ``spu serve``, waits until the workers have finished
their warm-up imports (or ``--settle`` seconds for the cold setting, the same idle time), then times the
first call of: a DFT energy (PySCF, water HF/STO-3G: the engine's import dominates), an xTB single point
and an ESM-2 embedding (``protein_embed`` on a randomly initialised 2-layer ESM-2 written in fair-esm's
format, so the first call pays what a real one pays: importing torch and esm and loading a checkpoint).
It also prints what each warm-up import took in the worker.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

TINY_ESM2 = "esm2_t2_bench_random"
CALLS = [
    ("dft_run", {"molecule": "O", "functional": "HF", "basis": "sto-3g", "device": "cpu"}),
    ("xtb_run", {"molecules": ["CN1C=NC2=C1C(=O)N(C(=O)N2C)C"]}),
    ("protein_embed", {"sequences": ["MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ"], "model": TINY_ESM2}),
]


def _warm_report(work: str) -> dict[str, float | None] | None:
    for path in Path(work, "workers").glob("cpu-0-*.log"):
        match = re.search(r"--- warm imports: (\{.*\})", path.read_text(errors="replace"))
        if match:
            return ast.literal_eval(match.group(1))
    return None


async def _first_calls(warm: bool, settle: float, weights: str) -> tuple[dict[str, float], dict | None]:
    work = tempfile.mkdtemp(prefix="spu-bench-warm-")
    env = {
        **os.environ,
        "SPU_WORKDIR": work,
        "SPU_CACHE_DIR": work + "/cache",
        "SPU_WARM_WORKERS": "1" if warm else "0",
        "SPU_WEIGHTS_DIR": weights,
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "spu", "serve"], env=env)
    out: dict[str, float] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline and not (warm and _warm_report(work)):
            await asyncio.sleep(0.25)
        for name, args in CALLS:
            start = time.perf_counter()
            res = await session.call_tool(name, {**args, "wait_s": 300})
            out[name] = time.perf_counter() - start
            if res.is_error:
                raise RuntimeError(" ".join(getattr(c, "text", "") for c in res.content))
    return out, _warm_report(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--settle", type=float, default=60.0)
    opts = parser.parse_args()
    rows: dict[str, dict[str, list[float]]] = {"cold": {}, "warm": {}}
    report = None
    weights = tempfile.mkdtemp(prefix="spu-bench-weights-")
    # in a child process: this one must not pay (or hide) the torch import it measures
    script = (
        "import sys; from pathlib import Path; from tools_server.protein.weights import save_random_esm2; "
        "save_random_esm2(Path(sys.argv[1]))"
    )
    subprocess.run([sys.executable, "-c", script, f"{weights}/esm/{TINY_ESM2}.pt"], check=True)
    for _ in range(opts.runs):
        for label in ("cold", "warm"):
            times, imported = asyncio.run(_first_calls(label == "warm", opts.settle, weights))
            report = imported or report
            for name, t in times.items():
                rows[label].setdefault(name, []).append(t)
    heads = ("cold min", "cold med", "warm min", "warm med", "warm/cold")
    print(f"{'first call':14s} " + " ".join(f"{h:>9s}" for h in heads))
    for name, _ in CALLS:
        cold, warm = rows["cold"][name], rows["warm"][name]
        print(
            f"{name:14s} {min(cold):9.2f} {statistics.median(cold):9.2f} {min(warm):9.2f} "
            f"{statistics.median(warm):9.2f} {statistics.median(warm) / statistics.median(cold):9.2f}"
        )
    if report:
        print("warm-up imports in a CPU worker (s, None = not installed): " + str(report))


if __name__ == "__main__":
    main()
