"""The demo tasks are labelled smoke tests, and no value a public source disputes the order of remains."""

from __future__ import annotations

import json

import pytest

from environment.demo_tasks import DEMO_TASKS, demo_answers_path, demo_task_dir
from spu_common.task import check_answers, load_answers, load_task


@pytest.mark.parametrize("slug", DEMO_TASKS)
def test_demo_tasks_are_labelled_smoke_tests(slug):
    for name in ("contract.json", "protocol.json"):
        data = json.loads((demo_task_dir(slug) / name).read_text(encoding="utf-8"))
        assert data["smoke_test"] is True
        assert "not a benchmark task" in data["purpose"]
    check_answers(load_task(demo_task_dir(slug)), load_answers(demo_answers_path(slug)))


def test_enzyme_kcat_group_drops_the_disputed_dna_polymerase_value():
    task = load_task(demo_task_dir("enzyme-kinetics"))
    answers = load_answers(demo_answers_path("enzyme-kinetics"))
    readable = answers.model_extra["id_map"]
    assert "kcat_pol1" not in readable.values()
    assert all(row["enzyme"] != "DNA polymerase I" for row in task.targets)
    kcat = {readable[e]: v for e, v in answers.group("g1").values.items()}
    # the remaining order, lowest to highest, as tabulated (no public source read disputes it)
    assert sorted(kcat, key=kcat.get) == [
        "kcat_lyz",
        "kcat_trps",
        "kcat_chymo",
        "kcat_ldh",
        "kcat_bla",
        "kcat_ache",
        "kcat_ksi",
        "kcat_ca",
    ]
    assert "DNA polymerase I" in answers.model_extra["notes"]
    assert "(8 experiments)" in task.instruction and "(9 experiments)" not in task.instruction
