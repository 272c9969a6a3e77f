"""``protein_pka``: per-residue pKa values (PROPKA 3) and protonation states at a pH (PDB2PQR)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from tools_server.plugin import ResultModel, StructurePath, ToolContext, ToolError, ToolResult, tool


class TitratableGroup(ResultModel):
    """One titratable group as PROPKA labels it (``ASP  25 A``), its pKa and its shift from the model pKa."""

    label: str
    residue: str
    number: int | None = None
    chain: str | None = None
    pka: float
    model_pka: float
    shift: float
    buried_percent: float
    ligand_group: bool
    coupled_with: str | None = None


class ProtonationState(ResultModel):
    residue: str
    #: the residue number, or its text where it is not a number (an insertion code)
    number: int | str
    chain: str | None = None
    amber_name: str
    state: str


class PkaResult(ToolResult):
    ph: float
    n_groups: int
    pi_folded: float | None
    pi_unfolded: float | None
    folding_free_energy_kcal_mol: float | None
    groups: list[TitratableGroup]
    artifacts: dict[str, str]
    states: list[ProtonationState] | None = None
    net_charge_e: float | None = None
    large_shifts: list[str] | None = None


class ProteinPkaInput(BaseModel):
    pdb_path: StructurePath | None = Field(
        None, max_length=4096, description="PDB file of a protein (e.g. a pdb_lookup artifact path)"
    )
    pdb_text: str | None = Field(None, max_length=5_000_000, description="PDB text instead of a file")
    ph: float = Field(7.0, ge=0, le=14, description="pH for the protonation states and folding energy")
    protonation_states: bool = Field(
        True, description="also run PDB2PQR at `ph` for per-residue states and a protonated PQR/PDB"
    )
    forcefield: Literal["AMBER", "PARSE", "CHARMM"] = Field(
        "AMBER", description="PDB2PQR force field for charges and radii in the PQR file"
    )

    @model_validator(mode="after")
    def _one_source(self) -> ProteinPkaInput:
        if (self.pdb_path is None) == (self.pdb_text is None):
            raise ValueError("give exactly one of pdb_path or pdb_text")
        return self


def _key(args: ProteinPkaInput) -> dict[str, Any]:
    from tools_server.plugin import file_key

    data = args.model_dump()
    data["pdb_path"] = file_key(args.pdb_path, kind="structure")
    return data


@tool(
    name="protein_pka",
    resource="cpu",
    read_only=True,
    idempotent=True,
    engines=("propka", "pdb2pqr"),
    time_limit_s=1800,
    canonicalize=_key,
    title="Protein pKa values (PROPKA) and protonation states (PDB2PQR)",
)
def protein_pka(args: ProteinPkaInput, ctx: ToolContext) -> PkaResult:
    """Per-residue pKa values of a protein structure with PROPKA 3 (empirical, structure-based), the folded
    and unfolded isoelectric points, and (protonation_states=true) the protonation state of each titratable
    residue at `ph` from PDB2PQR using those pKa values, with a protonated PQR and PDB as artifacts.

    Returns groups [{label 'ASP 25 A', residue, number, chain, pka, model_pka (free amino acid), shift,
    buried_percent, ligand_group, coupled_with}], pi_folded, pi_unfolded, folding_free_energy_kcal_mol at
    `ph` (PROPKA's estimate relative to the unfolded state), states [{residue, number, chain, amber_name
    (ASH/GLH/HID/HIE/HIP/LYN/CYX ...), state}], net_charge_e, artifacts {pka, pqr, pdb}.
    PROPKA values carry about 1 pKa unit of error (larger for buried and coupled residues); they are one
    conformation's estimate, not a measurement. Errors: no_protein, invalid_input, engine_unavailable."""
    import importlib.util

    from tools_server.pka import engine
    from tools_server.pka.structure import read_structure

    if importlib.util.find_spec("propka") is None:
        raise ToolError(
            "engine_unavailable", "PROPKA is not installed.", hint="pip install 'spu-scaffold[pka]'"
        )
    work = ctx.artifact_dir
    pdb = read_structure(args.pdb_path, args.pdb_text, work, name="structure")
    versions = engine.engine_versions()
    ctx.set_engine("propka", versions["propka"], device="cpu", pdb2pqr=versions["pdb2pqr"])
    ctx.progress(0.05, "PROPKA")
    try:
        pk = engine.run_propka(pdb, args.ph, work)
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError("invalid_input", f"PROPKA could not read or process the structure: {exc}") from exc
    if not any(not g["ligand_group"] for g in pk["groups"]):
        raise ToolError("no_protein", "PROPKA found no titratable protein group in the structure.")
    result: dict[str, Any] = {
        "ph": args.ph,
        "n_groups": len(pk["groups"]),
        "pi_folded": pk["pi_folded"],
        "pi_unfolded": pk["pi_unfolded"],
        "folding_free_energy_kcal_mol": pk["folding_free_energy_kcal_mol"],
        "groups": pk["groups"],
        "artifacts": {"pka": pk["pka_file"]} if pk["pka_file"] else {},
    }
    if args.protonation_states:
        if importlib.util.find_spec("pdb2pqr") is None:
            raise ToolError(
                "engine_unavailable", "PDB2PQR is not installed.", hint="pip install 'spu-scaffold[pka]'"
            )
        ctx.progress(0.5, "PDB2PQR")
        out_pqr, out_pdb = work / "protonated.pqr", work / "protonated.pdb"
        try:
            pq = engine.run_pdb2pqr(pdb, args.ph, args.forcefield, out_pqr, out_pdb)
        except Exception as exc:
            raise ToolError(
                "invalid_input",
                f"PDB2PQR could not protonate the structure: {exc}",
                hint="Repair the structure first (missing backbone atoms, alternate locations), or run "
                "with protonation_states=false for the PROPKA pKa values alone.",
            ) from exc
        result["states"] = pq["states"]
        result["net_charge_e"] = pq["net_charge_e"]
        result["artifacts"].update({"pqr": str(out_pqr), "pdb": str(out_pdb)})
    shifted = [g for g in pk["groups"] if abs(g["shift"]) >= 2.0 and not g["ligand_group"]]
    if shifted:
        result["large_shifts"] = [g["label"] for g in shifted]
        ctx.warn(
            f"{len(shifted)} groups have pKa shifts of 2 units or more; PROPKA is least reliable for such "
            "buried or coupled residues"
        )
    result["note"] = (
        "PROPKA pKa values are empirical estimates for this one structure (RMSE about 1 unit against "
        "measured values); they are not free energies and do not sample conformations."
    )
    return PkaResult(**result)
