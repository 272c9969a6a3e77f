"""Tools that exist only in the tests, to drive the job manager: sleep, crash, allocate, count.

Loaded into the server and its workers through SPU_TOOL_MODULES.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

from pydantic import BaseModel, Field

from tools_server.core.context import ToolContext
from tools_server.core.registry import tool


class SleepInput(BaseModel):
    seconds: float = Field(ge=0, le=600)
    steps: int = Field(10, ge=1)
    tag: str = ""


@tool(name="test_sleep", resource="cpu", time_limit_s=30)
def sleep_job(args: SleepInput, ctx: ToolContext) -> dict:
    """Sleep, reporting progress in steps; returns the worker's pid and process group."""
    for i in range(args.steps):
        time.sleep(args.seconds / args.steps)
        ctx.progress((i + 1) / args.steps, f"step {i + 1}/{args.steps}")
    return {"slept_s": args.seconds, "pid": os.getpid(), "pgid": os.getpgid(0), "tag": args.tag}


class CrashInput(BaseModel):
    how: str = Field(description="segfault | abort | exit | hang_without_pipe")


@tool(name="test_crash", resource="cpu", cacheable=False)
def crash_job(args: CrashInput) -> dict:
    """Die the way native engines die."""
    print("about to crash: " + args.how, flush=True)
    if args.how == "segfault":
        ctypes.string_at(0)
    elif args.how == "abort":
        os.kill(os.getpid(), signal.SIGABRT)
    elif args.how == "hang_without_pipe":  # an engine that closes descriptors it did not open, then hangs
        os.closerange(3, 1 << 16)
        time.sleep(60)
    os._exit(3)


class AllocInput(BaseModel):
    megabytes: int = Field(ge=1)
    hold_s: float = 5
    in_child: bool = False  # allocate in a process the job starts, as an engine binary would


@tool(name="test_allocate", resource="cpu", memory_limit_mb=300, cacheable=False)
def allocate_job(args: AllocInput) -> dict:
    """Allocate and touch memory, then hold it."""
    if args.in_child:
        import subprocess
        import sys

        code = f"b = bytearray({args.megabytes} * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
        subprocess.run([sys.executable, "-c", code + f"import time; time.sleep({args.hold_s})"], check=True)
        return {"allocated_mb": args.megabytes}
    block = bytearray(args.megabytes * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(args.hold_s)
    return {"allocated_mb": args.megabytes}


class SpawnInput(BaseModel):
    seconds: float = 60


@tool(name="test_spawn_child", resource="cpu", time_limit_s=2, cacheable=False)
def spawn_child_job(args: SpawnInput, ctx: ToolContext) -> dict:
    """Start a grandchild process that would outlive a careless kill, then sleep past the time limit."""
    import subprocess

    child = subprocess.Popen(["sleep", str(args.seconds)])
    (ctx.artifact("child.pid")).write_text(str(child.pid))
    time.sleep(args.seconds)
    return {}


class SquareInput(BaseModel):
    x: float


@tool(name="test_square", resource="cpu", engines=("numpy",))
def square_job(args: SquareInput, ctx: ToolContext) -> dict:
    """A trivial cacheable job."""
    ctx.set_engine("python", "3")
    return {"square": args.x * args.x, "pid": os.getpid()}


class WriteInput(BaseModel):
    kilobytes: int = Field(ge=1, le=1_000_000)


@tool(name="test_write", resource="cpu", cacheable=False)
def write_job(args: WriteInput, ctx: ToolContext) -> dict:
    """Write an artifact of the given size (a full disk makes this fail as an engine's output would)."""
    path = ctx.artifact("out.bin")
    with open(path, "wb") as fh:
        for _ in range(args.kilobytes):
            fh.write(b"\0" * 1024)
    return {"path": str(path)}
