"""MD and protein-model throughput on this machine, each against a baseline measured in the same run.

    .venv/bin/python bench/md_protein.py [--waters 1000] [--ps 2] [--json]

1. OpenMM CPU platform, TIP3P water box: ns/day of a bare OpenMM loop (baseline) against the same box,
   steps and reporting interval run through the md_run tool (minimisation, sampling, XTC writing included).
2. ESM forward time per residue: a 6-layer ESM-2 (esm2_t6_8M shape, random weights) on a 300-residue
   sequence, against the 2-layer tiny model the tests use, and the protein_embed tool wrapper against the
   bare forward pass (weights saved and loaded through tools_server.protein.weights).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SEQ300 = (
    "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVVHSLAKWKRQTLGQHDFSAGEGLYTHMKALR" * 3
)


def bench_openmm(n_waters: int, ps: float, threads: int) -> dict:
    import openmm
    from openmm import unit

    from tools_server.core.context import ToolContext
    from tools_server.md.liquid import build_water_box
    from tools_server.md.tools import MdRunInput, md_run

    built = build_water_box(n_waters, "O", 0.9)
    steps = int(ps * 500)
    integrator = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1 / unit.picosecond, 2 * unit.femtosecond)
    ctx = openmm.Context(
        built.system, integrator, openmm.Platform.getPlatformByName("CPU"), {"Threads": str(threads)}
    )
    ctx.setPositions(built.positions_nm)
    openmm.LocalEnergyMinimizer.minimize(ctx, 10, 200)
    integrator.step(50)
    t = time.perf_counter()
    integrator.step(steps)
    ctx.getState(getEnergy=True)
    raw = ps / 1000 / (time.perf_counter() - t) * 86400
    out = md_run(
        MdRunInput(
            components=[{"smiles": "O", "count": n_waters}],
            cutoff_nm=0.9,
            equilibration_ps=0,
            production_ps=ps,
            report_interval_ps=0.5,
            nve_check_ps=0,
            ensemble="nvt",
        ),
        ToolContext("md_run", "bench", threads=threads),
    )
    return {
        "atoms": built.system.getNumParticles(),
        "raw_ns_per_day": round(raw, 2),
        "tool_ns_per_day": out.ns_per_day,
        "tool_vs_raw": round(out.ns_per_day / raw, 3),
    }


def bench_esm(threads: int) -> dict:
    import esm
    import torch

    from tools_server.core.context import ToolContext
    from tools_server.protein.tools import ProteinEmbedInput, protein_embed

    torch.set_num_threads(threads)
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    _, _, tokens = alphabet.get_batch_converter()([("s", SEQ300)])
    results = {}
    for name, layers, dim, heads in (("tiny_2x32", 2, 32, 4), ("t6_8M_shape", 6, 320, 20)):
        torch.manual_seed(0)
        model = esm.model.esm2.ESM2(
            num_layers=layers, embed_dim=dim, attention_heads=heads, alphabet=alphabet
        ).eval()
        with torch.inference_mode():
            model(tokens)
            t = time.perf_counter()
            for _ in range(5):
                model(tokens, repr_layers=[layers])
            per_res = (time.perf_counter() - t) / 5 / len(SEQ300)
        results[f"{name}_ms_per_residue"] = round(per_res * 1e3, 4)
        if name == "t6_8M_shape":
            wdir = Path(tempfile.mkdtemp())
            (wdir / "esm").mkdir()
            cfg = Namespace(
                encoder_layers=layers,
                encoder_embed_dim=dim,
                encoder_attention_heads=heads,
                token_dropout=True,
            )
            torch.save({"model": model.state_dict(), "cfg": {"model": cfg}}, wdir / "esm" / "esm2_bench.pt")
            os.environ["SPU_WEIGHTS_DIR"] = str(wdir)
            args = ProteinEmbedInput(sequences=[SEQ300], model="esm2_bench")
            protein_embed(args, ToolContext("protein_embed", "warm", threads=threads))  # load once (cached)
            t = time.perf_counter()
            for _ in range(5):
                protein_embed(args, ToolContext("protein_embed", "bench", threads=threads))
            tool_per_res = (time.perf_counter() - t) / 5 / len(SEQ300)
            results["tool_embed_ms_per_residue"] = round(tool_per_res * 1e3, 4)
            results["tool_vs_bare_forward"] = round(tool_per_res / per_res, 3)
    results["ratio_t6_vs_tiny"] = round(
        results["t6_8M_shape_ms_per_residue"] / results["tiny_2x32_ms_per_residue"], 2
    )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waters", type=int, default=1000)
    parser.add_argument("--ps", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    os.environ.setdefault("SPU_WORKDIR", tempfile.mkdtemp())
    report = {
        "threads": opts.threads,
        "openmm_cpu_water": bench_openmm(opts.waters, opts.ps, opts.threads),
        "esm_cpu": bench_esm(opts.threads),
    }
    if opts.json:
        print(json.dumps(report, indent=1))
    else:
        for section, values in report.items():
            if isinstance(values, dict):
                print(section)
                for k, v in values.items():
                    print(f"  {k:32s} {v}")
            else:
                print(f"{section:34s} {values}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
