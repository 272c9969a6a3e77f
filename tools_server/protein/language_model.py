"""ESM language-model computations: mean embeddings and zero-shot variant scores.

Variant scores are log-likelihood ratios, sum over mutated positions i of
``log p(x_i = mutant | context) - log p(x_i = wild type | context)`` (Meier et al., 2021, "Language models
enable zero-shot prediction of the effects of mutations on protein function"). Methods differ in the context:

* ``masked_marginal``: the wild type with position i masked, one forward pass per distinct mutated position,
  additive over positions (the paper's best-performing method). Exactly antisymmetric for single mutants.
* ``masked_marginal_joint``: the wild type with all of the variant's positions masked at once, one pass per
  variant; couples the positions and is exactly antisymmetric for multi-point mutants too.
* ``wildtype_marginal``: the unmasked wild type, one pass in total (fastest, least accurate).
"""

from __future__ import annotations

from typing import Any, Literal

from tools_server.protein.sequences import Mutation

ScoreMethod = Literal["masked_marginal", "masked_marginal_joint", "wildtype_marginal"]
#: ESM models were trained on 1,024 tokens including the begin and end tokens.
MAX_RESIDUES = 1022
BATCH = 8


def pick_device(gpu_available: bool) -> str:
    import torch

    return "cuda" if gpu_available and torch.cuda.is_available() else "cpu"


def _num_layers(model: Any) -> int:
    return int(getattr(model, "num_layers", None) or len(model.layers))


def mean_embeddings(model: Any, alphabet: Any, sequences: list[str], device: str) -> Any:
    """Mean over residues (begin/end tokens excluded) of the last layer's representation: (N, D) float32."""
    import numpy as np
    import torch

    converter = alphabet.get_batch_converter()
    layer = _num_layers(model)
    out = []
    model = model.to(device)
    with torch.inference_mode():
        for start in range(0, len(sequences), BATCH):
            chunk = sequences[start : start + BATCH]
            _, _, tokens = converter([(str(i), s) for i, s in enumerate(chunk)])
            reps = model(tokens.to(device), repr_layers=[layer])["representations"][layer]
            offset = int(alphabet.prepend_bos)
            for i, seq in enumerate(chunk):
                out.append(reps[i, offset : offset + len(seq)].float().mean(0).cpu().numpy())
    return np.stack(out).astype(np.float32)


def log_probs_at(
    model: Any,
    alphabet: Any,
    sequence: str,
    mask_groups: list[tuple[int, ...]],
    device: str,
    mask: bool = True,
) -> list:
    """For each group of 0-based positions: log-probabilities (len(group), vocab) there, the group masked
    (or nothing masked when ``mask`` is False). Groups go through the model ``BATCH`` at a time, from the
    first: a caller that splits its groups into runs of whole batches gets the same numbers."""
    import torch

    converter = alphabet.get_batch_converter()
    _, _, base = converter([("wt", sequence)])
    offset = int(alphabet.prepend_bos)
    results: list = []
    model = model.to(device)
    with torch.inference_mode():
        for start in range(0, len(mask_groups), BATCH):
            groups = mask_groups[start : start + BATCH]
            tokens = base.repeat(len(groups), 1)
            for row, group in enumerate(groups):
                for pos in group if mask else ():
                    tokens[row, pos + offset] = alphabet.mask_idx
            logits = model(tokens.to(device))["logits"].float()
            logp = torch.log_softmax(logits, dim=-1).cpu()
            for row, group in enumerate(groups):
                results.append(logp[row, [p + offset for p in group]])
    return results


def forward_groups(
    wild_type: str, variants: list[list[Mutation]], method: ScoreMethod
) -> tuple[list[tuple[int, ...]], bool]:
    """The forward passes ``method`` needs for ``variants``: the groups of 0-based positions to read (and
    mask, unless the second value is False), in the order :func:`scores_from` expects their results."""
    if method == "wildtype_marginal":
        return [tuple(range(len(wild_type)))], False
    if method == "masked_marginal":
        return [(p,) for p in sorted({m.position - 1 for v in variants for m in v})], True
    return sorted({tuple(m.position - 1 for m in v) for v in variants if v}), True


def scores_from(
    method: ScoreMethod,
    variants: list[list[Mutation]],
    groups: list[tuple[int, ...]],
    log_probs: list,
    idx: Any,
) -> list[float]:
    """Each variant's score from the log-probabilities of :func:`forward_groups`' groups (``idx``: a
    token's column)."""
    if method == "wildtype_marginal":
        (logp,) = log_probs
        return [
            sum(
                float(logp[m.position - 1, idx(m.mutant)] - logp[m.position - 1, idx(m.wild_type)]) for m in v
            )
            for v in variants
        ]
    if method == "masked_marginal":
        per_pos = dict(zip([g[0] for g in groups], log_probs, strict=True))
        return [
            sum(
                float(
                    per_pos[m.position - 1][0, idx(m.mutant)] - per_pos[m.position - 1][0, idx(m.wild_type)]
                )
                for m in v
            )
            for v in variants
        ]
    by_group = dict(zip(groups, log_probs, strict=True))
    scores = []
    for v in variants:
        if not v:
            scores.append(0.0)
            continue
        logp = by_group[tuple(m.position - 1 for m in v)]
        scores.append(sum(float(logp[k, idx(m.mutant)] - logp[k, idx(m.wild_type)]) for k, m in enumerate(v)))
    return scores


def variant_scores(
    model: Any,
    alphabet: Any,
    wild_type: str,
    variants: list[list[Mutation]],
    method: ScoreMethod,
    device: str,
) -> list[float]:
    """Log-likelihood ratio (natural log) of each variant against ``wild_type``; 0 for the wild type."""
    groups, mask = forward_groups(wild_type, variants, method)
    log_probs = log_probs_at(model, alphabet, wild_type, groups, device, mask=mask)
    return scores_from(method, variants, groups, log_probs, alphabet.get_idx)
