"""`spu task build`: a task from a spec, reproducible bytes, author warnings, one error per spec problem."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from environment.taskbuild import (
    SpecError,
    build_task,
    compare_with_build,
    load_spec,
    seed_of,
)
from spu_common.task import check_answers, load_answers, load_task

ROWS = [
    # key, name, temperature_c, value, source
    ("alpha", "compound one", "25", "1.5", "Table 2, row 1"),
    ("bravo", "compound two", "40", "0.2", "Table 2, row 2"),
    ("charlie", "compound three", "30", "3.1", "Table 2, row 3"),
    ("delta", "compound four", "25", "2.4", "Table 2, row 4"),
    ("echo", "compound five", "60", "-1.0", "Table 3, row 1"),
    ("foxtrot", "compound six", "25", "0.7", "Table 3, row 2"),
    ("golf", "compound seven", "60", "2.2", "Table 3, row 3"),
]


def base_spec() -> dict:
    return {
        "task_id": "chem-test-build",
        "task_version": "1",
        "title": "Partitioning of test compounds",
        "domain": "chemistry",
        "instruction": "Order the compounds by the measured value.\n",
        "procedure": "Each compound was measured once with the same shake-flask procedure.\n",
        "experiments": "experiments.csv",
        "setup_fields": ["name", "temperature_c"],
        "citation": "Quackenbush AB, Zeller CD, "
        "'Partition coefficients of assorted organics by shake flask', "
        "J Test Chem 2021, 10.1234/jtc.2021.555",
        "data_source": "Table 2 and Table 3 of the article; ZellerBase release v2.1",
        "license": "CC-BY-4.0",
        "groups": [
            {
                "group_id": "first",
                "endpoint": "log P",
                "unit": "log10 units",
                "members": ["alpha", "bravo", "charlie", "delta"],
            },
            {
                "group_id": "second",
                "endpoint": "log P",
                "unit": "log10 units",
                "members": ["echo", "foxtrot", "golf"],
            },
        ],
    }


def write_spec(root: Path, spec: dict | None = None, rows=None, *, csv_text: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(
        yaml.safe_dump(spec if spec is not None else base_spec(), sort_keys=False)
    )
    if csv_text is None:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["key", "name", "temperature_c", "value", "source"])
        writer.writerows(rows if rows is not None else ROWS)
        csv_text = out.getvalue()
    (root / "experiments.csv").write_text(csv_text)
    return root


def codes(exc: SpecError) -> list[str]:
    return [p.code for p in exc.problems]


def agent_text(task_dir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(task_dir.rglob("*")) if p.is_file())


# ------------------------------------------------------------------------------------------------ building


def test_build_writes_a_valid_anonymized_task_and_cited_answers(tmp_path):
    spec = write_spec(tmp_path / "spec")
    result = build_task(spec, tmp_path / "out")
    task = load_task(tmp_path / "out" / "task")
    answers = load_answers(tmp_path / "out" / "answers.json")
    check_answers(task, answers)
    assert (task.task_id, task.task_version, result.experiments) == ("chem-test-build", "1", 7)
    assert task.group_ids == ["g1", "g2"]  # author group ids never reach the agent
    assert sorted(task.target_columns) == sorted(["experiment_id", "group_id", "name", "temperature_c"])
    assert task.numeric_columns == ["temperature_c"]
    id_map = answers.model_extra["id_map"]
    assert sorted(id_map.values()) == sorted(r[0] for r in ROWS)
    assert all(len(e) == 4 and e[0] in "abcdef" for e in id_map)
    by_key = {key: new for new, key in id_map.items()}
    group_of = {v: k for k, v in answers.model_extra["group_map"].items()}
    first = answers.group(group_of["first"])
    assert first.values[by_key["charlie"]] == pytest.approx(3.1)
    assert first.sources[by_key["charlie"]] == "Table 2, row 3"
    assert first.unit == "log10 units"
    assert answers.model_extra["citation"].startswith("Quackenbush AB")
    assert answers.model_extra["license"] == "CC-BY-4.0"
    text = agent_text(tmp_path / "out" / "task")
    for hidden in ("alpha", "charlie", "first", "second", "Table 2", "Quackenbush", "10.1234", "ZellerBase"):
        assert hidden not in text
    assert "Order the compounds by the measured value." in (tmp_path / "out/task/instruction.md").read_text()
    assert "shake-flask procedure" in (tmp_path / "out/task/experiment.md").read_text()
    protocol = json.loads((tmp_path / "out/task/protocol.json").read_text())
    assert protocol["setup_fields"] == ["name", "temperature_c"] and protocol["domain"] == "chemistry"


def test_build_is_reproducible_byte_for_byte_and_seeded_by_id_and_version(tmp_path):
    spec = write_spec(tmp_path / "spec")
    build_task(spec, tmp_path / "a")
    build_task(spec, tmp_path / "b")
    for rel in ("task/contract.json", "task/targets.csv", "task/instruction.md", "answers.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    assert compare_with_build(spec, tmp_path / "a") == []
    changed = base_spec() | {"task_version": "2"}
    build_task(write_spec(tmp_path / "spec2", changed), tmp_path / "c")
    assert seed_of("chem-test-build", "1") != seed_of("chem-test-build", "2")
    ids = json.loads((tmp_path / "a/answers.json").read_text())["id_map"]
    ids2 = json.loads((tmp_path / "c/answers.json").read_text())["id_map"]
    assert set(ids) != set(ids2)


def test_presented_order_is_shuffled_not_the_spec_order(tmp_path):
    rows = [(f"k{i:02d}", f"compound {i}", "25", str(i * 1.7 % 11), f"row {i}") for i in range(30)]
    spec = base_spec() | {
        "groups": [{"group_id": "g", "endpoint": "e", "unit": "u", "members": [r[0] for r in rows]}]
    }
    build_task(write_spec(tmp_path / "spec", spec, rows), tmp_path / "out")
    answers = json.loads((tmp_path / "out/answers.json").read_text())
    presented = json.loads((tmp_path / "out/task/contract.json").read_text())["groups"][0]["experiment_ids"]
    assert [answers["id_map"][e] for e in presented] != [r[0] for r in rows]


def test_weights_are_equal_by_default_and_kept_when_given(tmp_path):
    build_task(write_spec(tmp_path / "s1"), tmp_path / "o1")
    assert [g.weight for g in load_task(tmp_path / "o1/task").groups] == [0.5, 0.5]
    spec = base_spec()
    spec["groups"][0]["weight"] = 0.75
    spec["groups"][1]["weight"] = 0.25
    build_task(write_spec(tmp_path / "s2", spec), tmp_path / "o2")
    answers = load_answers(tmp_path / "o2/answers.json")
    weights = {answers.model_extra["group_map"][g.group_id]: g.weight for g in answers.groups}
    assert weights == {"first": 0.75, "second": 0.25}


def test_input_files_named_after_a_key_are_renamed_and_cells_follow(tmp_path):
    spec_dir = tmp_path / "spec"
    rows = [(k, f"{k}.pdb" if k == "alpha" else n, t, v, s) for k, n, t, v, s in ROWS]
    spec = base_spec() | {"inputs": ["structures"]}
    write_spec(spec_dir, spec, rows)
    (spec_dir / "structures").mkdir()
    (spec_dir / "structures" / "alpha.pdb").write_text("ATOM\n")
    (spec_dir / "structures" / "shared.fasta").write_text(">seq\nMKV\n")
    build_task(spec_dir, tmp_path / "out")
    task = load_task(tmp_path / "out/task")
    new_alpha = {v: k for k, v in load_answers(tmp_path / "out/answers.json").model_extra["id_map"].items()}[
        "alpha"
    ]
    assert sorted(task.input_files) == sorted([f"structures/{new_alpha}.pdb", "structures/shared.fasta"])
    assert (tmp_path / "out/task/structures" / f"{new_alpha}.pdb").read_text() == "ATOM\n"
    assert [r["name"] for r in task.targets if r["experiment_id"] == new_alpha] == [f"{new_alpha}.pdb"]


def test_a_file_named_after_several_keys_gets_their_new_ids(tmp_path):
    # "alpha_bravo.pdb" kept its name before: "_" joined to a key is not a token boundary of the old rule
    spec_dir = tmp_path / "spec"
    rows = [(k, "alpha_bravo.pdb" if k == "alpha" else n, t, v, s) for k, n, t, v, s in ROWS]
    write_spec(spec_dir, base_spec() | {"inputs": ["structures"]}, rows)
    (spec_dir / "structures" / "site-charlie").mkdir(parents=True)
    (spec_dir / "structures" / "alpha_bravo.pdb").write_text("ATOM\n")
    (spec_dir / "structures" / "site-charlie" / "model.pdb").write_text("ATOM\n")
    (spec_dir / "structures" / "alphabet.txt").write_text("not a key\n")
    build_task(spec_dir, tmp_path / "out")
    new = {
        key: new_id
        for new_id, key in load_answers(tmp_path / "out/answers.json").model_extra["id_map"].items()
    }
    task = load_task(tmp_path / "out/task")
    assert sorted(task.input_files) == sorted(
        [
            f"structures/{new['alpha']}_{new['bravo']}.pdb",
            f"structures/site-{new['charlie']}/model.pdb",
            "structures/alphabet.txt",  # a word that merely begins with a key is not that key
        ]
    )
    names = " ".join(task.input_files)
    assert not any(key in names.replace("alphabet", "") for key in ("alpha", "bravo", "charlie"))
    # the setup cell naming the file follows it
    assert [r["name"] for r in task.targets if r["experiment_id"] == new["alpha"]] == [
        f"{new['alpha']}_{new['bravo']}.pdb"
    ]


def test_output_inside_a_task_folder_is_refused(tmp_path):
    # OUT/answers.json would land in the folder the agent sees (it was written there, exit 0)
    spec = write_spec(tmp_path / "spec")
    build_task(spec, tmp_path / "out")
    for inside in (tmp_path / "out/task", tmp_path / "out/task/sub"):
        result = _spu("task", "build", str(spec), "-o", str(inside))
        assert result.exit_code == 2, result.output
        assert "[bad-output]" in result.output and "which the agent sees" in result.output
        assert "Traceback" not in result.output
    assert sorted(p.name for p in (tmp_path / "out/task").iterdir()) == [
        "contract.json",
        "experiment.md",
        "instruction.md",
        "protocol.json",
        "targets.csv",
    ]


def test_rebuild_replaces_own_task_but_not_a_foreign_directory(tmp_path):
    spec = write_spec(tmp_path / "spec")
    build_task(spec, tmp_path / "out")
    (tmp_path / "out/task/stale.txt").write_text("left over")
    build_task(spec, tmp_path / "out")  # same task id: rebuilt in place
    assert not (tmp_path / "out/task/stale.txt").exists()
    (tmp_path / "other/task").mkdir(parents=True)
    (tmp_path / "other/task/notes.md").write_text("mine")
    with pytest.raises(SpecError) as exc:
        build_task(spec, tmp_path / "other")
    assert codes(exc.value) == ["bad-output"]
    assert (tmp_path / "other/task/notes.md").read_text() == "mine"
    build_task(spec, tmp_path / "other", force=True)
    load_task(tmp_path / "other/task")


def test_a_spec_with_problems_leaves_an_earlier_build_untouched(tmp_path):
    spec_dir = write_spec(tmp_path / "spec")
    build_task(spec_dir, tmp_path / "out")
    before = (tmp_path / "out/answers.json").read_bytes()
    rows = [*ROWS[:-1], ("golf", "compound seven", "60", "n/a", "Table 3, row 3")]
    write_spec(spec_dir, base_spec(), rows)
    with pytest.raises(SpecError):
        build_task(spec_dir, tmp_path / "out")
    assert (tmp_path / "out/answers.json").read_bytes() == before


# ------------------------------------------------------------------------------------------------ warnings


def warning_codes(result) -> list[str]:
    return [w.code for w in result.warnings]


def test_clean_spec_has_no_warnings(tmp_path):
    result = build_task(write_spec(tmp_path / "spec"), tmp_path / "out")
    assert result.warnings == []
    assert result.notes == ["no noise_band given: the within-noise check was skipped"]


@pytest.mark.parametrize("sign", [1, -1])
def test_order_that_follows_one_varied_field_is_reported(tmp_path, sign):
    rows = [list(r) for r in ROWS]
    # group 'first' (alpha..delta): temperature strictly rises (or falls) with the value
    for row, temperature in zip(rows[:4], ("30", "10", "50", "40"), strict=True):
        row[2] = str(sign * float(temperature))
    result = build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    follows = [w for w in result.warnings if w.code == "follows-one-field"]
    assert [(w.group, w.built_group is not None) for w in follows] == [("first", True)]
    assert "'temperature_c'" in follows[0].message and f"rho = {sign:+d}" in follows[0].message


def test_a_field_constant_in_the_group_or_not_monotone_is_not_reported(tmp_path):
    rows = [list(r) for r in ROWS]
    for row in rows[:4]:
        row[2] = "25"  # constant in group 'first'
    # group 'second': echo -1.0 @60, foxtrot 0.7 @25, golf 2.2 @60 -> not monotone
    result = build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    assert "follows-one-field" not in warning_codes(result)


def test_values_within_the_noise_band_are_reported(tmp_path):
    spec = base_spec() | {"noise_band": 0.5}
    result = build_task(write_spec(tmp_path / "spec", spec), tmp_path / "out")
    noisy = [w for w in result.warnings if w.code == "within-noise"]
    # first: 0.2, 1.5, 2.4, 3.1 -> 2.4/3.1 differ by 0.7 (> 0.5): no pair; second: -1.0, 0.7, 2.2: none
    assert noisy == []
    spec = base_spec() | {"noise_band": 0.8}
    result = build_task(write_spec(tmp_path / "spec2", spec), tmp_path / "out2")
    noisy = [w for w in result.warnings if w.code == "within-noise"]
    assert [w.group for w in noisy] == ["first"]
    assert "delta (2.4) and charlie (3.1)" in noisy[0].message
    assert result.notes == []


def test_ties_are_reported(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[3][3] = "1.5"  # delta ties alpha
    result = build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    ties = [w for w in result.warnings if w.code == "tie"]
    assert len(ties) == 1 and ties[0].group == "first"
    assert "alpha, delta share the value 1.5" in ties[0].message


@pytest.mark.parametrize(
    ("where", "text", "kind"),
    [
        ("instruction", "See 10.1234/jtc.2021.555 for details.", "DOI"),
        ("instruction", "A related record: doi 10.5555/other.99.", "a DOI"),
        ("procedure", "Measured as in the work of Quackenbush and co-workers.", "author surname"),
        ("procedure", "Partition coefficients of assorted organics were measured.", "title words"),
        ("instruction", "Values were curated in ZellerBase.", "data source"),
    ],
)
def test_source_identifiers_in_agent_visible_text_are_reported(tmp_path, where, text, kind):
    spec = base_spec()
    spec[where] = spec[where] + text + "\n"
    result = build_task(write_spec(tmp_path / "spec", spec), tmp_path / "out")
    found = [w for w in result.warnings if w.code == "source-identifier"]
    assert found, result.warnings
    assert any(w.message.startswith(kind) for w in found)
    assert any(("instruction.md" if where == "instruction" else "experiment.md") in w.message for w in found)


def test_source_identifier_in_a_setup_cell_is_reported(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[0][1] = "compound one (Zeller 2021)"
    result = build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    assert any("'Zeller'" in w.message and "targets.csv" in w.message for w in result.warnings)


def test_the_card_names_the_public_records_a_task_shows(tmp_path):
    """A key the task shows among its conditions (a variant named in the protein's published numbering) is a
    recall risk on the card, with the contamination audit offered; a task that shows none has none."""
    rows = [[key, key.upper(), *rest] for key, _, *rest in ROWS]
    build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    risk = json.loads((tmp_path / "out" / "card.json").read_text())["recall_risk"]
    assert risk["names_shown"] == 7 and risk["examples"] == ["ALPHA", "BRAVO", "CHARLIE", "DELTA", "ECHO"]
    assert "spu contamination blind with these names masked" in risk["audit"]
    build_task(write_spec(tmp_path / "plain"), tmp_path / "plain-out")
    assert "recall_risk" not in json.loads((tmp_path / "plain-out" / "card.json").read_text())


def test_rows_in_no_group_are_reported_and_left_out(tmp_path):
    rows = [*ROWS, ("hotel", "compound eight", "25", "9.9", "Table 4, row 1")]
    result = build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    assert "unused-rows" in warning_codes(result)
    assert "compound eight" not in (tmp_path / "out/task/targets.csv").read_text()


# ------------------------------------------------------------------------------------------------ bad specs


def _mutated(change) -> dict:
    spec = base_spec()
    change(spec)
    return spec


BAD_SPECS = [
    # (description, spec change, expected code, expected field)
    ("missing task_id", lambda s: s.pop("task_id"), "missing-field", "task_id"),
    ("missing citation", lambda s: s.pop("citation"), "missing-field", "citation"),
    ("missing license", lambda s: s.pop("license"), "missing-field", "license"),
    ("upper-case id", lambda s: s.update(task_id="Chem_Test"), "bad-task-id", "task_id"),
    ("float version", lambda s: s.update(task_version=1.5), "bad-version", "task_version"),
    ("empty title", lambda s: s.update(title="  "), "bad-type", "title"),
    ("bad domain", lambda s: s.update(domain="physics"), "bad-domain", "domain"),
    ("unknown key", lambda s: s.update(noise=0.1), "unknown-key", "noise"),
    ("bad noise band", lambda s: s.update(noise_band=-1), "bad-noise-band", "noise_band"),
    (
        "proprietary licence",
        lambda s: s.update(license="All rights reserved"),
        "license-not-redistributable",
        "license",
    ),
    ("unknown licence", lambda s: s.update(license="unknown"), "license-unknown", "license"),
    ("setup fields not a list", lambda s: s.update(setup_fields="name"), "bad-type", "setup_fields"),
    (
        "value shown to the agent",
        lambda s: s.update(setup_fields=["name", "value"]),
        "reserved-setup-field",
        "setup_fields",
    ),
    (
        "setup field not a column",
        lambda s: s.update(setup_fields=["name", "solvent"]),
        "unknown-setup-field",
        "setup_fields",
    ),
    ("missing CSV", lambda s: s.update(experiments="nope.csv"), "missing-csv", "experiments"),
    ("missing input", lambda s: s.update(inputs=["absent.sdf"]), "missing-input", "inputs"),
    ("input outside the spec", lambda s: s.update(inputs=["../elsewhere.sdf"]), "bad-input", "inputs"),
    ("groups empty", lambda s: s.update(groups=[]), "bad-groups", "groups"),
    ("group not a mapping", lambda s: s["groups"].append("g3"), "bad-group", "groups[2]"),
    ("group lacks unit", lambda s: s["groups"][0].pop("unit"), "missing-field", "groups[0].unit"),
    ("unknown group key", lambda s: s["groups"][0].update(members_=[]), "unknown-key", "groups[0].members_"),
    (
        "repeated group id",
        lambda s: s["groups"][1].update(group_id="first"),
        "repeated-group",
        "groups[1].group_id",
    ),
    (
        "unknown member",
        lambda s: s["groups"][0]["members"].append("zulu"),
        "unknown-member",
        "groups[0] (first).members",
    ),
    (
        "member twice",
        lambda s: s["groups"][0]["members"].append("alpha"),
        "repeated-member",
        "groups[0] (first).members",
    ),
    (
        "member in two groups",
        lambda s: s["groups"][1]["members"].append("alpha"),
        "member-in-two-groups",
        "groups[1] (second).members",
    ),
    (
        "group of one",
        lambda s: s["groups"][1].update(members=["echo"]),
        "group-too-small",
        "groups[1] (second).members",
    ),
    (
        "descending direction",
        lambda s: s["groups"][0].update(direction="order from highest to lowest"),
        "bad-direction",
        "groups[0] (first).direction",
    ),
    (
        "negative weight",
        lambda s: s["groups"][0].update(weight=-0.5),
        "bad-weight",
        "groups[0] (first).weight",
    ),
    ("partial weights", lambda s: s["groups"][0].update(weight=0.5), "partial-weights", "groups"),
    (
        "weights not summing to 1",
        lambda s: [g.update(weight=0.4) for g in s["groups"]],
        "weights-sum",
        "groups",
    ),
]


@pytest.mark.parametrize(("what", "change", "code", "field"), BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_each_bad_spec_gets_one_clear_error(tmp_path, what, change, code, field):
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(tmp_path / "spec", _mutated(change)))
    assert codes(exc.value) == [code], str(exc.value)
    problem = exc.value.problems[0]
    assert problem.field == field
    assert problem.file == "spec.yaml"
    assert "spec.yaml" in str(problem) and f"[{code}]" in str(problem)


HEADER = "key,name,temperature_c,value,source\n"
GOOD = "".join(",".join(f'"{c}"' if "," in c else c for c in r) + "\n" for r in ROWS)
BAD_CSVS = [
    ("non-numeric value", HEADER + GOOD.replace("3.1,", "about 3,"), "csv-bad-value", 4, "value"),
    ("infinite value", HEADER + GOOD.replace("3.1,", "inf,"), "csv-bad-value", 4, "value"),
    ("missing source", HEADER + GOOD.replace("Table 2, row 2", ""), "csv-missing-source", 3, "source"),
    ("repeated key", HEADER + GOOD + "alpha,again,25,1.0,Table 9\n", "csv-repeated-key", 9, "key"),
    ("empty key", HEADER + GOOD + ",nameless,25,1.0,Table 9\n", "csv-empty-key", 9, "key"),
    ("ragged row", HEADER + GOOD + "hotel,too,many,cells,1.0,x\n", "csv-ragged-row", 9, None),
    ("missing value column", HEADER.replace(",value", "") + GOOD, "csv-missing-column", 1, "value"),
    ("repeated column", HEADER.replace("source", "name") + GOOD, "csv-repeated-column", 1, None),
    ("unclosed quote", HEADER + GOOD + 'hotel,"compound eight,25,1.0,Table 9\n', "csv-syntax", 9, None),
    (
        "line of a record after a multi-line cell",
        HEADER + 'alpha,"two\nlines",25,x,Table 1\n' + GOOD[GOOD.index("bravo") :],
        "csv-bad-value",
        3,
        "value",
    ),
]


@pytest.mark.parametrize(("what", "text", "code", "row", "field"), BAD_CSVS, ids=[b[0] for b in BAD_CSVS])
def test_each_bad_csv_row_gets_an_error_with_its_line(tmp_path, what, text, code, row, field):
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(tmp_path / "spec", csv_text=text))
    first = exc.value.problems[0]
    assert (first.code, first.file, first.row, first.field) == (code, "experiments.csv", row, field)
    assert f"experiments.csv line {row}" in str(first)


def test_every_problem_is_listed_at_once(tmp_path):
    spec = base_spec()
    spec["domain"] = "astrology"
    spec["groups"][0]["members"].append("zulu")
    text = HEADER + GOOD.replace("0.7,", "n/a,")
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(tmp_path / "spec", spec, csv_text=text))
    assert sorted(codes(exc.value)) == ["bad-domain", "csv-bad-value", "unknown-member"]


def test_all_equal_values_in_a_group_cannot_be_scored(tmp_path):
    rows = [list(r) for r in ROWS]
    for row in rows[4:]:
        row[3] = "1.0"
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(tmp_path / "spec", rows=rows))
    assert codes(exc.value) == ["group-all-equal"]


@pytest.mark.parametrize(
    ("text", "code", "row"),
    [
        ("task_id: [unclosed\n", "yaml-syntax", 2),
        ("- just\n- a list\n", "spec-not-mapping", None),
        (b"\xff\xfe not utf-8", "spec-encoding", None),
    ],
)
def test_unreadable_spec_yaml(tmp_path, text, code, row):
    (tmp_path / "spec").mkdir()
    path = tmp_path / "spec" / "spec.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "spec")
    assert codes(exc.value) == [code]
    assert exc.value.problems[0].row == row


def test_missing_spec_and_empty_csv(tmp_path):
    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "nowhere")
    assert codes(exc.value) == ["spec-missing"]
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(tmp_path / "spec", csv_text=""))
    assert codes(exc.value) == ["csv-empty"]
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(tmp_path / "spec2", csv_text=HEADER))
    assert "csv-no-rows" in codes(exc.value)


def test_version_given_as_integer_is_accepted_as_text(tmp_path):
    spec = base_spec() | {"task_version": 3}
    assert load_spec(write_spec(tmp_path / "spec", spec)).task_version == "3"


# ----------------------------------------------------------------------------------------------- command line


def _spu(*args: str):
    from spu.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_build_reports_problems_without_traceback(tmp_path):
    spec = base_spec()
    spec["groups"][0]["members"].append("zulu")
    spec_dir = write_spec(tmp_path / "spec", spec, csv_text=HEADER + GOOD.replace("3.1,", "x,"))
    result = _spu("task", "build", str(spec_dir), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "2 problems" in result.output
    assert "experiments.csv line 4, field 'value'" in result.output
    assert "[unknown-member]" in result.output
    assert not (tmp_path / "out").exists()


def test_cli_build_json_and_strict(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[3][3] = "1.5"  # a tie
    spec_dir = write_spec(tmp_path / "spec", rows=rows)
    result = _spu("task", "build", str(spec_dir), "-o", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["built"] and [w["code"] for w in data["warnings"]] == ["tie"]
    result = _spu("task", "build", str(spec_dir), "-o", str(tmp_path / "out"), "--strict")
    assert result.exit_code == 1 and "warning [tie]" in result.output


def test_show_prints_author_warnings_and_reports_a_stale_build(tmp_path):
    root = tmp_path / "chem-test-build"
    rows = [list(r) for r in ROWS]
    rows[3][3] = "1.5"
    write_spec(root / "spec", rows=rows)
    assert _spu("task", "build", str(root / "spec"), "-o", str(root)).exit_code == 0
    result = _spu("task", "show", str(root / "task"))
    assert result.exit_code == 0, result.output
    assert "matches a fresh build of the spec" in result.output
    assert "warning [tie] group 'first'" in result.output
    (root / "task" / "targets.csv").write_text((root / "task" / "targets.csv").read_text() + "\n")
    result = _spu("task", "show", str(root / "task"), "--json")
    data = json.loads(result.output)
    assert data["authoring"]["differs_from_build"] == ["task/targets.csv"]
    assert [w["code"] for w in data["authoring"]["warnings"]] == ["tie"]


def test_show_without_a_spec_prints_no_authoring_section(tmp_path):
    build_task(write_spec(tmp_path / "elsewhere"), tmp_path / "out")
    result = _spu("task", "show", str(tmp_path / "out" / "task"))
    assert result.exit_code == 0 and "spec:" not in result.output


def test_a_key_repeated_in_spec_yaml_is_an_error_with_its_line(tmp_path):
    spec_dir = write_spec(tmp_path / "spec")
    text = (spec_dir / "spec.yaml").read_text()
    (spec_dir / "spec.yaml").write_text(text + "title: Another title\n")
    with pytest.raises(SpecError) as exc:
        load_spec(spec_dir)
    problem = exc.value.problems[0]
    assert (problem.code, problem.field, problem.row) == ("repeated-key", "title", len(text.splitlines()) + 1)


def test_output_that_cannot_be_written_is_a_clear_error(tmp_path):
    spec_dir = write_spec(tmp_path / "spec")
    (tmp_path / "plain-file").write_text("x")
    for out in (tmp_path / "plain-file", tmp_path / "plain-file" / "below"):
        result = _spu("task", "build", str(spec_dir), "-o", str(out))
        assert result.exit_code == 2, result.output
        assert "[bad-output]" in result.output and "Traceback" not in result.output


def test_a_presented_order_equal_to_the_measured_order_is_reported(tmp_path):
    # find a version whose seeded shuffle presents group 'first' in measured order, then one that does not
    found = {}
    for version in range(1, 60):
        spec = base_spec() | {"task_version": str(version)}
        # a group shown in measured order may put the presented order above chance: allowed here
        result = build_task(
            write_spec(tmp_path / f"s{version}", spec), tmp_path / f"o{version}", allow_presented_order=True
        )
        contract = json.loads((tmp_path / f"o{version}/task/contract.json").read_text())
        answers = load_answers(tmp_path / f"o{version}/answers.json")
        first = answers.model_extra["group_map"]
        built = next(g for g in contract["groups"] if first[g["group_id"]] == "first")
        values = [answers.group(built["group_id"]).values[e] for e in built["experiment_ids"]]
        in_order = values == sorted(values)
        flagged = any(w.code == "presented-in-order" and w.group == "first" for w in result.warnings)
        assert flagged == in_order
        found[in_order] = version
        if len(found) == 2:
            break
    assert set(found) == {True, False}


def test_spec_yaml_problems_carry_the_line_of_their_key(tmp_path):
    spec = base_spec()
    spec["domain"] = "astrology"
    spec["groups"][1]["members"].append("zulu")
    spec_dir = write_spec(tmp_path / "spec", spec)
    lines = (spec_dir / "spec.yaml").read_text().splitlines()
    with pytest.raises(SpecError) as exc:
        load_spec(spec_dir)
    rows = {p.code: p.row for p in exc.value.problems}
    assert lines[rows["bad-domain"] - 1].startswith("domain:")
    assert lines[rows["unknown-member"] - 1].strip().startswith("members:")
    assert rows["unknown-member"] > next(i for i, ln in enumerate(lines, 1) if "group_id: second" in ln)
