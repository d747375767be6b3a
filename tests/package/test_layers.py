"""costmodel/'s architecture as a test: no import cycle between its modules, and layers that import downward only.

The import graph is read with `ast` from the source tree (no import is executed): every `import` / `from ... import`
anywhere in a module - at the top or inside a function - is an edge, so a cycle cannot hide behind a function-level
import. Layers, lowest first: io < profiles < model < evidence < answers < serving < cli; a module may import its own
layer (without a cycle) and the layers below, never one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "costmodel"
LAYERS = ("io", "profiles", "model", "evidence", "answers", "serving", "cli")
MAX_MODULE_LINES = 420  # "modules under ~400 lines" (issue 21); the largest today is model/components.py (403)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, root: Path = ROOT) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """The costmodel modules `path` imports (from X import name counts X.name when that is a module)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            targets = [module, *(f"{module}.{a.name}" for a in node.names)]
        else:
            continue
        out |= {t for t in targets if t.split(".")[0] == "costmodel" and is_module(t, root)}
    out.discard(name)
    return out


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    root = package.parent
    return {module_name(p, root): imports_of(p, root) for p in sorted(package.rglob("*.py"))
            if "data" not in p.relative_to(package).parts}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}
    for root in sorted(graph):
        if state.get(root):
            continue
        stack, path = [(root, iter(sorted(graph.get(root, ()))))], [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                return [*path[path.index(child):], child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph.get(child, ())))))
                path.append(child)
    return None


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_import_cycle_inside_costmodel():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()))


def test_layers_import_downward_only():
    upward = [f"{m} -> {t}" for m, targets in import_graph().items() for t in targets
              if layer(m) is not None and layer(t) is not None and layer(t) > layer(m)]
    assert upward == []


def test_every_costmodel_module_lives_in_a_layer():
    loose = [m for m in import_graph() if layer(m) is None and m not in ("costmodel", "costmodel.__main__")]
    assert loose == []
    for name in LAYERS:
        init = PACKAGE / name / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} needs a docstring saying what the layer is"


def test_modules_stay_small():
    big = {module_name(p): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert big == {}


@pytest.mark.parametrize("edges, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"a2"}, "a2": set(), "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
])
def test_find_cycle_finds_cycles(edges, cycle):
    assert find_cycle(edges) == cycle


def test_graph_sees_function_level_imports(tmp_path):
    pkg = tmp_path / "costmodel"
    (pkg / "model").mkdir(parents=True)
    for f in ("__init__.py", "model/__init__.py", "model/a.py"):
        (pkg / f).write_text("")
    (pkg / "model" / "b.py").write_text("def f():\n    from . import a\n    from .a import x\n")
    graph = import_graph(pkg)
    assert graph["costmodel.model.b"] == {"costmodel.model", "costmodel.model.a"}
