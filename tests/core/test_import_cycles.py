"""No import cycle inside the server: the graph of ``tools_server`` modules, read from every ``import``
statement (module level or in a function, as in test_layers.py) and from every string that imports a
project module (``"tools_server.x.y:function"``, or the name given to ``importlib.import_module``), has
no strongly connected component of more than one module. ``core/server.py`` and ``commands/serve_cli.py`` once
formed one over the bind rules; ``qc/calculator.py`` named ``"tools_server.mlip.models:make_calculator"``
in a string while ``mlip`` imported ``qc.calculator``, a cycle the import statements alone did not show."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_graph(root: Path, package: str = "tools_server") -> dict[str, set[str]]:
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # ``from package import submodule`` is an import of the submodule (its package is loaded
                # first by any import of it); ``from module import name`` one of the module
                subs = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [s for s in subs if s in modules] or [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
                targets = [string_import(node.value)]
            elif isinstance(node, ast.Call) and _call_name(node) in ("import_module", "__import__"):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    targets = [string_import(first.value)]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def string_import(text: str) -> str:
    """The module a string names for ``importlib`` (``"a.b"`` or ``"a.b:function"``), else ``""``."""
    module, _, attribute = text.partition(":")
    if attribute and not attribute.isidentifier():
        return ""
    return module if _DOTTED.fullmatch(module) else ""


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_server_has_no_import_cycle():
    graph = module_graph(ROOT)
    assert "tools_server.core.bind" in graph and len(graph) > 50
    assert cycles(graph) == []


def test_a_module_named_in_a_string_is_an_edge(tmp_path):
    """A factory table naming ``"pkg.b:make"`` while ``pkg.b`` imports ``pkg.a`` is a cycle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        'FACTORIES = {"b": "pkg.b:make"}\nimport importlib\nimportlib.import_module("pkg.c")\n'
    )
    (pkg / "c.py").write_text("")
    (pkg / "b.py").write_text("def make():\n    from pkg.a import FACTORIES\n    return FACTORIES\n")
    graph = module_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.b", "pkg.c"} and graph["pkg.b"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_cycle_check_sees_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_loading_the_registry_imports_no_http_client(spu_env):
    """The first ``tools/list`` waits for the registry: the web domain's HTTP client (httpx, httpcore, a
    third of the registry's load) comes with the first web call, not with the tool list."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tools_server.core.registry import load_registry\n"
        "assert 'web_fetch' in load_registry().tools\n"
        "print(sorted(m for m in ('httpx', 'httpcore', 'tools_server.web.client') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=spu_env, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
