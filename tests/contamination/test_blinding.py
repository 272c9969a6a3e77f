"""Blinding (environment/contamination/blinding.py): label transform and its exact inverse, SMILES token
substitution as a bijection that RDKit parses back to the same molecule, six levels, prompt masking."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from environment.contamination.blinding import (
    DEFAULT_TEMPLATE,
    LEVELS,
    VOCABULARY,
    Item,
    LabelTransform,
    SmilesSubstitution,
    blind,
    decimal_text,
    mask_template,
    tokenize_smiles,
)

# --- label transform -------------------------------------------------------------------------------------

decimals_text = st.decimals(
    min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=4, allow_nan=False
).map(str)


def test_transform_endpoints_and_order():
    transform = LabelTransform.fit(["-11.6", "1.58", "-3.00"])
    assert transform.forward_exact("1.58") == 0  # the largest label goes to 0 (negated)
    assert transform.forward_exact("-11.6") == 100  # the smallest to 100
    assert transform.forward_exact("-3.00") == Fraction(100) * Fraction("4.58") / Fraction("13.18")
    assert transform.forward(-3.0) > transform.forward(1.0)
    assert decimal_text(transform.label_min) == "-11.6"


@settings(max_examples=200, deadline=None)
@given(st.lists(decimals_text, min_size=2, max_size=30, unique=True))
def test_transform_inverts_exactly_in_rationals(labels):
    transform = LabelTransform.fit(labels)
    for y in labels:
        t = transform.forward_exact(y)
        assert 0 <= t <= 100
        assert transform.inverse_exact(t) == Fraction(Decimal(y))
    # the parameters survive JSON as exact decimal text
    again = LabelTransform.from_dict(transform.as_dict())
    assert again == transform


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), min_size=2, max_size=30, unique=True)
)
def test_transform_float_round_trip_to_1e_12(values):
    transform = LabelTransform.fit(values)
    y = np.array(values)
    back = np.array([transform.inverse(transform.forward(v)) for v in values])
    span = float(transform.label_max - transform.label_min)
    # relative to the scale of the data: a few float roundings of magnitude max(|y|, span)
    assert np.allclose(back, y, rtol=0, atol=1e-12 * max(span, float(np.max(np.abs(y)))))


def test_transform_needs_two_distinct_labels():
    with pytest.raises(ValueError, match="equal"):
        LabelTransform.fit(["1.0", "1.00"])
    with pytest.raises(ValueError):
        LabelTransform.fit(["1.0", "n/a"])


# --- SMILES substitution ---------------------------------------------------------------------------------

HELD_OUT_SMILES = [
    "CC(=O)Oc1ccccc1C(=O)O",  # aspirin: branches, aromatic ring
    "C1CCC2CCCCC2C1",  # fused rings
    "C%10CCCCC%10",  # two-digit ring closure
    "C12CC3CC4CC5CC6CC7CC8CC9CC%10CC%11CC(C1)C%11C%10C9C8C7C6C5C4C32",  # more than nine open rings
    "[13CH3][C@@H](Cl)Br",  # isotope, stereo centre, two-letter elements
    "N[C@@H](C)C(=O)O",
    "F/C=C/F",
    "F/C=C\\F",
    "C/C=C/C=C\\C",
    "[NH4+].[Cl-]",
    "[O-][N+](=O)c1ccc(Br)cc1",
    "c1ccc2[nH]ccc2c1",  # aromatic nitrogen with H
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",  # caffeine
    "[2H]C([2H])([2H])Cl",
    "[Na+].[O-]C(=O)C",
    "OC[C@H]1OC(O)[C@H](O)[C@@H](O)[C@@H]1O",
    "C#N",
    "c1ccsc1",
    "c1cc[se]c1",
    "[Fe+2]",
    "[Cu+2].[O-]S(=O)(=O)[O-]",
    "CC(C)(C)c1ccc(O)cc1",
    "O=C1NC(=O)C(=O)N1",
    "Clc1ccc(Cl)cc1",
    "BrCCBr",
    "[Si](C)(C)(C)C",
    "C[S@](=O)c1ccccc1",
    "[CH2:1]=[CH:2][OH:3]",
    "C1=CC=CC=C1",
    "ICCCl",
    "c1ccc(-c2ccccc2)cc1",
    "P(=O)(O)(O)O",
    "[C-]#[O+]",
]


@pytest.fixture(scope="module")
def substitution():
    return SmilesSubstitution.from_seed(0)


def test_tokens_concatenate_to_the_string():
    assert tokenize_smiles("[13CH3][C@@H](Cl)Br") == [
        "[", "1", "3", "C", "H", "3", "]", "[", "C", "@", "@", "H", "]", "(", "Cl", ")", "Br",
    ]  # fmt: skip
    assert tokenize_smiles("C%10CC%10") == ["C", "%", "1", "0", "C", "C", "%", "1", "0"]
    assert tokenize_smiles("[Sc+3]")[1] == "Sc"  # inside brackets: the element scandium
    assert tokenize_smiles("Sc1ccccc1")[:2] == ["S", "c"]  # outside: sulfur then aromatic carbon
    for smiles in HELD_OUT_SMILES:
        assert "".join(tokenize_smiles(smiles)) == smiles


@pytest.mark.parametrize("smiles", ["C C", "CC>>CC", "[C", "C[Zz]", "CcX"])
def test_untokenizable_smiles_rejected(smiles):
    with pytest.raises(ValueError):
        tokenize_smiles(smiles)


def test_substitution_is_a_bijection_on_tokens(substitution):
    mapping = substitution.mapping
    assert set(mapping) == set(VOCABULARY)
    assert len(set(mapping.values())) == len(mapping)  # injective, hence a bijection onto its image
    assert all(len(sub) == 1 for sub in mapping.values())
    assert all(token != sub for token, sub in mapping.items())  # no token kept as itself
    inverse = substitution.inverse_mapping
    assert all(inverse[mapping[t]] == t for t in mapping)
    assert all(mapping[inverse[s]] == s for s in inverse)


def test_substitution_deterministic_and_seeded(substitution):
    assert SmilesSubstitution.from_seed(0) == substitution
    assert SmilesSubstitution.from_seed(1).mapping != substitution.mapping
    assert SmilesSubstitution.from_dict(substitution.as_dict()) == substitution


@pytest.mark.parametrize("smiles", HELD_OUT_SMILES)
def test_unblinded_smiles_is_the_same_molecule(substitution, smiles):
    from rdkit import Chem

    blinded = substitution.encode(smiles)
    assert blinded != smiles
    assert len(blinded) == len(tokenize_smiles(smiles))  # one substitute character per token
    decoded = substitution.decode(blinded)
    assert decoded == smiles
    original, restored = Chem.MolFromSmiles(smiles), Chem.MolFromSmiles(decoded)
    assert original is not None and restored is not None
    assert Chem.MolToSmiles(restored) == Chem.MolToSmiles(original)


@pytest.mark.parametrize("smiles", HELD_OUT_SMILES)
def test_branches_and_ring_closures_keep_their_structure(substitution, smiles):
    # Every position holding a given token holds the same substitute, and no other position does:
    # branch brackets still pair up and ring-closure labels still pair up.
    tokens, blinded = tokenize_smiles(smiles), substitution.encode(smiles)
    for token in set(tokens):
        positions = [i for i, t in enumerate(tokens) if t == token]
        assert [i for i, c in enumerate(blinded) if c == substitution.mapping[token]] == positions


def test_decode_rejects_foreign_characters(substitution):
    with pytest.raises(ValueError):
        substitution.decode("§")
    with pytest.raises(ValueError):
        SmilesSubstitution.from_dict({"mapping": {"C": "x", "N": "x"}})
    with pytest.raises(ValueError, match="no substitute"):
        SmilesSubstitution.from_dict({"mapping": {"C": "x"}}).encode("CO")


# --- levels and prompts ----------------------------------------------------------------------------------

STUDY_TEMPLATE = (
    "You are an expert chemist and know the Delaney solubility dataset very well. You are given a SMILES "
    "string of a molecule. Your task is to predict the measured log solubility of that molecule in "
    "log(mol/L). Identify functional groups and explain how they change the Solubility. Answer as "
    '{"value": ...}.\nMolecule: {structure}\n'
)
CHEMISTRY_WORDS = ("smiles", "molecul", "chemi", "functional group", "compound")

ITEMS = [
    Item("a", "CC(=O)Oc1ccccc1C(=O)O", "-1.72", "aspirin"),
    Item("b", "c1ccccc1", "-1.64", "benzene"),
    Item("c", "C%10CCCCC%10", "-3.10", "cyclohexane"),
    Item("d", "[13CH3][C@@H](Cl)Br", "0.50", "x"),
    Item("e", "OCC", "1.10", "ethanol"),
]


@pytest.fixture(scope="module")
def blinding():
    return blind(ITEMS, "log solubility", property_hint="solubility", template=STUDY_TEMPLATE,
                 mask_terms=["Delaney", "log(mol/L)"], seed=0, decimals=2)  # fmt: skip


def test_six_levels_in_order(blinding):
    assert [b.level.name for b in blinding.levels] == [
        "specific", "specific-transformed", "generic", "generic-transformed",
        "agnostic", "agnostic-transformed",
    ]  # fmt: skip
    assert [b.level.transformed_labels for b in blinding.levels] == [False, True] * 3
    assert [b.level.transformed_structures for b in blinding.levels] == [False] * 4 + [True] * 2


def test_level_datasets(blinding):
    transform, substitution = blinding.transform, blinding.substitution
    for b in blinding.levels:
        assert [r["id"] for r in b.rows] == [i.item_id for i in ITEMS]
        for row, item in zip(b.rows, ITEMS, strict=True):
            if b.level.transformed_structures:
                assert (
                    row["structure"] != item.smiles and substitution.decode(row["structure"]) == item.smiles
                )
                assert "name" not in row  # names identify molecules
            else:
                assert row["structure"] == item.smiles and row["name"] == item.name
            if b.level.transformed_labels:
                # written to 2 decimals: the inverse is within half a unit of the last decimal, rescaled
                back = transform.inverse_exact(row["label"])
                assert (
                    abs(back - Fraction(item.label))
                    <= Fraction("0.005") * (Fraction("1.10") + Fraction("3.10")) / 100
                )
                assert row["label"] != item.label
            else:
                assert row["label"] == item.label
    assert blinding.levels[1].rows[2]["label"] == "100.00"  # the smallest label
    assert blinding.levels[1].rows[4]["label"] == "0.00"  # the largest label


def test_property_masking_in_prompts(blinding):
    prompts = {b.level.index: b.prompts[0]["prompt"] for b in blinding.levels}
    assert "log solubility" in prompts[1] and "Delaney" in prompts[1]
    assert prompts[1] == STUDY_TEMPLATE.replace("{structure}", ITEMS[0].smiles)  # level 1 untouched
    for index in (2, 3, 4, 5, 6):
        low = prompts[index].lower()
        assert "log solubility" not in low and "delaney" not in low and "log(mol/l)" not in low
        assert '{"value": ...}' in prompts[index]  # braces that are not placeholders survive
    assert "related to solubility" in prompts[2]
    for index in (3, 4, 5, 6):
        assert "solubility" not in prompts[index].lower()
    for index in (5, 6):
        low = prompts[index].lower()
        assert not [w for w in CHEMISTRY_WORDS if w in low], prompts[index]
        assert ITEMS[0].smiles not in prompts[index]
        assert blinding.substitution.encode(ITEMS[0].smiles) in prompts[index]


def test_default_template_placeholders_filled(blinding):
    result = blind(ITEMS, "log solubility", property_hint="solubility")
    for b in result.levels:
        assert not re.search(r"\{\w+\}", b.template.replace("{structure}", "")), b.template
        assert "{structure}" in b.template
    agnostic = result.levels[5].prompts[0]["prompt"]
    assert "sample property" in agnostic and "machine learning model" in agnostic
    assert "molecular property related to solubility" in result.levels[1].prompts[0]["prompt"]
    assert DEFAULT_TEMPLATE.count("{property}") == 1


def test_masking_protects_placeholders():
    level = LEVELS[3]
    masked = mask_template("{property} of property {features}", level, "property", "property")
    assert masked == "{property} of molecular property {features}"


def test_parameters_undo_the_blinding(blinding):
    params = blinding.parameters()
    transform = LabelTransform.from_dict(params["label_transform"])
    substitution = SmilesSubstitution.from_dict(params["smiles_substitution"])
    assert transform == blinding.transform and substitution == blinding.substitution
    assert [lv["dir"] for lv in params["levels"]] == [b.level.slug for b in blinding.levels]
    assert (
        params["label_transform"]["label_min"] == "-3.1" and params["label_transform"]["label_max"] == "1.1"
    )


def test_bad_items_reported_together():
    with pytest.raises(ValueError) as info:
        blind([Item("a", "C C", "1.0"), Item("b", "CCO", "n/a"), Item("c", "CCO", "2.0")], "p")
    assert "a:" in str(info.value) and "b:" in str(info.value)
