"""RDKit tools against PubChem's computed properties and exact counts."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from tools_server.chem import tools as T

ASPIRIN = "CC(=O)OC1=CC=CC=C1C(=O)O"  # PubChem CID 2244
CAFFEINE = "CN1C=NC2=C1C(=O)N(C(=O)N2C)C"  # PubChem CID 2519
IBUPROFEN = "CC(C)CC1=CC=C(C=C1)C(C)C(=O)O"  # PubChem CID 3672

# PubChem "Computed Properties" (PubChem release 2021.05.07; Cactvs 3.4.8.18 for TPSA, HBD/HBA, rotatable
# bonds): molecular weight g/mol, exact mass Da, TPSA Å², HBD, HBA, rotatable bonds.
PUBCHEM = {
    ASPIRIN: {"mw": 180.16, "exact": 180.04225873, "tpsa": 63.6, "hbd": 1, "hba": 4, "rot": 3},
    CAFFEINE: {"mw": 194.19, "exact": 194.08037557, "tpsa": 58.4, "hbd": 0, "hba": 3, "rot": 0},
    IBUPROFEN: {"mw": 206.28, "exact": 206.130679813, "tpsa": 37.3, "hbd": 1, "hba": 2, "rot": 4},
}


def test_chem_parse_identity_and_per_item_errors(ctx):
    out = T.chem_parse(T.ParseInput(molecules=[ASPIRIN, "C1CC(", "C[C@H](N)C(=O)O", "CC(N)C(=O)O"]), ctx)
    assert (out.n_ok, out.n_failed) == (3, 1)
    asp, bad, lala, ala = out.items
    # PubChem CID 2244: InChIKey BSYNRYMUTXBXSQ-UHFFFAOYSA-N, C9H8O4, 180.16 g/mol, 180.04225873 Da
    assert asp.inchikey == "BSYNRYMUTXBXSQ-UHFFFAOYSA-N"
    assert asp.formula == "C9H8O4"
    assert asp.average_mass_g_mol == pytest.approx(180.16, abs=0.01)
    assert asp.monoisotopic_mass_da == pytest.approx(180.04225873, abs=1e-5)
    assert bad.ok is False and bad.error.code == "invalid_smiles"
    # L-alanine (PubChem CID 5950): InChIKey QNAYBMKLOCPYGJ-REOHCLBHSA-N, one assigned stereocentre
    assert lala.inchikey == "QNAYBMKLOCPYGJ-REOHCLBHSA-N"
    assert lala.stereo.centres_assigned == 1 and lala.stereo.centres_unassigned == 0
    assert ala.stereo.centres_unassigned == 1
    assert any("unassigned stereo" in w for w in ala.warnings)


def test_chem_parse_flags_mixtures_and_charges(ctx):
    out = T.chem_parse(T.ParseInput(molecules=["[Na+].CC(=O)[O-]", "[NH4+]"]), ctx)
    salt, ammonium = out.items
    assert salt.fragments == 2 and salt.formal_charge == 0
    assert any("fragments" in w for w in salt.warnings)
    assert ammonium.formal_charge == 1


@pytest.mark.parametrize("smiles", [ASPIRIN, CAFFEINE, IBUPROFEN])
def test_descriptors_match_pubchem(ctx, smiles):
    ref = PUBCHEM[smiles]
    d = T.chem_descriptors(T.DescriptorInput(molecules=[smiles]), ctx).items[0].descriptors
    assert d.mol_weight_g_mol == pytest.approx(ref["mw"], abs=0.01)
    assert d.exact_mass_da == pytest.approx(ref["exact"], abs=1e-5)
    # RDKit's Ertl TPSA differs from Cactvs by treating imidazole N differently (caffeine 61.82 vs 58.4).
    assert d.tpsa_a2 == pytest.approx(ref["tpsa"], abs=3.5)
    assert d.hbd == ref["hbd"]
    # PubChem counts ester/acid O and rotatable bonds with Cactvs rules; RDKit's definitions differ by <= 1.
    assert abs(d.hba - ref["hba"]) <= 1
    assert abs(d.rotatable_bonds - ref["rot"]) <= 1


def test_lipinski_preset_and_all_preset(ctx):
    out = T.chem_descriptors(T.DescriptorInput(molecules=[ASPIRIN, "not a smiles"], preset="lipinski"), ctx)
    asp = out.items[0].descriptors
    assert asp.lipinski_violations == 0 and asp.lipinski_hba == 4 and asp.veber_ok is True
    assert out.items[1].error.code == "invalid_smiles"
    full = T.chem_descriptors(T.DescriptorInput(molecules=[CAFFEINE], preset="all"), ctx).items[0].descriptors
    assert len(full) > 200 and full["NumHDonors"] == 0


def test_physchem_counts_r_and_s_centres_and_floats_keep_ten_significant_digits(ctx):
    # L-alanine is (S)-2-aminopropanoic acid, D-alanine (R); trans-cyclohexane-1,2-diol as written is (R,R)
    out = T.chem_descriptors(
        T.DescriptorInput(molecules=["C[C@H](N)C(=O)O", "C[C@@H](N)C(=O)O", "O[C@@H]1CCCC[C@H]1O"]), ctx
    )
    counts = [(i.descriptors.stereocenters_r, i.descriptors.stereocenters_s) for i in out.items]
    assert counts == [(0, 1), (1, 0), (2, 0)]
    # the published item names the preset's fields, the stereocentre counts as integers
    physchem = T.DescriptorsResult.model_json_schema()["$defs"]["PhyschemDescriptors"]
    assert {physchem["properties"][k]["type"] for k in ("stereocenters_r", "stereocenters_s")} == {"integer"}
    assert set(physchem["required"]) == set(T.PhyschemDescriptors.model_fields) and not physchem.get(
        "additionalProperties", True
    )
    from rdkit import Chem
    from rdkit.Chem import Descriptors

    # a Gasteiger charge, 0.4775395271554559: version 1 reported 0.47754 (six decimals), which ties charges
    # that differ further down; ten significant digits are what the screen compares (docs/chemistry.md)
    exact = Descriptors.MaxAbsPartialCharge(Chem.MolFromSmiles(ASPIRIN))
    named = T.chem_descriptors(T.DescriptorInput(molecules=[ASPIRIN], names=["MaxAbsPartialCharge"]), ctx)
    assert named.items[0].descriptors["MaxAbsPartialCharge"] == float(f"{exact:.10g}") != round(exact, 6)


def test_large_batches_go_to_csv(ctx):
    out = T.chem_descriptors(T.DescriptorInput(molecules=[ASPIRIN] * 300), ctx)
    assert out.n_ok == 300 and out.table_csv and len(out.items) < 300
    with open(out.table_csv) as fh:
        assert sum(1 for _ in fh) == 301  # header + one row per molecule


def test_similarity_matrix_and_references(ctx):
    out = T.chem_similarity(T.SimilarityInput(molecules=[ASPIRIN, ASPIRIN, CAFFEINE]), ctx)
    m = out.matrix
    assert m[0][1] == 1.0 and m[0][0] == 1.0
    assert m[0][2] < 0.3  # aspirin and caffeine share few Morgan bits
    assert out.items[0].nearest[0] == T.Neighbour(index=1, similarity=1.0)
    ref = T.chem_similarity(
        T.SimilarityInput(
            molecules=[IBUPROFEN], references=[CAFFEINE, "CC(C)Cc1ccc(cc1)C(C)C(=O)[O-]"], fingerprint="maccs"
        ),
        ctx,
    )
    assert ref.items[0].nearest[0].index == 1


def test_substructure_counts(ctx):
    out = T.chem_substructure(
        T.SubstructureInput(
            molecules=[ASPIRIN, "OC(=O)CC(O)(CC(=O)O)C(=O)O", "bad("],
            smarts=["[CX3](=O)[OX2H1]", "c1ccccc1"],
            names=["carboxylic_acid", "benzene_ring"],
        ),
        ctx,
    )
    asp, citric, bad = out.items
    assert asp.counts == {"carboxylic_acid": 1, "benzene_ring": 1}
    assert citric.counts["carboxylic_acid"] == 3  # citric acid has three COOH groups
    assert bad.ok is False
    assert out.n_matching == {"carboxylic_acid": 2, "benzene_ring": 1}


def test_invalid_smarts_fails_the_call(ctx):
    from tools_server.core.errors import ToolError

    with pytest.raises(ToolError) as err:
        T.chem_substructure(T.SubstructureInput(molecules=["CCO"], smarts=["[C"]), ctx)
    assert err.value.code == "invalid_input"


def test_conformers_sdf_sorted_by_energy(ctx):
    from rdkit import Chem

    out = T.chem_conformers(T.ConformerInput(molecules=["CCCC"], n_conformers=20), ctx)
    item = out.items[0]
    assert item.force_field == "MMFF94" and item.n_conformers >= 2  # butane: anti and gauche
    assert item.relative_energies_kcal_mol == sorted(item.relative_energies_kcal_mol)
    # MMFF94 gauche-anti gap of butane is ~0.8 kcal/mol (experiment ~0.6-0.7); first excited conformer:
    assert 0.3 < item.relative_energies_kcal_mol[1] < 1.5
    mols = list(Chem.SDMolSupplier(item.sdf, removeHs=False))
    assert len(mols) == item.n_conformers and mols[0].GetNumAtoms() == 14


def test_conformers_of_a_salt_keep_the_ions_apart_and_say_so(ctx):
    """On abee5db both ions of ``[Na+].[Cl-]`` sat at one point in every conformer, without a word. Now they
    are 3 Å apart and the item says so (RDKit's force fields leave out interactions between fragments, so
    the energy is 0)."""
    import numpy as np
    from rdkit import Chem

    out = T.chem_conformers(T.ConformerInput(molecules=["[Na+].[Cl-]", "CCO"], n_conformers=2), ctx)
    salt, ethanol = out.items
    assert salt.energies_kcal_mol == [0.0] and "2 disconnected fragments" in salt.warnings[0]
    (pair,) = Chem.SDMolSupplier(salt.sdf, removeHs=False)
    assert np.linalg.norm(np.subtract(*pair.GetConformer().GetPositions())) == pytest.approx(3.0)
    assert ethanol.warnings is None


def test_depict_writes_png(ctx):
    out = T.chem_depict(T.DepictInput(molecules=[ASPIRIN, CAFFEINE, "bad("], highlight_smarts="C(=O)O"), ctx)
    with open(out.png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert out.n_drawn == 2 and out.errors[0].index == 2
    assert (out.width_px, out.height_px) == (900, 300)


CHEM_QC_TOOLS = (
    "chem_parse",
    "chem_descriptors",
    "chem_similarity",
    "chem_substructure",
    "chem_conformers",
    "chem_depict",
    "xtb_run",
    "xtb_conformers",
    "dft_run",
)


def test_chemistry_tools_over_mcp(mcp_server):
    tools = {t.name: t for t in mcp_server.list_tools()}
    for name in CHEM_QC_TOOLS:
        assert name in tools, name
        ann = tools[name].annotations
        assert ann.read_only_hint is True and ann.destructive_hint is False and ann.open_world_hint is False
    out = mcp_server.call_ok("chem_parse", {"molecules": [ASPIRIN, "C1CC("]})
    assert out["items"][0]["inchikey"] == "BSYNRYMUTXBXSQ-UHFFFAOYSA-N"
    assert out["items"][1]["error"]["code"] == "invalid_smiles"
    assert out["provenance"]["engine"] == "rdkit" and out["provenance"]["device"] == "cpu"
    # one spelling of the version (on 39e2847: engine_version 2026.09.1 beside engines.rdkit 2026.9.1)
    assert out["provenance"]["engine_version"] == out["provenance"]["engines"]["rdkit"] == version("rdkit")
    err = mcp_server.call_error("dft_run", {"molecule": "[Rf]"})
    assert err["code"] == "unsupported_element"
