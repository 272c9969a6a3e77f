"""Reading ``spec.yaml`` safely: the project's strict YAML reader (:mod:`spu_common.yamlfiles`: no aliases,
a depth cap, a key repeated in one mapping refused), with the file's size capped too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from environment.taskbuild.problems import SPEC_FILE, spec_error
from spu_common import confined
from spu_common.yamlfiles import StrictLoader, YamlRefused, loads_yaml_strict

MAX_SPEC_BYTES = 1_000_000


def read_text(path: Path) -> str:
    """The text of ``spec.yaml``, read once from its checked descriptor (:mod:`spu_common.confined`: a
    regular file, no link, sized before it is read); refused when unreadable, too large or not UTF-8."""
    try:
        data = confined.read_file(path, [path.parent], max_bytes=MAX_SPEC_BYTES, allow_hard_links=True).data
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise spec_error("spec-encoding", SPEC_FILE, "is not UTF-8 text") from None
    except confined.Refused as exc:
        if exc.reason == "too_large":
            size = f"{exc.size_bytes:,} bytes" if exc.size_bytes is not None else "larger"
            raise spec_error(
                "spec-too-large", SPEC_FILE, f"is {size}; the limit is {MAX_SPEC_BYTES:,}"
            ) from None
        raise spec_error("spec-unreadable", str(path), f"cannot be read: {exc.message}") from None


def load(text: str) -> Any:
    """The data of a spec's YAML text; a :class:`SpecError` says what is wrong and on which line."""
    try:
        return loads_yaml_strict(text)
    except YamlRefused as exc:
        raise spec_error(exc.code, SPEC_FILE, exc.message, row=exc.line, field=exc.key) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise spec_error(
            "yaml-syntax",
            SPEC_FILE,
            f"is not valid YAML: {getattr(exc, 'problem', None) or str(exc)[:200]}",
            row=(mark.line + 1) if mark is not None else None,
            hint="check indentation and quote text containing ': ' or '#'",
        ) from None


def key_lines(text: str) -> dict[tuple, int]:
    """Line numbers (1-based) of the keys of spec.yaml: ("task_id",), ("groups", 0), ("groups", 0, "unit"),
    ("source_files", "screen")."""
    try:
        root = yaml.compose(text, Loader=StrictLoader)
    except (yaml.YAMLError, YamlRefused):
        return {}
    lines: dict[tuple, int] = {}
    if not isinstance(root, yaml.MappingNode):
        return lines
    for key, value in root.value:
        lines[(key.value,)] = key.start_mark.line + 1
        if key.value == "groups" and isinstance(value, yaml.SequenceNode):
            for index, item in enumerate(value.value):
                lines[("groups", index)] = item.start_mark.line + 1
                if isinstance(item, yaml.MappingNode):
                    for group_key, _ in item.value:
                        lines[("groups", index, group_key.value)] = group_key.start_mark.line + 1
        if key.value == "source_files" and isinstance(value, yaml.MappingNode):
            for name, _ in value.value:
                lines[("source_files", name.value)] = name.start_mark.line + 1
    return lines


def line_of(field_name: str, lines: dict[tuple, int]) -> int | None:
    """The line of a problem's field (``task_id``, ``groups[2] (g3).members``, ``source_files.NAME``) in
    :func:`key_lines`."""
    match = re.match(r"groups\[(\d+)\](?: \([^)]*\))?(?:\.(.+))?$", field_name)
    if match:
        index, key = int(match.group(1)), match.group(2)
        return lines.get(("groups", index, key)) or lines.get(("groups", index)) or lines.get(("groups",))
    if field_name.startswith("source_files."):
        name = field_name.removeprefix("source_files.")
        return lines.get(("source_files", name)) or lines.get(("source_files",))
    return lines.get((field_name,))
