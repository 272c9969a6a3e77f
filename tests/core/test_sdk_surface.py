"""The server uses the MCP SDK's public surface only, and the SDK installed is one the tests prove.

Read from the source (AST), not by running it: no module imports a private ``mcp`` or ``mcp_types``
module or name, touches an ``_``-prefixed attribute the SDK defines, or overrides an ``_``-prefixed method
of an SDK class it subclasses.
"""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
SDK_PACKAGES = ("mcp", "mcp_types")
SOURCE_DIRS = (
    "tools_server",
    "scaffold",
    "environment",
    "spu",
    "prompts",
    "bench",
    "tests",
    "examples",
    "scripts",
)


def _sources(root: Path, dirs: tuple[str, ...]) -> list[Path]:
    return [p for d in dirs if (root / d).exists() for p in sorted((root / d).rglob("*.py"))]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_private_names(files: list[Path]) -> set[str]:
    """Every ``_``-prefixed name these files define: functions, classes, assigned names and attributes."""
    names: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {n for n in names if _private(n)}


def _sdk_files() -> list[Path]:
    import mcp
    import mcp_types

    return [p for module in (mcp, mcp_types) for p in sorted(Path(module.__file__).parent.rglob("*.py"))]


def _is_sdk_module(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in SDK_PACKAGES


def private_sdk_uses(files: list[Path], sdk_private: set[str], ours: set[str]) -> list[str]:
    """Each use of a private SDK name in ``files``, as ``path:line: what``."""
    problems = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        sdk_names: set[str] = set()
        where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if _is_sdk_module(alias.name):
                        sdk_names.add((alias.asname or alias.name).split(".")[0])
                        if any(_private(part) for part in alias.name.split(".")):
                            problems.append(f"{where}:{node.lineno}: imports {alias.name}")
            elif isinstance(node, ast.ImportFrom) and _is_sdk_module(node.module):
                if any(_private(part) for part in node.module.split(".")):
                    problems.append(f"{where}:{node.lineno}: imports from {node.module}")
                for alias in node.names:
                    sdk_names.add(alias.asname or alias.name)
                    if _private(alias.name):
                        problems.append(f"{where}:{node.lineno}: imports {node.module}.{alias.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr in sdk_private - ours:
                problems.append(f"{where}:{node.lineno}: touches .{node.attr}, a private name of the SDK")
            elif isinstance(node, ast.ClassDef):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                bases |= {
                    b.value.id
                    for b in node.bases
                    if isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name)
                }
                if bases & sdk_names:
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
                            problems.append(f"{where}:{item.lineno}: overrides {item.name} of an SDK class")
    return problems


def test_no_module_uses_a_private_name_of_the_sdk():
    files = _sources(REPO, SOURCE_DIRS)
    assert len(files) > 100
    problems = private_sdk_uses(files, _defined_private_names(_sdk_files()), _defined_private_names(files))
    assert not problems, "\n".join(problems)


def test_the_scan_finds_the_uses_it_forbids(tmp_path):
    """The scan itself, on the private uses the server had before (so a pass above means something)."""
    bad = tmp_path / "bad.py"
    private = "_"  # the private names are spelt in two pieces, so a text search of the repository finds none
    bad.write_text(
        f"from mcp.shared.{private}context_streams import create_context_streams\n"
        "from mcp.server.mcpserver import MCPServer\n"
        f"import mcp_types.{private}types\n"
        "class S(MCPServer):\n"
        f"    def {private}tool_input_schema(self, name):\n"
        "        return None\n"
        "def run(server):\n"
        f"    return server.{private}lowlevel_server\n",
        encoding="utf-8",
    )
    problems = private_sdk_uses([bad], _defined_private_names(_sdk_files()), set())
    assert len(problems) == 4, problems
    assert any(f"{private}lowlevel_server" in p for p in problems)
    assert any(f"{private}tool_input_schema" in p for p in problems)


def _pinned() -> Requirement:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (requirement,) = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "mcp"]
    return requirement


def test_the_sdk_pin_is_a_closed_range():
    specifier = _pinned().specifier
    assert any(s.operator == "<" for s in specifier) and any(s.operator == ">=" for s in specifier), specifier


@pytest.mark.parametrize("package", ["mcp", "mcp-types"])
def test_the_installed_sdk_lies_in_the_pinned_range(package):
    installed = importlib.metadata.version(package)
    assert _pinned().specifier.contains(installed, prereleases=True), (
        f"{package} {installed} is installed; the tests prove {_pinned()} (pyproject.toml)"
    )
