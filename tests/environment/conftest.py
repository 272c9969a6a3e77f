"""Fixtures for the benchmark-environment tests: small hand-made tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
from env_task_factory import write_task

from spu_common.task import Answers, Task, load_answers, load_task


@pytest.fixture
def make_task(tmp_path):
    """``make_task(groups, **kw) -> (Task, Answers, task_dir, answers_path)``."""
    counter = iter(range(1000))

    def make(groups: dict[str, dict[str, float]], **kw) -> tuple[Task, Answers, Path, Path]:
        task_dir, answers_path = write_task(tmp_path / f"t{next(counter)}", groups, **kw)
        return load_task(task_dir), load_answers(answers_path), task_dir, answers_path

    return make


@pytest.fixture
def two_group_task(make_task):
    """Group a has a tie (b1 = b2); group b has none. Equal weights."""
    return make_task(
        {
            "a": {"a1": 1.0, "a2": 3.0, "a3": 3.0, "a4": 5.0, "a5": 2.0},
            "b": {"b1": 10.0, "b2": 30.0, "b3": 20.0, "b4": 40.0},
        }
    )
