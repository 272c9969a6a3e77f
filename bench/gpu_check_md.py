"""GPU checks for molecular dynamics and protein models: OpenMM CUDA and ESM on the GPU.

Plugged into bench/gpu_check.py (its EXTENSION_MODULES imports this module, which appends to CHECKS), and
runnable on its own:

    .venv/bin/python bench/gpu_check_md.py [--json]

openmm-cuda: the same TIP3P water box (1,500 waters) evaluated on the CPU and CUDA platforms (energy and
forces must agree to single-precision level), then ns/day on each. esm-gpu: a tiny ESM-2 (built here,
random weights; no downloads) gives the same logits on CPU and GPU, and the forward time per residue on each.
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


def _water_box(n_waters: int):
    from openmm import app, unit

    ff = app.ForceField("amber14/tip3p.xml")
    modeller = app.Modeller(app.Topology(), [])
    modeller.addSolvent(ff, model="tip3p", numAdded=n_waters)
    system = ff.createSystem(
        modeller.topology,
        nonbondedMethod=app.PME,
        nonbondedCutoff=0.9 * unit.nanometer,
        constraints=app.HBonds,
    )
    return system, modeller.positions


def _ns_per_day(system, positions, platform, props, steps: int) -> tuple[float, object]:
    import openmm
    from openmm import unit

    integrator = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1 / unit.picosecond, 2 * unit.femtosecond)
    ctx = openmm.Context(system, integrator, platform, props)
    ctx.setPositions(positions)
    state = ctx.getState(getEnergy=True, getForces=True)
    openmm.LocalEnergyMinimizer.minimize(ctx, 10, 200)
    integrator.step(50)
    t = time.perf_counter()
    integrator.step(steps)
    ctx.getState(getEnergy=True)
    wall = time.perf_counter() - t
    return steps * 2e-6 / wall * 86400, state


def check_openmm_cuda(opts) -> CheckResult:
    try:
        import numpy as np
        import openmm
        from openmm import unit
    except ImportError as exc:
        return CheckResult("openmm-cuda", "skipped", detail=f"openmm not installed: {exc}")
    try:
        cuda = openmm.Platform.getPlatformByName("CUDA")
    except Exception as exc:
        return CheckResult("openmm-cuda", "failed", detail=f"CUDA platform not available: {exc}")
    system, positions = _water_box(1500)
    cpu_rate, cpu_state = _ns_per_day(system, positions, openmm.Platform.getPlatformByName("CPU"), {}, 500)
    gpu_rate, gpu_state = _ns_per_day(system, positions, cuda, {"Precision": "mixed"}, 5000)
    e_cpu = cpu_state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    e_gpu = gpu_state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    f_cpu = cpu_state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
    f_gpu = gpu_state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
    rel_e = abs(e_cpu - e_gpu) / abs(e_cpu)
    rel_f = float(np.linalg.norm(f_cpu - f_gpu) / np.linalg.norm(f_cpu))
    ok = rel_e < 1e-4 and rel_f < 1e-3
    # Report time per ns so the shared table's speedup column is CPU time / GPU time.
    return CheckResult(
        "openmm-cuda (4,500-atom TIP3P box)",
        "ok" if ok else "failed",
        gpu_s=86400 / gpu_rate,
        cpu_s=86400 / cpu_rate,
        difference=f"energy rel {rel_e:.1e}, forces rel {rel_f:.1e}",
        detail=f"{gpu_rate:.0f} ns/day CUDA vs {cpu_rate:.1f} ns/day CPU (s per simulated ns shown)",
    )


def check_esm_gpu(opts) -> CheckResult:
    try:
        import esm
        import torch
    except ImportError as exc:
        return CheckResult("esm-gpu", "skipped", detail=f"fair-esm/torch not installed: {exc}")
    if not torch.cuda.is_available():
        return CheckResult("esm-gpu", "failed", detail="torch sees no CUDA device")
    torch.manual_seed(0)
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    model = esm.model.esm2.ESM2(num_layers=6, embed_dim=320, attention_heads=20, alphabet=alphabet).eval()
    seq = (
        "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVVHSLAKWKRQTLGQHDFSAGEGLYTHMKALRPDEDR"
        * 3
    )
    _, _, tokens = alphabet.get_batch_converter()([("s", seq)])
    timings = {}
    logits = {}
    for device in ("cpu", "cuda"):
        m = model.to(device)
        tok = tokens.to(device)
        with torch.inference_mode():
            m(tok)
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(5):
                out = m(tok)["logits"]
            if device == "cuda":
                torch.cuda.synchronize()
            timings[device] = (time.perf_counter() - t) / 5 / len(seq)
            logits[device] = out.float().cpu()
    diff = float((logits["cpu"] - logits["cuda"]).abs().max())
    return CheckResult(
        "esm-gpu (ESM-2 6-layer, 318 residues)",
        "ok" if diff < 1e-2 else "failed",
        gpu_s=timings["cuda"],
        cpu_s=timings["cpu"],
        difference=f"max |logit diff| {diff:.1e}",
        detail="times are seconds per residue per forward pass",
    )


CHECKS.extend([check_openmm_cuda, check_esm_gpu])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        print(json.dumps({"gpu": False}) if opts.json else "No CUDA GPU here; nothing to check.")
        return 0
    results = [check(opts) for check in (check_openmm_cuda, check_esm_gpu)]
    if opts.json:
        print(json.dumps([r.__dict__ for r in results], indent=1))
    else:
        for r in results:
            print(f"{r.name:45s} {r.status:8s} gpu={r.gpu_s} cpu={r.cpu_s} {r.difference} {r.detail}")
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
