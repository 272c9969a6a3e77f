"""ESMFold (transformers' EsmForProteinFolding) with a memory estimate made before anything is loaded.

The estimate is deliberately conservative (the benchmark lost runs to ESMFold exhausting 16 GiB):
weights (their files' size, fp32) plus activations that grow with L^2 (pair representation, c_z channels,
about 40 live copies; the language model's attention maps) and, without chunking, L^3 (triangular
attention). Above ``CHUNK_ABOVE_RESIDUES`` the trunk runs chunked, which removes most of the L^3 term.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHUNK_ABOVE_RESIDUES = 256
DEFAULT_CHUNK = 64
PAIR_COPIES = 40
BYTES_FP32 = 4
#: Weight bytes of the published esmfold_v1 (ESM-2 3B + folding trunk, fp32) when no folder is at hand.
ESMFOLD_V1_WEIGHT_BYTES = 14_500_000_000
_CA = 1  # index of C-alpha in the atom37 ordering


def weight_bytes(folder: Path | None) -> int:
    if folder is None:
        return ESMFOLD_V1_WEIGHT_BYTES
    files = list(folder.glob("*.safetensors")) + list(folder.glob("*.bin"))
    return sum(f.stat().st_size for f in files) or ESMFOLD_V1_WEIGHT_BYTES


def estimate_bytes(config: dict[str, Any] | None, n_residues: int, weights: int, chunk: int | None) -> int:
    cfg = (config or {}).get("esmfold_config") or {}
    trunk = cfg.get("trunk") or {}
    c_z = int(trunk.get("pairwise_state_dim", 128))
    heads_z = max(1, c_z // int(trunk.get("pairwise_head_width", 32)))
    lm_heads = int((config or {}).get("num_attention_heads", 40))
    L = n_residues + 2
    pair = PAIR_COPIES * L * L * c_z * BYTES_FP32
    triangle = 2 * heads_z * L * L * (chunk or L) * BYTES_FP32
    lm_attention = 4 * lm_heads * L * L * BYTES_FP32
    return int(1.15 * weights + pair + triangle + lm_attention)


def max_residues_within(config, budget: int, weights: int) -> int:
    lo, hi = 0, 4096
    while lo < hi:
        mid = (lo + hi + 1) // 2
        chunk = DEFAULT_CHUNK if mid > CHUNK_ABOVE_RESIDUES else None
        if estimate_bytes(config, mid, weights, chunk) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def memory_budget_bytes(device: str, limit_gb: float | None) -> int:
    """Free memory the fold may use: 90 % of what the device has free now, capped by ``limit_gb``."""
    if device == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()
        budget = int(0.9 * free)
    else:
        import psutil

        budget = int(0.9 * psutil.virtual_memory().available)
    if limit_gb is not None:
        budget = min(budget, int(limit_gb * 1024**3))
    return budget


def fold(
    model: Any, sequence: str, device: str, chunk: int | None, num_recycles: int | None
) -> dict[str, Any]:
    """Run ESMFold; returns PDB text, per-residue pLDDT (0-100), mean pLDDT and pTM."""
    import torch

    model = model.to(device)
    if device == "cuda":
        model.esm = model.esm.half()
    model.trunk.set_chunk_size(chunk)
    if num_recycles is not None:
        # The trunk's max_recycles counts every pass through it, the first included.
        model.trunk.config.max_recycles = num_recycles + 1
    with torch.inference_mode():
        output = model.infer([sequence])
    plddt = output["plddt"][0, :, _CA].float().cpu().numpy()
    if plddt.max() <= 1.0 + 1e-6:
        plddt = plddt * 100.0
    output["plddt"] = output["plddt"] * (100.0 if float(output["plddt"].max()) <= 1.0 + 1e-6 else 1.0)
    pdb = model.output_to_pdb(output)[0]
    return {"pdb": pdb, "plddt": plddt, "ptm": float(output["ptm"].reshape(-1)[0])}
