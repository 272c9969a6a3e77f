"""`spu baselines`: chance, the monotone prior and declared proxies run through the real `spu serve`."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from environment.analysis.errors import AnalysisError
from environment.baselines import baselines, fill_template, load_declaration, pick, run_proxies
from environment.chance import chance_threshold
from environment.demo_tasks import demo_answers_path, demo_task_dir
from environment.rank_agreement import spearman_of_order
from environment.task import load_answers, load_task

REPO = Path(__file__).resolve().parents[2]


def spu(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_templates_fill_per_experiment_and_paths_pick_numbers():
    row = {"experiment_id": "e1", "smiles": "CCO", "temperature_c": 25.0}
    template = {
        "molecules": ["{smiles}"],
        "t": "{temperature_c}",
        "label": "{experiment_id} at {temperature_c} C",
    }
    assert fill_template(template, row) == {"molecules": ["CCO"], "t": 25.0, "label": "e1 at 25.0 C"}
    assert pick({"items": [{"descriptors": {"x": 1.5}}]}, "items.0.descriptors.x") == 1.5
    with pytest.raises(KeyError):
        pick({"items": []}, "items.0.x")


def test_a_declaration_naming_an_unknown_column_is_refused_with_file_and_proxy(tmp_path):
    task = load_task(demo_task_dir("aromatic-acidity"))
    path = tmp_path / "baselines.json"
    path.write_text(
        json.dumps(
            {
                "schema": "spu.baselines/1",
                "proxies": [
                    {
                        "name": "x",
                        "tool": "chem_descriptors",
                        "arguments": {"molecules": ["{structure}"]},
                        "value": "items.0.descriptors.tpsa_a2",
                        "direction": "ascending",
                    }
                ],
            }
        )
    )
    with pytest.raises(AnalysisError) as info:
        load_declaration(path, task)
    assert info.value.code == "baselines_invalid"
    assert f"{path}: proxies[0]" in str(info.value) and "structure" in str(info.value)
    path.write_text('{"proxies": [}')
    with pytest.raises(AnalysisError, match=r"baselines\.json:1: not valid JSON"):
        load_declaration(path, task)
    path.write_text('{"proxies": [], "proxies": []}')
    with pytest.raises(AnalysisError, match="appears twice"):
        load_declaration(path, task)


def test_monotone_baselines_of_the_demo_suite_without_proxies():
    done = spu("baselines", str(REPO / "environment" / "demo_tasks"), "--no-proxies", "--json")
    assert done.returncode == 0, done.stderr
    results = {t["task_id"]: t for t in json.loads(done.stdout)["tasks"]}
    assert set(results) == {"demo-aromatic-acidity", "demo-electrolyte-solvents", "demo-enzyme-kinetics"}
    task = load_task(demo_task_dir("electrolyte-solvents"))
    answers = load_answers(demo_answers_path("electrolyte-solvents"))
    electrolytes = results["demo-electrolyte-solvents"]
    assert electrolytes["chance_threshold"] == pytest.approx(
        chance_threshold(task, answers)["chance_threshold"]
    )
    # measurement temperature: 20, 25, 40 C in g1, 25 and 40 C in g2: two baselines, opposite in sign
    fields = {(m["field"], m["direction"]): m for m in electrolytes["monotone"]}
    assert set(fields) == {
        ("measurement_temperature_c", "ascending"),
        ("measurement_temperature_c", "descending"),
    }
    up = fields[("measurement_temperature_c", "ascending")]
    assert up["score"] == pytest.approx(-fields[("measurement_temperature_c", "descending")]["score"])
    assert [g["distinct_values"] for g in up["groups"]] == [3, 2]
    assert results["demo-aromatic-acidity"]["monotone"] == []  # 25 C everywhere


def _crippen_score(task, answers) -> float:
    from rdkit import Chem
    from rdkit.Chem import Crippen

    total = 0.0
    for group in task.groups:
        logp = {
            r["experiment_id"]: Crippen.MolLogP(Chem.MolFromSmiles(r["smiles"]))
            for r in task.rows_of(group.group_id)
        }
        order = sorted(group.experiment_ids, key=lambda e: logp[e])
        total += group.weight * spearman_of_order(order, answers.group(group.group_id).values)
    return total


@pytest.mark.slow
def test_declared_proxies_run_through_the_real_server_and_its_cache(spu_env):
    pytest.importorskip("rdkit")
    task = load_task(demo_task_dir("aromatic-acidity"))
    answers = load_answers(demo_answers_path("aromatic-acidity"))
    declaration = demo_answers_path("aromatic-acidity").parent / "baselines.json"
    proxies = load_declaration(declaration, task)
    first = run_proxies(task, answers, proxies)
    logp = next(p for p in first if p["name"] == "Crippen logP")
    assert logp["errors"] == [] and logp["calls"] == 16
    # the same ranking computed here with RDKit directly
    assert logp["score"] == pytest.approx(_crippen_score(task, answers), abs=1e-12)
    # both proxies send the same arguments: the second is served from the server's cache, and so is a rerun
    tpsa = next(p for p in first if p["name"] == "polar surface area")
    assert tpsa["cache_hits"] == 16
    again = run_proxies(task, answers, proxies)
    assert [p["cache_hits"] for p in again] == [16, 16]
    assert [p["score"] for p in again] == [p["score"] for p in first]


@pytest.mark.slow
def test_a_failing_proxy_reports_each_experiment_and_scores_nothing(spu_env, tmp_path):
    task = load_task(demo_task_dir("aromatic-acidity"))
    answers = load_answers(demo_answers_path("aromatic-acidity"))
    path = tmp_path / "baselines.json"
    path.write_text(
        json.dumps(
            {
                "proxies": [
                    {
                        "name": "names are not SMILES",
                        "tool": "chem_descriptors",
                        "arguments": {"molecules": ["{compound}"]},
                        "value": "items.0.descriptors.tpsa_a2",
                        "direction": "ascending",
                        "groups": ["g1"],
                    }
                ]
            }
        )
    )
    result = baselines(task, answers, declaration=path, draws=200)
    (proxy,) = result["proxies"]
    assert proxy["score"] is None and proxy["calls"] == 8
    assert len(proxy["errors"]) == 8 and proxy["errors"][0].startswith("g1/")


def test_the_cli_prints_each_baseline_of_one_task(spu_env):
    task_dir = demo_task_dir("electrolyte-solvents")
    done = spu("baselines", str(task_dir), "--no-proxies", env=spu_env)
    assert done.returncode == 0, done.stderr
    assert "demo-electrolyte-solvents: chance threshold" in done.stdout
    assert "monotone measurement_temperature_c ascending" in done.stdout
    with open(task_dir / "targets.csv", newline="") as handle:
        assert "measurement_temperature_c" in next(csv.reader(handle))
    missing = spu("baselines", str(task_dir), "--answers", str(task_dir / "nope.json"), env=spu_env)
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "Traceback" not in missing.stderr


def test_a_server_that_cannot_start_is_one_clear_error(spu_env):
    done = spu("baselines", str(demo_task_dir("aromatic-acidity")), "--server-command", "false", env=spu_env)
    assert done.returncode == 1
    assert "error [server_unavailable]: the tool server (false) failed" in done.stderr
    assert "Traceback" not in done.stderr
    missing = spu("baselines", str(demo_task_dir("aromatic-acidity")), "--proxies", "nope.json", env=spu_env)
    assert missing.returncode == 2 and "--proxies nope.json does not exist" in missing.stderr


def test_baselines_of_every_suite_task():
    suite = REPO / "environment" / "tasks"
    task_dirs = sorted(p.parent for p in suite.rglob("contract.json"))
    if not task_dirs:
        pytest.skip("no task suite in this checkout")
    done = spu("baselines", str(suite), "--no-proxies", "--json", "--draws", "500")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    results = payload.get("tasks", [payload])
    assert len(results) == len(task_dirs)
    for result in results:
        task_dir = next(d for d in task_dirs if load_task(d).task_id == result["task_id"])
        task, answers = load_task(task_dir), load_answers(task_dir.parent / "answers.json")
        expected = chance_threshold(task, answers, draws=500)
        assert result["chance_threshold"] == pytest.approx(expected["chance_threshold"])
        assert result["attainable_max"] == pytest.approx(expected["attainable_max"])
        by_key = {(m["field"], m["direction"]): m["score"] for m in result["monotone"]}
        for (field, direction), score in by_key.items():
            other = "descending" if direction == "ascending" else "ascending"
            assert score == pytest.approx(-by_key[(field, other)])
            assert field in task.numeric_columns
