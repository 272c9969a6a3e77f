"""Reading ``spec.yaml`` safely: the safe loader, with limits a hostile or broken file cannot get past.

PyYAML's safe loader still expands aliases (a few lines of ``&a [*b, *b, ...]`` grow to gigabytes when
printed or walked: an alias bomb ran 30-100 s into ``MemoryError``) and composes nested collections
recursively (deep nesting ended in ``RecursionError``). A spec needs neither, so aliases are refused, the
nesting depth and the file size are capped, and a key repeated in one mapping is refused (plain YAML keeps
the last one silently).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from environment.taskbuild.problems import SPEC_FILE, spec_error

MAX_SPEC_BYTES = 1_000_000
MAX_DEPTH = 20


class _Refused(Exception):
    def __init__(self, code: str, message: str, line: int | None, key: str | None = None):
        super().__init__(message)
        self.code, self.message, self.line, self.key = code, message, line, key


try:  # libyaml's parser, when PyYAML has it: five times faster (a 10,000-group spec: seconds, not minutes)
    from yaml.cyaml import CParser

    _PARSING: tuple[type, ...] = (CParser,)
except ImportError:
    _PARSING = (yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser)


class _LimitedLoader(
    yaml.composer.Composer, *_PARSING, yaml.constructor.SafeConstructor, yaml.resolver.Resolver
):
    """The safe loader without aliases, with a depth limit, refusing repeated keys. The events come from
    libyaml's parser where there is one; the nodes are composed here, in Python, where the limits are
    checked."""

    def __init__(self, stream: str) -> None:
        if _PARSING[0] is yaml.reader.Reader:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
        else:
            _PARSING[0].__init__(self, stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise _Refused(
                "yaml-alias", "uses a YAML alias (*name); specs may not use aliases", mark.line + 1
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused("yaml-too-deep", f"nests deeper than {MAX_DEPTH} levels", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = str(self.construct_object(key_node, deep=deep))
            if key in seen:
                raise _Refused(
                    "repeated-key",
                    f"the key {key!r} appears twice in one mapping (YAML would keep only the last)",
                    key_node.start_mark.line + 1,
                    key,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path) -> str:
    """The text of ``spec.yaml``, refused when unreadable, too large or not UTF-8."""
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise spec_error(
                "spec-too-large", SPEC_FILE, f"is {size:,} bytes; the limit is {MAX_SPEC_BYTES:,}"
            )
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise spec_error("spec-encoding", SPEC_FILE, "is not UTF-8 text") from None
    except OSError as exc:
        raise spec_error("spec-unreadable", str(path), f"cannot be read: {exc.strerror or exc}") from None


def load(text: str) -> Any:
    """The data of a spec's YAML text; a :class:`SpecError` says what is wrong and on which line."""
    try:
        return yaml.load(text, Loader=_LimitedLoader)
    except _Refused as exc:
        raise spec_error(exc.code, SPEC_FILE, exc.message, row=exc.line, field=exc.key) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        row = (mark.line + 1) if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)[:200]
        if "maximum nesting depth" in problem:  # libyaml's own limit (1,000 levels) can come first
            raise spec_error(
                "yaml-too-deep", SPEC_FILE, f"nests deeper than {MAX_DEPTH} levels", row=row
            ) from None
        raise spec_error(
            "yaml-syntax",
            SPEC_FILE,
            f"is not valid YAML: {problem}",
            row=row,
            hint="check indentation and quote text containing ': ' or '#'",
        ) from None


def key_lines(text: str) -> dict[tuple, int]:
    """Line numbers (1-based) of the keys of spec.yaml: ("task_id",), ("groups", 0), ("groups", 0, "unit")."""
    try:
        root = yaml.compose(text, Loader=_LimitedLoader)
    except (yaml.YAMLError, _Refused):
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
    return lines


def line_of(field_name: str, lines: dict[tuple, int]) -> int | None:
    """The line of a problem's field (``task_id``, ``groups[2] (g3).members``) in :func:`key_lines`."""
    match = re.match(r"groups\[(\d+)\](?: \([^)]*\))?(?:\.(.+))?$", field_name)
    if match:
        index, key = int(match.group(1)), match.group(2)
        return lines.get(("groups", index, key)) or lines.get(("groups", index)) or lines.get(("groups",))
    return lines.get((field_name,))
