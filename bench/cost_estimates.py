"""Cost estimates against measured runs: the DFT and MD scaling laws, calibrated on this machine.

    .venv/bin/python bench/cost_estimates.py [--skip-dft] [--skip-md] [--json]

Each part starts from an empty calibration record (a temporary cache directory), runs one job that
calibrates the machine, then runs three sizes and prints, for each, the estimate made before the run, the
measured time and their ratio (``estimate_ratio`` = measured / estimate; the target is 0.5-2.0):

1. DFT B3LYP/def2-SVP (density fitting, 1 thread): water calibrates, then methanol, ethanol, isopropanol
   (48, 72, 96 basis functions);
2. MD (``md_run``, TIP3P water, 0.5 ps equilibration, 2 ps production, 0.2 ps NVE, 1 thread): 150 waters
   calibrate, then 150, 300 and 600 waters.

The tests check each law against its formula and scaling and the calibration file's use
(tests/qc/test_cost_estimates.py, tests/md/test_md_cost.py); the accuracy on the machine at hand is
measured here, never asserted. Figures measured on the development machine: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _rows_dft() -> list[dict]:
    from tools_server.core.context import ToolContext
    from tools_server.qc import tools as Q

    rows = []
    for i, (name, smiles) in enumerate(
        (("water", "O"), ("methanol", "CO"), ("ethanol", "CCO"), ("isopropanol", "CC(C)O"))
    ):
        ctx = ToolContext("dft_run", f"bench-cost-dft-{i}", threads=1)
        out = Q.dft_run(Q.DftInput(molecule=smiles, functional="B3LYP", basis="def2-SVP", device="cpu"), ctx)
        rows.append({"job": f"dft {name}", "size": f"{out.n_basis} basis functions", **ctx.engine["cost"]})
    return rows


def _rows_md() -> list[dict]:
    from tools_server.core.context import ToolContext
    from tools_server.md.tools import MdRunInput, md_run

    rows = []
    for i, waters in enumerate((150, 150, 300, 600)):
        ctx = ToolContext("md_run", f"bench-cost-md-{i}", threads=1)
        args = MdRunInput(
            components=[{"smiles": "O", "count": waters}],
            cutoff_nm=0.7,
            minimize_max_iterations=100,
            equilibration_ps=0.5,
            production_ps=2,
            report_interval_ps=0.5,
            nve_check_ps=0.2,
        )
        md_run(args, ctx)
        rows.append({"job": f"md {waters} waters", "size": f"{3 * waters} atoms", **ctx.engine["cost"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-dft", action="store_true")
    parser.add_argument("--skip-md", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="spu-bench-cost-") as tmp:
        os.environ["SPU_WORKDIR"] = str(Path(tmp) / "work")
        os.environ["SPU_CACHE_DIR"] = str(Path(tmp) / "cache")  # an empty calibration record
        if not args.skip_dft:
            rows += _rows_dft()
        if not args.skip_md:
            rows += _rows_md()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'job':<22}{'size':<22}{'estimate s':>11}{'measured s':>12}{'ratio':>8}  calibrated on")
    for r in rows:
        ratio = r["estimate_ratio"]
        print(
            f"{r['job']:<22}{r['size']:<22}{r['estimate_s']:>11.2f}{r['measured_s']:>12.2f}"
            f"{ratio:>7.2f}x  {r['calibration']['runs']} run(s)"
        )
    calibrated = [r["estimate_ratio"] for r in rows if r["calibration"]["runs"] > 0]
    inside = sum(0.5 <= r <= 2.0 for r in calibrated)
    print(f"within 2x after calibration: {inside} of {len(calibrated)}")


if __name__ == "__main__":
    main()
