"""The screen's molecule family: every 2D descriptor RDKit computes, from a SMILES alone.

The panel is RDKit's whole descriptor list (``rdkit.Chem.Descriptors.descList``, computed by
``CalcMolDescriptors``: about 200 descriptors with ring counts, fragment counts, Crippen, EState, VSA, Chi
and Kappa indices, BCUT and QED, named as RDKit names them, ``RingCount``, ``fr_amide``), preceded by the
families the screen had before, under readable names: molecular weight, heavy atoms, Crippen logP, TPSA,
H-bond donors and acceptors, rotatable bonds, aromatic rings, formal charge, fraction sp3, and the
number of R and of S stereocentres (CIP labels, which no RDKit descriptor counts). Where an RDKit
descriptor ranks every group as a readable one does (``HeavyAtomCount`` and heavy atoms), the screen keeps
the readable name (:meth:`environment.prior_screen.familywise.Panel.distinct`).

A descriptor RDKit cannot compute for a molecule (a Gasteiger charge of an atom it has no parameters for:
NaN) is None there. Values are cached per SMILES text for the life of the process, so re-drawn designs
and shuffled controls of one task compute each molecule once.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

#: The readable entries, before RDKit's list: key -> label.
MOLECULE_DESCRIPTORS = {
    "molecular_weight": "molecular weight",
    "heavy_atoms": "heavy atoms",
    "logp_crippen": "Crippen logP",
    "tpsa": "TPSA",
    "hbd": "H-bond donors",
    "hba": "H-bond acceptors",
    "rotatable_bonds": "rotatable bonds",
    "aromatic_rings": "aromatic rings",
    "formal_charge": "formal charge",
    "fraction_sp3": "fraction sp3",
    "r_centres": "R stereocentres",
    "s_centres": "S stereocentres",
}


def rdkit_descriptor_names() -> list[str]:
    """RDKit's 2D descriptor list, in its order (the installed RDKit's; the version is in the docs)."""
    from rdkit.Chem import Descriptors

    return [name for name, _ in Descriptors.descList]


def molecule_descriptors(smiles: str) -> dict[str, float | None] | None:
    """The molecule panel for one SMILES: the readable entries (``MOLECULE_DESCRIPTORS`` keys), then RDKit's
    list under its own names; None when RDKit cannot parse the SMILES. A fresh dict each call."""
    found = _descriptors(smiles) if smiles else None
    return None if found is None else dict(found)


@functools.lru_cache(maxsize=8192)
def _descriptors(smiles: str) -> tuple[tuple[str, float | None], ...] | None:
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Crippen, Descriptors, rdMolDescriptors

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    centres = Counter(label for _, label in Chem.FindMolChiralCenters(mol, useLegacyImplementation=False))
    readable = {
        "molecular_weight": Descriptors.MolWt(mol),
        "heavy_atoms": float(mol.GetNumHeavyAtoms()),
        "logp_crippen": Crippen.MolLogP(mol),
        "tpsa": rdMolDescriptors.CalcTPSA(mol),
        "hbd": float(rdMolDescriptors.CalcNumHBD(mol)),
        "hba": float(rdMolDescriptors.CalcNumHBA(mol)),
        "rotatable_bonds": float(rdMolDescriptors.CalcNumRotatableBonds(mol)),
        "aromatic_rings": float(rdMolDescriptors.CalcNumAromaticRings(mol)),
        "formal_charge": float(Chem.GetFormalCharge(mol)),
        "fraction_sp3": rdMolDescriptors.CalcFractionCSP3(mol),
        "r_centres": float(centres["R"]),
        "s_centres": float(centres["S"]),
    }
    listed = Descriptors.CalcMolDescriptors(mol, missingVal=math.nan)
    out = {**readable, **{name: _finite(listed.get(name)) for name in rdkit_descriptor_names()}}
    return tuple(out.items())


def _finite(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None


def looks_like_smiles(cells: list[str]) -> bool:
    """Whether RDKit parses every cell as a SMILES."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    return all(Chem.MolFromSmiles(c) is not None for c in cells)
