"""Cheap facts about this machine: cores, memory, GPUs. Nothing here imports an engine."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import psutil


def cpu_count() -> int:
    """Cores this process may use (affinity and cgroup quota respected), overridable by SPU_CPU_SLOTS."""
    if os.environ.get("SPU_CPU_SLOTS"):
        return max(1, int(os.environ["SPU_CPU_SLOTS"]))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def memory_total_mb() -> int:
    total = psutil.virtual_memory().total
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            total = min(total, int(limit))
    except (OSError, ValueError):
        pass
    return total // 2**20


def job_memory_setting_mb() -> int | None:
    """``SPU_JOB_MEMORY_MB``, the memory limit set for jobs whose tool declares none (None when unset)."""
    return int(os.environ.get("SPU_JOB_MEMORY_MB") or 0) or None


def job_memory_limit_mb() -> int:
    """The memory limit of a job whose tool declares none: ``SPU_JOB_MEMORY_MB``, else 80% of this machine's
    memory."""
    return job_memory_setting_mb() or int(memory_total_mb() * 0.8)


@functools.cache
def gpus() -> list[dict[str, str]]:
    """NVIDIA GPUs as reported by nvidia-smi (name, memory, driver); empty without one.

    ``SPU_DISABLE_GPU=1`` hides them (CPU-only runs on a GPU machine).
    """
    if os.environ.get("SPU_DISABLE_GPU") == "1" or shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            found.append({"name": parts[0], "memory": parts[1], "driver": parts[2]})
    return found


def has_gpu() -> bool:
    return bool(gpus())
