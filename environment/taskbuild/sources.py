"""A spec's values re-read from the files they came from: ``spu task sources``.

``spec.yaml`` may pin its source files (``source_files``: per name the repository, the commit, the path in
it and the file's SHA-256; ``header: false`` for a CSV without a header row, ``sheet`` for a workbook), and
each row of the experiments CSV then names where its value was read: ``source_file`` (a name of
``source_files``), ``source_line`` (the CSV line, the header being line 1, or the worksheet row) and
``source_column`` (the header's text, or the column's number from 1 in a file without header). The check
reads each pinned file from a local copy of its repository (a git directory, read at the pinned commit, or
a checked-out folder), refuses a file whose SHA-256 differs from the pin, and compares every row's value
with the number in its cell. The numbers must be equal as floating-point numbers: a value is copied from
its cell, never rounded or converted.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environment.taskbuild.problems import Problems
from environment.taskbuild.rows import SpecRow
from spu_common.contract import parse_number

#: The experiments CSV's columns that say where a value was read.
REF_COLUMNS = ("source_file", "source_line", "source_column")
SOURCE_FILE_REQUIRED = ("repository", "commit", "path", "sha256")
SOURCE_FILE_OPTIONAL = ("header", "sheet")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class SourceFile:
    """One pinned source file: ``path`` in ``repository`` at ``commit``, whose bytes hash to ``sha256``."""

    name: str
    repository: str
    commit: str
    path: str
    sha256: str
    header: bool = True
    sheet: str | None = None


@dataclass(frozen=True)
class SourceRef:
    """Where one experiment's value was read: a file of ``source_files``, its line (or row) and column."""

    file: str
    line: int
    column: str


@dataclass
class SourceCheck:
    """The outcome of re-reading one spec's values: ``checked`` values compared; ``mismatches`` (one line
    each: a value that differs from its cell, or a file that does not hash to its pin); ``unreadable``, the
    files that could not be read at all (no local copy given, or the copy lacks them)."""

    task_id: str
    checked: int = 0
    mismatches: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.unreadable


class SourceUnavailable(Exception):
    """No local copy of a source file's repository was given, or the copy lacks the file."""


def parse_source_files(raw: Any, problems: Problems) -> dict[str, SourceFile]:
    """The ``source_files`` mapping of a spec, checked (every problem goes to ``problems``)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        problems.add("bad-source-files", "must map a name to each source file", field="source_files")
        return {}
    files: dict[str, SourceFile] = {}
    for name, entry in raw.items():
        where = f"source_files.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            problems.add("bad-source-files", f"{name!r} is not a name (letters, digits, . _ -)", field=where)
            continue
        if not isinstance(entry, dict):
            problems.add(
                "bad-source-files", "must be a mapping (repository, commit, path, sha256)", field=where
            )
            continue
        unknown = sorted(str(k) for k in set(entry) - set(SOURCE_FILE_REQUIRED + SOURCE_FILE_OPTIONAL))
        missing = [k for k in SOURCE_FILE_REQUIRED if not isinstance(entry.get(k), str) or not entry[k]]
        if unknown or missing:
            problems.add(
                "bad-source-files",
                f"unknown keys {unknown}" if unknown else f"needs {', '.join(missing)}",
                field=where,
                hint=f"keys: {', '.join(SOURCE_FILE_REQUIRED + SOURCE_FILE_OPTIONAL)}",
            )
            continue
        checks = (
            ("repository", _REPOSITORY, "OWNER/NAME"),
            ("commit", _COMMIT, "the full 40-digit lowercase commit"),
            ("sha256", _SHA256, "64 lowercase hex digits"),
        )
        bad = [
            f"{key} {entry[key]!r} is not {what}"
            for key, pattern, what in checks
            if not pattern.match(entry[key])
        ]
        path = entry["path"]
        if path.startswith("/") or ".." in path.split("/"):
            bad.append(f"path {path!r} is not a path inside the repository")
        header = entry.get("header", True)
        sheet = entry.get("sheet")
        if not isinstance(header, bool):
            bad.append("header must be true or false")
        if sheet is not None and (not isinstance(sheet, str) or not sheet):
            bad.append("sheet must be a worksheet's name")
        if bad:
            problems.add("bad-source-files", "; ".join(bad), field=where)
            continue
        files[name] = SourceFile(
            name, entry["repository"], entry["commit"], path, entry["sha256"], header, sheet
        )
    return files


def parse_refs(
    rows: dict[str, SpecRow], files: dict[str, SourceFile], csv_name: str, problems: Problems
) -> dict[str, SourceRef]:
    """Each row's :class:`SourceRef`. With ``source_files`` declared every row must name one."""
    if not files:
        return {}
    refs: dict[str, SourceRef] = {}
    for key, row in rows.items():
        cells = {c: row.cells.get(c, "").strip() for c in REF_COLUMNS}
        line = cells["source_line"]
        if cells["source_file"] not in files:
            problems.add(
                "bad-source-ref",
                f"source_file {cells['source_file']!r} is not a name of source_files",
                file=csv_name,
                row=row.line,
                field="source_file",
                hint=f"one of {', '.join(sorted(files))}",
            )
        elif not line.isascii() or not line.isdigit() or int(line) < 1 or not cells["source_column"]:
            problems.add(
                "bad-source-ref",
                "needs a source_line (a line number from 1) and a source_column",
                file=csv_name,
                row=row.line,
                field="source_line" if not line.isdigit() else "source_column",
            )
        else:
            refs[key] = SourceRef(cells["source_file"], int(line), cells["source_column"])
    return refs


# ----------------------------------------------------------------------------------------------- reading


def git_copy_reader(copies: Mapping[str, Path]) -> Callable[[SourceFile], bytes]:
    """A reader of pinned files from local copies, by repository (``owner/name`` -> path): a git
    directory (bare, or a work tree's ``.git``) is read at the pinned commit; any other folder is taken
    as a checkout and read as it is (the SHA-256 check then says whether it is the pinned file)."""

    def read(source: SourceFile) -> bytes:
        copy = copies.get(source.repository)
        if copy is None:
            raise SourceUnavailable(f"no local copy of {source.repository} was given")
        if (copy / "HEAD").is_file() and (copy / "objects").is_dir():
            done = subprocess.run(
                ["git", "--git-dir", str(copy), "cat-file", "blob", f"{source.commit}:{source.path}"],
                capture_output=True,
                check=False,
            )
            if done.returncode != 0:
                raise SourceUnavailable(
                    f"{source.repository} at {copy} has no {source.path} at commit {source.commit[:12]}"
                )
            return done.stdout
        return read_folder(copy, source)

    return read


def read_folder(folder: Path, source: SourceFile) -> bytes:
    """A pinned file read from a checked-out folder of its repository."""
    path = folder / source.path
    if not path.is_file():
        raise SourceUnavailable(f"{folder} has no {source.path}")
    return path.read_bytes()


def _table(source: SourceFile, data: bytes) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """The file as ``{line or row: {column: cell}}`` and its column names (numbers from 1 without a
    header row). A CSV record is keyed by its last physical line, as the experiments CSV's lines are."""
    if source.sheet is not None or source.path.lower().endswith(".xlsx"):
        return _workbook(source, data)
    text = data.decode("utf-8-sig")
    delimiter = "\t" if source.path.lower().endswith((".tsv", ".tab")) else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    records = [(reader.line_num, cells) for cells in reader]
    return _keyed(records, source.header)


def _workbook(source: SourceFile, data: bytes) -> tuple[dict[int, dict[str, Any]], list[str]]:
    import warnings

    from openpyxl import load_workbook

    with warnings.catch_warnings():  # workbooks often carry extensions openpyxl skips, saying so each time
        warnings.simplefilter("ignore", UserWarning)
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        sheet = book[source.sheet] if source.sheet is not None else book.worksheets[0]
        rows = enumerate(sheet.iter_rows(values_only=True), start=1)
        records = [(row_no, list(cells)) for row_no, cells in rows]
        book.close()
    return _keyed(records, source.header)


def _keyed(records: list[tuple[int, list[Any]]], header: bool) -> tuple[dict[int, dict[str, Any]], list[str]]:
    if header and records:
        names = ["" if c is None else str(c).strip() for c in records[0][1]]
        body = records[1:]
    else:
        width = max((len(cells) for _, cells in records), default=0)
        names = [str(i) for i in range(1, width + 1)]
        body = records
    return {line: dict(zip(names, cells, strict=False)) for line, cells in body}, names


def _number(cell: Any) -> float | None:
    if isinstance(cell, bool):
        return None
    if isinstance(cell, int | float):
        return float(cell)
    if isinstance(cell, str):
        return parse_number(cell.strip())
    return None


def check_values(
    task_id: str,
    rows: dict[str, SpecRow],
    files: dict[str, SourceFile],
    refs: dict[str, SourceRef],
    read: Callable[[SourceFile], bytes],
) -> SourceCheck:
    """Every row's value against its cell (module docstring). The rows of a file that cannot be read, or
    whose SHA-256 differs from its pin, are not compared."""
    result = SourceCheck(task_id)
    tables: dict[str, dict[int, dict[str, Any]] | None] = {}
    for name, source in files.items():
        if not any(ref.file == name for ref in refs.values()):
            continue
        try:
            data = read(source)
        except SourceUnavailable as exc:
            result.unreadable.append(f"{name}: {exc}")
            tables[name] = None
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != source.sha256:
            result.mismatches.append(
                f"{name}: {source.repository} {source.path} hashes to {digest}, not the pinned "
                f"{source.sha256}"
            )
            tables[name] = None
            continue
        tables[name] = _table(source, data)[0]
    for key, ref in refs.items():
        table = tables.get(ref.file)
        if table is None:
            continue
        result.checked += 1
        where = f"{key}: {ref.file} line {ref.line} column {ref.column!r}"
        record = table.get(ref.line)
        if record is None or ref.column not in record:
            result.mismatches.append(f"{where}: no such cell")
            continue
        found = _number(record[ref.column])
        if found is None or found != rows[key].value:
            result.mismatches.append(
                f"{where}: the file says {record[ref.column]!r}, the spec {rows[key].value!r}"
            )
    return result


def check_sources(spec_dir: str | Path, read: Callable[[SourceFile], bytes]) -> SourceCheck:
    """Load a spec (:func:`environment.taskbuild.load_spec`; a spec problem raises ``SpecError``) and re-read
    its values with ``read``. A spec without ``source_files`` checks nothing."""
    from environment.taskbuild.spec import load_spec

    spec = load_spec(spec_dir)
    return check_values(spec.task_id, spec.rows, spec.source_files, spec.source_refs, read)
