"""Which test flagged a cell, flags resting on R12 alone, and the honest-noise control
(environment/contamination/control.py): an accurate model without retrieval is flagged by R12, and the
control shows that honest accuracy produces that flag; planted copies go beyond it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from environment.contamination.audit import Prediction, run_audit
from environment.contamination.control import float_keys, scaled_errors
from environment.contamination.digits import digit_key, format_figures
from environment.contamination.report import markdown_table
from environment.contamination.simulate import simulated_cell, simulated_labels


def test_vectorised_keys_agree_with_the_decimal_keys():
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.normal(0, 1, 2000) * 10.0 ** rng.integers(-4, 5, 2000),
            [9.996, -9.9951, 0.0999, 1000.0, 99.94, 1e-7, 123456.0],
        ]
    )
    negative, exponent, digits, valid = float_keys(values)
    for i, x in enumerate(values):
        key = digit_key(format_figures(float(x)))
        assert valid[i]
        assert (negative[i], exponent[i], digits[i]) == (
            key.negative,
            key.exponent,
            100 * key.digits[0] + 10 * key.digits[1] + key.digits[2],
        ), x
    assert not float_keys(np.array([0.0, np.nan, np.inf]))[3].any()


def test_scaled_errors_leave_out_three_figure_matches_and_refill_the_centre():
    labels = [-3.47, -3.47, -3.47, -3.47, -0.347, -3.47]
    predictions = [-3.47, -3.46, -3.48, -3.20, -0.300, None]
    keys = [digit_key(str(y)) for y in labels]
    depths = [3, 2, 2, 1, 1, 0]
    errors, exponents = scaled_errors(predictions, labels, keys, depths)
    # -3.46 and -3.48: one third-figure unit either side (0.01) -> mean neighbour count 1 -> one zero back;
    # -0.300 on a label of exponent -1: (0.047) / 0.1 = 0.47 in units of the first figure's interval
    assert sorted(np.round(errors, 9)) == sorted([0.01, -0.01, 0.27, 0.47, 0.0])
    assert sorted(exponents.tolist()) == [-1, 0, 0, 0, 0]


def _honest_rows(labels, noise, rng, model):
    return [
        Prediction(
            model=model,
            benchmark="esol-like",
            item_id=f"{i:04d}",
            prediction=format_figures(float(y) + float(rng.normal(0.0, noise))),
            label=y,
        )
        for i, y in enumerate(labels)
    ]


@pytest.fixture(scope="module")
def audited():
    """An honest model (normal error SD 0.15 on labels of mean -3, SD 2: small next to the first figure's
    interval of 1), a model that copies 10% of labels, and a guesser, on the same 300 labels."""
    rng = np.random.default_rng(4)
    labels = simulated_labels(300, rng)
    rows = _honest_rows(labels, 0.15, rng, "honest")
    rows += simulated_cell(labels, "planted", rng, share=0.1, model="copier", benchmark="esol-like")
    rows += simulated_cell(labels, "random", rng, model="guesser", benchmark="esol-like")
    return run_audit(rows, alpha=0.05, seed=0, honest_sims=200)


def test_an_honest_accurate_model_is_flagged_on_r12_alone_and_the_control_explains_it(audited):
    cells = {c.model: c for c in audited.cells}
    honest = cells["honest"]
    # the R12 test flags honest accuracy: the defect the control is there to expose
    assert honest.significant_r12 and not honest.significant_r23
    assert honest.flagged_by == "R12" and honest.r12_only
    # the control, with the model's own error spread and no retrieval, retains about as much
    assert honest.honest_r12 == pytest.approx(honest.r12, abs=0.05)
    assert honest.honest_flag_rate_r12 >= 0.8  # its own R12 test is significant in most simulations
    assert honest.honest_p_r12 > 0.05 and honest.beyond_honest is False
    assert 0.12 < honest.honest_error_scale < 0.25  # about the SD of 0.15 it was built with
    note = next(n for n in audited.notes if n.startswith("honest/esol-like"))
    assert "flagged on R12 alone" in note and "no more than honest accuracy produces" in note
    assert audited.as_dict()["n_flagged_r12_only"] == 1


def test_planted_copies_go_beyond_the_honest_control(audited):
    copier = {c.model: c for c in audited.cells}["copier"]
    assert copier.flagged_by == "R12+R23" and not copier.r12_only
    # no simulation of the control reaches the copier's evidence: the smallest Monte Carlo p, 1 / (1 + 200)
    assert copier.honest_p_r23 == pytest.approx(1 / 201)
    assert copier.beyond_honest is True
    guesser = {c.model: c for c in audited.cells}["guesser"]
    assert not guesser.flagged and guesser.beyond_honest is None and guesser.flagged_by == ""


def test_the_table_says_which_test_flagged_and_what_the_control_shows(audited):
    table = markdown_table(audited)
    assert "2 cell(s) flagged, 1 of them on R12 alone." in table
    assert "**R12** (R12 alone), within honest" in table
    assert "**R12+R23**, beyond honest" in table
    assert "Honest control: 200 simulated predictors per cell" in table


def test_control_off_leaves_the_fields_empty_and_says_so():
    rng = np.random.default_rng(4)
    labels = simulated_labels(300, rng)
    result = run_audit(_honest_rows(labels, 0.15, rng, "honest"), honest_sims=0)
    cell = result.cells[0]
    assert cell.r12_only and cell.honest_sims == 0 and math.isnan(cell.honest_r12)
    assert cell.beyond_honest is None
    assert "run the honest-noise control" in result.notes[0]
    with pytest.raises(ValueError, match="honest_sims"):
        run_audit(_honest_rows(labels, 0.15, rng, "honest"), honest_sims=-1)


def test_audit_command_writes_the_control(tmp_path):
    from spu.cli import app

    rng = np.random.default_rng(4)
    labels = simulated_labels(200, rng)
    table = tmp_path / "predictions.csv"
    rows = _honest_rows(labels, 0.15, rng, "honest")
    table.write_text(
        "model,benchmark,item_id,prediction,label\n"
        + "".join(f"{r.model},{r.benchmark},{r.item_id},{r.prediction},{r.label}\n" for r in rows)
    )
    runner = CliRunner()
    out = runner.invoke(
        app,
        ["contamination", "audit", str(table), "-o", str(tmp_path / "a"), "--honest-sims", "50", "--json"],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["honest_sims"] == 50 and data["cells"][0]["honest_sims"] == 50
    assert data["cells"][0]["flagged_by"] == "R12" and data["cells"][0]["r12_only"] is True
    assert data["n_flagged_r12_only"] == 1 and data["notes"]
    header = (tmp_path / "a" / "audit.csv").read_text().splitlines()[0].split(",")
    assert {"flagged_by", "r12_only", "honest_r12", "honest_p_r12", "beyond_honest"} <= set(header)
    bad = runner.invoke(app, ["contamination", "audit", str(table), "--honest-sims", "-1"])
    assert bad.exit_code == 2 and "--honest-sims" in bad.output
