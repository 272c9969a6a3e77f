"""tests/slow_tests.txt, which makes the quick subset (-m "not slow"), names only tests that exist."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_listed_slow_test_exists():
    lines = (REPO / "tests" / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
    listed = {line for line in lines if line and not line.startswith("#")}
    assert len(listed) > 100  # the list was read (comments and blank lines left out)
    missing = []
    functions: dict[str, set[str]] = {}
    for node_id in sorted(listed):
        file, _, name = node_id.partition("::")
        path = REPO / file
        if not path.is_file():
            missing.append(node_id)
            continue
        name = name.split("::")[-1].split("[")[0]
        if name not in functions.setdefault(file, _test_functions(path)):
            missing.append(node_id)
    assert missing == [], f"rewrite the list: bench/test_durations.py --write-slow-list; gone: {missing[:5]}"
