"""The trivial-descriptor screen: its families per input kind, and the family-wise verdict checked against
exact enumeration, shuffled-value controls and other seeds."""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata

from environment.analysis.baselines import baselines
from environment.chance import chance_threshold
from environment.prior_screen import descriptor_columns, entry_of, molecule_descriptors, screen
from spu_common.task import load_answers, load_task, parse_answers

#: the tasks as issue 36 measured them (the suite has since changed): data/issue36_tasks/README.md
FROZEN = Path(__file__).resolve().parent / "data" / "issue36_tasks"


@cache
def suite_task(task_id: str):
    return load_task(FROZEN / task_id / "task"), load_answers(FROZEN / task_id / "answers.json")


def _shuffled(task, answers, seed: int):
    """The answers with values permuted within each group (written here, independent of the screen)."""
    rng = np.random.default_rng(seed)
    groups = []
    for group in task.groups:
        values = answers.group(group.group_id).values
        ids = group.experiment_ids
        permuted = rng.permutation([values[e] for e in ids])
        groups.append({"group_id": group.group_id, "values": dict(zip(ids, permuted.tolist(), strict=True))})
    return parse_answers({"task_id": answers.task_id, "task_version": answers.task_version, "groups": groups})


# --------------------------------------------------------------------------------------- the verdict

CONTROL_TASKS = (
    "bio-gb1-triple-arrangements",
    "bio-thrombin-inhibitor-affinity",
    "chem-drug-like-solubility",
    "chem-hostguest-binding",
    "mat-nasicon-conductivity",
    "med-rat-microsomal-clearance",
)


@pytest.mark.slow  # 240 screens of real tasks; bench/prior_screen.py: all 24
def test_shuffled_value_controls_are_prior_solvable_at_about_the_nominal_5pct():
    # fails on 9a09d4a: a task was prior-solvable when its best entry reached the single-ranking chance
    # threshold, and 66 of these 240 controls (28%) were
    flagged = 0
    draws = 0
    for task_id in CONTROL_TASKS:
        task, answers = suite_task(task_id)
        # the screen as baselines() runs it; the panel is of the inputs and the chance threshold of each
        # group's values with their ties, so a shuffle within groups changes neither
        columns, notes = descriptor_columns(task)
        threshold = chance_threshold(task, answers, draws=4000)["chance_threshold"]
        for seed in range(40):
            shuffled = _shuffled(task, answers, 7000 + seed)
            if seed == 0:
                assert chance_threshold(task, shuffled, draws=4000)["chance_threshold"] == threshold
            result = screen(task, shuffled, threshold, seed=seed, columns=columns, notes=notes)
            flagged += result["prior_solvable"]
            draws += 1
    # a permutation test at 0.05: at most 5% in expectation; 240 controls, binomial sd 1.4%
    assert flagged / draws <= 0.09, flagged
    assert flagged >= 1  # the test can flag at all


@pytest.mark.parametrize(
    "task_id, verdict",
    [
        ("bio-thrombin-inhibitor-affinity", "not-prior-solvable"),
        ("bio-mcl1-inhibitor-affinity", "prior-solvable"),
        ("bio-gb1-triple-arrangements", "not-prior-solvable"),
        ("mat-refractory-hea-strength", "prior-solvable"),
    ],
)
def test_the_verdict_does_not_flip_on_the_seed(task_id, verdict):
    # fails on 9a09d4a: no family-wise verdict (its panel threshold for thrombin, 0.725 from 1,000 draws,
    # said "not beaten" where an independent estimate gave 0.689)
    task, answers = suite_task(task_id)
    columns, notes = descriptor_columns(task)
    found = {
        screen(task, answers, seed=seed, columns=columns, notes=notes)["prior_verdict"] for seed in range(8)
    }
    assert found == {verdict}


def _exact_familywise_p(task, answers, columns) -> float:
    """The family-wise p-value over every joint within-group permutation, computed here with scipy's
    average ranks: the share of permutations whose best |expected score| reaches the observed best."""
    per_group = []
    for group in task.groups:
        ids = group.experiment_ids
        n = len(ids)
        measured = rankdata([answers.group(group.group_id).values[e] for e in ids])
        measured -= measured.mean()
        scale = group.weight / np.sqrt((measured @ measured) * n * (n * n - 1) / 12)
        entries = np.array(
            [
                rankdata([values[e] for e in ids]) - (n + 1) / 2
                if all(values[e] is not None for e in ids)
                else np.zeros(n)
                for values in columns.values()
            ]
        )
        perms = np.array(list(itertools.permutations(measured)))
        per_group.append(scale * perms @ entries.T)  # (permutations, entries)
    observed = np.abs(sum(g[0] for g in per_group)).max()  # the identity permutation comes first
    first, second = per_group
    best = np.abs(first[:, None, :] + second[None, :, :]).max(axis=2)
    return float(np.mean(best >= observed - 1e-9))


@pytest.mark.parametrize(
    "task_id",
    [
        "bio-gb1-glycine-site-arrangements",
        "bio-p38-inhibitor-potency",
        "bio-thrombin-inhibitor-affinity",
        "mat-cofeniv-hea-hardness",
        "mat-lisicon-germanate-conductivity",
        "mat-nasicon-conductivity",
    ],
)
def test_the_family_wise_p_value_agrees_with_exact_enumeration(task_id):
    task, answers = suite_task(task_id)
    columns, notes = descriptor_columns(task)
    exact = _exact_familywise_p(task, answers, columns)
    result = screen(task, answers, columns=columns, notes=notes)
    low, high = result["prior_p_interval"]
    assert low <= exact <= high
    assert result["prior_verdict"] == ("prior-solvable" if exact < 0.05 else "not-prior-solvable")


def test_a_panel_that_ties_in_every_group_has_p_one_without_drawing(make_task):
    task, answers, *_ = make_task(
        {"g": {"a": 1.0, "b": 2.0, "c": 3.0}, "h": {"d": 1.0, "e": 2.0, "f": 3.0}},
        conditions={e: {"temperature_k": 298.0} for e in "abcdef"},
    )
    result = screen(task, answers)
    assert result["prior_p_value"] == 1.0 and result["prior_draws"] == 0
    assert result["prior_verdict"] == "not-prior-solvable"


def test_an_entry_at_the_threshold_is_not_above_it_and_the_task_not_prior_solvable(make_task):
    # fails on 9a09d4a: there the best entry *reaching* the threshold made the task prior-solvable. Two
    # groups of five; the dose ranks each group 1, 2, 5, 4, 3: sum d^2 = 8, rho = 1 - 6 * 8 / 120 = 0.6,
    # the exact 95th percentile of the task score
    order = [1, 2, 5, 4, 3]
    groups = {
        "g": {f"a{i}": float(i) for i in range(5)},
        "h": {f"b{i}": float(i) for i in range(5)},
    }
    conditions = {f"{p}{i}": {"dose": float(order[i])} for p in "ab" for i in range(5)}
    task, answers, *_ = make_task(groups, conditions=conditions)
    threshold = chance_threshold(task, answers)["chance_threshold"]
    result = baselines(task, answers, run_declared=False)
    best = result["screen"]["best"]
    assert best["expected_score"] == pytest.approx(0.6, abs=1e-12) == pytest.approx(threshold, abs=1e-9)
    assert result["prior_solvable"] is False
    assert best["above_chance"] is False


# ---------------------------------------------------------------------------------------- the families


@pytest.mark.parametrize(
    "task_id, score",
    [
        ("bio-gb1-glycine-site-arrangements", 0.679),
        ("bio-gb1-residue-arrangements", 0.661),
        ("bio-gb1-triple-arrangements", 0.533),
    ],
)
def test_sequence_variants_are_screened_per_mutated_site(task_id, score):
    # fails on 9a09d4a: only sequence-wide descriptors, which tie in every group of these tasks by design,
    # while the volume of the residue at site 54, larger first, is above the chance threshold in all three
    # (the audit's +0.679, +0.661 and +0.533)
    task, answers = suite_task(task_id)
    threshold = chance_threshold(task, answers)["chance_threshold"]
    columns, notes = descriptor_columns(task)
    result = screen(task, answers, threshold, columns=columns, notes=notes)
    for column in ("substitutions", "sequence"):  # the study's numbering, and positions in the sequence
        entry = entry_of(result, f"{column}: site 54 residue volume", "descending")
        assert entry["expected_score"] == pytest.approx(score, abs=5e-4)
        assert entry["above_chance"]
    # the whole-sequence entries are constant within every group: computed, then left out of the screen
    for name in ("sequence: length", "sequence: hydrophobicity (GRAVY)"):
        assert all(len({columns[name][e] for e in g.experiment_ids}) == 1 for g in task.groups)
        assert entry_of(result, name, "ascending") is None


def test_residue_properties_by_hand():
    from environment.prior_screen import parse_substitutions
    from environment.prior_screen.residues import side_chain_charge, value

    assert parse_substitutions("V39F/D40C/G41L/V54A") == {
        39: ("V", "F"),
        40: ("D", "C"),
        41: ("G", "L"),
        54: ("V", "A"),
    }
    assert parse_substitutions("WT") == {} and parse_substitutions("V39") is None
    assert parse_substitutions("V39F/V39A") is None  # one site twice
    assert value("volume", "F", "V") == 189.9 and value("volume", "G", "G") == 60.1  # Zamyatnin 1972
    assert value("KyteDoolitle", "F", "V") == 2.8  # Kyte-Doolittle
    assert value("blosum62", "F", "V") == -1.0 and value("blosum62", "V", "V") == 4.0
    # aspartate's side chain (pKa 4.05 in Biopython) at pH 7: -1 / (1 + 10^(4.05 - 7))
    assert side_chain_charge("D") == pytest.approx(-1 / (1 + 10 ** (4.05 - 7)), abs=1e-12)
    assert value("charge", "K", "V") == pytest.approx(1 / (1 + 10 ** (7 - 10.0)), abs=1e-9)
    assert value("charge", "A", "V") == 0.0 and value("volume", "X", "V") is None


def test_compositions_are_screened_per_element_amount(make_task):
    # fails on 9a09d4a: only atomic fractions. The Fe amount (1, 2, 3, 4) orders the values; its fraction
    # (1, 0.286, 0.75, 0.308) does not, in either direction
    formulas = {"a": "Fe1", "b": "Fe2Co5", "c": "Fe3Co1", "d": "Fe4Co9"}
    values = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    task, answers, *_ = make_task(
        {"g": values, "h": {"e": 1.0, "f": 2.0, "i": 3.0}},
        conditions={
            **{k: {"alloy": f} for k, f in formulas.items()},
            "e": {"alloy": "Fe1Ni1"},
            "f": {"alloy": "Fe2Ni7"},
            "i": {"alloy": "Fe3Ni2"},
        },
    )
    result = screen(task, answers)

    def score(name: str, direction: str) -> float:
        return entry_of(result, name, direction)["expected_score"]

    assert score("alloy: Fe amount", "ascending") == pytest.approx(1.0, abs=1e-12)
    assert score("alloy: Fe fraction", "ascending") < 0.5 and score("alloy: Fe fraction", "descending") < 0.5


def test_a_series_is_screened_per_substituent_position(make_task):
    # fails on 9a09d4a: no per-position entries. Four 3,4-disubstituted benzamides: position of the
    # chlorine / methoxy / ethyl / hydrogen
    smiles = {
        "a": "NC(=O)c1ccc(Cl)c(C)c1",
        "b": "NC(=O)c1ccc(OC)c(C)c1",
        "c": "NC(=O)c1ccc(CC)c(C)c1",
        "d": "NC(=O)c1cccc(C)c1",
    }
    task, _, *_ = make_task(
        {"g": {"a": 2.0, "b": 3.0, "c": 4.0, "d": 1.0}},
        conditions={k: {"smiles": s} for k, s in smiles.items()},
    )
    columns, _ = descriptor_columns(task)
    heavy = {name: v for name, v in columns.items() if "substituent heavy atoms" in name}
    # the varying position holds Cl (1 heavy atom), OMe (2), Et (2) and H (0) in the members
    assert sorted(tuple(v[e] for e in "abcd") for v in heavy.values()) == [(1.0, 2.0, 2.0, 0.0)]
    (name,) = heavy
    logp = columns[name.replace("heavy atoms", "Crippen logP")]
    assert logp["d"] == 0.0 and logp["a"] > 0  # hydrogen caps the position: H2 scores 0 in Crippen's model


def test_text_conditions_are_screened_as_numbers_or_as_indicators(make_task):
    task, _, *_ = make_task(
        {"g": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}},
        conditions={
            "a": {"temperature": "25 °C", "solvent": "water"},
            "b": {"temperature": "30 °C", "solvent": "water"},
            "c": {"temperature": "35 °C", "solvent": "DMSO"},
            "d": {"temperature": "40 °C", "solvent": "DMSO"},
        },
    )
    columns, _ = descriptor_columns(task)
    assert columns["temperature (number)"] == {"a": 25.0, "b": 30.0, "c": 35.0, "d": 40.0}
    assert columns["solvent = DMSO"] == {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0}


def test_one_group_without_structures_leaves_the_others_screened(make_task):
    # fails on 9a09d4a: one experiment without SMILES switched the molecule screen off for every group
    task, answers, *_ = make_task(
        {"g": {"a": 1.0, "b": 2.0, "c": 3.0}, "h": {"d": 1.0, "e": 2.0, "f": 3.0}},
        conditions={
            "a": {"smiles": "C"},
            "b": {"smiles": "CC"},
            "c": {"smiles": "CCC"},
            "d": {"smiles": ""},
            "e": {"smiles": ""},
            "f": {"smiles": ""},
        },
    )
    result = screen(task, answers, 0.9)
    heavy = entry_of(result, "smiles: heavy atoms", "ascending")
    assert [g["expected_rho"] for g in heavy["groups"]] == pytest.approx([1.0, 0.0])
    assert heavy["expected_score"] == pytest.approx(0.5)
    assert any("no molecule for d, e, f in h" in note for note in result["notes"])


def test_stereocentres_are_counted_by_cip_label():
    alanine = molecule_descriptors("C[C@@H](C(=O)O)N")  # L-alanine: S
    assert (alanine["r_centres"], alanine["s_centres"]) == (0.0, 1.0)
    assert molecule_descriptors("C[C@H](C(=O)O)N")["r_centres"] == 1.0
