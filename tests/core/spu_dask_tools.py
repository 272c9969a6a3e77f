"""Tools that exist only in the Dask tests: a batch with declared items, and a job that holds its worker.

Loaded into the server, its Dask workers and their worker processes through SPU_TOOL_MODULES.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from pydantic import BaseModel, Field

from tools_server.core.fanout import map_items
from tools_server.plugin import InputPath, ToolContext, tool


def _write_pid(path: Path) -> None:
    """Write this process's pid to ``path`` whole: a test polls for the file and reads it at once, so it
    must never see it created but still empty (CI's run on abee5db read '' once)."""
    part = path.with_name(path.name + ".part")
    part.write_text(str(os.getpid()))
    os.replace(part, path)


def _item(value: float, seconds: float, out_dir: str) -> dict:
    if value < 0:
        return {"ok": False, "value": value, "error": {"code": "invalid_input", "message": "negative"}}
    time.sleep(seconds)
    path = Path(out_dir) / f"item-{value:g}.txt"
    path.write_text(f"{value * value}\n")
    return {"ok": True, "value": value, "square": value * value, "pid": os.getpid(), "file": str(path)}


class ItemsInput(BaseModel):
    values: list[float] = Field(min_length=1, max_length=200)
    seconds: float = Field(0.0, ge=0, le=10)


@tool(name="dask_items", resource="cpu", threads="all", items="values", cacheable=True)
def items_job(args: ItemsInput, ctx: ToolContext) -> dict:
    """Square each value (a negative one is a per-item error), sleeping `seconds` per item; each item
    writes its square to an artifact."""
    jobs = [(v, args.seconds, str(ctx.artifact_dir)) for v in args.values]
    items = map_items(_item, jobs, ctx.threads, lambda d, n: ctx.progress(d / n, f"{d}/{n} items"))
    return {"items": items, "n_ok": sum(it["ok"] for it in items)}


class HoldInput(BaseModel):
    pid_file: str
    seconds: float = Field(300, ge=0, le=600)


@tool(name="dask_hold", resource="cpu", cacheable=False, time_limit_s=600)
def hold_job(args: HoldInput, ctx: ToolContext) -> dict:
    """Write this process's pid to `pid_file`, report progress, then hold the worker for `seconds`."""
    _write_pid(Path(args.pid_file))
    ctx.progress(0.5, "holding")
    time.sleep(args.seconds)
    return {"held_s": args.seconds}


class ReadInput(BaseModel):
    path: InputPath


@tool(name="dask_read", resource="cpu", cacheable=False)
def read_job(args: ReadInput) -> dict:
    """Read a file given by path: its size, SHA-256 and the path the tool was handed."""
    import hashlib

    data = Path(args.path).read_bytes()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "path": args.path}


def _held_item(value: float, pid_dir: str, seconds: float) -> dict:
    _write_pid(Path(pid_dir, f"item-{value:g}.pid"))
    time.sleep(seconds)
    return {"ok": True, "value": value}


class HeldItemsInput(BaseModel):
    values: list[float] = Field(min_length=1, max_length=20)
    pid_dir: str
    seconds: float = Field(300, ge=0, le=600)


def _held_items(args: HeldItemsInput, ctx: ToolContext) -> dict:
    jobs = [(v, args.pid_dir, args.seconds) for v in args.values]
    return {"items": map_items(_held_item, jobs, ctx.threads)}


@tool(
    name="dask_items_hold", resource="cpu", threads="all", items="values", cacheable=False, time_limit_s=600
)
def items_hold_job(args: HeldItemsInput, ctx: ToolContext) -> dict:
    """Each item writes the pid of the process running it to `pid_dir`, then sleeps `seconds`."""
    return _held_items(args, ctx)


@tool(name="dask_items_brief", resource="cpu", threads="all", items="values", cacheable=False, time_limit_s=4)
def items_brief_job(args: HeldItemsInput, ctx: ToolContext) -> dict:
    """As dask_items_hold, with a time limit of 4 s."""
    return _held_items(args, ctx)


def _crashing_item(value: float) -> dict:
    if value < 0:
        os.kill(os.getpid(), signal.SIGSEGV)  # a native crash, as an engine's can be
    return {"ok": True, "value": value}


@tool(name="dask_items_crash", resource="cpu", threads="all", items="values", cacheable=False)
def items_crash_job(args: ItemsInput, ctx: ToolContext) -> dict:
    """Items; a negative value crashes the process running it (SIGSEGV)."""
    return {"items": map_items(_crashing_item, [(v,) for v in args.values], ctx.threads)}


def _crashing_or_held_item(value: float, pid_dir: str, seconds: float) -> dict:
    if value < 0:
        time.sleep(1)  # the other items have started
        _crashing_item(value)
    return _held_item(value, pid_dir, seconds)


@tool(name="dask_items_crash_held", resource="cpu", threads="all", items="values", cacheable=False)
def items_crash_held_job(args: HeldItemsInput, ctx: ToolContext) -> dict:
    """As dask_items_hold, but a negative value crashes the process running it (SIGSEGV) after 1 s."""
    jobs = [(v, args.pid_dir, args.seconds) for v in args.values]
    return {"items": map_items(_crashing_or_held_item, jobs, ctx.threads)}


def _hog_item(value: float, megabytes: int, seconds: float) -> dict:
    block = b"\1" * (megabytes * 2**20)  # written, so every page is resident
    time.sleep(seconds)
    return {"ok": True, "value": value, "megabytes": len(block) // 2**20}


class HogInput(BaseModel):
    values: list[float] = Field(min_length=1, max_length=20)
    megabytes: int = Field(ge=0, le=4096)
    seconds: float = Field(0, ge=0, le=600)


@tool(name="dask_items_hog", resource="cpu", threads="all", items="values", cacheable=False)
def items_hog_job(args: HogInput, ctx: ToolContext) -> dict:
    """Each item holds `megabytes` of memory for `seconds`."""
    jobs = [(v, args.megabytes, args.seconds) for v in args.values]
    return {"items": map_items(_hog_item, jobs, ctx.threads)}
