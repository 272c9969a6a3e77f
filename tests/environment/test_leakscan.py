"""The content scanner (environment/leakscan) and the export's leak check built on it.

Generated serializations of a suite task's answers (pandas' JSON orients, CSV and TSV with any column set,
order and delimiter, plain-text lines, aligned and transposed tables, a value column in the task's order
without ids; numbers written with 2 to 8 significant digits in fixed, exponent or general notation;
compressed with gzip, bzip2 or xz, zipped or tarred, nested) are each found, and refused by
`spu harbor export`; generated harmless files (the task's own conditions in those formats, its ids beside
random numbers in the values' range, prose) are not. Archives are read within bounds: a decompression bomb
is refused with one line. Hypothesis runs with a fixed seed and a modest budget."""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import json
import lzma
import math
import shutil
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from environment.harbor.export import ExportError, export_task
from environment.leakscan import Limits, ScanLimitError, Scanner, marks_beside, scan_path
from environment.leakscan.marks import written_forms
from environment.leakscan.reading import read_stream
from spu_common.task import Task, load_task

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "environment" / "tasks"
TASK_IDS = sorted(p.parent.name for p in SUITE.glob("*/task"))
#: the experiments a generated leak holds at least (with ids: their digits beyond the first add up to the
#: evidence the scanner asks; without ids, a run in the task's order twice as long)
LEAK_EXPERIMENTS = 6
FAST = settings(derandomize=True, max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
EXPORTS = settings(derandomize=True, max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


@functools.cache
def _task(task_id: str) -> tuple[Task, dict[str, float]]:
    task = load_task(SUITE / task_id / "task")
    answers = json.loads((SUITE / task_id / "answers.json").read_text(encoding="utf-8"))
    return task, {e: v for g in answers["groups"] for e, v in g["values"].items()}


@functools.cache
def _scanner(task_id: str) -> Scanner:
    task, _ = _task(task_id)
    return Scanner([marks_beside(SUITE / task_id / "answers.json", task)])


# -- numbers as people write them ---------------------------------------------------------------------------


def _written(value: float, digits: int, style: str) -> str:
    """Zero as 0, else ``value`` with ``digits`` significant digits (trailing zeros kept) in one style."""
    if value == 0:
        return "0"
    if style == "e":
        return f"{value:.{digits - 1}e}"
    if style == "g":
        return f"{value:#.{digits}g}".rstrip(".")
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def test_a_written_number_matches_its_value_at_the_precision_written():
    """The forms the scanner knows a value by, checked against Python's own formatting."""
    forms = {(d, n) for d, n in written_forms(4.085)}
    assert (2, 408) in forms and (2, 409) in forms  # a tie: both neighbours
    assert (1, 41) in forms and (3, 4085) in forms and (0, 4) not in forms  # one significant digit: none
    assert (-2, 50) in {(d, n) for d, n in written_forms(5023.0)}  # 5.0e+03


# -- serializations ------------------------------------------------------------------------------------------


@st.composite
def _numbers(draw: st.DrawFn) -> tuple[int, str]:
    return draw(st.integers(2, 8)), draw(st.sampled_from(["f", "e", "g"]))


def _frame(task: Task, values: dict[str, float], ids: list[str], columns: list[str], fmt) -> pd.DataFrame:
    rows = {r["experiment_id"]: r for r in task.targets}
    return pd.DataFrame(
        [{c: (_written(values[e], *fmt) if c == "value" else rows[e][c]) for c in columns} for e in ids]
    )


def _json_number(text: str) -> float | str:
    """A JSON number where a float writes the text as it is (4.09), else the text (4.10, 12, 1.2e+03)."""
    return float(text) if repr(float(text)) == text else text


def _render(frame: pd.DataFrame, form: str, delimiter: str) -> bytes:
    if form.startswith("json-"):
        orient = form[5:]
        if orient in ("index", "columns"):
            frame = frame.set_index(frame.columns[0])
        if "value" in frame.columns:
            frame = frame.assign(value=[_json_number(v) for v in frame["value"]])
        return frame.to_json(orient=orient, double_precision=15).encode()
    if form == "csv":
        return frame.to_csv(index=False, sep=delimiter).encode()
    if form == "aligned":
        return frame.to_string(index=False).encode()
    if form == "markdown":
        lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
        lines += ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
        return "\n".join(lines).encode()
    if form == "transposed":
        return frame.T.to_csv(header=False, sep=delimiter).encode()
    # plain-text lines: "experiment e7f2 gave 4.20 (% yield)"
    return "\n".join(
        f"experiment {' '.join(map(str, row))} noted" for row in frame.itertuples(index=False)
    ).encode()


_WRAPPERS = ["gzip", "bzip2", "xz", "zip", "tar"]


def _wrap(data: bytes, wrappers: list[str]) -> bytes:
    for wrapper in wrappers:
        if wrapper == "gzip":
            data = gzip.compress(data, mtime=0)
        elif wrapper == "bzip2":
            data = bz2.compress(data)
        elif wrapper == "xz":
            data = lzma.compress(data)
        else:
            buffer = io.BytesIO()
            if wrapper == "zip":
                with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
                    zf.writestr("notes/data.bin", data)
            else:
                with tarfile.open(fileobj=buffer, mode="w") as tf:
                    info = tarfile.TarInfo("inner/data")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
            data = buffer.getvalue()
    return data


_FORMS = ["json-records", "json-index", "json-columns", "json-split", "json-values", "json-table", "csv"]
_FORMS += ["aligned", "markdown", "transposed", "lines"]


@st.composite
def leaks(draw: st.DrawFn) -> tuple[str, bytes]:
    """A suite task and a file holding the values of at least LEAK_EXPERIMENTS of its experiments."""
    task_id = draw(st.sampled_from(TASK_IDS))
    task, values = _task(task_id)
    presented = [e for g in task.groups for e in g.experiment_ids]
    writable = [e for e in presented if values[e] != 0]
    conditions = task.condition_columns()
    fmt = draw(_numbers())
    wrappers = draw(st.lists(st.sampled_from(_WRAPPERS), max_size=3))
    if draw(st.booleans()):  # with the ids, in any order, beside other columns
        ids = draw(st.lists(st.sampled_from(writable), min_size=LEAK_EXPERIMENTS, unique=True))
        others = draw(st.lists(st.sampled_from(["group_id", *conditions]), unique=True, max_size=4))
        columns = draw(st.permutations(["experiment_id", "value", *others]))
        form = draw(st.sampled_from(_FORMS))
        if form in ("json-index", "json-columns"):
            columns = ["experiment_id", *[c for c in columns if c != "experiment_id"]]
    else:  # a value column in the order the task presents its experiments, no ids
        start = draw(st.integers(0, len(presented) - 2 * LEAK_EXPERIMENTS))
        ids = presented[start : start + draw(st.integers(2 * LEAK_EXPERIMENTS, len(presented) - start))]
        others = draw(st.lists(st.sampled_from(conditions), unique=True, max_size=2))
        columns = draw(st.permutations(["value", *others]))
        form = draw(st.sampled_from(["json-records", "json-split", "json-values", "csv", "aligned", "lines"]))
    delimiter = draw(st.sampled_from([",", "\t", ";", "|", " "]))
    frame = _frame(task, values, ids, list(columns), fmt)
    return task_id, _wrap(_render(frame, form, delimiter), wrappers)


@st.composite
def harmless(draw: st.DrawFn) -> tuple[str, bytes]:
    """A suite task and a file that holds none of its answers: its own conditions in another format, its ids
    beside random numbers in the range of its values, prose with numbers, or a list of names shaped like its
    weak keys (``r0`` to ``r200``)."""
    task_id = draw(st.sampled_from(TASK_IDS))
    task, values = _task(task_id)
    kind = draw(st.sampled_from(["conditions", "random", "prose", "enumeration"]))
    ids = [e for g in task.groups for e in g.experiment_ids]
    if kind == "conditions":
        columns = ["experiment_id", *draw(st.lists(st.sampled_from(task.condition_columns()), unique=True))]
        frame = pd.DataFrame([{c: r[c] for c in columns} for r in task.targets])
        data = _render(frame, draw(st.sampled_from(_FORMS)), draw(st.sampled_from([",", "\t", ";"])))
    elif kind == "random":
        low, high = min(values.values()), max(values.values())
        fmt = draw(_numbers())
        numbers = draw(st.lists(st.floats(low, high), min_size=len(ids), max_size=len(ids)))
        data = "\n".join(
            f"{e}: {_written(x, *fmt)}" for e, x in zip(ids, numbers, strict=True) if x != 0
        ).encode()
    elif kind == "enumeration":  # r0 r1 ... r200, line 1 ... line 900: names like the weak keys, listed whole
        prefix = draw(st.sampled_from(["r", "e", "c", "cp", "no ", "line ", "entry ", "id "]))
        start = draw(st.integers(0, 5000))
        names = [f"{prefix}{i}" for i in range(start, start + draw(st.integers(30, 300)))]
        data = draw(st.sampled_from([", ", "\n", " "])).join(names).encode()
    else:
        words = draw(
            st.lists(
                st.sampled_from(["the", "yield", "line", "entry", "id", "no", "table", "run"]), max_size=60
            )
        )
        numbers = draw(st.lists(st.integers(0, 5000), min_size=len(words), max_size=len(words)))
        data = " ".join(f"{w} {n}" for w, n in zip(words, numbers, strict=True)).encode()
    return task_id, _wrap(data, draw(st.lists(st.sampled_from(_WRAPPERS), max_size=2)))


def _scan(task_id: str, data: bytes) -> list[str]:
    return [
        f.what
        for name, doc in read_stream("leak", io.BytesIO(data), Limits())
        for f in _scanner(task_id).scan(name, doc)
    ]


@FAST
@given(leaks())
def test_every_generated_leak_is_found(leak):
    task_id, data = leak
    assert _scan(task_id, data), data[:300]


@FAST
@given(harmless())
def test_no_generated_harmless_file_is_found(case):
    task_id, data = case
    assert _scan(task_id, data) == []


@pytest.mark.slow
@EXPORTS
@given(
    leak=leaks(), name=st.sampled_from(["notes.md", "data.json", "x", "proteins/extra.dat", "table.tsv.gz"])
)
def test_no_generated_leak_is_exported(tmp_path_factory, leak, name):
    task_id, data = leak
    task = tmp_path_factory.mktemp("task") / "task"
    shutil.copytree(SUITE / task_id / "task", task)
    (task / name).parent.mkdir(parents=True, exist_ok=True)
    (task / name).write_bytes(data)
    out = tmp_path_factory.mktemp("out") / "harbor"
    with pytest.raises(ExportError, match=rf"^the answers would reach the agent: environment/task/{name}"):
        export_task(task, out, answers=SUITE / task_id / "answers.json", image="img:1")
    assert not out.exists()  # nothing left behind for a run to pick up


# -- reading within bounds -----------------------------------------------------------------------------------


def test_a_decompression_bomb_is_refused_in_one_line(tmp_path):
    bomb = tmp_path / "task" / "bomb.gz"
    shutil.copytree(SUITE / "chem-fragment-pka-logp" / "task", bomb.parent)
    bomb.write_bytes(gzip.compress(b"\0" * (64 << 20)))
    with pytest.raises(ExportError) as info:
        export_task(bomb.parent, tmp_path / "out", answers=SUITE / "chem-fragment-pka-logp" / "answers.json")
    message = str(info.value)
    assert "\n" not in message and "environment/task/bomb.gz" in message and "200 times its size" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("limits", "data", "said"),
    [
        (Limits(bytes_out=1 << 20), gzip.compress(b"a" * (2 << 20), mtime=0), "more than 1048576 bytes"),
        (Limits(ratio=10), bz2.compress(b"b" * (4 << 20)), "more than 10 times its size"),
        (Limits(depth=2), _wrap(b"x", ["gzip", "gzip", "gzip"]), "nested more than 2 deep"),
        (Limits(), gzip.compress(b"c" * 1000, mtime=0)[:-12], "ends early"),
    ],
)
def test_reading_stays_within_bounds(limits, data, said):
    with pytest.raises(ScanLimitError, match=said):
        list(read_stream("f", io.BytesIO(data), limits))


def test_a_large_document_is_read_in_overlapping_pieces():
    data = b"x" * 100 + b"needle" + b"y" * 114
    pieces = list(read_stream("f", io.BytesIO(data), Limits(piece_bytes=103, overlap_bytes=8)))
    assert [len(p) for _, p in pieces] == [103, 111, 22] and any(b"needle" in p for _, p in pieces)


def test_links_are_not_followed(tmp_path):
    secret = tmp_path / "answers.json"
    shutil.copyfile(SUITE / "chem-fragment-pka-logp" / "answers.json", secret)
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "link.json").symlink_to(secret)
    assert scan_path(tmp_path / "export", _scanner("chem-fragment-pka-logp")) == []
    assert scan_path(secret, _scanner("chem-fragment-pka-logp")) != []


#: the suite's tasks that record most values as whole numbers (percent inhibition, yields, counts)
WHOLE_TASKS = [
    t for t in TASK_IDS if 2 * sum(float(v).is_integer() for v in _task(t)[1].values()) > len(_task(t)[1])
]


@FAST
@given(data=st.data())
def test_a_whole_number_written_with_a_decimal_point_is_no_more_evidence(data):
    # a task of whole numbers (a few values may have a decimal): 10.0 is 10 as a float prints it (pandas'
    # and NumPy's files are full of such runs); the same run of whole values written with or without ".0"
    # gets the same verdict (values of two digits or more: a one-digit number is no evidence, and only 1.0
    # keeps a place in a run as 0 does)
    task_id = data.draw(st.sampled_from(WHOLE_TASKS))
    task, values = _task(task_id)
    presented = [e for g in task.groups for e in g.experiment_ids]
    start = data.draw(st.integers(0, len(presented) - 2))
    run = [values[e] for e in presented[start : start + data.draw(st.integers(2, 12))]]
    assume(all(abs(v) >= 10 and float(v).is_integer() for v in run))
    bare = " ".join(f"{v:.0f}" for v in run).encode()
    dotted = " ".join(f"{v:.1f}" for v in run).encode()
    assert bool(_scan(task_id, dotted)) == bool(_scan(task_id, bare)), (task_id, dotted)


def test_the_suite_has_whole_number_tasks_to_check():
    assert len(WHOLE_TASKS) >= 2, WHOLE_TASKS


@EXPORTS
@given(task_id=st.sampled_from(TASK_IDS), seed=st.integers(0, 2**32 - 1), decimals=st.integers(0, 2))
def test_a_large_table_of_numbers_in_the_range_of_the_values_holds_no_run_by_luck(task_id, seed, decimals):
    # a data file of 20,000 numbers written like the task's values (scipy ships a table of iris distances
    # to one decimal): runs of values in the task's order turn up in it by luck, at one of its many numbers
    _, values = _task(task_id)
    low, high = min(values.values()), max(values.values())
    numbers = np.random.default_rng(seed).uniform(low, high, size=20_000)
    lines = [" ".join(f"{x:.{decimals}e}" for x in numbers[i : i + 10]) for i in range(0, len(numbers), 10)]
    assert _scan(task_id, "\n".join(lines).encode()) == []
