"""Cheminformatics tools (RDKit): parse, descriptors, similarity, substructure, conformers, depiction.

Every tool takes a batch of molecule strings (SMILES, molblock, XYZ text, or a path to an SDF/MOL/XYZ
file such as an earlier tool's artifact; see ``tools_server.molecules``) and answers per item: one
bad molecule gives an ``ok: false`` item with a stable error code and never fails the batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag

from tools_server.molecules import MoleculeText
from tools_server.plugin import (
    BatchResult,
    FiniteOrNull,
    Item,
    ItemsResult,
    ResultModel,
    ToolContext,
    ToolError,
    ToolResult,
    tool,
)

MoleculeList = list[MoleculeText]
_MOL_DESC = (
    "Molecules: SMILES, molblock, XYZ text, or a path to an .sdf/.mol/.xyz file (an earlier tool's artifact; "
    "'file.sdf#3' picks record 3, counting from 0)."
)


class StereoCounts(ResultModel):
    centres_assigned: int
    centres_unassigned: int
    double_bonds_assigned: int
    double_bonds_unassigned: int


class ParseItem(Item):
    canonical_smiles: str | None = None
    inchikey: str | None = None
    formula: str | None = None
    average_mass_g_mol: float | None = None
    monoisotopic_mass_da: float | None = None
    formal_charge: int | None = None
    heavy_atoms: int | None = None
    fragments: int | None = None
    radical_electrons: int | None = None
    stereo: StereoCounts | None = None


class ParseResult(BatchResult):
    items: list[ParseItem]


class PhyschemDescriptors(ResultModel):
    """The ``physchem`` preset (each field's unit is in the result's ``units``; null where RDKit gives no
    finite number)."""

    mol_weight_g_mol: FiniteOrNull
    exact_mass_da: FiniteOrNull
    logp_crippen: FiniteOrNull
    molar_refractivity_cm3_mol: FiniteOrNull
    tpsa_a2: FiniteOrNull
    hbd: int
    hba: int
    rotatable_bonds: int
    heavy_atoms: int
    rings: int
    aromatic_rings: int
    fraction_csp3: FiniteOrNull
    formal_charge: int
    #: stereocentres, assigned and unassigned; of the assigned ones, those with the CIP label R and S
    stereocenters: int
    stereocenters_r: int
    stereocenters_s: int
    qed: FiniteOrNull


class LipinskiDescriptors(ResultModel):
    """The ``lipinski`` preset: the rule-of-five terms and violations, and Veber's rule."""

    mol_weight_g_mol: FiniteOrNull
    logp_crippen: FiniteOrNull
    lipinski_hbd: int
    lipinski_hba: int
    lipinski_violations: int
    hbd: int
    rotatable_bonds: int
    tpsa_a2: FiniteOrNull
    veber_ok: bool


#: the model of each preset's descriptors (``all`` and explicit ``names`` give RDKit's names, an open map)
PRESET_MODELS: dict[str, type[ResultModel]] = {
    "physchem": PhyschemDescriptors,
    "lipinski": LipinskiDescriptors,
}


def _descriptor_set(value: Any) -> str:
    """Which of :class:`DescriptorItem`'s forms ``value`` takes: a preset's model, or the open map of RDKit
    names (a map with exactly a preset's keys is that preset's)."""
    if isinstance(value, BaseModel):
        return "physchem" if isinstance(value, PhyschemDescriptors) else "lipinski"
    keys = set(value) if isinstance(value, dict) else set()
    for name, model in PRESET_MODELS.items():
        if keys == set(model.model_fields):
            return name
    return "named"


def _any_of(schema: dict[str, Any]) -> None:
    """The descriptors' schema as ``anyOf``: a preset's fields also fit the open map, so JSON Schema's
    ``oneOf`` (exactly one) would refuse them."""
    for branch in schema.get("anyOf", []):
        if "oneOf" in branch:
            branch["anyOf"] = branch.pop("oneOf")


class DescriptorItem(Item):
    smiles: str | None = None
    #: a preset's fields, or RDKit descriptor name -> value (counts and flags as integers and booleans; null
    #: where RDKit gives no number)
    descriptors: (
        Annotated[
            Annotated[PhyschemDescriptors, Tag("physchem")]
            | Annotated[LipinskiDescriptors, Tag("lipinski")]
            | Annotated[dict[str, bool | int | FiniteOrNull], Tag("named")],
            Discriminator(_descriptor_set),
        ]
        | None
    ) = Field(None, json_schema_extra=_any_of)


class DescriptorsResult(BatchResult):
    preset: str | None
    units: dict[str, str]
    items: list[DescriptorItem]


class Neighbour(ResultModel):
    index: int
    similarity: float


class SimilarityItem(Item):
    nearest: list[Neighbour] | None = None


class SimilarityResult(ItemsResult):
    fingerprint: str
    metric: str
    n_molecules: int
    n_references: int
    matrix: list[list[float | None]] | None = None
    matrix_csv: str | None = None
    reference_errors: list[Item] | None = None
    items: list[SimilarityItem]


class SubstructureItem(Item):
    counts: dict[str, int] | None = None


class SubstructureResult(ItemsResult):
    n_molecules: int
    n_matching: dict[str, int]
    items: list[SubstructureItem]


class ConformerItem(Item):
    smiles: str | None = None
    force_field: str | None = None
    n_conformers: int | None = None
    energies_kcal_mol: list[float] | None = None
    relative_energies_kcal_mol: list[float] | None = None
    sdf: str | None = None


class ConformersResult(ItemsResult):
    n_molecules: int
    items: list[ConformerItem]


class DepictResult(ToolResult):
    png: str
    width_px: int
    height_px: int
    n_drawn: int
    errors: list[Item]


def _keys(molecules: list[str]) -> list[str]:
    from tools_server.molecules import cache_key

    return [cache_key(m) for m in molecules]


def _item_keys(molecules: list[str]) -> list[str]:
    """:func:`_keys` for a tool that reports a molecule over the size limits as an item error, not as the
    call's: such a molecule is keyed by its text."""
    import hashlib

    from tools_server.molecules import MoleculeError, cache_key

    keys = []
    for text in molecules:
        try:
            keys.append(cache_key(text))
        except MoleculeError:
            keys.append("raw:" + hashlib.sha256(text.strip().encode()).hexdigest())
    return keys


def _error_item(index: int, exc: Exception) -> dict[str, Any]:
    from tools_server.molecules import MoleculeError

    if isinstance(exc, MoleculeError):
        return {"index": index, "ok": False, "error": exc.to_dict()}
    return {
        "index": index,
        "ok": False,
        "error": {"code": "invalid_input", "message": f"{type(exc).__name__}: {exc}"},
    }


def _parse_all(
    molecules: list[str], ctx: ToolContext | None = None
) -> list[tuple[Any, list[str], dict | None]]:
    """(mol or None, warnings, error item or None) for each input."""
    from tools_server.molecules import parse_rdkit

    out: list[tuple[Any, list[str], dict | None]] = []
    n = len(molecules)
    for i, text in enumerate(molecules):
        try:
            mol, warnings = parse_rdkit(text)
            out.append((mol, warnings, None))
        except Exception as exc:
            out.append((None, [], _error_item(i, exc)))
        if ctx is not None and n > 200 and i % 200 == 0:
            ctx.progress(0.5 * i / n, f"parsed {i}/{n}")
    return out


def _set_rdkit_engine(ctx: ToolContext) -> None:
    # the installed distribution's version, as the provenance's `engines` table spells it (rdBase's own
    # string pads the month: 2026.09.1 beside 2026.9.1)
    ctx.set_engine("rdkit", device="cpu")


# --------------------------------------------------------------------------------------------------
# chem_parse
# --------------------------------------------------------------------------------------------------


class ParseInput(BaseModel):
    molecules: MoleculeList = Field(..., min_length=1, max_length=10_000, description=_MOL_DESC)


def _stereo_summary(mol: Any) -> dict[str, int]:
    from rdkit import Chem

    counts = {
        "centres_assigned": 0,
        "centres_unassigned": 0,
        "double_bonds_assigned": 0,
        "double_bonds_unassigned": 0,
    }
    for info in Chem.FindPotentialStereo(mol):
        assigned = info.specified == Chem.StereoSpecified.Specified
        if info.type in (
            Chem.StereoType.Atom_Tetrahedral,
            Chem.StereoType.Atom_SquarePlanar,
            Chem.StereoType.Atom_TrigonalBipyramidal,
            Chem.StereoType.Atom_Octahedral,
        ):
            counts["centres_assigned" if assigned else "centres_unassigned"] += 1
        elif info.type == Chem.StereoType.Bond_Double:
            counts["double_bonds_assigned" if assigned else "double_bonds_unassigned"] += 1
    return counts


def parse_one(index: int, mol: Any, warnings: list[str]) -> ParseItem:
    from rdkit import Chem
    from rdkit.Chem import Descriptors, rdMolDescriptors

    from tools_server.molecules import rdkit_messages

    warnings = list(warnings)
    with rdkit_messages() as inchi_messages:
        inchikey = Chem.MolToInchiKey(mol) or None
    warnings += [f"InChI: {m}" for m in inchi_messages]
    stereo = _stereo_summary(mol)
    fragments = len(Chem.GetMolFrags(mol))
    radicals = Descriptors.NumRadicalElectrons(mol)
    if fragments > 1:
        warnings.append(f"{fragments} disconnected fragments (salt, mixture or counter-ion)")
    if stereo["centres_unassigned"] or stereo["double_bonds_unassigned"]:
        warnings.append(
            "unassigned stereo: the SMILES stands for a mixture of stereoisomers or is underspecified"
        )
    if radicals:
        warnings.append(f"{radicals} radical electron(s)")
    return ParseItem(
        index=index,
        ok=True,
        canonical_smiles=Chem.MolToSmiles(mol),
        inchikey=inchikey,
        formula=rdMolDescriptors.CalcMolFormula(mol),
        average_mass_g_mol=round(Descriptors.MolWt(mol), 4),
        monoisotopic_mass_da=round(Descriptors.ExactMolWt(mol), 6),
        formal_charge=Chem.GetFormalCharge(mol),
        heavy_atoms=mol.GetNumHeavyAtoms(),
        fragments=fragments,
        radical_electrons=radicals,
        stereo=StereoCounts(**stereo),
        warnings=warnings,
    )


@tool(
    name="chem_parse",
    resource="cpu",
    read_only=True,
    idempotent=True,
    engines=("rdkit",),
    time_limit_s=600,
    canonicalize=lambda a: {"molecules": _item_keys(a.molecules)},
    title="Parse and check molecules",
)
def chem_parse(args: ParseInput, ctx: ToolContext) -> ParseResult:
    """Parse molecules and report identity: canonical SMILES, InChIKey, Hill formula, average mass (g/mol),
    monoisotopic mass (Da), formal charge (e), heavy atoms, fragments, radical electrons, stereo counts
    (tetrahedral centres and double bonds, assigned and unassigned) and warnings (RDKit sanitisation,
    InChI, mixtures, unassigned stereo). Input: SMILES or molblock (or XYZ / an SDF path). One item per
    input, in order; an unreadable input is an item with ok=false and error.code (e.g. invalid_smiles).
    Large batches also come as a CSV artifact (table_csv)."""
    _set_rdkit_engine(ctx)
    items = []
    for i, (mol, warnings, error) in enumerate(_parse_all(args.molecules)):
        items.append(ParseItem.model_validate(error) if error else parse_one(i, mol, warnings))
    from tools_server.plugin import table_result

    n_ok = sum(1 for it in items if it.ok)
    return ParseResult(
        n_molecules=len(items), n_ok=n_ok, n_failed=len(items) - n_ok, **table_result(ctx, "parsed", items)
    )


# --------------------------------------------------------------------------------------------------
# chem_descriptors
# --------------------------------------------------------------------------------------------------


class DescriptorInput(BaseModel):
    molecules: MoleculeList = Field(..., min_length=1, max_length=10_000, description=_MOL_DESC)
    preset: Literal["physchem", "lipinski", "all"] = Field(
        "physchem",
        description="physchem: MW, exact mass, Crippen logP, TPSA, HBD/HBA, rotatable bonds, rings, Fsp3, "
        "charge, stereocentres (all, R, S), QED; lipinski: rule-of-five and Veber terms; all: every RDKit "
        "descriptor (~210).",
    )
    names: list[str] | None = Field(
        None,
        max_length=300,
        description="Exact RDKit descriptor names (rdkit.Chem.Descriptors); overrides preset.",
    )


def _descriptor_key(args: DescriptorInput) -> dict[str, Any]:
    return {"molecules": _keys(args.molecules), "preset": args.preset, "names": args.names}


@tool(
    name="chem_descriptors",
    version="2",
    resource="cpu",
    read_only=True,
    idempotent=True,
    engines=("rdkit",),
    time_limit_s=1800,
    canonicalize=_descriptor_key,
    title="Molecular descriptors",
)
def chem_descriptors(args: DescriptorInput, ctx: ToolContext) -> DescriptorsResult:
    """Compute RDKit descriptors for up to 10,000 molecules. Presets: `physchem` (mol_weight_g_mol,
    exact_mass_da, logp_crippen, tpsa_a2 in Å², hbd, hba, rotatable_bonds, rings, fraction_csp3,
    stereocenters with stereocenters_r and stereocenters_s by CIP label, qed ...), `lipinski` (rule-of-five
    terms and violations, Veber), `all` (every RDKit descriptor under its RDKit name), or explicit RDKit
    descriptor `names`. Output: `units` (per field), one item per molecule with `descriptors` (floats to 10
    significant digits); per-item errors (ok=false, error.code). Large tables are written to `table_csv` with
    a preview inline. logp_crippen is Wildman-Crippen, not PubChem's XLogP3."""
    from tools_server.chem import descriptors
    from tools_server.plugin import table_result

    if args.names:
        known = set(descriptors.rdkit_descriptor_names())
        unknown = [n for n in args.names if n not in known]
        if unknown:
            raise ToolError(
                "invalid_input",
                f"Unknown RDKit descriptor names: {', '.join(unknown[:10])}",
                hint="Names are case-sensitive, e.g. MolWt, TPSA, NumHDonors, MolLogP.",
            )
    _set_rdkit_engine(ctx)
    parsed = _parse_all(args.molecules, ctx)
    items = []
    n = len(parsed)
    for i, (mol, warnings, error) in enumerate(parsed):
        if error:
            items.append(DescriptorItem.model_validate(error))
            continue
        try:
            from rdkit import Chem

            values = descriptors.compute(mol, args.preset, args.names)
            typed = None if args.names else PRESET_MODELS.get(args.preset)
            item = DescriptorItem(
                index=i,
                ok=True,
                smiles=Chem.MolToSmiles(mol),
                descriptors=typed(**values) if typed else values,
                warnings=warnings or None,
            )
            items.append(item)
        except Exception as exc:
            items.append(DescriptorItem.model_validate(_error_item(i, exc)))
        if n > 200 and i % 200 == 0:
            ctx.progress(0.5 + 0.5 * i / n, f"descriptors {i}/{n}")
    table = table_result(ctx, "descriptors", items)
    n_ok = sum(1 for it in items if it.ok)
    return DescriptorsResult(
        preset=None if args.names else args.preset,
        units=descriptors.units_for(args.preset, args.names),
        n_molecules=n,
        n_ok=n_ok,
        n_failed=n - n_ok,
        **table,
    )


# --------------------------------------------------------------------------------------------------
# chem_similarity
# --------------------------------------------------------------------------------------------------


class SimilarityInput(BaseModel):
    molecules: MoleculeList = Field(..., min_length=1, max_length=10_000, description=_MOL_DESC)
    references: MoleculeList | None = Field(
        None,
        max_length=10_000,
        description="Compare each molecule against these; omit for the all-pairs matrix of `molecules`.",
    )
    fingerprint: Literal["morgan", "maccs", "rdkit", "atompair"] = "morgan"
    radius: int = Field(2, ge=1, le=4, description="Morgan radius (2 ~ ECFP4).")
    n_bits: int = Field(
        2048, ge=64, le=16384, description="Fingerprint length (not used by MACCS, 167 keys)."
    )
    use_features: bool = Field(False, description="Morgan with feature invariants (FCFP-like).")
    metric: Literal["tanimoto", "dice"] = "tanimoto"
    top_k: int = Field(5, ge=1, le=100, description="Nearest neighbours listed per molecule.")


def _similarity_key(args: SimilarityInput) -> dict[str, Any]:
    data = args.model_dump()
    data["molecules"] = _keys(args.molecules)
    data["references"] = _keys(args.references) if args.references else None
    return data


@tool(
    name="chem_similarity",
    resource="cpu",
    read_only=True,
    idempotent=True,
    engines=("rdkit",),
    time_limit_s=1800,
    canonicalize=_similarity_key,
    title="Fingerprint similarity",
)
def chem_similarity(args: SimilarityInput, ctx: ToolContext) -> SimilarityResult:
    """Fingerprint similarity (Tanimoto or Dice, 0-1) with Morgan (radius, n_bits), MACCS, RDKit path or
    atom-pair fingerprints. Without `references`: the all-pairs matrix of `molecules`; with them: each
    molecule against every reference. Output per molecule: its `top_k` most similar partners (index,
    similarity); the full matrix inline as `matrix` when it has at most 2,500 cells, otherwise as a CSV
    artifact `matrix_csv` (rows = molecules, columns = references). Invalid molecules are items with
    ok=false; their matrix rows/columns are empty."""
    import numpy as np

    from tools_server.chem.fingerprints import bulk_similarity, fingerprint

    _set_rdkit_engine(ctx)
    parsed = _parse_all(args.molecules, ctx)
    self_matrix = args.references is None
    ref_parsed = parsed if self_matrix else _parse_all(args.references or [])

    def fps(rows: list[tuple[Any, list[str], dict | None]]) -> list[Any]:
        return [
            fingerprint(
                m, args.fingerprint, radius=args.radius, n_bits=args.n_bits, use_features=args.use_features
            )
            if m is not None
            else None
            for m, _, _ in rows
        ]

    q_fps = fps(parsed)
    r_fps = q_fps if self_matrix else fps(ref_parsed)
    r_valid = [j for j, f in enumerate(r_fps) if f is not None]
    matrix = np.full((len(q_fps), len(r_fps)), np.nan)
    items: list[SimilarityItem] = []
    for i, f in enumerate(q_fps):
        if f is None:
            items.append(
                SimilarityItem.model_validate(parsed[i][2] or _error_item(i, ValueError("unreadable")))
            )
            continue
        sims = bulk_similarity(f, [r_fps[j] for j in r_valid], args.metric)
        matrix[i, r_valid] = sims
        order = [j for j in np.argsort(-matrix[i], kind="stable") if not np.isnan(matrix[i, j])]
        if self_matrix:
            order = [j for j in order if j != i]
        items.append(
            SimilarityItem(
                index=i,
                ok=True,
                nearest=[
                    Neighbour(index=int(j), similarity=round(float(matrix[i, j]), 4))
                    for j in order[: args.top_k]
                ],
            )
        )
        if len(q_fps) > 200 and i % 200 == 0:
            ctx.progress(0.5 + 0.5 * i / len(q_fps), f"similarity {i}/{len(q_fps)}")
    ref_errors = [] if self_matrix else [e for _, _, e in ref_parsed if e]
    from tools_server.plugin import table_result

    out: dict[str, Any] = {}
    if matrix.size <= 2500:
        out["matrix"] = [[None if np.isnan(v) else round(float(v), 4) for v in row] for row in matrix]
    else:
        path = ctx.artifact("similarity_matrix.csv")
        np.savetxt(path, matrix, delimiter=",", fmt="%.4f")
        out["matrix_csv"] = str(path)
    if ref_errors:
        out["reference_errors"] = [Item.model_validate(e) for e in ref_errors[:50]]
    return SimilarityResult(
        fingerprint=args.fingerprint,
        metric=args.metric,
        n_molecules=len(q_fps),
        n_references=len(r_fps),
        **out,
        **table_result(ctx, "nearest", items),
    )


# --------------------------------------------------------------------------------------------------
# chem_substructure
# --------------------------------------------------------------------------------------------------


class SubstructureInput(BaseModel):
    molecules: MoleculeList = Field(..., min_length=1, max_length=10_000, description=_MOL_DESC)
    smarts: list[str] = Field(..., min_length=1, max_length=200, description="SMARTS patterns to count.")
    names: list[str] | None = Field(None, description="A name per pattern (defaults to the SMARTS itself).")
    unique: bool = Field(True, description="Count matches that differ in their atom sets only once.")


def _substructure_key(args: SubstructureInput) -> dict[str, Any]:
    return {**args.model_dump(), "molecules": _keys(args.molecules)}


@tool(
    name="chem_substructure",
    resource="cpu",
    read_only=True,
    idempotent=True,
    engines=("rdkit",),
    time_limit_s=1800,
    canonicalize=_substructure_key,
    title="SMARTS substructure counts",
)
def chem_substructure(args: SubstructureInput, ctx: ToolContext) -> SubstructureResult:
    """Count SMARTS substructure matches in each molecule. Output: per molecule `counts` {pattern name:
    number of matches}; `n_matching` {pattern name: molecules with at least one match}. An invalid SMARTS
    fails the call (invalid_input); an invalid molecule is an item with ok=false."""
    from rdkit import Chem

    from tools_server.molecules import rdkit_messages
    from tools_server.plugin import table_result

    names = args.names or args.smarts
    if len(names) != len(args.smarts):
        raise ToolError("invalid_input", f"{len(names)} names for {len(args.smarts)} SMARTS patterns")
    patterns = []
    for name, sm in zip(names, args.smarts, strict=True):
        with rdkit_messages() as msgs:
            patt = Chem.MolFromSmarts(sm)
        if patt is None:
            raise ToolError(
                "invalid_input",
                f"Invalid SMARTS {sm!r} ({name}): {'; '.join(msgs)}",
                hint="Check the SMARTS syntax, e.g. '[CX3](=O)[OX2H1]' for a carboxylic acid.",
            )
        patterns.append((name, patt))
    _set_rdkit_engine(ctx)
    items = []
    n_matching = {name: 0 for name, _ in patterns}
    for i, (mol, _, error) in enumerate(_parse_all(args.molecules, ctx)):
        if error:
            items.append(SubstructureItem.model_validate(error))
            continue
        counts = {}
        for name, patt in patterns:
            counts[name] = len(mol.GetSubstructMatches(patt, uniquify=args.unique, maxMatches=100_000))
            n_matching[name] += int(counts[name] > 0)
        items.append(SubstructureItem(index=i, ok=True, counts=counts))
    return SubstructureResult(
        n_molecules=len(items), n_matching=n_matching, **table_result(ctx, "substructure", items)
    )


# --------------------------------------------------------------------------------------------------
# chem_conformers
# --------------------------------------------------------------------------------------------------


class ConformerInput(BaseModel):
    molecules: MoleculeList = Field(..., min_length=1, max_length=1000, description=_MOL_DESC)
    n_conformers: int = Field(
        20, ge=1, le=500, description="Conformers embedded per molecule before pruning."
    )
    force_field: Literal["MMFF", "UFF"] = Field("MMFF", description="MMFF94 (falls back to UFF) or UFF.")
    prune_rms_angstrom: float = Field(
        0.5,
        ge=0.0,
        le=5.0,
        description="Heavy-atom RMSD below which two embedded conformers count as one (Å).",
    )
    energy_window_kcal_mol: float | None = Field(
        None, gt=0, description="Keep conformers within this window above the lowest (kcal/mol)."
    )
    seed: int = Field(42, description="Random seed for ETKDG.")


def _conformer_key(args: ConformerInput) -> dict[str, Any]:
    return {**args.model_dump(), "molecules": _keys(args.molecules)}


def force_field_energies(rdmol: Any, force_field: str, threads: int = 1) -> tuple[str, list[float]]:
    """Optimise every conformer; returns the force field used and energies in kcal/mol."""
    from rdkit.Chem import AllChem

    if force_field == "MMFF" and AllChem.MMFFHasAllMoleculeParams(rdmol):
        res = AllChem.MMFFOptimizeMoleculeConfs(rdmol, numThreads=threads, maxIters=2000)
        return "MMFF94", [e for _, e in res]
    if AllChem.UFFHasAllMoleculeParams(rdmol):
        res = AllChem.UFFOptimizeMoleculeConfs(rdmol, numThreads=threads, maxIters=2000)
        return "UFF", [e for _, e in res]
    raise ToolError("unsupported_element", "Neither MMFF94 nor UFF has parameters for this molecule")


def conformer_item(
    i: int,
    text: str,
    n_conformers: int,
    seed: int,
    prune_rms: float,
    force_field: str,
    window: float | None,
    threads: int,
    out_dir: str,
) -> ConformerItem:
    """One molecule of ``chem_conformers``: its item (or its error item), the SDF written into ``out_dir``."""
    from rdkit import Chem

    from tools_server.engines.conformers import etkdg
    from tools_server.molecules import fragments_note, parse_rdkit

    try:
        mol, _ = parse_rdkit(text)
        mol_h = Chem.AddHs(mol, addCoords=mol.GetNumConformers() > 0)
        mol_h.RemoveAllConformers()
        ids = etkdg(mol_h, n_conformers, seed, prune_rms, threads)
        if not ids:
            raise ToolError("invalid_input", "ETKDG could not embed any conformer")
        ff, energies = force_field_energies(mol_h, force_field, threads)
        order = sorted(range(len(ids)), key=lambda k: energies[k])
        e_min = energies[order[0]]
        if window is not None:
            order = [k for k in order if energies[k] - e_min <= window]
        path = Path(out_dir) / f"conformers_{i}.sdf"
        with Chem.SDWriter(str(path)) as writer:
            for rank, k in enumerate(order):
                mol_h.SetProp("_Name", f"{Chem.MolToSmiles(mol)} conformer {rank}")
                mol_h.SetDoubleProp("energy_kcal_mol", energies[k])
                writer.write(mol_h, confId=ids[k])
        fragments = len(Chem.GetMolFrags(mol))
        note = fragments_note(fragments) + "; the energies leave out the interactions between them"
        return ConformerItem(
            index=i,
            ok=True,
            smiles=Chem.MolToSmiles(mol),
            force_field=ff,
            n_conformers=len(order),
            energies_kcal_mol=[round(energies[k], 4) for k in order],
            relative_energies_kcal_mol=[round(energies[k] - e_min, 4) for k in order],
            sdf=str(path),
            warnings=[note] if fragments > 1 else None,
        )
    except ToolError as exc:
        return ConformerItem.failed(i, exc)
    except Exception as exc:
        return ConformerItem.model_validate(_error_item(i, exc))


@tool(
    name="chem_conformers",
    resource="cpu",
    threads="all",
    items="molecules",
    read_only=True,
    idempotent=True,
    engines=("rdkit",),
    time_limit_s=3600,
    canonicalize=_conformer_key,
    title="Force-field conformers",
)
def chem_conformers(args: ConformerInput, ctx: ToolContext) -> ConformersResult:
    """Generate 3D conformers with RDKit ETKDGv3 and optimise them with MMFF94 (or UFF). Output per
    molecule: `n_conformers`, `energies_kcal_mol` (force-field energy, ascending),
    `relative_energies_kcal_mol`,
    `force_field` used, and `sdf` (artifact; conformers sorted by energy, each with an `energy_kcal_mol`
    property). Pass `sdf#k` to xtb_run or dft_run to refine conformer k. Force-field energies rank
    conformers of one molecule only; they are not comparable between molecules."""
    from tools_server.plugin import map_items

    _set_rdkit_engine(ctx)
    n = len(args.molecules)
    options = (
        args.n_conformers,
        args.seed,
        args.prune_rms_angstrom,
        args.force_field,
        args.energy_window_kcal_mol,
    )
    jobs = [(i, text, *options, ctx.threads, str(ctx.artifact_dir)) for i, text in enumerate(args.molecules)]
    # one process, RDKit's own threads per molecule; on a Dask cluster the molecules become tasks
    items = map_items(
        conformer_item, jobs, 1, lambda d, total: ctx.progress(d / total, f"conformers {d}/{total}")
    )
    from tools_server.plugin import table_result

    return ConformersResult(n_molecules=n, **table_result(ctx, "conformers", items))


# --------------------------------------------------------------------------------------------------
# chem_depict
# --------------------------------------------------------------------------------------------------


class DepictInput(BaseModel):
    molecules: MoleculeList = Field(..., min_length=1, max_length=200, description=_MOL_DESC)
    legends: list[str] | None = Field(
        None, description="One caption per molecule (default: index and SMILES)."
    )
    highlight_smarts: str | None = Field(None, description="Highlight the atoms matching this SMARTS.")
    per_row: int = Field(5, ge=1, le=20)
    panel_px: int = Field(300, ge=100, le=1000, description="Width and height of each panel in pixels.")


@tool(
    name="chem_depict",
    resource="cpu",
    read_only=True,
    idempotent=True,
    engines=("rdkit",),
    time_limit_s=600,
    canonicalize=lambda a: {**a.model_dump(), "molecules": _keys(a.molecules)},
    title="Draw molecules",
)
def chem_depict(args: DepictInput, ctx: ToolContext) -> DepictResult:
    """Draw up to 200 molecules as one PNG grid (2D depictions; optional SMARTS highlight). Output: `png`
    (artifact path), `width_px`, `height_px`, `n_drawn`, and per-item errors for unreadable inputs
    (drawn as empty panels)."""
    from rdkit import Chem
    from rdkit.Chem.Draw import rdMolDraw2D

    _set_rdkit_engine(ctx)
    if args.legends is not None and len(args.legends) != len(args.molecules):
        raise ToolError("invalid_input", f"{len(args.legends)} legends for {len(args.molecules)} molecules")
    patt = Chem.MolFromSmarts(args.highlight_smarts) if args.highlight_smarts else None
    if args.highlight_smarts and patt is None:
        raise ToolError("invalid_input", f"Invalid SMARTS {args.highlight_smarts!r}")
    mols, legends, highlights, errors = [], [], [], []
    for i, (mol, _, error) in enumerate(_parse_all(args.molecules)):
        if error:
            errors.append(error)
            mol = Chem.Mol()
        else:
            mol = Chem.Mol(mol)
            mol.RemoveAllConformers()
        mols.append(mol)
        legend = (
            args.legends[i]
            if args.legends
            else f"{i}: {Chem.MolToSmiles(mol)}"
            if not error
            else f"{i}: invalid"
        )
        legends.append(legend[:60])
        hits = (
            sorted({a for match in mol.GetSubstructMatches(patt) for a in match})
            if patt and not error
            else []
        )
        highlights.append(hits)
    per_row = min(args.per_row, len(mols))
    rows = -(-len(mols) // per_row)
    width, height = per_row * args.panel_px, rows * args.panel_px
    drawer = rdMolDraw2D.MolDraw2DCairo(width, height, args.panel_px, args.panel_px)
    drawer.DrawMolecules(mols, legends=legends, highlightAtoms=highlights)
    drawer.FinishDrawing()
    path = ctx.artifact("molecules.png")
    path.write_bytes(drawer.GetDrawingText())
    return DepictResult(
        png=str(path),
        width_px=width,
        height_px=height,
        n_drawn=len(mols) - len(errors),
        errors=[Item.model_validate(e) for e in errors],
    )
