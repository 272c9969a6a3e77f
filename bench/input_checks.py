"""What the input checks of issue 14 cost: JSON-RPC frame checks and argument limits, against parsing the
same frame with json.loads alone, and the RDKit-free molecule cache key against RDKit canonicalisation.

    .venv/bin/python bench/input_checks.py

Prints per-frame times and ratios; no assertion (the tests check behaviour, this measures cost).
"""

from __future__ import annotations

import json
import time


def _best(fn, repeat: int = 5, number: int = 20) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def main() -> None:
    from tools_server.core.framing import check_frame
    from tools_server.core.limits import check_arguments
    from tools_server.molecules import cache_key, canonical_smiles

    for n in (10, 1_000, 10_000):
        args = {"molecules": ["CC(=O)Oc1ccccc1C(=O)O"] * n, "preset": "physchem"}
        frame = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": args}}
        ).encode()
        parse = _best(lambda frame=frame: json.loads(frame))
        framed = _best(lambda frame=frame: check_frame(frame))
        limits = _best(lambda args=args: check_arguments(args))
        print(
            f"{n:>6} molecules, {len(frame) / 1024:8.1f} KiB frame: json.loads {parse * 1e3:7.3f} ms, "
            f"check_frame {framed * 1e3:7.3f} ms ({framed / parse:4.2f}x json.loads), "
            f"check_arguments {limits * 1e3:7.3f} ms"
        )
    smiles = "CC(=O)Oc1ccccc1C(=O)O"
    cheap = _best(lambda: cache_key(smiles), number=200)
    rdkit = _best(lambda: canonical_smiles(smiles), number=200)
    print(
        f"cache key of aspirin: text key {cheap * 1e6:.1f} us, RDKit canonical {rdkit * 1e6:.1f} us "
        f"({rdkit / cheap:.0f}x)"
    )
    big = "C" * 1999
    cheap = _best(lambda: cache_key(big), number=20)
    rdkit = _best(lambda: canonical_smiles(big), number=3, repeat=3)
    print(
        f"cache key of a 1,999-atom chain: text key {cheap * 1e3:.3f} ms, RDKit canonical "
        f"{rdkit * 1e3:.1f} ms ({rdkit / cheap:.0f}x)"
    )


if __name__ == "__main__":
    main()
