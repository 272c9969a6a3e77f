"""Build a task directory, its answers and its card from a spec: ``spu task build SPEC_DIR -o OUT_DIR``.

A spec is a folder holding ``spec.yaml`` (task identity, instruction, shared procedure, setup fields,
groups, citation, data source, licence) and a CSV of experiments (one row per experiment: ``key``, the
setup fields, ``value``, ``source``). The builder writes ``OUT_DIR/task/`` (what the agent sees:
anonymized ids, seeded shuffled order, one neutral template, no values or source identifiers) and
``OUT_DIR/answers.json`` (values, a source per value, the citation, the id mapping) and ``OUT_DIR/card.json``
(what the benchmark claims about the task: chance, power, the screen's verdict, the selection record).

The modules, in the order a build runs: ``safeyaml`` and ``spec`` read and check the spec (``rows`` its
CSV, ``paths`` the files it names, ``design`` its design and selection record; every problem is reported at
once as a :class:`SpecError`), ``render`` lays the task out in memory, ``card`` measures it (and refuses a
presented order above chance), ``build`` writes and checks it, ``checks`` gives the author warnings. The
rules a contract obeys (ids, weights, numbers) are ``spu_common.contract``'s, shared with the task
loader. Format and walk-through: ``docs/authoring-tasks.md``.
"""

from environment.taskbuild.build import (
    BuildResult,
    build_task,
    check_built_task,
    compare_with_build,
    spec_of_task,
)
from environment.taskbuild.card import CARD_FILE, assess
from environment.taskbuild.checks import author_checks, notes, source_identifiers
from environment.taskbuild.design import Design, DrawError, draw
from environment.taskbuild.problems import AuthorWarning, SpecError, SpecProblem
from environment.taskbuild.render import INFORMATION_POLICY, SUBMISSION_RULES, Rendered, render, seed_of
from environment.taskbuild.screening import design_screen
from environment.taskbuild.spec import DOMAINS, NON_REDISTRIBUTABLE, Spec, load_spec

__all__ = [
    "CARD_FILE",
    "DOMAINS",
    "INFORMATION_POLICY",
    "NON_REDISTRIBUTABLE",
    "SUBMISSION_RULES",
    "AuthorWarning",
    "BuildResult",
    "Design",
    "DrawError",
    "Rendered",
    "Spec",
    "SpecError",
    "SpecProblem",
    "assess",
    "author_checks",
    "build_task",
    "check_built_task",
    "compare_with_build",
    "design_screen",
    "draw",
    "load_spec",
    "notes",
    "render",
    "seed_of",
    "source_identifiers",
    "spec_of_task",
]
