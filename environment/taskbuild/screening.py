"""A design's prior rate: re-draw it, build each draw in memory, screen it (the design module's docstring
says what is measured). Apart from :mod:`environment.taskbuild.design` because it builds tasks: the spec
reads designs, and rendering reads the spec."""

from __future__ import annotations

import dataclasses
from typing import Any

from environment.chance import chance_threshold
from environment.prior_screen import descriptor_columns, screen, shuffled_answers, task_from_files
from environment.taskbuild.design import Design, DrawError, design_digest, draw
from environment.taskbuild.render import render


def design_screen(spec, n: int, *, progress=None) -> dict[str, Any]:
    """The design's prior rate over ``n`` draws (module docstring). ``spec`` is a loaded Spec with a
    design; ``progress(done, n)`` is called after each draw."""
    design: Design = spec.design
    counts = {"prior-solvable": 0, "undecided": 0, "not-prior-solvable": 0}
    shuffled = {"prior-solvable": 0, "undecided": 0, "not-prior-solvable": 0}
    failed = 0
    for seed in range(n):
        try:
            members = draw(design, spec.rows, spec.task_id, seed)
        except DrawError:
            failed += 1
            continue
        groups = [dataclasses.replace(g, members=members[g.group_id]) for g in spec.groups]
        rendered = render(dataclasses.replace(spec, groups=groups))
        task, answers = task_from_files(rendered.files, rendered.answers)
        threshold = chance_threshold(task, answers)["chance_threshold"]
        columns, notes = descriptor_columns(task)
        counts[
            screen(task, answers, threshold, seed=seed, columns=columns, notes=notes)["prior_verdict"]
        ] += 1
        control = shuffled_answers(task, answers, seed)
        shuffled[
            screen(task, control, threshold, seed=seed, columns=columns, notes=notes)["prior_verdict"]
        ] += 1
        if progress is not None:
            progress(seed + 1, n)
    drawn = n - failed
    return {
        "draws": n,
        "seeds": f"0..{n - 1}",
        "failed_draws": failed,
        "prior_solvable": counts["prior-solvable"],
        "undecided": counts["undecided"],
        "prior_rate": counts["prior-solvable"] / drawn if drawn else None,
        "shuffled_prior_solvable": shuffled["prior-solvable"],
        "shuffled_prior_rate": shuffled["prior-solvable"] / drawn if drawn else None,
        "digest": design_digest(design, spec.rows, spec.task_id),
    }
