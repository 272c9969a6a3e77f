"""The layers, read from the code's imports (every ``import`` statement, at module level or in a function, and
every string that imports a module: ``importlib.import_module("a.b")``, ``"a.b:function"``):

* the ground floor (``spu_common``: JSON files, console output, shared error codes) imports no part and
  holds no command: each part owns its commands, and ``spu`` mounts them;
* the benchmark side (``environment``) imports neither the server nor the agent;
* the server (``tools_server``) imports neither the agent nor the benchmark side: the task contract and the
  audit log's format it uses live in the ground floor;
* the agent (``scaffold``) reaches the server only over MCP: it imports no ``tools_server`` module;
* only the root command (``spu``) mounts all parts, and ``spu serve`` loads neither agent nor statistics;
* no domain is named in the core, and nothing points at files outside the repository;
* the procedure layer every engine shares (``tools_server.engines``) imports no domain: domains use it;
* every domain, and the public layers domains share (``tools_server.engines``, ``tools_server.molecules``),
  reaches the server only through ``tools_server.plugin``, as a third-party package does;
* no domain imports another: what two domains share lives in the facade or the layers below them;
* the operator commands (``tools_server.commands``: serve, cache, config, doctor) use the mechanism in
  ``tools_server.core``; nothing else in the server imports them.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_import_cycles import _call_name, string_import

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("spu", "spu_common", "tools_server", "scaffold", "environment", "prompts")
FORBIDDEN = {
    "spu_common": ("tools_server", "scaffold", "environment", "spu", "prompts"),
    "environment": ("tools_server", "scaffold", "spu"),
    "tools_server": ("scaffold", "environment", "spu"),
    "scaffold": ("tools_server", "spu"),
    "prompts": ("tools_server", "scaffold", "environment", "spu"),
}


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every module ``path`` imports, with its line: import statements (a relative one resolved against the
    file's package under ``root``), ``import_module``/``__import__`` calls, and strings that import one."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom):
            package = path.relative_to(root).parent.parts
            base = package[: len(package) - (node.level - 1)]
            found.append((node.lineno, ".".join([*base, *filter(None, [node.module])])))
        elif isinstance(node, ast.Call) and _call_name(node) in ("import_module", "__import__"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            module = string_import(node.value)
            if module and (":" in node.value or is_module(module, root)):
                found.append((node.lineno, module))
    return found


def is_module(name: str, root: Path = ROOT) -> bool:
    """Whether a dotted name is a module of the repository (``"spu.tools"``, an entry-point group, is not)."""
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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


def commands_in(path: Path) -> list[str]:
    """Where a module makes a command: a Typer app, or a function decorated as a command, a group or a
    group's callback (``@app.command()``, ``@click.command``, ``@app.callback()``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and _call_name(node) == "Typer":
            found.append(f"{path.name}:{node.lineno} makes a Typer")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in ("command", "callback", "group"):
                    found.append(f"{path.name}:{node.lineno} {node.name} is a command")
    return sorted(found, key=lambda hit: int(hit.split(":")[1].split()[0]))


def test_the_shared_layer_holds_no_command():
    """``spu_common`` gives commands their output helpers (``console.py``) but holds no command: the audit
    commands belong to the part that writes the log (``tools_server/web/cli.py``)."""
    assert [hit for path in sorted((ROOT / "spu_common").rglob("*.py")) for hit in commands_in(path)] == []
    assert commands_in(ROOT / "tools_server" / "web" / "cli.py")  # the check sees real commands


def test_the_command_check_sees_a_command(tmp_path):
    bad = tmp_path / "cmd.py"
    bad.write_text(
        "import typer\napp = typer.Typer()\n@app.command('x')\ndef x():\n    pass\n"
        "@click.command\ndef y():\n    pass\n"
    )
    assert commands_in(bad) == [
        "cmd.py:2 makes a Typer",
        "cmd.py:4 x is a command",
        "cmd.py:7 y is a command",
    ]


def test_the_server_never_imports_the_benchmark_side():
    """No module of ``tools_server`` imports ``environment``, at module level, in a function or by name in a
    string: the task contract and the audit log's format the server uses live in ``spu_common``."""
    found = [
        f"{path.relative_to(ROOT)}:{lineno} imports {module}"
        for path in sorted((ROOT / "tools_server").rglob("*.py"))
        for lineno, module in imports_of(path)
        if module.split(".")[0] == "environment"
    ]
    assert found == []
    shared = {m for path in (ROOT / "tools_server").rglob("*.py") for _, m in imports_of(path)}
    assert {"spu_common.task", "spu_common.submission", "spu_common.audit_log"} <= shared


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
    """The checker itself: an import inside a function is found, and so is a module imported by name."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f():\n    from tools_server.core import settings\n"
        "    importlib.import_module('environment.legacy')\n"
        "    return {'grade': 'environment.grading:grade', 'module': 'environment.chance',\n"
        "            'entry points': 'spu.tools', 'text': 'a: b'}\n"
    )
    assert imports_of(bad) == [
        (2, "tools_server.core"),
        (3, "environment.legacy"),
        (4, "environment.grading"),
        (4, "environment.chance"),
    ]


#: the packages of ``tools_server`` that are no domain: the server's mechanism, its operator commands and
#: the procedure layer
SHARED_PACKAGES = ("core", "commands", "engines")


def _domains() -> list[str]:
    return sorted(
        p.name
        for p in (ROOT / "tools_server").iterdir()
        if p.is_dir() and (p / "__init__.py").exists() and p.name not in SHARED_PACKAGES
    )


@pytest.mark.parametrize("shared", SHARED_PACKAGES)
def test_shared_layers_name_no_domain(shared):
    domains = _domains()
    assert {"chem", "qc", "web", "md", "protein", "ranking", "mlip"} <= set(domains)
    named = []
    for path in sorted((ROOT / "tools_server" / shared).rglob("*.py")):
        for lineno, module in imports_of(path):
            parts = module.split(".")
            if parts[0] == "tools_server" and len(parts) > 1 and parts[1] in domains:
                named.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
    assert named == []


#: what no domain names: the server's mechanism and its commands (the facade stands in front of them)
SERVER_INSIDES = re.compile(r"\btools_server\.(core|commands)\b")


def inside_names(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` names the server's mechanism or its commands: an import statement, or any text (a
    doctor check's code, a string imported by name, a docstring pointing a reader there)."""
    return [
        f"{path.relative_to(root)}:{i}: {line.strip()}"
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SERVER_INSIDES.search(line)
    ]


def test_domains_reach_the_server_only_through_the_plugin_facade():
    """The project's domains are written exactly like a third-party package: of the server they import
    ``tools_server.plugin`` (and the public layers ``tools_server.engines`` and ``tools_server.molecules``,
    which use the facade too), never ``tools_server.core`` or ``tools_server.commands``."""
    paths = [
        ROOT / "tools_server" / "molecules.py",
        *sorted((ROOT / "tools_server" / "engines").rglob("*.py")),
    ]
    for domain in _domains():
        paths += sorted((ROOT / "tools_server" / domain).rglob("*.py"))
    found = [hit for path in paths for hit in inside_names(path)]
    assert found == []
    facade = [m for path in paths for _, m in imports_of(path) if m == "tools_server.plugin"]
    assert len(facade) > 20  # the check reads real imports: the domains do import the facade


def test_the_facade_check_sees_the_core_named_in_a_string(tmp_path):
    """The checker itself: a doctor check's code imports in a string, which no import statement shows."""
    bad = tmp_path / "checks.py"
    bad.write_text(
        'CODE = """\nfrom tools_server.core import settings\n"""\nfrom tools_server.plugin import tool\n'
    )
    assert inside_names(bad, tmp_path) == ["checks.py:2: from tools_server.core import settings"]


def test_the_operator_commands_sit_above_the_mechanism():
    """``tools_server/commands`` (``spu serve``, ``spu cache``, ``spu config``, ``spu doctor``) imports the
    mechanism in ``tools_server/core``; no module of the server outside it imports a command module, so
    the arrows between the two point one way."""
    commands = ROOT / "tools_server" / "commands"
    found = [
        f"{path.relative_to(ROOT)}:{lineno} imports {module}"
        for path in sorted((ROOT / "tools_server").rglob("*.py"))
        if commands not in path.parents
        for lineno, module in imports_of(path)
        if module == "tools_server.commands" or module.startswith("tools_server.commands.")
    ]
    assert found == []
    used = {
        m for path in commands.rglob("*.py") for _, m in imports_of(path) if m.startswith("tools_server.core")
    }
    assert {"tools_server.core.registry", "tools_server.core.server", "tools_server.core.cache"} <= used


def domain_crossings(root: Path = ROOT) -> list[str]:
    """Where a domain names a module of another domain: an import statement (relative ones resolved), an
    ``import_module`` call or a string that imports a module (``"tools_server.md.protein_system:load"``)."""
    package = root / "tools_server"
    domains = {
        p.name for p in package.iterdir() if (p / "__init__.py").exists() and p.name not in SHARED_PACKAGES
    }
    found = []
    for domain in sorted(domains):
        for path in sorted((package / domain).rglob("*.py")):
            for lineno, module in imports_of(path, root):
                parts = module.split(".")
                if parts[0] == "tools_server" and len(parts) > 1 and parts[1] in domains - {domain}:
                    found.append(f"{path.relative_to(root)}:{lineno} imports {module}")
    return found


def test_no_domain_imports_another_domain():
    """Domains share code only through the plugin facade (``tools_server.plugin``: the items table, result
    types) and the layers below them (``tools_server.engines``: the protein system, calculators;
    ``tools_server.molecules``): no module of a domain names a module of another, in an import, relative or
    not, or in a string. On 39e2847 ``qc`` and ``mlip`` imported ``chem.tables`` and ``dock`` imported
    ``md.protein_system``."""
    assert domain_crossings() == []


def test_the_crossing_check_sees_every_way_of_naming_another_domain(tmp_path):
    package = tmp_path / "tools_server"
    for name in ("chem", "qc", "engines"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "qc" / "tools.py").write_text(
        "from ..chem import tables\n"
        "from tools_server.engines import task\n"
        "def f():\n"
        "    import tools_server.chem.descriptors\n"
        "    importlib.import_module('tools_server.chem.fingerprints')\n"
        "    return 'tools_server.chem.tables:table_result'\n"
    )
    assert domain_crossings(tmp_path) == [
        "tools_server/qc/tools.py:1 imports tools_server.chem",
        "tools_server/qc/tools.py:4 imports tools_server.chem.descriptors",
        "tools_server/qc/tools.py:5 imports tools_server.chem.fingerprints",
        "tools_server/qc/tools.py:6 imports tools_server.chem.tables",
    ]


def test_every_domain_registers_through_an_entry_point():
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"]["spu.tools"]
    domains = _domains()
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
