"""Loading tasks and answers: the demo tasks load, malformed tasks fail with a message naming the problem."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from env_task_factory import write_task
from hypothesis import given, settings
from hypothesis import strategies as st

from environment.demo_tasks import DEMO_TASKS, demo_answers_path, demo_task_dir
from spu_common.task import TaskError, check_answers, load_answers, load_task


@pytest.mark.parametrize("slug", DEMO_TASKS)
def test_demo_tasks_load_with_cited_answers(slug):
    task = load_task(demo_task_dir(slug))
    answers = load_answers(demo_answers_path(slug))
    check_answers(task, answers)
    assert len(task.groups) == 2
    assert sum(g.weight for g in task.groups) == pytest.approx(1.0)
    for group in task.groups:
        assert 5 <= len(group.experiment_ids) <= 10
        given = answers.group(group.group_id)
        assert set(given.sources) == set(group.experiment_ids)  # every value cited
        assert all(len(s) > 20 for s in given.sources.values())
        # anonymized ids: short hex starting with a letter, not the readable ids of the answers' id_map
        assert all(len(e) == 4 and e[0] in "abcdef" for e in group.experiment_ids)
    assert "Information policy" in task.instruction and "rankings.json" in task.instruction
    assert not (demo_task_dir(slug) / "answers.json").exists()


def test_chemistry_demo_has_smiles_that_rdkit_parses():
    from rdkit import Chem

    task = load_task(demo_task_dir("aromatic-acidity"))
    assert all(Chem.MolFromSmiles(row["smiles"]) is not None for row in task.targets)


def test_demo_values_are_the_tabulated_ones():
    answers = load_answers(demo_answers_path("aromatic-acidity"))
    readable = {old: new for new, old in answers.model_extra["id_map"].items()}
    # CRC Handbook, aqueous pKa at 25 C: benzoic acid 4.20, 4-nitrophenol 7.15
    assert answers.group("g1").values[readable["benzoic_h"]] == pytest.approx(4.20)
    assert answers.group("g2").values[readable["phenol_4no2"]] == pytest.approx(7.15)


def test_equal_weights_when_absent_and_numeric_columns(make_task):
    task, *_ = make_task(
        {"a": {"x": 1, "y": 2}, "b": {"z": 1, "w": 2}},
        conditions={"x": {"temp": "25"}, "y": {"temp": "30.5"}, "z": {"temp": ""}, "w": {"temp": "40"}},
    )
    assert [g.weight for g in task.groups] == [0.5, 0.5]
    assert task.numeric_columns == ["temp"]
    assert [r["temp"] for r in task.targets] == [25.0, 30.5, None, 40.0]


def _mutate_contract(task_dir, change):
    contract = json.loads((task_dir / "contract.json").read_text())
    change(contract)
    (task_dir / "contract.json").write_text(json.dumps(contract))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.pop("task_id"), "lacks 'task_id'"),
        (lambda c: c["groups"].append(dict(c["groups"][0])), "names group 'a' twice"),
        (lambda c: c["groups"][0].update(weight=0.7), "give a weight for every group or for none"),
        (lambda c: [g.update(weight=0.4) for g in c["groups"]], "sum to 0.8"),
        (lambda c: c["groups"][0].update(experiment_ids=["x", "x"]), "more than once"),
        (lambda c: c["groups"][0].update(experiment_ids=[]), "at least one"),
        (lambda c: c["groups"][0]["experiment_ids"].append("q"), "no row for 1 experiment"),
    ],
)
def test_malformed_contract_is_refused(tmp_path, change, message):
    task_dir, _ = write_task(tmp_path, {"a": {"x": 1, "y": 2}, "b": {"z": 1, "w": 2}})
    _mutate_contract(task_dir, change)
    with pytest.raises(TaskError, match=message):
        load_task(task_dir)


def test_targets_row_not_in_contract_and_missing_files(tmp_path):
    task_dir, _ = write_task(tmp_path, {"a": {"x": 1, "y": 2}})
    with open(task_dir / "targets.csv", "a") as fh:
        fh.write("extra,a\n")
    with pytest.raises(TaskError, match=r"'extra' of group 'a' is not in contract\.json"):
        load_task(task_dir)
    (task_dir / "instruction.md").unlink()
    with pytest.raises(TaskError, match=r"lacks instruction\.md"):
        load_task(task_dir)


def test_answers_inside_the_task_are_refused(tmp_path):
    task_dir, answers = write_task(tmp_path, {"a": {"x": 1, "y": 2}})
    (task_dir / "answers.json").write_text(answers.read_text())
    with pytest.raises(TaskError, match="outside the task directory"):
        load_task(task_dir)


def test_duplicate_keys_in_contract_are_refused(tmp_path):
    task_dir, _ = write_task(tmp_path, {"a": {"x": 1, "y": 2}})
    (task_dir / "contract.json").write_text(
        '{"task_id": "t", "task_id": "u", "task_version": "1", "groups": []}'
    )
    with pytest.raises(TaskError, match="twice"):
        load_task(task_dir)


def test_answers_must_cover_the_task(make_task, tmp_path):
    task, _answers, _, answers_path = make_task({"a": {"x": 1, "y": 2, "z": 3}})
    data = json.loads(answers_path.read_text())
    del data["groups"][0]["values"]["z"]
    (tmp_path / "short.json").write_text(json.dumps(data))
    with pytest.raises(TaskError, match=r"lack values for \['z'\]"):
        check_answers(task, load_answers(tmp_path / "short.json"))
    data["groups"][0]["values"] = {"x": 1, "y": 1, "z": 1}
    (tmp_path / "flat.json").write_text(json.dumps(data))
    check_answers(task, load_answers(tmp_path / "flat.json"))  # all tied: loads, scores 0 (grading tests)
    data["groups"][0]["values"] = {"x": 1, "y": "high", "z": 1}
    (tmp_path / "text.json").write_text(json.dumps(data))
    with pytest.raises(TaskError, match="finite number"):
        load_answers(tmp_path / "text.json")


# -- a folder swapped for a link while a task loads -------------------------------------------------------
# The tool server loads tasks from paths an agent names, below its roots, while anything else may be
# changing that folder. The rule: the path is reached only through spu_common.confined, never named again
# (resolved, stat'ed) outside it. The test swaps one component of the path between its real folder and a
# link to a twin (outside the root, or beside it) at the boundaries of the OS calls load_task makes
# (``sys.setprofile`` sees each call into ``os``). Whatever the schedule, the load ends in a TaskError or in
# the real task, shown at its real path: never another error, never the twin.


class _Swapper:
    """Swaps ``target`` between its real folder and a link to ``twin`` before the OS calls whose index
    (counted from 0 over calls into ``os`` on this thread) is in ``toggles``."""

    def __init__(self, target, twin, toggles):
        self.target, self.twin, self.held = target, twin, target.with_name(f".held-{target.name}")
        self.toggles, self.calls, self.linked = set(toggles), 0, False

    def _toggle(self):
        if self.linked:
            os.unlink(self.target)
            os.rename(self.held, self.target)
        else:
            os.rename(self.target, self.held)
            os.symlink(self.twin, self.target)
        self.linked = not self.linked

    def _profile(self, frame, event, arg):
        if event == "c_call" and getattr(arg, "__module__", None) == "posix":
            if self.calls in self.toggles:
                self._toggle()
            self.calls += 1

    def load(self, task_dir, roots):
        sys.setprofile(self._profile)
        try:
            return load_task(task_dir, roots=roots, allow_hard_links=False)
        finally:
            sys.setprofile(None)
            if self.linked:
                self._toggle()


@pytest.fixture(scope="module")
def swap_layout(tmp_path_factory):
    """root/raced/task (the real task), its twin outside the root and beside it, with another title."""
    base = tmp_path_factory.mktemp("swaps")
    task_dir, _ = write_task(base / "root" / "raced", {"a": {"x": 1, "y": 2}, "b": {"z": 1, "w": 2}})
    for twin in (base / "outside" / "raced", base / "root" / "beside"):
        shutil.copytree(task_dir.parent, twin)
        _mutate_contract(twin / task_dir.name, lambda c: c.update(title="the twin"))
    return base, task_dir


def _load_swapped(base, task_dir, component, twin, toggles):
    """The task loaded under the swap schedule ``toggles``, or None when the load refused it (TaskError);
    any other error propagates."""
    target = task_dir if component == "task" else task_dir.parent
    far = {"outside": base / "outside" / "raced", "beside": base / "root" / "beside"}[twin]
    to = far / task_dir.name if component == "task" else far
    try:
        return _Swapper(target, to, toggles).load(task_dir, [base / "root"])
    except TaskError:
        return None


def _the_real_task(task, task_dir) -> bool:
    return task.root == task_dir.resolve() and task.title != "the twin"


@pytest.mark.parametrize("component", ["task", "raced"])
@pytest.mark.parametrize("twin", ["outside", "beside"])
@pytest.mark.parametrize("length", [1, 2])
def test_a_folder_swapped_for_a_link_at_any_os_call_is_refused_or_never_followed(
    swap_layout, component, twin, length
):
    """Every single swap (there and back after ``length`` calls), at every OS call of the load."""
    base, task_dir = swap_layout
    counter = _Swapper(task_dir, task_dir, ())
    assert counter.load(task_dir, [base / "root"]).title != "the twin"
    assert counter.calls > 20  # the profile hook sees the load's calls into os
    for start in range(counter.calls):
        task = _load_swapped(base, task_dir, component, twin, (start, start + length))
        assert task is None or _the_real_task(task, task_dir), (start, task.root, task.title)


@settings(max_examples=60)
@given(
    toggles=st.lists(st.integers(min_value=0, max_value=120), max_size=8),
    component=st.sampled_from(["task", "raced"]),
    twin=st.sampled_from(["outside", "beside"]),
)
def test_any_schedule_of_swaps_while_a_task_loads_is_refused_or_never_followed(
    swap_layout, toggles, component, twin
):
    base, task_dir = swap_layout
    task = _load_swapped(base, task_dir, component, twin, toggles)
    assert task is None or _the_real_task(task, task_dir), (toggles, task.root, task.title)
