"""Machine-learned potentials against GFN2-xTB: energy + forces of one ~30-atom molecule per second.

    .venv/bin/python bench/mlip.py [--smiles SMILES] [--repeats N] [--threads N] [--json]

Same molecule, same process, same thread count: tblite GFN2-xTB single points against ANI-2x (TorchANI,
8-network ensemble) and AIMNet2 (its published architecture), each through the ASE calculator the tools
use, with the coordinates nudged between calls so nothing is served from a cache. The models use the
weights in SPU_WEIGHTS_DIR when present, else the same architectures with random weights: the cost of a
forward and backward pass does not depend on the weight values. Prints evaluations per second and the
ratio to xTB. The GPU batch throughput is in bench/gpu_check_mlip.py (run by bench/gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

IBUPROFEN = "CC(C)Cc1ccc(cc1)C(C)C(=O)O"  # 33 atoms with hydrogens


def ani2x_model(device: str = "cpu") -> tuple[Any, str]:
    """ANI-2x from SPU_WEIGHTS_DIR, or its architecture with random weights."""
    import torch

    from tools_server.mlip import models

    if models.ani_state_dict().is_file():
        calc = models.load_calculator("ani2x", "ani2x", device)
        return calc, "ANI-2x (published weights)"
    model = models.random_ani2x().to(device=device, dtype=torch.float64)
    model.requires_grad_(False)
    return model.ase(), "ANI-2x architecture (random weights)"


def aimnet2_module() -> Any:
    """AIMNet2's published architecture (aimnet/models/aimnet2.yaml) with random weights, without the
    long-range Coulomb output (the calculator adds Coulomb itself for the published files)."""
    import importlib.resources

    import torch
    import yaml
    from aimnet.config import build_module

    cfg = yaml.safe_load(importlib.resources.files("aimnet.models").joinpath("aimnet2.yaml").read_text())
    cfg["kwargs"]["outputs"].pop("lrcoulomb", None)
    torch.manual_seed(0)
    module = build_module(cfg)
    module.cutoff = 5.0
    return module


def aimnet2_calculator(device: str = "cpu") -> tuple[Any, str]:
    from aimnet.calculators import AIMNet2ASE, AIMNet2Calculator

    from tools_server.mlip import models

    path = models.model_path("aimnet2", models.DEFAULT_MODEL["aimnet2"])
    if path is not None and path.is_file():
        return models.load_calculator("aimnet2", path.stem, device), "AIMNet2 (published weights)"
    base = AIMNet2Calculator(model=aimnet2_module(), device=device)
    return AIMNet2ASE(base, charge=0, mult=1), "AIMNet2 architecture (random weights)"


def time_calls(fn, repeats: int) -> float:
    fn(0)  # warm-up: graph building, kernel selection
    start = time.perf_counter()
    for i in range(repeats):
        fn(i + 1)
    return repeats / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smiles", default=IBUPROFEN)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    import numpy as np
    import torch
    from ase import Atoms

    from tools_server.molecules import load_molecule

    torch.set_num_threads(opts.threads)
    mol = load_molecule(opts.smiles)
    base = np.asarray(mol.coords_angstrom, dtype=float)
    rng = np.random.default_rng(0)
    nudges = [rng.normal(0, 0.01, base.shape) for _ in range(opts.repeats + 1)]
    rows: list[dict[str, Any]] = []

    from tblite.interface import Calculator

    bohr = 1 / 0.52917721067

    def xtb(i: int) -> None:
        calc = Calculator("GFN2-xTB", np.asarray(mol.numbers), (base + nudges[i]) * bohr)
        calc.set("verbosity", 0)
        calc.singlepoint()

    rows.append({"method": "GFN2-xTB (tblite)", "evals_per_s": time_calls(xtb, opts.repeats)})

    for build in (ani2x_model, aimnet2_calculator):
        try:
            calc, label = build()
        except Exception as exc:  # an engine that is not installed is reported, not fatal
            rows.append({"method": build.__name__, "error": f"{type(exc).__name__}: {exc}"})
            continue
        atoms = Atoms(numbers=mol.numbers, positions=base)
        atoms.calc = calc

        def run(i: int, atoms: Atoms = atoms) -> None:
            atoms.positions = base + nudges[i]
            atoms.get_forces()

        rows.append({"method": label, "evals_per_s": time_calls(run, opts.repeats)})

    ref = rows[0]["evals_per_s"]
    for r in rows:
        if "evals_per_s" in r:
            r["ratio_to_xtb"] = round(r["evals_per_s"] / ref, 2)
            r["evals_per_s"] = round(r["evals_per_s"], 2)
    if opts.json:
        print(
            json.dumps({"smiles": opts.smiles, "n_atoms": mol.n_atoms, "threads": opts.threads, "rows": rows})
        )
        return 0
    print(f"{opts.smiles}: {mol.n_atoms} atoms, {opts.threads} thread(s), {opts.repeats} evaluations each")
    print(f"{'method':42s} {'energy+forces/s':>16s} {'vs xTB':>8s}")
    for r in rows:
        if "error" in r:
            print(f"{r['method']:42s} {'unavailable: ' + r['error'][:60]}")
        else:
            print(f"{r['method']:42s} {r['evals_per_s']:16.2f} {r['ratio_to_xtb']:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
