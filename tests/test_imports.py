"""No import cycle anywhere in the project: model/, explorer/ and bench/.

The graph is read from the source with ``ast`` (nothing is imported): every ``import`` and
``from ... import`` of a project module, at the top of a file or inside a function, relative
imports resolved. ``from pkg import name`` points at ``pkg.name`` when that is a module, else at
``pkg``. Importing ``pkg.sub`` also runs ``pkg/__init__.py``; that implicit step is left out,
because every package whose ``__init__`` re-exports its submodules would otherwise be a cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("model", "explorer", "bench")


def module_files(root: Path = ROOT, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the packages."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The project modules that ``name`` (in ``path``) imports, anywhere in the file."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: one level is the current package
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    edges = set()
    for target in found:  # "import a.b.c" -> the longest prefix that is a project module
        parts = target.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        if parts and ".".join(parts) != name:
            edges.add(".".join(parts))
    return edges


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    files = module_files(root, packages)
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, first == last) per strongly connected component that has
    one, found with Tarjan's algorithm; sorted, so the report is stable."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def strongconnect(v: str) -> None:  # recursion depth = module count: small
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                comps.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(_cycle_in(graph, comp) for comp in comps)


def _cycle_in(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest cycle through the first module of the component (breadth-first)."""
    start = min(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ()) & comp):
                if w == start:  # back where we began: walk the path back
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in {comp}")  # a strongly connected component always has one


def report(cycles: list[list[str]]) -> str:
    return "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


# --- the cycle finder itself -----------------------------------------------------------------------
def test_cycle_finder_finds_cycles_and_only_cycles():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"a"}}) == [["a", "a"]]
    two = find_cycles({"a": {"b"}, "b": {"a"}, "x": {"y"}, "y": {"z"}, "z": {"x", "a"}})
    assert two == [["a", "b", "a"], ["x", "y", "z", "x"]]


def test_graph_reads_relative_local_and_from_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import thing\n")
    (pkg / "a.py").write_text("import os\n\ndef f():\n    from . import b  # function-local\n")
    (pkg / "b.py").write_text("from pkg.sub import c\nfrom .sub.c import x\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from .. import a\nimport pkg.b\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.sub.c"},
                     "pkg.sub": set(), "pkg.sub.c": {"pkg.a", "pkg.b"}}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]


# --- the project -------------------------------------------------------------------------------------
def test_the_graph_sees_the_project():
    graph = import_graph()
    assert {"model", "model.registry", "model.runtime.errors", "explorer.app", "bench.models"} <= set(graph)
    assert "model.runtime.errors" in graph["model.arch.family"] and "model.runtime.errors" in graph["model.files.hf"]
    assert graph["model.runtime.errors"] == set()  # a leaf


def test_weights_error_is_one_class_everywhere():
    import model
    from model import registry
    from model.runtime import errors

    assert model.WeightsError is registry.WeightsError is errors.WeightsError


def test_registry_is_a_table_with_top_level_imports_only():
    from model import registry

    tree = ast.parse(Path(registry.__file__).read_text())
    local = [n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not local, "registry.py imports inside a function"
    assert set(registry.LOADERS) == set(registry.available()) >= {"seed", "seed-sort", "minilm", "smollm2"}
    assert all(callable(f) for f in registry.LOADERS.values())


@pytest.mark.parametrize("packages", [("model",), ("model", "bench")], ids=["model", "model+bench"])
def test_no_import_cycle_in_model(packages):
    cycles = find_cycles(import_graph(packages=packages))
    assert not cycles, report(cycles)


def test_no_import_cycle_anywhere():
    cycles = find_cycles(import_graph())
    assert not cycles, report(cycles)
