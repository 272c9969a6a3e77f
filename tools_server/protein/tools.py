"""MCP tools for proteins: properties, alignment, antibody numbering, ESM embeddings and variant scores,
ESMFold."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tools_server.plugin import Item, ItemsResult, ResultModel, ToolContext, ToolError, ToolResult, tool
from tools_server.protein.sequences import (
    EXTENDED_AMINO_ACIDS,
    STANDARD_AMINO_ACIDS,
    clean_sequence,
    format_mutations,
    parse_mutations,
)

MAX_PROTPARAM_LENGTH = 100_000
MAX_ALIGN_LENGTH = 10_000


class ByCysteineState(ResultModel):
    cys_reduced: float
    cystines: float


class PropertiesItem(Item):
    """ProtParam's properties of one sequence."""

    length: int | None = None
    molecular_mass_da: float | None = None
    isoelectric_point: float | None = None
    charge_at_ph: float | None = None
    extinction_coefficient_m1_cm1: ByCysteineState | None = None
    absorbance_0_1_percent: ByCysteineState | None = None
    gravy: float | None = None
    instability_index: float | None = None
    aliphatic_index: float | None = None
    aromaticity: float | None = None


class ProteinPropertiesResult(ItemsResult):
    ph: float
    items: list[PropertiesItem]


class AlignmentResult(ToolResult):
    score: float
    mode: str
    alignment_length: int
    identical: int
    identity: float
    identity_over_reference: float
    substitutions: list[str]
    deletions: list[str]
    insertions: list[str]
    variant: str | None = None
    alignment: str | None = None


class Germline(ResultModel):
    gene: str
    species: str
    identity: float


class Region(ResultModel):
    model_config = ConfigDict(serialize_by_alias=True)

    sequence: str
    #: first and last position, as numbered ('H27', 'H38A'); null for a region with no residue
    from_: str | None = Field(None, alias="from")
    to: str | None = None


class VariableDomain(ResultModel):
    chain_type: str
    species: str | None = None
    start: int
    end: int
    #: 'H1:E' style: position (the scheme's number and insertion code) and residue
    numbering: list[str]
    v_gene: Germline | None = None
    j_gene: Germline | None = None
    regions: dict[str, Region] | None = None
    cdr_definition: str | None = None


class NumberingItem(Item):
    length: int | None = None
    domains: list[VariableDomain] | None = None


class NumberingResult(ItemsResult):
    scheme: str
    items: list[NumberingItem]


class EmbeddingResult(ToolResult):
    model: str
    n_sequences: int
    embedding_dim: int
    names: list[str]
    norms: list[float]
    artifacts: dict[str, str]
    cosine_similarity: list[list[float]] | None = None


class VariantItem(Item):
    variant: str | None = None
    n_mutations: int | None = None
    #: natural-log likelihood ratio against the wild type (the mean over the models)
    score: float | None = None
    per_model: dict[str, float] | None = None


class VariantScoresResult(ItemsResult):
    items: list[VariantItem]
    models: list[str]
    method: str
    units: str
    wild_type_length: int
    ranking_high_to_low: list[str]
    n_errors: int


class FoldResult(ToolResult):
    length: int
    model: str
    mean_plddt: float
    ptm: float
    plddt_per_residue: list[float]
    low_confidence_residues: list[int]
    memory_estimate_gb: float
    chunk_size: int | None
    artifacts: dict[str, str]


def _version(dist: str) -> str | None:
    from tools_server.plugin import distribution_version

    return distribution_version(dist)


# --- properties ---------------------------------------------------------------------------------------


class ProteinPropertiesInput(BaseModel):
    sequences: list[str] = Field(
        ..., min_length=1, max_length=1000, description="one-letter protein sequences"
    )
    ph: float = Field(7.0, ge=0, le=14, description="pH for the net charge")


@tool(name="protein_properties", resource="instant", read_only=True, idempotent=True, engines=("biopython",))
def protein_properties(args: ProteinPropertiesInput, ctx: ToolContext) -> ProteinPropertiesResult:
    """Sequence properties (Biopython ProtParam, the ExPASy ProtParam definitions) for each sequence.

    Returns per item: length, average molecular mass (Da), theoretical pI, net charge at `ph` (e),
    molar extinction coefficient at 280 nm in water (M^-1 cm^-1, all Cys reduced and all as cystines),
    absorbance of 1 g/L (0.1 %), GRAVY (Kyte-Doolittle), instability index (Guruprasad; > 40 unstable),
    aliphatic index (Ikai), aromaticity. A bad sequence is a per-item error (invalid_sequence).
    """
    from Bio.SeqUtils.ProtParam import ProteinAnalysis

    items = []
    for index, raw in enumerate(args.sequences):
        try:
            seq = clean_sequence(raw, max_length=MAX_PROTPARAM_LENGTH)
        except ToolError as err:
            items.append(PropertiesItem.failed(index, err))
            continue
        pa = ProteinAnalysis(seq)
        mass = pa.molecular_weight()
        eps_reduced, eps_cystines = pa.molar_extinction_coefficient()
        items.append(
            PropertiesItem(
                index=index,
                ok=True,
                length=len(seq),
                molecular_mass_da=round(mass, 2),
                isoelectric_point=round(pa.isoelectric_point(), 2),
                charge_at_ph=round(pa.charge_at_pH(args.ph), 3),
                extinction_coefficient_m1_cm1=ByCysteineState(cys_reduced=eps_reduced, cystines=eps_cystines),
                absorbance_0_1_percent=ByCysteineState(
                    cys_reduced=round(eps_reduced / mass, 3), cystines=round(eps_cystines / mass, 3)
                ),
                gravy=round(pa.gravy(), 3),
                instability_index=round(pa.instability_index(), 2),
                aliphatic_index=round(aliphatic_index(seq), 2),
                aromaticity=round(pa.aromaticity(), 4),
            )
        )
    ctx.set_engine("biopython", _version("biopython"), device="cpu")
    return ProteinPropertiesResult(ph=args.ph, items=items)


def aliphatic_index(seq: str) -> float:
    """Ikai (1980): mole percent Ala + 2.9 Val + 3.9 (Ile + Leu)."""
    n = len(seq)
    mole = {aa: 100.0 * seq.count(aa) / n for aa in "AVIL"}
    return mole["A"] + 2.9 * mole["V"] + 3.9 * (mole["I"] + mole["L"])


# --- alignment ----------------------------------------------------------------------------------------


class SequenceAlignInput(BaseModel):
    reference: str = Field(..., description="reference sequence; mutations are numbered in it (1-based)")
    query: str = Field(..., description="the sequence to compare")
    mode: Literal["global", "local"] = Field("global")
    matrix: str = Field(
        "BLOSUM62", max_length=20, description="substitution matrix name from Bio.Align.substitution_matrices"
    )
    open_gap_score: float = Field(-10.0, le=0)
    extend_gap_score: float = Field(-0.5, le=0)


@tool(name="sequence_align", resource="instant", read_only=True, idempotent=True, engines=("biopython",))
def sequence_align(args: SequenceAlignInput, ctx: ToolContext) -> AlignmentResult:
    """Pairwise protein alignment (Biopython PairwiseAligner, BLOSUM62, gap open -10 / extend -0.5 like
    EMBOSS needle). Returns score, identity (identical positions / alignment columns, and / reference
    length), substitutions in reference numbering as A23V (and joined 'A23V:G45D' usable by
    protein_variant_scores), insertions and deletions, and the alignment text for sequences up to 2,000.
    """
    from Bio import Align
    from Bio.Align import substitution_matrices

    ref = clean_sequence(
        args.reference, name="reference", max_length=MAX_ALIGN_LENGTH, alphabet=EXTENDED_AMINO_ACIDS
    )
    qry = clean_sequence(args.query, name="query", max_length=MAX_ALIGN_LENGTH, alphabet=EXTENDED_AMINO_ACIDS)
    aligner = Align.PairwiseAligner()
    aligner.mode = args.mode
    try:
        aligner.substitution_matrix = substitution_matrices.load(args.matrix)
    except (FileNotFoundError, ValueError) as exc:
        raise ToolError("invalid_input", f"Unknown substitution matrix {args.matrix!r}.") from exc
    aligner.open_gap_score = args.open_gap_score
    aligner.extend_gap_score = args.extend_gap_score
    alignment = aligner.align(ref, qry)[0]
    aligned_ref, aligned_qry = alignment[0], alignment[1]
    ref_start = int(alignment.coordinates[0][0])
    substitutions, insertions, deletions = [], [], []
    identical = 0
    ref_pos = ref_start  # 0-based index of the next reference residue
    for a, b in zip(aligned_ref, aligned_qry, strict=True):
        if a != "-" and b != "-":
            if a == b:
                identical += 1
            else:
                substitutions.append(f"{a}{ref_pos + 1}{b}")
            ref_pos += 1
        elif a != "-":
            deletions.append(f"{a}{ref_pos + 1}del")
            ref_pos += 1
        else:
            insertions.append(f"ins{ref_pos}_{ref_pos + 1}{b}")
    columns = len(aligned_ref)
    out = AlignmentResult(
        score=float(alignment.score),
        mode=args.mode,
        alignment_length=columns,
        identical=identical,
        identity=round(identical / columns, 4) if columns else 0.0,
        identity_over_reference=round(identical / len(ref), 4),
        substitutions=substitutions,
        deletions=deletions,
        insertions=insertions,
    )
    if not deletions and not insertions and substitutions:
        out.variant = ":".join(substitutions)
    if len(ref) <= 2000 and len(qry) <= 2000:
        out.alignment = str(alignment)
    ctx.set_engine("biopython", _version("biopython"), device="cpu")
    return out


# --- antibody numbering -------------------------------------------------------------------------------


class AntibodyNumberInput(BaseModel):
    sequences: list[str] = Field(
        ..., min_length=1, max_length=200, description="antibody variable domains (VH, VL, VHH, scFv)"
    )
    scheme: Literal["imgt", "kabat", "chothia", "martin", "aho", "wolfguy"] = Field("imgt")
    engine: Literal["auto", "anarcii", "anarci"] = Field(
        "auto",
        description="anarcii (language model, weights ship with the package) or anarci (HMMER, also assigns "
        "germlines); auto prefers anarcii.",
    )


@tool(
    name="antibody_number",
    resource="cpu",
    threads="all",
    read_only=True,
    idempotent=True,
    version="2",
    engines=("anarcii", "anarci", "hmmer"),
)
def antibody_number(args: AntibodyNumberInput, ctx: ToolContext) -> NumberingResult:
    """Number antibody variable domains in a standard scheme with ANARCII or ANARCI.

    Returns per sequence and domain: chain type (H, K, L), species and identity of the best germline hit,
    the numbered residues ('H1', 'H82A' style positions: the scheme's number plus insertion code) and the
    framework and CDR regions (IMGT CDR definitions for the imgt scheme; Kabat for kabat; Chothia for
    chothia and martin) as sequences with their number ranges. Per-item errors for unnumberable sequences.
    Germline genes are assigned by the anarci engine only.
    """
    import importlib.util
    import os
    import sys

    from tools_server.protein.numbering import number_sequences, number_with_anarcii

    if args.engine == "anarcii" or (args.engine == "auto" and importlib.util.find_spec("anarcii")):
        try:
            import anarcii  # noqa: F401
        except ImportError as exc:
            raise ToolError(
                "engine_unavailable", "ANARCII is not installed.", hint="pip install anarcii"
            ) from exc
        ctx.set_engine("anarcii", _version("anarcii"), device="cuda" if ctx.gpu_available else "cpu")
        return NumberingResult(
            **number_with_anarcii(args.sequences, args.scheme, ctx.threads, ctx.gpu_available)
        )
    try:
        import anarci
    except ImportError as exc:
        raise ToolError(
            "engine_unavailable",
            "ANARCI is not installed.",
            hint="pip install anarci hmmer (see docs/proteins.md)",
        ) from exc
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    ctx.set_engine("anarci", _version("anarci"), device="cpu")
    return NumberingResult(**number_sequences(anarci, args.sequences, args.scheme))


# --- ESM language models ------------------------------------------------------------------------------


class ProteinEmbedInput(BaseModel):
    sequences: list[str] = Field(..., min_length=1, max_length=2000)
    model: str = Field(
        "esm2_t33_650M_UR50D",
        max_length=120,
        description="fair-esm model name (weights in SPU_WEIGHTS_DIR/esm)",
    )
    names: list[str] | None = Field(None, description="labels for the sequences, same order")


@tool(
    name="protein_embed",
    resource="gpu",
    threads="all",
    items="sequences",
    read_only=True,
    idempotent=True,
    engines=("fair-esm", "torch"),
    version="1",
)
def protein_embed(args: ProteinEmbedInput, ctx: ToolContext) -> EmbeddingResult:
    """ESM-2 mean embeddings of protein sequences (mean over residues of the last layer).

    Returns the embedding dimension, per-sequence vector norms, pairwise cosine similarities (inline
    for up to 50 sequences), and artifact paths: embeddings.npy (N x D float32, in input order) and
    similarity.npy. Sequences up to 1,022 residues; weights from SPU_WEIGHTS_DIR (error weights_missing).
    """
    import numpy as np

    from tools_server.plugin import ONE_TASK_EACH, map_items
    from tools_server.protein import language_model, weights

    seqs = [
        clean_sequence(
            s, name=f"sequence {i}", max_length=language_model.MAX_RESIDUES, alphabet=EXTENDED_AMINO_ACIDS
        )
        for i, s in enumerate(args.sequences)
    ]
    if args.names is not None and len(args.names) != len(seqs):
        raise ToolError("invalid_input", "names must have one entry per sequence.")
    weights.check_esm(args.model)
    device = language_model.pick_device(ctx.gpu_available)
    _threads(ctx)
    ctx.set_engine("fair-esm", _version("fair-esm"), device=device, model=args.model)
    # The sequences are the items, in runs of whole model batches (the batches, and so the numbers, are
    # the ones one process computes); one process here, the model loaded once; on a Dask cluster the runs
    # become tasks. The similarity matrix couples the sequences: it is computed once all are back.
    runs = _runs(len(seqs), language_model.BATCH, ONE_TASK_EACH)
    parts = map_items(
        embed_run,
        [(args.model, seqs[a:b], device) for a, b in runs],
        1,
        lambda d, total: ctx.progress(d / total, f"embedded {d}/{total} parts"),
    )
    emb = np.concatenate(parts, axis=0)
    norms = np.linalg.norm(emb, axis=1)
    unit = emb / np.maximum(norms[:, None], 1e-12)
    sim = unit @ unit.T
    emb_path, sim_path = ctx.artifact("embeddings.npy"), ctx.artifact("similarity.npy")
    np.save(emb_path, emb)
    np.save(sim_path, sim.astype(np.float32))
    return EmbeddingResult(
        model=args.model,
        n_sequences=len(seqs),
        embedding_dim=int(emb.shape[1]),
        names=args.names or [f"seq{i}" for i in range(len(seqs))],
        norms=[round(float(x), 4) for x in norms],
        artifacts={"embeddings_npy": str(emb_path), "similarity_npy": str(sim_path)},
        **(
            {"cosine_similarity": [[round(float(x), 4) for x in row] for row in sim]}
            if len(seqs) <= 50
            else {}
        ),
    )


class VariantScoresInput(BaseModel):
    wild_type: str = Field(..., description="wild-type sequence; mutation positions are 1-based in it")
    variants: list[str] = Field(
        ...,
        min_length=1,
        max_length=20000,
        description="mutants like 'A23V' or 'A23V:G45D'; 'WT' is the wild type",
    )
    model: str = Field(
        "auto",
        max_length=120,
        description="'auto' (ESM-1v ensemble if its weights are present, else esm2_t33_650M_UR50D), 'esm1v' "
        "(ensemble of the ESM-1v models present), or a fair-esm model name",
    )
    method: Literal["masked_marginal", "masked_marginal_joint", "wildtype_marginal"] = Field(
        "masked_marginal"
    )


@tool(
    name="protein_variant_scores",
    resource="gpu",
    threads="all",
    items="variants",
    read_only=True,
    idempotent=True,
    engines=("fair-esm", "torch"),
)
def protein_variant_scores(args: VariantScoresInput, ctx: ToolContext) -> VariantScoresResult:
    """Zero-shot variant effect scores from ESM language models (higher = more likely = more tolerated).

    Score = sum over mutated positions of log p(mutant) - log p(wild type), natural log, relative to the
    given wild type (Meier et al. 2021). masked_marginal masks each mutated position in the wild type
    (additive; the default), masked_marginal_joint masks all of a variant's positions together,
    wildtype_marginal uses one unmasked pass. With several models (ESM-1v ensemble) the score is their
    mean and per-model scores are listed. Bad variants are per-item errors (invalid_mutation); a bad wild
    type fails the call (invalid_sequence). Returns items in input order and a ranking from highest score.
    """
    from tools_server.plugin import ONE_TASK_EACH, map_items
    from tools_server.protein import language_model, weights

    wt = clean_sequence(args.wild_type, name="wild type", max_length=language_model.MAX_RESIDUES)
    items: list[VariantItem] = []
    parsed = []
    for index, text in enumerate(args.variants):
        try:
            muts = parse_mutations(text, wt)
        except ToolError as err:
            items.append(VariantItem.failed(index, err, variant=text))
            continue
        items.append(VariantItem(index=index, variant=format_mutations(muts), ok=True, n_mutations=len(muts)))
        parsed.append((index, muts))
    if not parsed:  # every variant is wrong: say so before any weights are looked for or loaded
        return VariantScoresResult(
            models=[],
            method=args.method,
            units="natural-log likelihood ratio vs wild type",
            wild_type_length=len(wt),
            items=items,
            ranking_high_to_low=[],
            n_errors=len(items),
        )
    models = _variant_models(args.model)
    for name in models:
        weights.check_esm(name)
    device = language_model.pick_device(ctx.gpu_available)
    _threads(ctx)
    ctx.set_engine("fair-esm", _version("fair-esm"), device=device, models=models)
    variants = [m for _, m in parsed]
    # The variants are the items, but the work is the forward passes they share (masked_marginal: one per
    # distinct mutated position, whatever the number of variants there), so it is split by forward pass:
    # runs of whole model batches, model by model (the batches, and so the numbers, are the ones one
    # process computes). One process here, each model loaded once; on a Dask cluster the runs become tasks,
    # at most ONE_TASK_EACH in all so that Dask takes them model by model and a worker loads each model
    # once. Scores, the ensemble mean and the ranking couple the runs: computed once all are back.
    groups, mask = language_model.forward_groups(wt, variants, args.method)
    runs = _runs(len(groups), language_model.BATCH, max(1, ONE_TASK_EACH // len(models)))
    jobs = [(wt, name, groups[a:b], mask, device) for name in models for a, b in runs]
    parts = map_items(
        variant_log_probs, jobs, 1, lambda d, total: ctx.progress(d / total, f"scored {d}/{total} parts")
    )
    per_model: dict[str, list[float]] = {}
    for k, name in enumerate(models):
        mine = parts[k * len(runs) : (k + 1) * len(runs)]
        tokens = mine[0]["tok_to_idx"]
        log_probs = [row for part in mine for row in part["log_probs"]]
        per_model[name] = language_model.scores_from(
            args.method, variants, groups, log_probs, lambda t, tokens=tokens: tokens.get(t, tokens["<unk>"])
        )
    for j, (index, _muts) in enumerate(parsed):
        scores = [float(per_model[n][j]) for n in models]
        items[index].score = round(sum(scores) / len(scores), 4)
        if len(models) > 1:
            items[index].per_model = {n: round(s, 4) for n, s in zip(models, scores, strict=True)}
    ranked = sorted((it for it in items if it.ok), key=lambda it: -it.score)
    return VariantScoresResult(
        models=models,
        method=args.method,
        units="natural-log likelihood ratio vs wild type",
        wild_type_length=len(wt),
        items=items,
        ranking_high_to_low=[it.variant for it in ranked[:200]],
        n_errors=sum(1 for it in items if not it.ok),
    )


def _runs(n: int, batch: int, most: int) -> list[tuple[int, int]]:
    """``range(n)`` in at most ``most`` runs ``(start, end)`` of whole batches of ``batch`` (the last may be
    short), of about equal length."""
    batches = -(-n // batch)
    parts = max(1, min(batches, most))
    edges = [batch * (batches * k // parts) for k in range(parts)] + [n]
    return [(edges[k], min(edges[k + 1], n)) for k in range(parts)]


def embed_run(name: str, sequences: list[str], device: str) -> Any:
    """Mean embeddings (len(sequences), D) of a run of ``protein_embed``'s sequences; the model is loaded
    once per process (cached)."""
    from tools_server.protein import language_model, weights

    model, alphabet = weights.load_esm(name)
    return language_model.mean_embeddings(model, alphabet, sequences, device)


def variant_log_probs(
    wild_type: str, name: str, groups: list[tuple[int, ...]], mask: bool, device: str
) -> dict[str, Any]:
    """Log-probabilities at each group of positions (masked, or not), a run of
    ``protein_variant_scores``' forward passes with model ``name`` (loaded once per process, cached), and
    the model's token columns."""
    from tools_server.protein import language_model, weights

    model, alphabet = weights.load_esm(name)
    rows = language_model.log_probs_at(model, alphabet, wild_type, groups, device, mask=mask)
    return {"tok_to_idx": dict(alphabet.tok_to_idx), "log_probs": [row.numpy() for row in rows]}


def _variant_models(choice: str) -> list[str]:
    from tools_server.protein import weights

    if choice in ("auto", "esm1v"):
        present = weights.available_esm1v()
        if present:
            return present
        if choice == "esm1v":
            raise weights.weights_missing(
                "the ESM-1v ensemble", weights.esm_dir() / f"{weights.ESM1V_MODELS[0]}.pt"
            )
        return [weights.DEFAULT_ESM2]
    return [choice]


def _threads(ctx: ToolContext) -> None:
    import torch

    torch.set_num_threads(max(1, ctx.threads))


# --- ESMFold ------------------------------------------------------------------------------------------


class ProteinFoldInput(BaseModel):
    sequence: str = Field(..., description="one protein chain, one-letter code")
    model: str = Field("esmfold_v1", max_length=120, description="folder name under SPU_WEIGHTS_DIR/esmfold")
    max_residues: int = Field(1000, ge=1, le=4000, description="hard length limit")
    max_memory_gb: float | None = Field(None, gt=0, description="cap on memory the fold may use")
    num_recycles: int | None = Field(
        None, ge=0, le=24, description="recycling passes after the first; default: the model's (3)"
    )


@tool(
    name="protein_fold",
    resource="gpu",
    threads="all",
    read_only=True,
    idempotent=True,
    engines=("transformers", "torch"),
)
def protein_fold(args: ProteinFoldInput, ctx: ToolContext) -> FoldResult:
    """Predict a structure with ESMFold (transformers implementation).

    Before loading, estimates the memory the fold needs (weights plus activations growing with L^2 and L^3)
    and refuses with too_large, saying the longest sequence that fits, instead of being killed.
    Returns mean pLDDT (0-100), per-residue pLDDT, pTM (0-1), a low-confidence warning when mean pLDDT < 70,
    and the PDB artifact (pLDDT in the B-factor column).
    """
    import numpy as np

    from tools_server.protein import folding, language_model, weights

    seq = clean_sequence(args.sequence, max_length=args.max_residues, alphabet=STANDARD_AMINO_ACIDS + "X")
    device = language_model.pick_device(ctx.gpu_available)
    folder = weights.find_esmfold(args.model)
    config = weights.esmfold_config(args.model)
    wbytes = folding.weight_bytes(folder)
    chunk = folding.DEFAULT_CHUNK if len(seq) > folding.CHUNK_ABOVE_RESIDUES else None
    need = folding.estimate_bytes(config, len(seq), wbytes, chunk)
    budget = folding.memory_budget_bytes(device, args.max_memory_gb)
    if need > budget:
        fits = folding.max_residues_within(config, budget, wbytes)
        raise ToolError(
            "too_large",
            f"Folding {len(seq)} residues needs about {need / 1024**3:.1f} GiB on {device}; "
            f"{budget / 1024**3:.1f} GiB is available.",
            hint=(f"Sequences up to about {fits} residues fit here; " if fits else "")
            + "split the protein into domains, or run on a GPU with more memory.",
            estimate_gb=round(need / 1024**3, 2),
            available_gb=round(budget / 1024**3, 2),
            max_residues_that_fit=fits,
        )
    model = weights.load_esmfold(args.model)
    _threads(ctx)
    ctx.set_engine("transformers-esmfold", _version("transformers"), device=device, model=args.model)
    ctx.progress(0.1, "folding")
    result = folding.fold(model, seq, device, chunk, args.num_recycles)
    pdb_path = ctx.artifact("structure.pdb")
    pdb_path.write_text(result["pdb"])
    plddt = result["plddt"]
    mean = float(np.mean(plddt))
    if mean < 70:
        ctx.warn(f"Mean pLDDT {mean:.1f} < 70: low confidence; treat the structure as a rough model.")
    return FoldResult(
        length=len(seq),
        model=args.model,
        mean_plddt=round(mean, 2),
        ptm=round(float(result["ptm"]), 4),
        plddt_per_residue=[round(float(x), 1) for x in plddt],
        low_confidence_residues=[i + 1 for i, x in enumerate(plddt) if x < 50][:200],
        memory_estimate_gb=round(need / 1024**3, 2),
        chunk_size=chunk,
        artifacts={"pdb": str(pdb_path)},
        warnings=list(ctx.warnings),
    )
