"""The experiments CSV of a spec: one row per experiment (``key``, setup fields, ``value``, ``source``)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass

from environment.taskbuild.problems import Problems
from spu_common.contract import parse_number, repeated

CSV_REQUIRED = ("key", "value", "source")
#: Column names the builder writes itself or keeps hidden: never setup fields.
RESERVED_FIELDS = ("key", "value", "source", "experiment_id", "group_id")


@dataclass
class SpecRow:
    key: str
    line: int
    cells: dict[str, str]
    value: float
    source: str


def read_rows(raw: bytes, name: str, setup_fields: list[str], problems: Problems) -> dict[str, SpecRow]:
    """The rows of the experiments CSV (its bytes) by key; every problem found goes to ``problems``."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        problems.add("csv-encoding", "is not UTF-8 text", file=name)
        return {}
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header = _header(reader, name, setup_fields, problems)
    if header is None:
        return {}
    rows: dict[str, SpecRow] = {}
    for line_no, cells in _records(reader, name, problems):
        row = _row(line_no, cells, header, name, problems)
        if row is None:
            continue
        if row.key in rows:
            problems.add(
                "csv-repeated-key",
                f"key {row.key!r} already used on line {rows[row.key].line}",
                file=name,
                row=line_no,
                field="key",
            )
            continue
        rows[row.key] = row
    if not rows:
        problems.add("csv-no-rows", "has no experiment rows", file=name)
    return rows


def _header(reader, name: str, setup_fields: list[str], problems: Problems) -> list[str] | None:
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        problems.add(
            "csv-empty", "is empty: it needs a header row (key, setup fields, value, source)", file=name
        )
        return None
    except csv.Error as exc:
        problems.add("csv-syntax", f"is not readable CSV: {exc}", file=name, row=reader.line_num or 1)
        return None
    found = len(problems)
    if repeated(header):
        problems.add("csv-repeated-column", f"repeats the columns {repeated(header)}", file=name, row=1)
    for col in CSV_REQUIRED:
        if col not in header:
            problems.add("csv-missing-column", f"has no column {col!r}", file=name, row=1, field=col)
    for col in setup_fields:
        if col not in header and col not in RESERVED_FIELDS:
            problems.add(
                "unknown-setup-field",
                f"setup field {col!r} is not a column of {name}",
                field="setup_fields",
                hint=f"columns: {', '.join(header)}",
            )
    return header if len(problems) == found else None


def _records(reader, name: str, problems: Problems) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of each non-blank record; a syntax error ends the file."""
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.add("csv-syntax", f"is not readable CSV: {exc}", file=name, row=reader.line_num)
            return
        if cells and any(c.strip() for c in cells):
            yield reader.line_num, cells  # the record's last line (a quoted cell may span lines)


def _row(line_no: int, cells: list[str], header: list[str], name: str, problems: Problems) -> SpecRow | None:
    if len(cells) != len(header):
        problems.add(
            "csv-ragged-row",
            f"has {len(cells)} cells, the header has {len(header)}",
            file=name,
            row=line_no,
            hint="quote cells that contain commas",
        )
        return None
    row = {h: c.strip() for h, c in zip(header, cells, strict=True)}
    for column, cell in row.items():
        if "\x00" in cell:
            problems.add("csv-bad-cell", "holds a NUL character", file=name, row=line_no, field=column)
    key = row["key"]
    if not key:
        problems.add("csv-empty-key", "has an empty key", file=name, row=line_no, field="key")
        return None
    value = parse_number(row["value"])
    if value is None:
        problems.add(
            "csv-bad-value",
            f"value {row['value']!r} is not a finite number in plain decimal notation",
            file=name,
            row=line_no,
            field="value",
            hint="one number in the group's unit, ASCII digits with a dot as decimal mark; no units, "
            "ranges, digit separators or other scripts' digits",
        )
    if not row["source"]:
        problems.add(
            "csv-missing-source",
            f"key {key!r} has no source",
            file=name,
            row=line_no,
            field="source",
            hint="say where this value was read: table and row, data set file and record id",
        )
    return SpecRow(key, line_no, row, value if value is not None else math.nan, row["source"])
