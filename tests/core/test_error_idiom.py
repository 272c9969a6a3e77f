"""One idiom for errors: a problem is raised as a ``ToolError`` (or a subclass) where it is found, and the
server turns it into the MCP error result in one place. On 39e2847 engine and molecule errors were plain
exceptions with a ``code``, converted to ``ToolError`` in two idioms: a ``tool_errors()`` context manager,
and ``except MoleculeError as exc: raise ToolError(exc.code, exc.message)`` at six call sites."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from tools_server.core.errors import ToolError

ROOT = Path(__file__).resolve().parents[2]


def reraises(path: Path, root: Path = ROOT) -> list[str]:
    """``except`` handlers that raise a new ``ToolError`` built from the caught exception's ``code``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ExceptHandler) and node.name):
            continue
        for inner in ast.walk(node):
            if not (isinstance(inner, ast.Raise) and isinstance(inner.exc, ast.Call)):
                continue
            call = inner.exc
            name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
            first = call.args[0] if call.args else None
            if (
                name == "ToolError"
                and isinstance(first, ast.Attribute)
                and first.attr == "code"
                and isinstance(first.value, ast.Name)
                and first.value.id == node.name
            ):
                found.append(f"{path.relative_to(root)}:{inner.lineno}")
    return found


def test_no_tool_catches_an_error_to_raise_it_again_as_a_tool_error():
    found = [hit for path in sorted((ROOT / "tools_server").rglob("*.py")) for hit in reraises(path)]
    assert found == []


def test_the_check_sees_the_conversion_idiom(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "try:\n    load()\nexcept MoleculeError as exc:\n"
        "    raise ToolError(exc.code, exc.message) from None\n"
    )
    assert reraises(bad, tmp_path) == ["bad.py:4"]


@pytest.mark.parametrize(
    ("module", "name", "code"),
    [
        ("tools_server.molecules", "MoleculeError", "invalid_smiles"),
        ("tools_server.engines.calculator", "CalculatorError", "not_converged"),
        ("tools_server.qc.xtb", "XtbError", "engine_error"),
    ],
)
def test_engine_and_molecule_errors_are_tool_errors_that_cross_processes(module, name, code):
    import importlib

    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, ToolError)
    err = cls(code, "what went wrong")
    back = pickle.loads(pickle.dumps(err))  # from a pool process or a Dask task
    assert type(back) is cls and back.to_dict() == err.to_dict()
    assert back.hint  # the code's shared recovery hint


def test_a_molecule_error_raised_deep_in_a_tool_reaches_the_client_with_its_code(mcp_server):
    """No conversion anywhere on the way: the molecule loader's error is the call's error."""
    error = mcp_server.call_error("dft_run", {"molecule": "C1CC(", "wait_s": 120})
    assert error["code"] == "invalid_smiles" and error["hint"].startswith("Check the SMILES")
