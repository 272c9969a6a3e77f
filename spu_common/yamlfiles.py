"""The project's one strict YAML reader: PyYAML's safe loader with limits a hostile or broken file cannot get
past.

The safe loader still expands aliases (a few lines of ``&a [*b, *b, ...]`` grow to gigabytes when printed
or walked: an alias bomb ran 30-100 s into ``MemoryError``), composes nested collections recursively (deep
nesting ended in ``RecursionError``) and keeps the last of a key repeated in one mapping, silently. Files
the project reads (task specs, policies) need none of that: aliases are refused, the nesting depth is
capped, and a repeated key is refused, as :func:`spu_common.jsonfiles.loads_strict` refuses one in JSON.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 20


class YamlRefused(ValueError):
    """A YAML text the strict reader refuses: ``code`` (``yaml-alias``, ``yaml-too-deep``,
    ``repeated-key``), ``message``, the 1-based ``line`` and, for a repeated key, the ``key``."""

    def __init__(self, code: str, message: str, line: int | None, key: str | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.code, self.message, self.line, self.key = code, message, line, key


try:  # libyaml's parser, when PyYAML has it: five times faster (a 10,000-group spec: seconds, not minutes)
    from yaml.cyaml import CParser

    _PARSING: tuple[type, ...] = (CParser,)
except ImportError:
    _PARSING = (yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser)


class StrictLoader(
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
            raise YamlRefused("yaml-alias", "uses a YAML alias (*name), which is not allowed", mark.line + 1)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise YamlRefused("yaml-too-deep", f"nests deeper than {MAX_DEPTH} levels", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = str(self.construct_object(key_node, deep=deep))
            if key in seen:
                raise YamlRefused(
                    "repeated-key",
                    f"the key {key!r} appears twice in one mapping (YAML would keep only the last)",
                    key_node.start_mark.line + 1,
                    key,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def loads_yaml_strict(text: str) -> Any:
    """Parse YAML under the rules above; raises :class:`YamlRefused`, or ``yaml.YAMLError`` when invalid."""
    try:
        return yaml.load(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as exc:
        # libyaml stops at its own nesting limit (1,000) before the composer sees the 21st level
        if exc.problem and "nesting depth" in exc.problem:
            line = exc.problem_mark.line + 1 if exc.problem_mark else None
            raise YamlRefused("yaml-too-deep", f"nests deeper than {MAX_DEPTH} levels", line) from None
        raise
