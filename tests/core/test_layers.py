"""The layers, read from the code's imports (every ``import`` statement, at module level or in a function):

* the ground floor (``spu_common``: JSON files, console output, shared error codes) imports no part;
* the benchmark side (``environment``) imports neither the server nor the agent;
* the server (``tools_server``) never imports the agent;
* the agent (``scaffold``) reaches the server only over MCP: it imports no ``tools_server`` module;
* only the root command (``spu``) mounts all parts, and ``spu serve`` loads neither agent nor statistics;
* the server's core never imports the benchmark side;
* no domain is named in the core, and nothing points at files outside the repository;
* the procedure layer every engine shares (``tools_server.engines``) imports no domain: domains use it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("spu", "spu_common", "tools_server", "scaffold", "environment", "prompts")
FORBIDDEN = {
    "spu_common": ("tools_server", "scaffold", "environment", "spu", "prompts"),
    "environment": ("tools_server", "scaffold", "spu"),
    "tools_server": ("scaffold", "spu"),
    "scaffold": ("tools_server", "spu"),
    "prompts": ("tools_server", "scaffold", "environment", "spu"),
}


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def layer_violations() -> list[str]:
    out = []
    for part, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / part).rglob("*.py")):
            for lineno, module in imports_of(path):
                top = module.split(".")[0]
                if top in forbidden:
                    out.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
    return out


def test_layers_hold():
    assert layer_violations() == []


def test_server_core_never_imports_the_benchmark_side():
    found = [
        f"{path.relative_to(ROOT)}:{lineno} imports {module}"
        for path in sorted((ROOT / "tools_server" / "core").rglob("*.py"))
        for lineno, module in imports_of(path)
        if module.split(".")[0] == "environment"
    ]
    assert found == []


def test_plugins_import_only_the_plugin_facade():
    """The example plugin and the code in docs/adding-a-tool.md import nothing of the server but
    ``tools_server.plugin``, so the core can change beneath a plugin."""
    import re

    found = []
    tracked = subprocess.run(
        ["git", "ls-files", "examples"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    for path in [ROOT / rel for rel in tracked if rel.endswith(".py")]:
        found += [
            (str(path.relative_to(ROOT)), m) for _, m in imports_of(path) if m.split(".")[0] == "tools_server"
        ]
    page = (ROOT / "docs" / "adding-a-tool.md").read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", page, re.S):
        tree = ast.parse(block)
        found += [
            ("docs/adding-a-tool.md", n.module)
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tools_server")
        ]
    assert found and {module for _, module in found} == {"tools_server.plugin"}, found


def test_the_layer_check_sees_a_violation(tmp_path):
    """The checker itself: an import inside a function is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from tools_server.core import settings\n")
    assert imports_of(bad) == [(2, "tools_server.core")]


#: the packages of ``tools_server`` that are no domain: the server's mechanism and the procedure layer
SHARED_PACKAGES = ("core", "engines")


@pytest.mark.parametrize("shared", SHARED_PACKAGES)
def test_shared_layers_name_no_domain(shared):
    domains = sorted(
        p.name
        for p in (ROOT / "tools_server").iterdir()
        if p.is_dir() and (p / "__init__.py").exists() and p.name not in SHARED_PACKAGES
    )
    assert {"chem", "qc", "web", "md", "protein", "ranking", "mlip"} <= set(domains)
    named = []
    for path in sorted((ROOT / "tools_server" / shared).rglob("*.py")):
        for lineno, module in imports_of(path):
            parts = module.split(".")
            if parts[0] == "tools_server" and len(parts) > 1 and parts[1] in domains:
                named.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
    assert named == []


def test_no_domain_imports_another_domains_private_names():
    """Shared helpers (molecule input, element symbols, file fingerprints) live in ``tools_server.molecules``
    and the weights lookup in ``tools_server.core.settings``; a domain never reaches into another's ``_``
    names."""
    domains = {p.name for p in (ROOT / "tools_server").iterdir() if (p / "__init__.py").exists()} - set(
        SHARED_PACKAGES
    )
    found = []
    for domain in sorted(domains):
        for path in sorted((ROOT / "tools_server" / domain).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                    continue
                parts = node.module.split(".")
                if parts[0] == "tools_server" and len(parts) > 1 and parts[1] in domains - {domain}:
                    found += [
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}"
                        for a in node.names
                        if a.name.startswith("_")
                    ]
    assert found == []


def test_every_domain_registers_through_an_entry_point():
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"]["spu.tools"]
    domains = {
        p.name
        for p in (ROOT / "tools_server").iterdir()
        if p.is_dir() and (p / "__init__.py").exists() and p.name not in SHARED_PACKAGES
    }
    assert {name: f"tools_server.{name}:DOMAIN" for name in domains}.items() <= declared.items()


def test_spu_serve_imports_neither_agent_nor_benchmark_statistics():
    code = (
        "import sys\n"
        "from spu.cli import PARTS, make_app\n"
        "make_app([PARTS['serve']])\n"
        "import tools_server.core.server\n"
        "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] if '.' in m else m for m in sys.modules\n"
        "       if m.startswith(('scaffold', 'environment.report', 'environment.statistics'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# the team's design files, which users never have (names built here so this line does not match itself)
TEAM_FILES = [f"{stem}.md" for stem in ("ARCHITECTURE", "INTERFACES", "CONVENTIONS")] + ["../" + "shared"]


@pytest.mark.parametrize("name", TEAM_FILES)
def test_nothing_points_outside_the_repository(name):
    tracked = subprocess.run(
        ["git", "ls-files"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    hits = []
    for rel in tracked:
        path = ROOT / rel
        if (
            path.suffix not in (".py", ".md", ".toml", ".sh", ".yaml", ".jinja", ".txt", "")
            or not path.is_file()
        ):
            continue
        if rel == "tests/core/test_layers.py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{rel}:{i}" for i, line in enumerate(text.splitlines(), 1) if name in line]
    assert hits == []
