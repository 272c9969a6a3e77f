"""What the suite promises beyond a reproducible build: at least 40 tasks (chemistry 12, materials 10, biology
10, medicine 8 at least), the prior-solvable share the README states (a quarter at most is the aim, not met
since the fourth round added designs before the screen), no
author warning on any of them, a redistributable licence, a noise band, groups of 5-12 experiments in
2-6 groups, a value source naming a file or table, a README line per task, and per task either a
``baselines.json`` whose proxies load and call real tools with valid arguments, or a README row saying why no
physics or model proxy of the server applies."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from environment.analysis.baselines import TASK_DIR, fill_template, load_declaration
from environment.chance import chance_threshold
from environment.prior_screen import DIRECTIONS, descriptor_columns, score_proxy
from environment.task import load_answers, load_task
from environment.taskbuild import NON_REDISTRIBUTABLE, build_task, load_spec

TASKS = Path(__file__).resolve().parents[2] / "environment" / "tasks"
SPECS = sorted(p.parent for p in TASKS.glob("*/spec/spec.yaml"))
PARAMS = [pytest.param(s, id=s.parent.name) for s in SPECS]


#: The smallest number of tasks per field (issue 37: chemistry 12, materials 10, biology 10, medicine 8).
MIN_PER_DOMAIN = {"chemistry": 12, "materials": 10, "biology": 10, "medicine": 8}


def test_suite_has_40_tasks_with_the_minimum_in_each_of_four_domains():
    domains = Counter(load_spec(s).domain for s in SPECS)
    assert len(SPECS) >= 40, sorted(s.parent.name for s in SPECS)
    assert set(domains) == set(MIN_PER_DOMAIN), domains
    assert all(domains[d] >= n for d, n in MIN_PER_DOMAIN.items()), domains


@cache
def prior_solvable() -> tuple[str, ...]:
    """The tasks whose best screen entry reaches the chance threshold, computed here from the screen's
    panel and the expected score over tie-breaks (the panel threshold is not needed for the verdict)."""
    out = []
    for spec_dir in SPECS:
        task = load_task(spec_dir.parent / "task")
        answers = load_answers(spec_dir.parent / "answers.json")
        threshold = chance_threshold(task, answers)["chance_threshold"]
        columns, _ = descriptor_columns(task)
        best = max(
            (score_proxy(task, answers, values, d)[0] for values in columns.values() for d in DIRECTIONS),
            default=float("-inf"),
        )
        if best >= threshold:
            out.append(spec_dir.parent.name)
    return tuple(out)


def test_readme_states_the_prior_solvable_share_the_screen_finds():
    readme = (TASKS / "README.md").read_text(encoding="utf-8")
    found = re.search(r"Today (\d+) of the (\d+) tasks are prior-solvable", readme)
    assert found, "the suite README states the share"
    assert (int(found.group(1)), int(found.group(2))) == (len(prior_solvable()), len(SPECS))


@pytest.mark.xfail(
    strict=True,
    reason="not met: the fourth round's 20 tasks were designed before the screen and 16 are prior-solvable; "
    "issue 37's second phase redesigns them under the family-wise verdict",
)
def test_at_most_a_quarter_of_the_suite_is_prior_solvable():
    assert len(prior_solvable()) <= len(SPECS) / 4, prior_solvable()


def test_readme_lists_every_task():
    readme = (TASKS / "README.md").read_text(encoding="utf-8")
    missing = [s.parent.name for s in SPECS if f"`{s.parent.name}`" not in readme]
    assert missing == []


#: Warnings a suite task may keep when the README flags it (the experiment is worth it despite a prior).
FLAGGABLE = {"prior-solvable", "presented-order"}


@pytest.mark.parametrize("spec_dir", PARAMS)
def test_suite_task_builds_without_author_warnings(spec_dir, tmp_path):
    result = build_task(spec_dir, tmp_path)
    readme = (TASKS / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith(f"| `{spec_dir.parent.name}`")]
    flagged = any("prior-solvable" in row for row in rows)
    left = [str(w) for w in result.warnings if not (flagged and w.code in FLAGGABLE)]
    assert left == []
    # the README flags exactly the tasks the screen calls prior-solvable
    assert flagged == any(w.code == "prior-solvable" for w in result.warnings)


@pytest.mark.parametrize("spec_dir", PARAMS)
def test_suite_task_shape_licence_and_sources(spec_dir):
    spec = load_spec(spec_dir)
    licence = spec.license.lower()
    assert not any(bad in licence for bad in NON_REDISTRIBUTABLE) and "-nc" not in licence
    assert spec.noise_band is not None and spec.noise_band > 0
    assert 2 <= len(spec.groups) <= 6
    for group in spec.groups:
        assert 5 <= len(group.members) <= 12, group.group_id
    for row in spec.rows.values():
        # every value names where it was read: a file of the source (path with an extension) or a table
        assert any(tok in row.source for tok in (".csv", ".xlsx", ".yml", ".json", "Table")), row.source


#: The row of each task README that names its best declared physics or model proxy.
PROXY_ROW = "| best declared physics or model proxy |"


@cache
def server_tools() -> dict:
    from tools_server.core.registry import load_registry

    return load_registry().tools


@pytest.mark.parametrize("spec_dir", PARAMS)
def test_suite_task_declares_a_proxy_or_says_why_none_applies(spec_dir, monkeypatch):
    root = spec_dir.parent
    rows = [
        line
        for line in (root / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith(PROXY_ROW)
    ]
    assert len(rows) == 1, "one proxy row in the task README"
    row = rows[0]
    declaration = root / "baselines.json"
    if not declaration.is_file():
        assert "none applies" in row, row
        return
    task = load_task(root / "task")
    proxies = load_declaration(declaration, task)
    assert proxies and any(p["name"] in row for p in proxies), row
    # every call names a tool of the server, with arguments its input model knows and accepts for every
    # experiment (paths under the task directory readable, as run_proxies allows)
    monkeypatch.setenv("SPU_INPUT_ROOTS", str(task.root.resolve()))
    tools = server_tools()
    for proxy in proxies:
        for term in proxy["terms"]:
            spec = tools[term["tool"]]
            unknown = set(term["arguments"]) - set(spec.input_model.model_fields)
            assert not unknown, (term["tool"], unknown)
            for gid in proxy["groups"]:
                for experiment in task.rows_of(gid):
                    filled = fill_template(
                        term["arguments"], {TASK_DIR: str(task.root.resolve()), **experiment}
                    )
                    spec.input_model.model_validate(filled)
