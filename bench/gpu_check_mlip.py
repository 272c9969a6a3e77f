"""GPU check for the machine-learned potentials: ANI-2x batch throughput on the GPU against the CPU.

Plugged into bench/gpu_check.py (its EXTENSION_MODULES imports this module, which appends to CHECKS), and
runnable on its own:

    .venv/bin/python bench/gpu_check_mlip.py [--json] [--batch 64]

mlip-ani2x-batch: one batch of `--batch` copies of a 33-atom molecule (ibuprofen, coordinates nudged per
copy) through the ANI-2x ensemble (published weights from SPU_WEIGHTS_DIR when present, else its
architecture with random weights) on the CPU and on CUDA: energies must agree to 1e-4 Hartree per molecule
(float32), and molecules per second on each give the speedup.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _gpu_checks import registry  # found through the path set above

CHECKS, CheckResult = registry()


BATCH = 64


def _ani_module():
    from tools_server.mlip import models

    if models.ani_state_dict().is_file():
        import os

        import torchani

        os.environ["TORCHANI_DATA_DIR"] = str(models.ani_dir())
        return torchani.models.ANI2x(), "published weights"
    model = models.random_ani2x()
    model.requires_grad_(False)
    return model, "random weights"


def check_mlip_ani2x_batch(opts) -> CheckResult:
    name = "mlip-ani2x-batch"
    try:
        import numpy as np
        import torch

        from tools_server.molecules import load_molecule

        if not torch.cuda.is_available():
            return CheckResult(name, "skipped", detail="torch sees no CUDA device")
        batch = getattr(opts, "batch", BATCH) or BATCH
        mol = load_molecule("CC(C)Cc1ccc(cc1)C(C)C(=O)O")
        rng = np.random.default_rng(0)
        coords = np.stack(
            [mol.coords_angstrom + rng.normal(0, 0.02, mol.coords_angstrom.shape) for _ in range(batch)]
        )
        species = torch.tensor([mol.numbers] * batch)
        xyz = torch.tensor(coords, dtype=torch.float32)
        model, weights = _ani_module()

        def run(device: str) -> tuple[float, np.ndarray]:
            m = model.to(device)
            s, c = species.to(device), xyz.to(device).requires_grad_(True)
            e = m((s, c)).energies
            torch.autograd.grad(e.sum(), c)  # warm-up with forces
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            reps = 3
            for _ in range(reps):
                c = xyz.to(device).requires_grad_(True)
                e = m((s, c)).energies
                torch.autograd.grad(e.sum(), c)
            if device == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - start) / reps, e.detach().cpu().numpy()

        cpu_s, e_cpu = run("cpu")
        gpu_s, e_gpu = run("cuda")
        diff = float(np.abs(e_cpu - e_gpu).max())
        status = "ok" if diff < 1e-4 else "failed"
        return CheckResult(
            name, status, gpu_s=gpu_s, cpu_s=cpu_s, difference=f"max |dE| {diff:.2e} Eh",
            detail=f"{batch} x 33 atoms, energy+forces, ANI-2x ({weights}); GPU {batch / gpu_s:.0f} "
            f"molecules/s, CPU {batch / cpu_s:.1f} molecules/s",
        )  # fmt: skip
    except Exception as exc:
        return CheckResult(name, "failed", detail=f"{type(exc).__name__}: {exc}")


CHECKS.append(check_mlip_ani2x_batch)


def main() -> int:
    parser = argparse.ArgumentParser(description="ANI-2x batch throughput on the GPU against the CPU")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--batch", type=int, default=BATCH)
    opts = parser.parse_args()
    res = check_mlip_ani2x_batch(opts)
    from dataclasses import asdict

    print(json.dumps(asdict(res)) if opts.json else res)
    return 1 if res.status == "failed" else 0


if __name__ == "__main__":
    raise SystemExit(main())
