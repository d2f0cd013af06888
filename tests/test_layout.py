"""The layout shows the architecture: core, tools and scenes apart, no import circles, no module over 600
lines, and every package folder shipped by pyproject."""

import ast
import re
from pathlib import Path
from typing import Dict, Set

import pytest

from helpers import ROOT

MAX_LINES = 600
PACKAGE = ROOT / "gsplat_lpt"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, root: Path, prefix: str) -> Set[str]:
    """Modules under `prefix` that `path` imports, at module level or inside functions."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return {module for module in found if module == prefix or module.startswith(prefix + ".")}


def graph(root: Path, prefix: str, files) -> Dict[str, Set[str]]:
    modules = {module_name(path, root): path for path in files}
    edges = {}
    for name, path in modules.items():
        targets = {target for target in imports_of(path, root, prefix) if target in modules and target != name}
        edges[name] = {t for t in targets if not (name.startswith(t + ".") and modules[t].name == "__init__.py")}
    return edges


def cycles(edges: Dict[str, Set[str]]):
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                found.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def library_graph():
    return graph(ROOT, "gsplat_lpt", sorted(PACKAGE.rglob("*.py")))


def test_no_import_circles():
    assert cycles(library_graph()) == []
    examples = ROOT / "examples"
    assert cycles(graph(examples, "omnire", sorted((examples / "omnire").glob("*.py")))) == []


def layer(module: str) -> str:
    """core, tools or scenes; `python -m gsplat_lpt` (__main__) is the command line's entry, with the tools."""
    parts = module.split(".")
    if module == "gsplat_lpt.__main__":
        return "tools"
    return parts[1] if len(parts) > 1 and parts[1] in ("tools", "scenes") else "core"


def test_core_imports_neither_tools_nor_scenes_and_scenes_not_tools():
    allowed = {"core": {"core"}, "scenes": {"scenes"}, "tools": {"core", "scenes", "tools"}}
    wrong = [(source, target) for source, targets in library_graph().items() for target in targets
             if layer(target) not in allowed[layer(source)] and target != "gsplat_lpt"]
    assert wrong == []


def test_no_module_over_600_lines():
    files = list(PACKAGE.rglob("*.py")) + list((ROOT / "examples").rglob("*.py")) + list((ROOT / "tests").rglob("*.py"))
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_pyproject_ships_every_package():
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(gsplat_lpt[\w.]*)"', text.split("[tool.setuptools]")[1].split("[")[0] + text))
    packages = {module_name(init, ROOT) for init in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, packages - listed
    assert 'gsplat-lpt = "gsplat_lpt.tools.cli:main"' in text


@pytest.mark.parametrize("module", ["gsplat_lpt.tools.cli", "gsplat_lpt.scenes", "gsplat_lpt.__main__"])
def test_entry_points_import(module):
    import importlib

    if module.endswith("__main__"):
        assert "from .tools.cli import main" in (PACKAGE / "__main__.py").read_text()
    else:
        importlib.import_module(module)
