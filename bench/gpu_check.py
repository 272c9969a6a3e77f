"""GPU device check: does each GPU engine load, run, agree with the CPU, and how much faster is it?

    .venv/bin/python bench/gpu_check.py [--json] [--only NAME ...] [--molecule SMILES] [--basis B]

Runs a list of checks in order and prints one table (check, status, GPU time, CPU time, speedup,
difference). Without a CUDA GPU it says so and exits 0. Exit code 1 when a check that could run failed.

Extension point: a check is a function ``check(opts) -> CheckResult`` appended to ``CHECKS``. Other
domains add theirs from their own module, which this script imports if present::

    # bench/gpu_check_md.py
    from gpu_check import CHECKS, CheckResult

    def check_openmm_cuda(opts):
        ...
        return CheckResult("openmm-cuda", "ok", gpu_s=..., cpu_s=..., difference="...")

    CHECKS.append(check_openmm_cuda)

``EXTENSION_MODULES`` lists the modules imported that way (missing ones are skipped).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: Modules beside this script that append their checks to CHECKS when imported.
EXTENSION_MODULES = ("gpu_check_md", "gpu_check_mlip")


@dataclass
class CheckResult:
    name: str
    status: str  # "ok", "failed", "skipped"
    gpu_s: float | None = None
    cpu_s: float | None = None
    difference: str | None = None
    detail: str | None = None

    @property
    def speedup(self) -> float | None:
        if self.gpu_s and self.cpu_s:
            return self.cpu_s / self.gpu_s
        return None


Check = Callable[[argparse.Namespace], CheckResult]
CHECKS: list[Check] = []


def cuda_summary() -> dict[str, Any]:
    """GPUs from nvidia-smi and whether CuPy can reach one."""
    from tools_server.core import hardware

    info: dict[str, Any] = {"gpus": hardware.gpus()}
    try:
        import cupy

        info["cupy"] = cupy.__version__
        info["cuda_devices"] = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        info["cupy_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return info


def check_gpu4pyscf_dft(opts: argparse.Namespace) -> CheckResult:
    """The same B3LYP energy with gpu4pyscf and with PySCF on the CPU, through dft_run."""
    from tools_server.core.context import ToolContext
    from tools_server.qc import tools as Q
    from tools_server.qc.device import choose_device, gpu4pyscf_available

    name = f"gpu4pyscf DFT ({opts.functional}/{opts.basis}, {opts.molecule_name})"
    if not gpu4pyscf_available():
        return CheckResult(
            name, "skipped", detail="gpu4pyscf or cupy not installed (pip install 'spu-scaffold[gpu]')"
        )
    from tools_server.core import hardware

    results = {}
    for device in ("gpu", "cpu"):
        ctx = ToolContext("dft_run", f"gpu-check-{device}", threads=hardware.cpu_count(), gpu=device == "gpu")
        args = Q.DftInput(molecule=opts.molecule, functional=opts.functional, basis=opts.basis, device=device)
        if device == "gpu":  # warm-up: CUDA context, kernels compiled on first use
            Q.dft_run(Q.DftInput(molecule="O", functional=opts.functional, basis="sto-3g", device="gpu"), ctx)
        start = time.perf_counter()
        out = Q.dft_run(args, ctx)
        results[device] = (time.perf_counter() - start, out, ctx)
    (gpu_s, gpu, gctx), (cpu_s, cpu, _) = results["gpu"], results["cpu"]
    diff = abs(gpu.energy_hartree - cpu.energy_hartree)
    auto = choose_device("auto", gpu.n_basis, gpu_slot=True)
    ok = diff < 1e-5 and gpu.scf["converged"] and cpu.scf["converged"]
    return CheckResult(
        name,
        "ok" if ok else "failed",
        gpu_s=gpu_s,
        cpu_s=cpu_s,
        difference=f"{diff:.2e} Eh",
        detail=f"{gpu.n_basis} basis functions; device=auto would pick {auto.device}: {auto.reason}; "
        f"engine {gctx.engine.get('engine')} {gctx.engine.get('engine_version')}",
    )


CHECKS.append(check_gpu4pyscf_dft)


def load_extensions() -> list[str]:
    loaded = []
    for module in EXTENSION_MODULES:
        try:
            importlib.import_module(module)
            loaded.append(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return loaded


def run_checks(opts: argparse.Namespace) -> list[CheckResult]:
    results = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if opts.only and name not in opts.only:
            continue
        try:
            results.append(check(opts))
        except Exception as exc:
            results.append(CheckResult(name, "failed", detail=f"{type(exc).__name__}: {exc}"[:500]))
    return results


def print_table(results: list[CheckResult]) -> None:
    head = ("check", "status", "GPU s", "CPU s", "speedup", "difference")
    rows = [
        (
            r.name,
            r.status,
            _f(r.gpu_s),
            _f(r.cpu_s),
            f"{r.speedup:.1f}x" if r.speedup else "-",
            r.difference or "-",
        )
        for r in results
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    for row in (head, *rows):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))
    for r in results:
        if r.detail:
            print(f"- {r.name}: {r.detail}")


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", nargs="*", help="run only these checks (function names without 'check_')")
    parser.add_argument("--molecule", default="CN1C=NC2=C1C(=O)N(C(=O)N2C)C", help="SMILES for the DFT check")
    parser.add_argument("--molecule-name", default="caffeine")
    parser.add_argument("--functional", default="B3LYP")
    parser.add_argument("--basis", default="def2-SVP")
    opts = parser.parse_args()
    summary = cuda_summary()
    if not summary["gpus"]:
        message = "No CUDA GPU found (nvidia-smi lists none); nothing to check on this machine."
        print(json.dumps({"gpu": False, "message": message}) if opts.json else message)
        return 0
    extensions = load_extensions()
    results = run_checks(opts)
    if opts.json:
        print(
            json.dumps(
                {
                    "gpu": True,
                    **summary,
                    "extensions": extensions,
                    "checks": [{**asdict(r), "speedup": r.speedup} for r in results],
                },
                indent=2,
            )
        )
    else:
        print(
            f"GPU: {', '.join(g['name'] for g in summary['gpus'])}; CuPy: "
            f"{summary.get('cupy', summary.get('cupy_error'))}"
        )
        print_table(results)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
