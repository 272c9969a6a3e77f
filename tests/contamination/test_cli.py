"""`spu contamination audit|blind|unblind` through the root Typer app, and one real subprocess."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from environment.contamination.simulate import simulated_cell, simulated_labels

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def app():
    from spu.cli import app

    return app


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


@pytest.fixture(scope="module")
def audit_table(tmp_path_factory) -> Path:
    """Two benchmarks x three models; only model "retriever" on "esol" copies 15% of labels verbatim."""
    rng = np.random.default_rng(11)
    rows = []
    for bench in ("esol", "freesolv"):
        labels = simulated_labels(200, rng)
        for model, kind in (("retriever", "planted"), ("guesser", "random"), ("coarse", "coarse")):
            share = 0.15 if (model, bench) == ("retriever", "esol") else 0.0
            rows += simulated_cell(labels, kind, rng, share=share, model=model, benchmark=bench)
    path = tmp_path_factory.mktemp("audit") / "predictions.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "benchmark", "reasoning", "item_id", "prediction", "label"])
        writer.writerows([r.model, r.benchmark, "low", r.item_id, r.prediction, r.label] for r in rows)
    return path


def test_audit_json_table_and_heatmap(app, runner, audit_table, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["contamination", "audit", str(audit_table), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n_cells"] == 6 and data["n_tests"] >= 6
    flagged = {(c["model"], c["benchmark"]) for c in data["cells"] if c["flagged"]}
    assert flagged == {("retriever", "esol")}
    assert all(c["reasoning"] == "low" for c in data["cells"])
    with open(out / "audit.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and {r["flagged"] for r in rows} == {"True", "False"}
    assert "retriever · low" in (out / "audit.md").read_text()
    assert (out / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "audit.json").read_text())["n_flagged"] == 1


def test_audit_fail_on_flag_and_usage_errors(app, runner, audit_table, tmp_path):
    result = runner.invoke(
        app, ["contamination", "audit", str(audit_table), "-o", str(tmp_path), "--fail-on-flag"]
    )
    assert result.exit_code == 1
    assert "**R12+R23**, beyond honest" in result.stdout  # which test flagged, and the honest control
    bad = tmp_path / "bad.csv"
    bad.write_text("model,item_id,prediction,label\nm,1,1.00,1.00\n")
    result = runner.invoke(app, ["contamination", "audit", str(bad), "-o", str(tmp_path)])
    assert result.exit_code == 2 and "benchmark" in result.output
    result = runner.invoke(app, ["contamination", "audit", str(tmp_path / "missing.csv")])
    assert result.exit_code == 2


DATASET = [
    ("m1", "CC(=O)Oc1ccccc1C(=O)O", "-1.72"),
    ("m2", "c1ccccc1", "-1.64"),
    ("m3", "C%10CCCCC%10", "-3.10"),
    ("m4", "[13CH3][C@@H](Cl)Br", "0.50"),
    ("m5", "F/C=C\\F", "1.10"),
    ("m6", "[NH4+].[Cl-]", "0.735"),
]


@pytest.fixture
def dataset_csv(tmp_path) -> Path:
    path = tmp_path / "data.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["compound_id", "smiles", "logS"])
        writer.writerows(DATASET)
    return path


def test_blind_then_unblind(app, runner, dataset_csv, tmp_path):
    from rdkit import Chem

    out = tmp_path / "blinded"
    template = tmp_path / "prompt.txt"
    template.write_text("As a {role}, predict the log solubility in the ESOL set for {structure}.")
    result = runner.invoke(app, [
        "contamination", "blind", str(dataset_csv), "--property", "log solubility", "--hint", "solubility",
        "--label-column", "logS", "--id-column", "compound_id", "--template", str(template), "--mask", "ESOL",
        "--decimals", "4", "--out", str(out), "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    params = json.loads(result.stdout)
    assert [lv["dir"] for lv in params["levels"]] == [
        "1-specific", "2-specific-transformed", "3-generic", "4-generic-transformed", "5-agnostic",
        "6-agnostic-transformed",
    ]  # fmt: skip
    assert json.loads((out / "blinding.json").read_text())["label_transform"]["label_max"] == "1.1"
    for level in params["levels"]:
        folder = out / level["dir"]
        prompts = [json.loads(line) for line in (folder / "prompts.jsonl").read_text().splitlines()]
        assert [p["id"] for p in prompts] == [d[0] for d in DATASET]
        if level["index"] > 1:
            assert "ESOL" not in prompts[0]["prompt"] and "log solubility" not in prompts[0]["prompt"]
        assert "{structure}" in (folder / "prompt_template.txt").read_text()

    # A harness predicts on level 6 and sends back transformed values and blinded structures.
    with open(out / "6-agnostic-transformed" / "dataset.csv", newline="") as handle:
        level6 = list(csv.DictReader(handle))
    predictions = tmp_path / "pred.csv"
    with open(predictions, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "structure", "prediction"])
        writer.writerows([r["id"], r["structure"], r["label"]] for r in level6)
        writer.writerow(["junk", "", "n/a"])
    restored = tmp_path / "restored.csv"
    result = runner.invoke(app, [
        "contamination", "unblind", str(out / "blinding.json"), str(predictions), "--out", str(restored),
        "--structure-column", "structure", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"rows": 7, "converted": 6, "out": str(restored)}
    with open(restored, newline="") as handle:
        back = list(csv.DictReader(handle))
    span = Decimal("1.10") - Decimal("-3.10")
    for row, (_, smiles, label) in zip(back, DATASET, strict=False):
        # transformed labels were written with 4 decimals: the inverse is within 0.00005 * span / 100
        assert abs(Decimal(row["prediction_original"]) - Decimal(label)) <= Decimal("0.00005") * span / 100
        assert row["structure_smiles"] == smiles
        assert Chem.MolToSmiles(Chem.MolFromSmiles(row["structure_smiles"])) == Chem.MolToSmiles(
            Chem.MolFromSmiles(smiles)
        )
    assert back[-1]["prediction_original"] == ""


def test_blind_usage_errors(app, runner, dataset_csv, tmp_path):
    result = runner.invoke(
        app, ["contamination", "blind", str(dataset_csv), "--property", "p", "-o", str(tmp_path)]
    )
    assert result.exit_code == 2 and "label" in result.output  # no "label" column in this file
    bad = tmp_path / "bad.csv"
    bad.write_text("smiles,label\nC C,1.0\nCCO,2.0\n")
    result = runner.invoke(app, ["contamination", "blind", str(bad), "--property", "p", "-o", str(tmp_path)])
    assert result.exit_code == 2 and "unsupported character" in result.output


def test_subprocess_help_and_audit(audit_table, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "spu", "contamination", "audit", str(audit_table), "-o", str(tmp_path)],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 cell(s) flagged" in done.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "spu", "contamination", "--help"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "audit" in help_text and "blind" in help_text and "unblind" in help_text
