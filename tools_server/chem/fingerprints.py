"""Molecular fingerprints and similarity metrics (RDKit)."""

from __future__ import annotations

from typing import Any

KINDS = ("morgan", "maccs", "rdkit", "atompair")
METRICS = ("tanimoto", "dice")


def fingerprint(
    mol: Any, kind: str, *, radius: int = 2, n_bits: int = 2048, use_features: bool = False
) -> Any:
    """A bit-vector fingerprint: Morgan (ECFP-like; FCFP with ``use_features``), MACCS keys, RDKit path-based
    or hashed atom pairs."""
    from rdkit.Chem import MACCSkeys, rdFingerprintGenerator

    if kind == "maccs":
        return MACCSkeys.GenMACCSKeys(mol)
    if kind == "morgan":
        kwargs: dict[str, Any] = {"radius": radius, "fpSize": n_bits}
        if use_features:
            kwargs["atomInvariantsGenerator"] = rdFingerprintGenerator.GetMorganFeatureAtomInvGen()
        gen = rdFingerprintGenerator.GetMorganGenerator(**kwargs)
    elif kind == "rdkit":
        gen = rdFingerprintGenerator.GetRDKitFPGenerator(fpSize=n_bits)
    elif kind == "atompair":
        gen = rdFingerprintGenerator.GetAtomPairGenerator(fpSize=n_bits)
    else:
        raise ValueError(f"unknown fingerprint {kind!r}")
    return gen.GetFingerprint(mol)


def bulk_similarity(query: Any, targets: list[Any], metric: str) -> list[float]:
    from rdkit import DataStructs

    if metric == "dice":
        return list(DataStructs.BulkDiceSimilarity(query, targets))
    return list(DataStructs.BulkTanimotoSimilarity(query, targets))
