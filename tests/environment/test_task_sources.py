"""Values re-read from their pinned source files (issue 49.5): ``source_files`` in spec.yaml, the
``source_file``/``source_line``/``source_column`` of each experiments row, and ``spu task sources``.

Each test builds a real git repository in tmp_path holding a source file, pins it by commit and SHA-256 in a
spec, and checks the spec against the repository's git directory (read at the commit) or a checkout."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from environment.taskbuild import SpecError, load_spec
from environment.taskbuild.sources import check_sources, git_copy_reader

REPO = "lab/screen-data"


def _spu(*args: str):
    from spu.cli import app

    return CliRunner().invoke(app, list(args))


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, bytes]) -> str:
    """Commit ``files`` into a fresh repository at ``repo``; the commit's full id."""
    repo.mkdir(parents=True, exist_ok=True)
    if not (repo / ".git").exists():
        _git(repo, "init", "-q")
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "data")
    return _git(repo, "rev-parse", "HEAD")


def _spec(root: Path, source: dict, rows: list[dict], extra_yaml: str = "") -> Path:
    """A two-group spec whose rows name their cells in ``source`` (mapping of source_files' one entry)."""
    root.mkdir(parents=True, exist_ok=True)
    keys = [r["key"] for r in rows]
    entry = "\n".join(f"    {k}: {json.dumps(v)}" for k, v in source.items())
    (root / "spec.yaml").write_text(
        "task_id: sources-example\n"
        'task_version: "1"\n'
        "title: Yields of a small screen\n"
        "domain: chemistry\n"
        "instruction: Order the reactions by yield.\n"
        "procedure: Each experiment is one reaction.\n"
        "experiments: experiments.csv\n"
        "setup_fields: [name]\n"
        'citation: "A. Author, \\"A screen\\", J. Chem. 1 (2024)"\n'
        'data_source: "lab/screen-data at commit 0123456789ab, data/yields.csv"\n'
        "license: CC-BY-4.0\n"
        f"source_files:\n  screen:\n{entry}\n"
        f"{extra_yaml}"
        "groups:\n"
        f"  - {{group_id: a, endpoint: yield, unit: '%', members: [{', '.join(keys[: len(keys) // 2])}]}}\n"
        f"  - {{group_id: b, endpoint: yield, unit: '%', members: [{', '.join(keys[len(keys) // 2 :])}]}}\n",
        encoding="utf-8",
    )
    buf = io.StringIO()
    fields = ["key", "name", "value", "source", "source_file", "source_line", "source_column"]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (root / "experiments.csv").write_text(buf.getvalue(), encoding="utf-8")
    return root


def _row(key: str, value: str, line: int, column: str = "yield") -> dict:
    return {
        "key": key,
        "name": key,
        "value": value,
        "source": f"yields.csv line {line}",
        "source_file": "screen",
        "source_line": str(line),
        "source_column": column,
    }


YIELDS = b"id,ligand,yield\nr1,L1,12.5\nr2,L2,40\nr3,L3,7.25\nr4,L4,88\n"


def _four() -> list[dict]:
    """A row for each of YIELDS' four values, each naming its line."""
    return [_row("r1", "12.5", 2), _row("r2", "40", 3), _row("r3", "7.25", 4), _row("r4", "88", 5)]


@pytest.fixture
def pinned(tmp_path):
    repo = tmp_path / "copy"
    commit = _commit(repo, {"data/yields.csv": YIELDS})
    source = {
        "repository": REPO,
        "commit": commit,
        "path": "data/yields.csv",
        "sha256": hashlib.sha256(YIELDS).hexdigest(),
    }
    return repo, source


def test_every_value_equal_to_its_cell_passes_from_the_git_directory_and_from_a_checkout(tmp_path, pinned):
    repo, source = pinned
    rows = [_row("r1", "12.5", 2), _row("r2", "40", 3), _row("r3", "7.25", 4), _row("r4", "88.0", 5)]
    spec = _spec(tmp_path / "spec", source, rows)
    for copy in (repo / ".git", repo):
        result = check_sources(spec, git_copy_reader({REPO: copy}))
        assert (result.checked, result.mismatches, result.unreadable, result.ok) == (4, [], [], True)


def test_a_changed_value_is_named_with_its_file_line_and_column(tmp_path, pinned):
    repo, source = pinned
    rows = [_row("r1", "12.5", 2), _row("r2", "41", 3), _row("r3", "7.25", 4), _row("r4", "88", 5)]
    result = check_sources(_spec(tmp_path / "spec", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert result.checked == 4 and not result.ok
    assert result.mismatches == ["r2: screen line 3 column 'yield': the file says '40', the spec 41.0"]


def test_a_line_past_the_file_or_an_unknown_column_is_no_such_cell(tmp_path, pinned):
    repo, source = pinned
    rows = [_row("r1", "12.5", 2), _row("r2", "40", 9), _row("r3", "7.25", 4, "yeild"), _row("r4", "88", 5)]
    result = check_sources(_spec(tmp_path / "spec", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert sorted(m.split(":")[0] for m in result.mismatches) == ["r2", "r3"]
    assert all(m.endswith("no such cell") for m in result.mismatches)


def test_the_pinned_commit_is_read_even_when_the_repository_moved_on(tmp_path, pinned):
    repo, source = pinned
    _commit(repo, {"data/yields.csv": YIELDS.replace(b"12.5", b"99")})  # a later commit changes a value
    rows = _four()
    result = check_sources(_spec(tmp_path / "spec", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert result.ok and result.checked == 4
    # a checkout holds the new file, which no longer hashes to the pin: nothing of it is compared
    result = check_sources(_spec(tmp_path / "spec2", source, rows), git_copy_reader({REPO: repo}))
    assert result.checked == 0 and len(result.mismatches) == 1
    assert "hashes to" in result.mismatches[0] and source["sha256"] in result.mismatches[0]


def test_a_repository_without_a_local_copy_is_unreadable_not_a_mismatch(tmp_path, pinned):
    _, source = pinned
    result = check_sources(_spec(tmp_path / "spec", source, _four()), git_copy_reader({}))
    assert (result.checked, result.mismatches) == (0, [])
    assert result.unreadable == [f"screen: no local copy of {REPO} was given"]


def test_a_file_without_header_is_read_by_column_number(tmp_path):
    data = b"0.5,0.5,0,328254.5\n0.75,0.25,0,263555\n1,0,0,247891.5\n"
    repo = tmp_path / "copy"
    commit = _commit(repo, {"data.csv": data})
    source = {
        "repository": REPO,
        "commit": commit,
        "path": "data.csv",
        "sha256": hashlib.sha256(data).hexdigest(),
        "header": False,
    }
    rows = [_row("f1", "328254.5", 1, "4"), _row("f2", "263555", 2, "4")]
    rows += [_row("f3", "1", 3, "1"), _row("f4", "0.25", 2, "2")]
    result = check_sources(_spec(tmp_path / "spec", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert result.ok and result.checked == 4


def test_a_workbook_is_read_by_sheet_row_and_header(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Table 4"
    for row in (["Compound", "AAK1", "ABL1"], ["c1", 14, 99.7], ["c2", 0, 28]):
        sheet.append(row)
    buf = io.BytesIO()
    book.save(buf)
    data = buf.getvalue()
    repo = tmp_path / "copy"
    commit = _commit(repo, {"profile.xlsx": data})
    source = {
        "repository": REPO,
        "commit": commit,
        "path": "profile.xlsx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "sheet": "Table 4",
    }
    rows = [_row("k1", "99.7", 2, "ABL1"), _row("k2", "14", 2, "AAK1")]
    rows += [_row("k3", "28", 3, "ABL1"), _row("k4", "0", 3, "AAK1")]
    result = check_sources(_spec(tmp_path / "spec", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert result.ok and result.checked == 4
    rows[2] = _row("k3", "29", 3, "ABL1")
    result = check_sources(_spec(tmp_path / "spec2", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert result.mismatches == ["k3: screen line 3 column 'ABL1': the file says 28, the spec 29.0"]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"commit": "abc123"}, "bad-source-files"),  # not the full commit
        ({"sha256": "XYZ"}, "bad-source-files"),
        ({"repository": "no-owner"}, "bad-source-files"),
        ({"path": "../outside.csv"}, "bad-source-files"),
        ({"header": "no"}, "bad-source-files"),
        ({"branch": "main"}, "bad-source-files"),  # an unknown key
    ],
)
def test_a_malformed_pin_is_a_spec_problem(tmp_path, pinned, change, code):
    _, source = pinned
    spec = _spec(tmp_path / "spec", {**source, **change}, _four())
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert [p.code for p in err.value.problems] == [code]
    assert err.value.problems[0].row is not None  # the line of spec.yaml it is on


def test_a_row_naming_no_pinned_file_or_no_line_is_a_spec_problem_with_its_csv_line(tmp_path, pinned):
    _, source = pinned
    rows = _four()
    rows[0]["source_file"] = "other"
    rows[1]["source_line"] = "three"
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path / "spec", source, rows))
    assert [(p.code, p.row) for p in err.value.problems] == [("bad-source-ref", 2), ("bad-source-ref", 3)]


def test_cli_exit_codes_zero_one_and_two(tmp_path, pinned):
    repo, source = pinned
    good = _spec(tmp_path / "good", source, _four())
    wrong = _four()
    wrong[1]["value"] = "39"
    bad = _spec(tmp_path / "bad", source, wrong)
    copy = f"{REPO}={repo / '.git'}"
    result = _spu("task", "sources", str(good), "--repo", copy)
    assert result.exit_code == 0, result.output
    assert "4/4 values equal their source cells in 1 spec(s)" in result.output
    result = _spu("task", "sources", str(good), str(bad), "--repo", copy, "--json")
    assert result.exit_code == 1
    assert json.loads(result.output)["mismatches"] == 1
    result = _spu("task", "sources", str(good))  # no copy of the repository given
    assert result.exit_code == 2 and "no local copy" in result.output
    result = _spu("task", "sources", str(good), "--repo", "no-equals-sign")
    assert result.exit_code == 2 and "OWNER/NAME=PATH" in result.output


CELL = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=12) | st.sampled_from(
    ["a,b", 'say "x"', "two\nlines", ""]
)
NUMBER = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    table=st.lists(st.tuples(CELL, NUMBER), min_size=4, max_size=8, unique_by=lambda t: t[1]),
    pick=st.data(),
)
def test_generated_tables_check_by_the_line_each_record_ends_on(tmp_path_factory, table, pick):
    """CSV files with quoted commas, quotes and line breaks in text cells: a record is named by the line it
    ends on (the convention of the experiments CSV's own line numbers); every value checks, and a changed
    one is caught."""
    tmp = tmp_path_factory.mktemp("gen")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["label", "value"])
    ends = []
    for label, number in table:
        writer.writerow([label, repr(number)])
        ends.append(buf.getvalue().count("\n"))
    data = buf.getvalue().encode()
    repo = tmp / "copy"
    source = {
        "repository": REPO,
        "commit": _commit(repo, {"t.csv": data}),
        "path": "t.csv",
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    rows = [_row(f"k{i}", repr(n), ends[i], "value") for i, (_, n) in enumerate(table)]
    result = check_sources(_spec(tmp / "spec", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert result.ok and result.checked == len(table), result.mismatches
    victim = pick.draw(st.integers(0, len(table) - 1))
    rows[victim]["value"] = repr(table[victim][1] + 1.0)
    result = check_sources(_spec(tmp / "spec2", source, rows), git_copy_reader({REPO: repo / ".git"}))
    assert [m.split(":")[0] for m in result.mismatches] == [f"k{victim}"]
