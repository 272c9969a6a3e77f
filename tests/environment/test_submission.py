"""Submission rules, the five recoveries of the paper's Appendix E.1, the atomic writer, and properties."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spu_common.submission import (
    ALT_ORDER_KEYS,
    MAX_SUBMISSION_BYTES,
    fallback_submission,
    validate_submission,
    write_submission_atomic,
)

ORDER_A = ["a3", "a1", "a5", "a2", "a4"]
ORDER_B = ["b2", "b1", "b4", "b3"]


def canonical(task):
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "rankings": [{"group_id": "a", "order": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }


def test_canonical_submission_is_strictly_valid(two_group_task):
    task = two_group_task[0]
    for form in (canonical(task), json.dumps(canonical(task)), json.dumps(canonical(task)).encode()):
        report = validate_submission(form, task)
        assert report.valid and report.strict_valid
        assert report.orders == {"a": ORDER_A, "b": ORDER_B}
        assert report.recovered == []
        assert report.normalized == canonical(task)


def test_fallback_is_valid_and_in_presented_order(two_group_task):
    task = two_group_task[0]
    submission = fallback_submission(task)
    assert validate_submission(submission, task, recover=False).valid
    assert submission["rankings"][0]["order"] == ["a1", "a2", "a3", "a4", "a5"]


def _variants(task):
    """(departure label, file) for each of the five departures, and two combined."""
    keyed = {"task_id": task.task_id, "task_version": "1", "rankings": {"a": ORDER_A, "b": ORDER_B}}
    keyed_sub = {
        "task_id": task.task_id,
        "task_version": "1",
        "rankings": {"a": {"order": ORDER_A}, "b": {"ranking": ORDER_B}},
    }
    alt_top = {
        "task_id": task.task_id,
        "task_version": "1",
        "groups": [{"group_id": "a", "order": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }
    predictions = {
        "task_id": task.task_id,
        "task_version": "1",
        "predictions": [{"group_id": "a", "order": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }
    group_key = {
        "task_id": task.task_id,
        "task_version": "1",
        "rankings": [{"group": "a", "order": ORDER_A}, {"group": "b", "order": ORDER_B}],
    }
    identity = {
        "task": task.task_id,
        "version": "1",
        "rankings": [{"group_id": "a", "order": ORDER_A}, {"group_id": "b", "order": ORDER_B}],
    }
    combined = {"task": task.task_id, "version": "1", "groups": {"a": {"item_ids": ORDER_A}, "b": ORDER_B}}
    out = [
        ("object keyed by group id", keyed),
        ("object keyed by group id", keyed_sub),
        ("alternative top-level key", alt_top),
        ("alternative top-level key", predictions),
        ("alternative group identifier key", group_key),
        ("renamed identity fields", identity),
        ("alternative top-level key", combined),
    ]
    for key in ALT_ORDER_KEYS:
        out.append(
            (
                "alternative ordering key",
                {
                    "task_id": task.task_id,
                    "task_version": "1",
                    "rankings": [{"group_id": "a", key: ORDER_A}, {"group_id": "b", key: ORDER_B}],
                },
            )
        )
    return out


def test_each_departure_is_recovered_without_moving_items(two_group_task):
    task = two_group_task[0]
    for label, data in _variants(task):
        report = validate_submission(data, task)
        assert report.valid, (label, report.messages())
        assert not report.strict_valid
        assert any(line.startswith(label) for line in report.recovered), (label, report.recovered)
        assert report.orders == {"a": ORDER_A, "b": ORDER_B}, label
        assert validate_submission(report.normalized, task, recover=False).strict_valid
        strict = validate_submission(data, task, recover=False)
        assert not strict.valid, label


def test_combined_departures_are_all_listed(two_group_task):
    task = two_group_task[0]
    data = {"task": task.task_id, "version": "1", "groups": {"a": {"item_ids": ORDER_A}, "b": ORDER_B}}
    kinds = [line.split(":")[0] for line in validate_submission(data, task).recovered]
    assert sorted(kinds) == sorted(
        [
            "renamed identity fields",
            "alternative top-level key",
            "object keyed by group id",
            "alternative ordering key",
        ]
    )


def test_canonical_key_wins_and_ambiguous_alternatives_are_not_guessed(two_group_task):
    task = two_group_task[0]
    both = canonical(task)
    both["rankings"][0]["item_ids"] = list(reversed(ORDER_A))
    assert validate_submission(both, task).orders["a"] == ORDER_A
    ambiguous = canonical(task)
    del ambiguous["rankings"][0]["order"]
    ambiguous["rankings"][0]["items"] = ORDER_A
    ambiguous["rankings"][0]["ranking"] = list(reversed(ORDER_A))
    report = validate_submission(ambiguous, task)
    assert not report.valid and "several alternative keys" in report.group_errors["a"][0]
    assert "b" not in report.group_errors
    two_tops = {
        "task_id": task.task_id,
        "groups": canonical(task)["rankings"],
        "predictions": canonical(task)["rankings"],
    }
    assert "several alternative keys" in validate_submission(two_tops, task).file_errors[0]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b"", "empty"),
        (b'{"task_id": ', "not valid JSON"),
        (b"[1, 2]", "must hold a JSON object"),
        (b'{"task_id": NaN}', "not valid JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    ],
)
def test_file_level_errors_from_bytes(two_group_task, raw, message):
    report = validate_submission(raw, two_group_task[0])
    assert not report.valid and report.normalized is None
    assert message in report.file_errors[0]


def test_size_limit_is_one_mebibyte(two_group_task):
    task = two_group_task[0]
    text = json.dumps(canonical(task))
    padded = text[:-1] + ', "notes": "' + "x" * (MAX_SUBMISSION_BYTES - len(text) - 14) + '"}'
    assert len(padded.encode()) == MAX_SUBMISSION_BYTES - 1
    assert validate_submission(padded.encode(), task).valid
    too_big = padded[:-2] + 'xx"}'
    assert len(too_big.encode()) == MAX_SUBMISSION_BYTES + 1
    assert "more than the limit" in validate_submission(too_big.encode(), task).file_errors[0]


def test_duplicate_keys_anywhere_invalidate_the_file(two_group_task):
    task = two_group_task[0]
    text = json.dumps(canonical(task)).replace('"group_id": "a"', '"group_id": "a", "group_id": "a"')
    assert "keys must be unique" in validate_submission(text, task).file_errors[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(task_id="other"), "is not this task's id"),
        (lambda d: d.update(task_version="2"), "is not this task's version"),
        (lambda d: d.update(task_version=1), "is not this task's version"),
        (lambda d: d.pop("task_id"), "does not state 'task_id'"),
        (lambda d: d.pop("rankings"), "has no 'rankings'"),
        (lambda d: d.update(rankings=[]), "is empty"),
        (lambda d: d["rankings"].append({"group_id": "zz", "order": []}), "unknown group 'zz'"),
        (lambda d: d["rankings"].append("a"), "must be an object"),
        (lambda d: d["rankings"][0].pop("group_id"), "has no 'group_id'"),
        (lambda d: d.update(rankings="a,b"), "must be a list"),
    ],
)
def test_whole_file_errors(two_group_task, change, message):
    data = canonical(two_group_task[0])
    change(data)
    report = validate_submission(data, two_group_task[0])
    assert not report.valid
    assert any(message in e for e in report.file_errors), report.file_errors


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["rankings"].pop(0), "absent"),
        (lambda d: d["rankings"].append({"group_id": "a", "order": ORDER_A}), "listed 2 times"),
        (lambda d: d["rankings"][0]["order"].pop(), "1 of 5 experiments missing"),
        (lambda d: d["rankings"][0]["order"].append("a1"), "more than once"),
        (lambda d: d["rankings"][0]["order"].append("b1"), "not experiments of this group"),
        (lambda d: d["rankings"][0]["order"].__setitem__(0, 3), "must be experiment id strings"),
        (lambda d: d["rankings"][0].update(order="a1 a2"), "must be a list"),
        (lambda d: d["rankings"][0].pop("order"), "no 'order' list"),
    ],
)
def test_errors_confined_to_group_a(two_group_task, change, message):
    data = json.loads(json.dumps(canonical(two_group_task[0])))
    change(data)
    report = validate_submission(data, two_group_task[0])
    assert not report.valid and report.file_errors == []
    assert list(report.group_errors) == ["a"] and message in report.group_errors["a"][0]
    assert report.orders == {"b": ORDER_B}


def test_paths_are_read_and_missing_files_reported(two_group_task, tmp_path):
    task = two_group_task[0]
    path = write_submission_atomic(tmp_path / "out" / "rankings.json", canonical(task))
    assert validate_submission(path, task).valid
    assert "no submission file" in validate_submission(tmp_path / "none.json", task).file_errors[0]
    assert "pass a pathlib.Path" in validate_submission("rankings.json", task).file_errors[0]


def test_atomic_writer_replaces_and_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "rankings.json"
    write_submission_atomic(target, {"v": 1})
    write_submission_atomic(target, {"v": 2, "name": "é"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"v": 2, "name": "é"}
    assert os.listdir(tmp_path) == ["rankings.json"]
    with pytest.raises(ValueError):
        write_submission_atomic(target, {"v": float("nan")})
    assert json.loads(target.read_text(encoding="utf-8"))["v"] == 2
    assert os.listdir(tmp_path) == ["rankings.json"]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["a", "b", "a1", "b2", "t-demo", "1", "order", "rankings", "groups"]),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                [
                    "task_id",
                    "task",
                    "task_version",
                    "version",
                    "rankings",
                    "groups",
                    "predictions",
                    "group_id",
                    "group",
                    "order",
                    "item_ids",
                    "ranking",
                    "a",
                    "b",
                    "x",
                ]
            )
            | st.text(max_size=5),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=json_values, recover=st.booleans())
def test_validator_never_raises_on_arbitrary_json(two_group_task, data, recover):
    task = two_group_task[0]
    for form in (data, json.dumps(data), json.dumps(data).encode()):
        report = validate_submission(form, task, recover=recover)
        assert report.valid == (not report.file_errors and not report.group_errors)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.permutations(["a1", "a2", "a3", "a4", "a5"]),
    st.permutations(["b1", "b2", "b3", "b4"]),
    st.booleans(),
    st.booleans(),
)
def test_any_valid_submission_validates(two_group_task, order_a, order_b, swap_groups, with_version):
    task = two_group_task[0]
    rankings = [{"group_id": "a", "order": order_a}, {"group_id": "b", "order": order_b}]
    if swap_groups:
        rankings.reverse()
    data = {"task_id": task.task_id, "rankings": rankings}
    if with_version:
        data["task_version"] = "1"
    for recover in (True, False):
        report = validate_submission(json.dumps(data).encode(), task, recover=recover)
        assert report.strict_valid
        assert report.orders == {"a": list(order_a), "b": list(order_b)}


def test_a_link_is_refused_not_followed(two_group_task, tmp_path):
    # a link made by the agent must not point the grader at another file, even at a valid submission
    task = two_group_task[0]
    valid = write_submission_atomic(tmp_path / "elsewhere.json", canonical(task))
    for target in (valid, tmp_path / "missing.json"):
        link = tmp_path / f"rankings-{target.stem}.json"
        link.symlink_to(target)
        report = validate_submission(link, task)
        assert not report.valid and "is a symbolic link, not a regular file" in report.file_errors[0]


def test_a_named_pipe_is_refused_without_blocking(two_group_task, tmp_path):
    # opening a pipe with no writer for reading would wait forever
    pipe = tmp_path / "rankings.json"
    os.mkfifo(pipe)
    report = validate_submission(pipe, two_group_task[0])
    assert not report.valid and "is a named pipe, not a regular file" in report.file_errors[0]
    folder = tmp_path / "folder.json"
    folder.mkdir()
    assert "is a directory" in validate_submission(folder, two_group_task[0]).file_errors[0]


def test_a_huge_file_is_refused_by_its_size_before_any_read(two_group_task, tmp_path, monkeypatch):
    # a 3 GiB file (sparse: no disk used) is judged by stat alone; reading it would take the verifier's memory
    huge = tmp_path / "rankings.json"
    with huge.open("wb") as fh:
        fh.truncate(3 * 2**30)

    def no_read(*args, **kwargs):
        raise AssertionError("the file was opened before its size was checked")

    monkeypatch.setattr(os, "open", no_read)
    monkeypatch.setattr("pathlib.Path.read_bytes", no_read)
    monkeypatch.setattr("pathlib.Path.open", no_read)
    report = validate_submission(huge, two_group_task[0])
    assert report.file_errors == [f"the file has {3 * 2**30} bytes, more than the limit of 1048576 (1 MiB)"]
