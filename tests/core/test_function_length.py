"""The benchmark side (``environment``) reads in pieces: no function or method is longer than
:data:`MAX_LINES` lines, signature, docstring and body together (a longer one is split where it does two
things)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 80


def long_functions(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(
                        f"{path.relative_to(folder.parent)}:{node.lineno} {node.name} ({lines} lines)"
                    )
    return found


def test_no_benchmark_side_function_is_over_80_lines():
    assert long_functions(ROOT / "environment") == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "long.py").write_text(f"def f():\n{body}\n", encoding="utf-8")
    assert long_functions(tmp_path / "part") == ["part/long.py:1 f (81 lines)"]
