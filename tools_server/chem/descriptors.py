"""RDKit descriptor presets and the unit of each reported value.

Values are reported to ``SIGNIFICANT_DIGITS`` significant digits (:func:`_clean`): what a float descriptor
carries beyond that is the order of a floating-point sum, and a fixed number of decimals would tie small
values that differ (partial charges, BCUT terms) and split values that agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Significant digits of every reported float (the screen of ``spu baselines`` compares at the same).
SIGNIFICANT_DIGITS = 10

#: name -> unit for the curated presets (RDKit's own descriptor names are kept as written).
UNITS: dict[str, str] = {
    "mol_weight_g_mol": "g/mol (average mass)",
    "exact_mass_da": "Da (monoisotopic)",
    "logp_crippen": "log10 (Wildman-Crippen octanol/water; not PubChem's XLogP3)",
    "molar_refractivity_cm3_mol": "Crippen molar refractivity (cm^3/mol)",
    "tpsa_a2": "Å^2 (Ertl topological polar surface area, N and O only)",
    "hbd": "count (RDKit CalcNumHBD)",
    "hba": "count (RDKit CalcNumHBA)",
    "rotatable_bonds": "count (RDKit default definition)",
    "heavy_atoms": "count",
    "rings": "count",
    "aromatic_rings": "count",
    "fraction_csp3": "fraction",
    "formal_charge": "e",
    "stereocenters": "count (assigned and unassigned)",
    "stereocenters_r": "count (assigned centres with the CIP label R)",
    "stereocenters_s": "count (assigned centres with the CIP label S)",
    "lipinski_hbd": "count (N-H and O-H, Lipinski's definition)",
    "lipinski_hba": "count (N and O atoms, Lipinski's definition)",
    "lipinski_violations": "count of Ro5 rules broken (MW > 500, logP > 5, HBD > 5, HBA > 10)",
    "veber_ok": "bool (rotatable bonds <= 10 and TPSA <= 140 Å^2)",
    "qed": "dimensionless 0-1 (Bickerton quantitative estimate of drug-likeness)",
}


def _physchem() -> dict[str, Callable[[Any], Any]]:
    from rdkit import Chem
    from rdkit.Chem import Crippen, Descriptors
    from rdkit.Chem import rdMolDescriptors as rd

    return {
        "mol_weight_g_mol": Descriptors.MolWt,
        "exact_mass_da": Descriptors.ExactMolWt,
        "logp_crippen": Crippen.MolLogP,
        "molar_refractivity_cm3_mol": Crippen.MolMR,
        "tpsa_a2": rd.CalcTPSA,
        "hbd": rd.CalcNumHBD,
        "hba": rd.CalcNumHBA,
        "rotatable_bonds": rd.CalcNumRotatableBonds,
        "heavy_atoms": lambda m: m.GetNumHeavyAtoms(),
        "rings": rd.CalcNumRings,
        "aromatic_rings": rd.CalcNumAromaticRings,
        "fraction_csp3": rd.CalcFractionCSP3,
        "formal_charge": Chem.GetFormalCharge,
        "stereocenters": lambda m: len(
            Chem.FindMolChiralCenters(m, includeUnassigned=True, useLegacyImplementation=False)
        ),
        "stereocenters_r": lambda m: _cip_count(m, "R"),
        "stereocenters_s": lambda m: _cip_count(m, "S"),
        "qed": lambda m: __import__("rdkit.Chem.QED", fromlist=["qed"]).qed(m),
    }


def _cip_count(mol: Any, label: str) -> int:
    """Assigned stereocentres whose CIP label is ``label`` (``R`` or ``S``)."""
    from rdkit import Chem

    return sum(
        1 for _, found in Chem.FindMolChiralCenters(mol, useLegacyImplementation=False) if found == label
    )


def _lipinski(m: Any) -> dict[str, Any]:
    from rdkit.Chem import Crippen, Descriptors, Lipinski
    from rdkit.Chem import rdMolDescriptors as rd

    mw, logp = Descriptors.MolWt(m), Crippen.MolLogP(m)
    hbd, hba = Lipinski.NumHDonors(m), Lipinski.NOCount(m)
    rot, tpsa = rd.CalcNumRotatableBonds(m), rd.CalcTPSA(m)
    return {
        "mol_weight_g_mol": mw,
        "logp_crippen": logp,
        "lipinski_hbd": Lipinski.NHOHCount(m),
        "lipinski_hba": hba,
        "lipinski_violations": int(mw > 500) + int(logp > 5) + int(Lipinski.NHOHCount(m) > 5) + int(hba > 10),
        "hbd": hbd,
        "rotatable_bonds": rot,
        "tpsa_a2": tpsa,
        "veber_ok": bool(rot <= 10 and tpsa <= 140),
    }


PRESETS = ("physchem", "lipinski", "all")


def rdkit_descriptor_names() -> list[str]:
    from rdkit.Chem import Descriptors

    return [name for name, _ in Descriptors._descList]


def compute(mol: Any, preset: str, names: list[str] | None = None) -> dict[str, Any]:
    """Descriptors of one RDKit Mol: a preset, or the named RDKit descriptors when ``names`` is given."""
    from rdkit.Chem import Descriptors

    if names:
        table = dict(Descriptors._descList)
        return {n: _clean(table[n](mol)) for n in names}
    if preset == "lipinski":
        return {k: _clean(v) for k, v in _lipinski(mol).items()}
    if preset == "all":
        return {k: _clean(v) for k, v in Descriptors.CalcMolDescriptors(mol).items()}
    return {k: _clean(fn(mol)) for k, fn in _physchem().items()}


def _clean(value: Any) -> Any:
    """A descriptor's value as plain Python: booleans and integers as they are, anything else a float to
    ``SIGNIFICANT_DIGITS`` significant digits, ``None`` where RDKit gives no finite number (the result's type
    carries it as null)."""
    import math

    if isinstance(value, bool | int):
        return value
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    return float(f"{f:.{SIGNIFICANT_DIGITS}g}")


def units_for(preset: str, names: list[str] | None) -> dict[str, str]:
    if names or preset == "all":
        return {"*": "RDKit descriptor definitions (rdkit.Chem.Descriptors); masses in g/mol, areas in Å^2"}
    keys = list(_lipinski_keys() if preset == "lipinski" else _physchem_keys())
    return {k: UNITS[k] for k in keys}


def _physchem_keys() -> tuple[str, ...]:
    return (
        "mol_weight_g_mol",
        "exact_mass_da",
        "logp_crippen",
        "molar_refractivity_cm3_mol",
        "tpsa_a2",
        "hbd",
        "hba",
        "rotatable_bonds",
        "heavy_atoms",
        "rings",
        "aromatic_rings",
        "fraction_csp3",
        "formal_charge",
        "stereocenters",
        "stereocenters_r",
        "stereocenters_s",
        "qed",
    )


def _lipinski_keys() -> tuple[str, ...]:
    return (
        "mol_weight_g_mol",
        "logp_crippen",
        "lipinski_hbd",
        "lipinski_hba",
        "lipinski_violations",
        "hbd",
        "rotatable_bonds",
        "tpsa_a2",
        "veber_ok",
    )
