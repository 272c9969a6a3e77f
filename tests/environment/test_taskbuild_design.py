"""Designs, draws and the design screen; selection records; the card and the READMEs generated from cards."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_taskbuild import _spu

from environment.taskbuild import SpecError, build_task, load_spec

CARD_FILE = "card.json"

#: the tasks as issue 36 measured them (the suite has since changed): data/issue36_tasks/README.md
FROZEN = Path(__file__).resolve().parent / "data" / "issue36_tasks"


def _block(name: str) -> str:
    return f"<!-- generated: {name} (spu baselines --write-readme) -->\n<!-- end generated: {name} -->\n"


README_BLOCKS = {
    "suite": f"# suite\n\n{_block('baselines')}\n{_block('proxies')}",
    "task": f"# task\n\n{_block('measured')}",
}


def pool_spec(
    root: Path, *, prior: bool, seed: int | None = None, members: bool = True, **design_extra
) -> Path:
    """A spec whose CSV is a pool of 40 rows in two bands; with ``prior`` the shown dose orders the values."""
    rng = np.random.default_rng(5)
    rows = []
    for i in range(40):
        dose = float(i % 20)
        value = dose + rng.normal(0, 0.3) if prior else rng.normal(0, 3)
        rows.append(
            (f"k{i:02d}", f"compound {i}", f"{dose:g}", "A" if i < 20 else "B", f"{value:.4f}", f"T{i}")
        )
    spec = {
        "task_id": "chem-test-design",
        "task_version": "1",
        "title": "Test compounds drawn from a pool",
        "domain": "chemistry",
        "instruction": "Order the compounds by the measured value.\n",
        "procedure": "Each compound was measured once with one procedure.\n",
        "experiments": "experiments.csv",
        "setup_fields": ["name", "dose"],
        "citation": "Zeller CD, 'Assorted measurements of a pool', J Test Chem 2021, 10.1234/jtc.2021.556",
        "data_source": "Table 4 of the article",
        "license": "CC-BY-4.0",
        "noise_band": 0.1,
        "design": {
            "rule": "five compounds per band",
            "groups": [
                {"group_id": "band-a", "size": 5, "where": {"band": "A"}},
                {"group_id": "band-b", "size": 5, "where": {"band": "B", "dose": [0, 19]}},
            ],
            **({"seed": seed} if seed is not None else {}),
            **design_extra,
        },
        "groups": [
            {"group_id": "band-a", "endpoint": "log P", "unit": "log10 units"},
            {"group_id": "band-b", "endpoint": "log P", "unit": "log10 units"},
        ],
    }
    if members:
        spec["groups"][0]["members"] = ["k00", "k03", "k07", "k12", "k18"]
        spec["groups"][1]["members"] = ["k21", "k24", "k29", "k33", "k38"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["key", "name", "dose", "band", "value", "source"])
    writer.writerows(rows)
    (root / "experiments.csv").write_text(out.getvalue())
    return root


def test_draws_are_reproducible_banded_spaced_and_disjoint(tmp_path):
    from environment.taskbuild import draw

    spec = load_spec(pool_spec(tmp_path / "spec", prior=False))
    first = draw(spec.design, spec.rows, spec.task_id, 3)
    assert first == draw(spec.design, spec.rows, spec.task_id, 3)
    assert first != draw(spec.design, spec.rows, spec.task_id, 4)
    assert {spec.rows[k].cells["band"] for k in first["band-a"]} == {"A"}
    assert {spec.rows[k].cells["band"] for k in first["band-b"]} == {"B"}
    for members in first.values():
        assert len(members) == 5
        values = sorted(spec.rows[k].value for k in members)
        assert min(np.diff(values)) >= 0.1  # the noise band is the default spacing
    assert not set(first["band-a"]) & set(first["band-b"])


def test_a_design_seed_draws_the_members_and_listed_members_must_be_the_draw(tmp_path):
    from environment.taskbuild import draw

    spec = load_spec(pool_spec(tmp_path / "a", prior=False, seed=2, members=False))
    assert [g.members for g in spec.groups] == list(draw(spec.design, spec.rows, spec.task_id, 2).values())
    with pytest.raises(SpecError) as wrong:
        load_spec(pool_spec(tmp_path / "b", prior=False, seed=2))
    assert [p.code for p in wrong.value.problems] == ["design-mismatch", "design-mismatch"]


@pytest.mark.parametrize(
    "change, code",
    [
        (lambda s: s["design"]["groups"][0].update(where={"colour": "red"}), "bad-design"),
        (lambda s: s["design"]["groups"][0].update(size=21), "design-draw"),
        (lambda s: s["design"]["groups"].pop(), "design-mismatch"),
        (lambda s: s["design"].update(spacing=-1), "bad-design"),
        (lambda s: s.update(selection={"tried": 1, "kept": 2, "rule": "x"}), "bad-selection"),
        (lambda s: s.update(selection={"tried": 3, "rule": "x"}), "bad-selection"),
    ],
)
def test_a_bad_design_or_selection_is_one_clear_problem(tmp_path, change, code):
    root = pool_spec(tmp_path / "spec", prior=False, seed=0, members=False)
    spec = yaml.safe_load((root / "spec.yaml").read_text())
    change(spec)
    (root / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(SpecError) as exc:
        load_spec(root)
    assert code in [p.code for p in exc.value.problems]


def test_the_design_screen_measures_the_design_s_prior_rate(tmp_path):
    # fails on 9a09d4a: no design screen (a task picked among draws by the screen's verdict said nothing)
    prior = build_task(pool_spec(tmp_path / "p", prior=True), tmp_path / "p-out", design_screen=20)
    # the dose orders the values in every draw: the design is prior-solvable whatever is drawn, while the
    # same draws with shuffled values are near the test's 5%
    assert prior.design_screen["prior_rate"] >= 0.9
    assert prior.design_screen["shuffled_prior_rate"] <= 0.2
    null = build_task(pool_spec(tmp_path / "n", prior=False), tmp_path / "n-out", design_screen=20)
    assert null.design_screen["prior_rate"] <= 0.2
    card = json.loads((tmp_path / "n-out" / CARD_FILE).read_text())
    assert card["design_screen"] == null.design_screen
    assert card["design"]["groups"][1]["where"] == {"band": "B", "dose": [0, 19]}
    # a rebuild without the flag keeps the screen while the design and its pool are unchanged ...
    build_task(pool_spec(tmp_path / "n", prior=False), tmp_path / "n-out")
    assert json.loads((tmp_path / "n-out" / CARD_FILE).read_text())["design_screen"] == null.design_screen
    # ... and drops it when the pool changes
    csv_path = tmp_path / "n" / "experiments.csv"
    csv_path.write_text(csv_path.read_text().replace(",T39\n", ",T39 (rechecked)\n"))
    build_task(tmp_path / "n", tmp_path / "n-out")
    assert json.loads((tmp_path / "n-out" / CARD_FILE).read_text())["design_screen"] is None
    with pytest.raises(SpecError) as no_design:
        build_task(FROZEN / "mat-lihf-phosphate-conductivity" / "spec", tmp_path / "x", design_screen=5)
    assert [p.code for p in no_design.value.problems] == ["no-design"]


def test_a_design_screen_measured_with_another_panel_is_not_carried(tmp_path, monkeypatch):
    # fails on 39e2847: a rebuild carried the design screen while the design and its pool were unchanged, so a
    # card kept the prior rate measured with the 12-descriptor panel after the screen's panel grew (issue 47)
    import environment.prior_screen as prior_screen

    spec = pool_spec(tmp_path / "n", prior=False)
    first = build_task(spec, tmp_path / "out", design_screen=5)
    assert first.design_screen is not None
    build_task(spec, tmp_path / "out")
    assert json.loads((tmp_path / "out" / CARD_FILE).read_text())["design_screen"] == first.design_screen
    monkeypatch.setattr(prior_screen, "PANEL_VERSION", prior_screen.PANEL_VERSION + 1)
    build_task(spec, tmp_path / "out")
    assert json.loads((tmp_path / "out" / CARD_FILE).read_text())["design_screen"] is None


def test_the_selection_record_reaches_the_card_and_spu_baselines(tmp_path):
    # fails on 9a09d4a: a task kept because the screen rejected other draws said so nowhere
    root = pool_spec(tmp_path / "spec", prior=False)
    spec = yaml.safe_load((root / "spec.yaml").read_text())
    spec["selection"] = {"tried": 3, "kept": 1, "rule": "the first draw the screen did not flag"}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    built = _spu("task", "build", str(root), "-o", str(tmp_path / "out"), "--design-screen", "10")
    assert built.exit_code == 0, built.output
    assert "design screen: " in built.output and " of 10 draws prior-solvable" in built.output
    card = json.loads((tmp_path / "out" / CARD_FILE).read_text())
    assert card["selection"] == spec["selection"]
    shown = _spu("baselines", str(tmp_path / "out" / "task"), "--no-proxies")
    assert shown.exit_code == 0, shown.output
    assert "selection: 1 kept of 3 tried: the first draw the screen did not flag" in shown.output
    assert f"design: {card['design_screen']['prior_solvable']} of 10 draws prior-solvable" in shown.output
    listed = _spu("task", "show", str(tmp_path / "out" / "task"))
    assert "selection: 1 kept of 3 tried" in listed.output and "power: " in listed.output


@pytest.mark.parametrize(
    "task_id",
    [
        "chem-drug-like-solubility",
        "med-human-microsomal-clearance",
        "med-rat-microsomal-clearance",
        "med-mdr1-efflux-ratio",
    ],
)
def test_the_suite_s_screened_draws_record_their_selection_and_design_prior_rate(task_id):
    card = json.loads((FROZEN / task_id / CARD_FILE).read_text())
    assert card["selection"]["kept"] == 1 and "rejected" in card["selection"]["rule"]
    screened = card["design_screen"]
    assert screened["draws"] == 60 and screened["failed_draws"] == 0
    assert screened["prior_rate"] == screened["prior_solvable"] / 60
    # the committed members are one draw of the design's pool: every member matches its group's band
    spec = load_spec(FROZEN / task_id / "spec")
    for group, designed in zip(spec.groups, spec.design.groups, strict=True):
        (column, (low, high)) = next(iter(designed.where.items()))
        assert all(low <= float(spec.rows[k].cells[column]) <= high for k in group.members)


def test_proxy_scores_written_into_a_card_survive_a_rebuild_until_the_declaration_changes(tmp_path):
    from environment.taskbuild.card import dump_card, proxies_digest, with_proxy_scores

    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(FROZEN / "chem-drug-like-solubility" / "baselines.json", out / "baselines.json")
    spec = FROZEN / "chem-drug-like-solubility" / "spec"
    build_task(spec, out)
    card = json.loads((out / CARD_FILE).read_text())
    (declared,) = card["proxies"]
    assert declared["score"] is None and card["proxies_digest"] is None
    measured = [{"name": declared["name"], "score": 0.25, "reversed_score": -0.25, "above_chance": False}]
    digest = proxies_digest(out / "baselines.json", (out / "answers.json").read_bytes())
    (out / CARD_FILE).write_bytes(dump_card(with_proxy_scores(card, measured, digest)))
    build_task(spec, out)
    assert json.loads((out / CARD_FILE).read_text())["proxies"][0]["score"] == 0.25
    # a failed proxy keeps its error codes, not the messages (they name paths of the machine that ran it)
    errors = [f"g{i}/e1: [weights_missing] not in /root/x" for i in (1, 2)]
    failed = [{"name": declared["name"], "score": None, "errors": errors}]
    assert (
        with_proxy_scores(card, failed, digest)["proxies"][0]["error"] == "weights_missing on 2 experiments"
    )
    (out / "baselines.json").write_text(
        (out / "baselines.json").read_text().replace("descending", "ascending")
    )
    build_task(spec, out)
    assert json.loads((out / CARD_FILE).read_text())["proxies"][0]["score"] is None


def test_write_readme_fills_the_generated_blocks_from_the_cards(tmp_path):
    suite = tmp_path / "suite"
    for task_id in ("mat-lihf-phosphate-conductivity", "mat-cofeniv-hea-hardness"):
        shutil.copytree(FROZEN / task_id, suite / task_id)
        (suite / task_id / "README.md").write_text(README_BLOCKS["task"])
    (suite / "README.md").write_text(README_BLOCKS["suite"])
    done = _spu("baselines", str(suite), "--no-proxies", "--write-readme")
    assert done.exit_code == 0, done.output
    text = (suite / "README.md").read_text()
    assert "Today 1 of the 2 tasks are prior-solvable under the family-wise test (0 undecided)." in text
    assert "| `mat-cofeniv-hea-hardness` | 2 (10) | 0.600 (exact) | 0.59 |" in text
    assert (
        "| `mat-lihf-phosphate-conductivity` | none applies (no proxy declared beside the answers) |" in text
    )
    task_text = (suite / "mat-cofeniv-hea-hardness" / "README.md").read_text()
    assert "| prior-solvable (family-wise p below 0.05) | **yes** |" in task_text
    assert task_text.startswith("# task\n")
    # a README without its block: one clear error, and nothing is written
    (suite / "README.md").write_text("# suite without blocks\n")
    before = task_text
    (suite / "mat-cofeniv-hea-hardness" / "README.md").write_text(README_BLOCKS["task"])
    failed = _spu("baselines", str(suite), "--no-proxies", "--write-readme")
    assert failed.exit_code == 2
    assert "[readme_block_missing]" in failed.output and "baselines" in failed.output
    assert (suite / "mat-cofeniv-hea-hardness" / "README.md").read_text() == README_BLOCKS["task"] != before
    # a task without a card
    (suite / "mat-lihf-phosphate-conductivity" / CARD_FILE).unlink()
    (suite / "README.md").write_text(README_BLOCKS["suite"])
    missing = _spu("baselines", str(suite), "--no-proxies", "--write-readme")
    assert missing.exit_code == 2 and "[card_missing]" in missing.output


def test_write_readme_on_a_fresh_build_says_what_to_add_before_computing(tmp_path, monkeypatch):
    """A task fresh from spu task build has no README: --write-readme failed after the baselines had run
    (29 s) with `[readme_unreadable] .../README.md: No such file or directory` and no hint. The READMEs and
    cards are now checked first, and the error names the lines to add."""
    import environment.analysis.baselines

    built = tmp_path / "built"
    shutil.copytree(FROZEN / "mat-cofeniv-hea-hardness", built)  # task/, answers.json, card.json

    def not_yet(*args, **kwargs):
        raise AssertionError("the baselines ran before the READMEs were checked")

    monkeypatch.setattr(environment.analysis.baselines, "baselines", not_yet)
    failed = _spu("baselines", str(built / "task"), "--no-proxies", "--write-readme")
    assert failed.exit_code == 2, failed.output
    (line,) = failed.output.splitlines()
    assert line.startswith(f"error: [readme_missing] {built / 'README.md'} does not exist")
    assert "(hint: Create it with the lines of its generated blocks" in line
    assert "<!-- generated: measured (spu baselines --write-readme) -->" in line
    assert not (built / "README.md").exists()
