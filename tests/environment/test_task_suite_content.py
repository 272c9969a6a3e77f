"""What the suite promises beyond a reproducible build: at least seventeen tasks across the four domains, no
author warning on any of them, a redistributable licence, a noise band, groups of 5-12 experiments in
2-6 groups, a value source naming a file or table, and a README line per task."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from environment.taskbuild import NON_REDISTRIBUTABLE, build_task, load_spec

TASKS = Path(__file__).resolve().parents[2] / "environment" / "tasks"
SPECS = sorted(p.parent for p in TASKS.glob("*/spec/spec.yaml"))
PARAMS = [pytest.param(s, id=s.parent.name) for s in SPECS]


def test_suite_has_seventeen_tasks_across_four_domains():
    domains = Counter(load_spec(s).domain for s in SPECS)
    assert len(SPECS) >= 17, sorted(s.parent.name for s in SPECS)
    assert set(domains) == {"chemistry", "materials", "biology", "medicine"}, domains


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
    # tnks2's citation gives the DOI only: the study's title could not be checked offline, and the builder
    # says so rather than skipping the title check silently
    allowed = {"no-title"} if spec_dir.parent.name == "bio-tnks2-inhibitor-potency" else set()
    left = [
        str(w) for w in result.warnings if not (flagged and w.code in FLAGGABLE) and w.code not in allowed
    ]
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
        assert any(tok in row.source for tok in (".csv", ".yml", ".json", "Table")), row.source
