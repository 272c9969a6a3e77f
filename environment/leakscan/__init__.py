"""The one content scanner for whatever could carry a task's answers to an agent: the wheel, the sdist,
every layer of an image, every file of a Harbor export (docs/harbor.md, "What the scanner looks for").

It looks for content, never for names: every document (archives opened and compressed streams read,
within bounds: :mod:`environment.leakscan.reading`) is searched for the marks of each task
(:mod:`environment.leakscan.marks`: author keys, source identifiers, values with or in the order of their
experiment ids) by the rules of :mod:`environment.leakscan.scan`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from environment.leakscan.marks import TaskMarks, marks_beside, marks_under
from environment.leakscan.reading import Limits, ScanLimitError, read_path, read_stream
from environment.leakscan.scan import Finding, Scanner

__all__ = [
    "Finding",
    "Limits",
    "ScanLimitError",
    "Scanner",
    "TaskMarks",
    "marks_beside",
    "marks_under",
    "scan_path",
    "scan_stream",
]


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per document, task and kind (a large document is read in overlapping pieces)."""
    seen: dict[tuple[str, str, str], Finding] = {}
    for finding in findings:
        seen.setdefault((finding.where, finding.task_id, finding.what.split(" (")[0]), finding)
    return list(seen.values())


def scan_path(
    path: Path, scanner: Scanner, limits: Limits | None = None, name: str | None = None
) -> list[Finding]:
    """What of the scanner's marks the file or folder ``path`` holds, in any document within it (named from
    ``name``, default the path)."""
    documents = read_path(Path(path), limits or Limits(), name)
    return _unique(f for name, data in documents for f in scanner.scan(name, data))


def scan_stream(name: str, stream: BinaryIO, scanner: Scanner, limits: Limits | None = None) -> list[Finding]:
    """The same for a stream (``docker save`` output: every layer of an image)."""
    documents = read_stream(name, stream, limits or Limits())
    return _unique(f for doc_name, data in documents for f in scanner.scan(doc_name, data))
