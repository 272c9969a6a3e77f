"""Test-only tools for CPU reservations and warm workers (loaded through SPU_TOOL_MODULES)."""

from __future__ import annotations

import os
import sys
import time

from pydantic import BaseModel, Field

from tools_server.core.context import ToolContext
from tools_server.core.registry import tool


class HoldInput(BaseModel):
    seconds: float = Field(0.6, ge=0, le=30)
    tag: str = ""
    n: int = Field(1, ge=1, description="how many items: the reservation of perf_batch depends on it")
    meet_dir: str = Field("", description="a directory where jobs leave their tag and look for another's")
    meet: str = Field("", description="the tag of a job this one waits (up to 30 s) to see running")


def _hold(args: HoldInput, ctx: ToolContext) -> dict:
    start = time.time()
    met = None
    if args.meet_dir:
        here = os.path.join(args.meet_dir, args.tag)
        open(here, "w").close()
        other = os.path.join(args.meet_dir, args.meet)
        deadline = time.monotonic() + 30
        while not (met := os.path.exists(other)) and time.monotonic() < deadline:
            time.sleep(0.02)
    time.sleep(args.seconds)
    out = {"threads": ctx.threads, "start": start, "end": time.time(), "pid": os.getpid(), "tag": args.tag}
    return {**out, "met": met}


@tool(name="perf_single", resource="cpu", cacheable=False)
def perf_single(args: HoldInput, ctx: ToolContext) -> dict:
    """Hold one core for a while; returns ctx.threads and when it ran."""
    return _hold(args, ctx)


@tool(name="perf_all", resource="cpu", cacheable=False, threads="all")
def perf_all(args: HoldInput, ctx: ToolContext) -> dict:
    """Hold every core for a while; returns ctx.threads and when it ran."""
    return _hold(args, ctx)


@tool(name="perf_three", resource="cpu", cacheable=False, threads=3)
def perf_three(args: HoldInput, ctx: ToolContext) -> dict:
    """Ask for three cores; returns ctx.threads and when it ran."""
    return _hold(args, ctx)


@tool(
    name="perf_batch",
    resource="cpu",
    cacheable=False,
    threads=lambda args: "single" if args.n == 1 else "all",
)
def perf_batch(args: HoldInput, ctx: ToolContext) -> dict:
    """One core for one item, every core for a batch."""
    return _hold(args, ctx)


class Empty(BaseModel):
    pass


@tool(name="perf_warm_probe", resource="cpu", cacheable=False, engines=("wave", "colorsys"))
def perf_warm_probe(args: Empty) -> dict:
    """Say which of this tool's engines were already imported in the worker before the call."""
    return {"imported": {m: m in sys.modules for m in ("wave", "colorsys")}, "pid": os.getpid()}
