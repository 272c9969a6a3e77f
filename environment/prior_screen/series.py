"""Per-position substituent descriptors of a molecular series: the screen's ``series`` family.

The molecules of a column form a series when their maximum common substructure (RDKit's FMCS over every
molecule of the task, rings matched only to complete rings) holds at least ``MIN_CORE_ATOMS`` heavy atoms
and ``CORE_SHARE`` of the smallest molecule's. The molecules are then decomposed on that core (RDKit's
R-group decomposition, each molecule on the first match of the core) and each position ``R1``, ``R2`` ...
gives entries of its substituent: heavy atoms, Crippen logP, TPSA, H-bond donors and acceptors, each
computed on the substituent capped with hydrogen at its attachment (a position a molecule leaves empty
holds hydrogen: 0 heavy atoms). A molecule the core does not match has no value (its group is left out
of these entries).

FMCS stops after ``MCS_TIMEOUT_S``; a search that hits the limit gives no series entries (with a note).
The limit is generous (the suite's searches take under 2 s on a busy shared core) so that the entries do not
depend on the speed of the machine; molecules over ``MAX_SERIES_HEAVY_ATOMS`` heavy atoms (peptide
macrocycles, where the search can take minutes) are not searched.
"""

from __future__ import annotations

import functools

SUBSTITUENT_DESCRIPTORS = {
    "heavy_atoms": "heavy atoms",
    "logp_crippen": "Crippen logP",
    "tpsa": "TPSA",
    "hbd": "H-bond donors",
    "hba": "H-bond acceptors",
}
_HYDROGEN = {"heavy_atoms": 0.0, "logp_crippen": 0.0, "tpsa": 0.0, "hbd": 0.0, "hba": 0.0}
MIN_CORE_ATOMS = 6
CORE_SHARE = 0.4
MCS_TIMEOUT_S = 60
#: Molecules larger than this (heavy atoms) are not searched for a core: on peptide macrocycles the search
#: takes from seconds to minutes depending on the order of the molecules.
MAX_SERIES_HEAVY_ATOMS = 50


def _capped(fragment):
    """The substituent with its attachment points turned into hydrogens (``[*:1]Cl`` -> ``Cl``)."""
    from rdkit import Chem

    editable = Chem.RWMol(fragment)
    for atom in editable.GetAtoms():
        if atom.GetAtomicNum() == 0:
            atom.SetAtomicNum(1)
            atom.SetIsotope(0)
            atom.SetAtomMapNum(0)
            atom.SetNoImplicit(True)
    mol = Chem.RemoveHs(editable.GetMol(), sanitize=False)
    try:
        Chem.SanitizeMol(mol)
    except Chem.MolSanitizeException:  # a cut that leaves aromatic flags on atoms outside any ring
        mol.UpdatePropertyCache(strict=False)
        Chem.GetSymmSSSR(mol)
    return mol


def substituent_descriptors(fragment) -> dict[str, float]:
    from rdkit.Chem import Crippen, rdMolDescriptors

    mol = _capped(fragment)
    if mol.GetNumHeavyAtoms() == 0:  # a hydrogen at the position
        return dict(_HYDROGEN)
    return {
        "heavy_atoms": float(mol.GetNumHeavyAtoms()),
        "logp_crippen": Crippen.MolLogP(mol),
        "tpsa": rdMolDescriptors.CalcTPSA(mol),
        "hbd": float(rdMolDescriptors.CalcNumHBD(mol)),
        "hba": float(rdMolDescriptors.CalcNumHBA(mol)),
    }


@functools.lru_cache(maxsize=64)
def common_core(smiles: tuple[str, ...]) -> tuple[str | None, bool]:
    """The SMARTS of the series' core (None when the molecules are no series) and whether the search hit its
    time limit. Molecules that differ only in stereochemistry are searched once."""
    from rdkit import Chem
    from rdkit.Chem import rdFMCS

    mols = [Chem.MolFromSmiles(s) for s in smiles]
    constitutions = {Chem.MolToSmiles(m, isomericSmiles=False): m for m in mols}
    found = rdFMCS.FindMCS(
        list(constitutions.values()),
        timeout=MCS_TIMEOUT_S,
        ringMatchesRingOnly=True,
        completeRingsOnly=True,
    )
    smallest = min(m.GetNumHeavyAtoms() for m in mols)
    if found.canceled or found.numAtoms < max(MIN_CORE_ATOMS, CORE_SHARE * smallest):
        return None, bool(found.canceled)
    return found.smartsString, False


def series_columns(
    column: str, cells: dict[str, str]
) -> tuple[dict[str, dict[str, float | None]], list[str]]:
    """Per-position substituent entries of the SMILES in ``cells`` ({experiment id: SMILES}), and notes."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdRGroupDecomposition

    RDLogger.DisableLog("rdApp.*")
    mols = {e: m for e, c in cells.items() if c and (m := Chem.MolFromSmiles(c)) is not None}
    if len(mols) < 3:
        return {}, []
    if max(m.GetNumHeavyAtoms() for m in mols.values()) > MAX_SERIES_HEAVY_ATOMS:
        return {}, [f"{column}: molecules over {MAX_SERIES_HEAVY_ATOMS} heavy atoms; no series entries"]
    core_smarts, canceled = common_core(tuple(sorted({cells[e] for e in mols})))
    if canceled:
        return {}, [f"{column}: the common-core search hit its {MCS_TIMEOUT_S} s limit; no series entries"]
    if core_smarts is None:
        return {}, []
    core = Chem.MolFromSmarts(core_smarts)
    ids = list(mols)
    options = rdRGroupDecomposition.RGroupDecompositionParameters()
    # the first match of the core in each molecule: the default search over symmetric matches takes
    # minutes on a macrocycle's core
    options.matchingStrategy = rdRGroupDecomposition.RGroupMatching.NoSymmetrization
    rows, unmatched = rdRGroupDecomposition.RGroupDecompose(
        [core], [mols[e] for e in ids], asRows=True, options=options
    )
    matched = [e for i, e in enumerate(ids) if i not in set(unmatched)]
    labels = sorted({k for row in rows for k in row if k != "Core"}, key=lambda k: int(k[1:]))
    described = [
        {label: substituent_descriptors(row[label]) if label in row else _HYDROGEN for label in labels}
        for row in rows
    ]
    by_id = dict(zip(matched, described, strict=True))
    out: dict[str, dict[str, float | None]] = {}
    for label in labels:
        for key, name in SUBSTITUENT_DESCRIPTORS.items():
            out[f"{column}: {label} substituent {name}"] = {
                e: (by_id[e][label][key] if e in by_id else None) for e in cells
            }
    return out, []
