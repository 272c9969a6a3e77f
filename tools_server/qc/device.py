"""Where DFT runs: gpu4pyscf on a GPU with a useful FP64 rate, otherwise PySCF on the CPU.

gpu4pyscf's DFT runs in double precision, and GPUs differ a hundredfold there: an H100/H200 does tens of
FP64 TFLOPS while the H20, L40 or a consumer RTX card does about one. On such a card a small molecule is
no faster than on the CPU, so ``device="auto"`` weighs the card's FP64 rate (a table of known models;
a short cupy probe for unknown ones) and the size of the job, and says why in the provenance.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass

from tools_server.plugin import Engine

#: gpu4pyscf ships one distribution per CUDA major version; the first one installed gives the version.
GPU4PYSCF = Engine("gpu4pyscf", ("gpu4pyscf-cuda12x", "gpu4pyscf-cuda13x", "gpu4pyscf-cuda11x", "gpu4pyscf"))

#: Peak FP64 rate in TFLOPS (tensor-core FP64 where the card has it), from the vendors' data sheets.
FP64_TFLOPS: dict[str, float] = {
    "B200": 40.0,
    "B100": 30.0,
    "GH200": 67.0,
    "H200": 67.0,
    "H100": 51.0,
    "H800": 51.0,
    "A100": 19.5,
    "A800": 19.5,
    "A30": 10.3,
    "V100": 7.8,
    "P100": 4.7,
    "MI300X": 163.4,
    "MI250X": 95.7,
    "MI250": 90.5,
    "MI210": 45.3,
    "H20": 1.0,
    "L40S": 1.4,
    "L40": 1.4,
    "L20": 1.0,
    "L4": 0.5,
    "A40": 0.6,
    "A10": 1.0,
    "A16": 0.3,
    "A2": 0.1,
    "T4": 0.25,
    "RTX": 1.3,
    "GEFORCE": 1.3,
    "QUADRO": 0.5,
    "TITAN": 0.5,
}
#: A card at or above this FP64 rate always gets DFT jobs.
FAST_FP64_TFLOPS = 5.0
#: On a slow-FP64 card, only jobs with at least this many basis functions go to the GPU: there the
#: memory bandwidth and the J/K builds still win over a few CPU cores.
SLOW_GPU_MIN_NBASIS = 1500


@dataclass
class DeviceChoice:
    device: str  # "cpu" or "gpu"
    reason: str
    gpu_name: str | None = None
    fp64_tflops: float | None = None


def fp64_rate(gpu_name: str) -> float | None:
    """FP64 TFLOPS of a card from the table, matching model tokens (so 'H20' does not match 'H200')."""
    tokens = set(re.findall(r"[A-Z0-9]+", gpu_name.upper()))
    for model in sorted(FP64_TFLOPS, key=len, reverse=True):
        if model in tokens:
            return FP64_TFLOPS[model]
    return None


def probe_fp64_tflops(size: int = 2048) -> float | None:
    """Measured FP64 matrix-multiply rate with cupy (about a second); None without cupy."""
    try:
        import time

        import cupy
    except ImportError:
        return None
    a = cupy.random.random((size, size), dtype=cupy.float64)
    a @ a  # warm-up and cuBLAS initialisation
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    reps = 3
    for _ in range(reps):
        a @ a
    cupy.cuda.Device().synchronize()
    return 2 * size**3 * reps / (time.perf_counter() - start) / 1e12


def gpu4pyscf_available() -> bool:
    return importlib.util.find_spec("gpu4pyscf") is not None and importlib.util.find_spec("cupy") is not None


def choose_device(requested: str, n_basis: int, *, gpu_slot: bool) -> DeviceChoice:
    """Pick cpu or gpu for a DFT job of ``n_basis`` functions; ``gpu_slot`` says the job holds the GPU."""
    from tools_server.plugin import gpus

    if requested == "cpu":
        return DeviceChoice("cpu", "device=cpu requested")
    found = gpus()
    missing = None
    if not found:
        missing = "no CUDA GPU on this machine"
    elif not gpu4pyscf_available():
        missing = "gpu4pyscf/cupy not installed (pip install 'spu-scaffold[gpu]')"
    elif not gpu_slot:
        missing = "this job ran on a CPU slot (the GPU slot was not assigned)"
    if missing:
        if requested == "gpu":
            from tools_server.plugin import ToolError

            raise ToolError(
                "engine_unavailable",
                f"device=gpu but {missing}",
                hint="Use device=auto or cpu, or run on a machine with an NVIDIA GPU and gpu4pyscf.",
            )
        return DeviceChoice("cpu", missing)
    name = found[0]["name"]
    rate = fp64_rate(name)
    source = "known-model table"
    if rate is None:
        rate = probe_fp64_tflops()
        source = "measured with a cupy DGEMM probe"
    if requested == "gpu":
        return DeviceChoice("gpu", f"device=gpu requested ({name}, FP64 ~{_fmt(rate)} TFLOPS)", name, rate)
    if rate is None or rate >= FAST_FP64_TFLOPS:
        return DeviceChoice(
            "gpu", f"{name}: FP64 ~{_fmt(rate)} TFLOPS ({source}) is fast enough for DFT", name, rate
        )
    if n_basis >= SLOW_GPU_MIN_NBASIS:
        return DeviceChoice(
            "gpu",
            f"{name} has slow FP64 (~{_fmt(rate)} TFLOPS, {source}) but {n_basis} basis "
            f"functions >= {SLOW_GPU_MIN_NBASIS} still favour the GPU",
            name,
            rate,
        )
    return DeviceChoice(
        "cpu",
        f"{name} has slow FP64 (~{_fmt(rate)} TFLOPS, {source}); {n_basis} basis functions "
        f"< {SLOW_GPU_MIN_NBASIS} run as fast on the CPU",
        name,
        rate,
    )


def _fmt(rate: float | None) -> str:
    return "?" if rate is None else f"{rate:.1f}"
