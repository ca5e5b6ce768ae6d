"""The package layout is the architecture: every import (module-level or inside a function) points down the layer
order below, there is no import cycle, and no module imports another module's underscore names.

Layers, lowest first (a module belongs to the longest prefix that names it). An arrow may stay inside a layer, as
long as it makes no cycle, or point to a lower layer; an arrow to a higher layer is an error, printed with the
chain of imports it closes."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "flfun"

LAYERS = [
    ["flfun.config", "flfun.dtypes", "flfun.util", "flfun.tree", "flfun.backends.fastpath"],  # leaves (fastpath: C)
    ["flfun.backends", "flfun.backends.base", "flfun.memory.raw", "flfun.memory.report"],  # device, raw memory
    ["flfun.array"],                                                             # data only
    ["flfun.core", "flfun.ir"],                                                  # tracing, the IR
    ["flfun.memory"],                                                            # allocators, planner, telemetry
    ["flfun.primitives"],
    ["flfun.compiler"],                                                          # passes, planner, executor
    ["flfun.transforms"],
    ["flfun.distributed"],                                                       # devices, sharded, pmap, comms
    ["flfun.backends.numpy_backend", "flfun.backends.cupy_backend", "flfun.backends.xp", "flfun.backends.cuda",
     "flfun.backends.cfuse"],
    ["flfun.numpy", "flfun.lax", "flfun.lax_control", "flfun.lax_math", "flfun.lax_shape", "flfun.lax_gather",
     "flfun.lax_solve", "flfun.scipy", "flfun.random", "flfun.nn", "flfun.optim", "flfun.checkpoint", "flfun.serialization", "flfun.profiler",
     "flfun.testing", "flfun.extend"],
    ["flfun"],
]


def modules() -> dict[str, pathlib.Path]:
    """Every module of the package by dotted name (a package by its own name; a C extension by its source)."""
    mods = {}
    for path in sorted([*PKG.rglob("*.py"), *PKG.rglob("*.c")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def imports(name: str, path: pathlib.Path, mods: dict) -> list[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` for every flfun import in the file, at any depth; ``from a import b``
    where ``a.b`` is a module counts as an import of ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found += [(sub, [], node.lineno)] if sub in mods else [(base, [a.name], node.lineno)]
        elif _dynamic_import(node) and isinstance(node.args[0], ast.Constant):
            found.append((node.args[0].value, [], node.lineno))
    return [(m, names, line) for m, names, line in found if m == "flfun" or m.startswith("flfun.")]


def _dynamic_import(node) -> bool:
    """``importlib.import_module(...)`` or ``__import__(...)``."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    return isinstance(f, ast.Attribute) and f.attr == "import_module" or isinstance(f, ast.Name) and f.id in (
        "import_module", "__import__")


def owner(target: str, mods: dict) -> str:
    while target not in mods and "." in target:
        target = target.rpartition(".")[0]
    return target


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges = {m: set() for m in mods}
    for m, path in mods.items():
        if path.suffix == ".py":
            edges[m] |= {owner(t, mods) for t, _, _ in imports(m, path, mods)} - {m}
    return edges


def layer(module: str) -> int:
    best = max((p for group in LAYERS for p in group if module == p or module.startswith(p + ".")), key=len)
    return next(i for i, group in enumerate(LAYERS) if best in group)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One closed chain of imports per strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while not comp or w != v:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [chain(edges, min(c), min(c), c) for c in comps]


def chain(edges, start: str, goal: str, allowed=None) -> list[str]:
    """The shortest import chain from ``start`` back to ``goal`` (breadth first)."""
    paths, seen = [[start]], set()
    while paths:
        path = paths.pop(0)
        for w in sorted(edges[path[-1]]):
            if w == goal:
                return path + [w]
            if w not in seen and (allowed is None or w in allowed):
                seen.add(w)
                paths.append(path + [w])
    return []


def test_every_module_has_a_layer():
    assert [m for m in modules() if not any(m == p or m.startswith(p + ".") for g in LAYERS for p in g)] == []


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_imports_point_down_the_layers():
    edges = graph()
    bad = sorted((a, b) for a in edges for b in edges[a] if layer(b) > layer(a))
    lines = []
    for a, b in bad:
        back = chain(edges, b, a)
        lines.append(f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
                     + (f"; closes {' -> '.join([a] + back)}" if back else ""))
    assert not bad, "imports against the layer order:\n" + "\n".join(lines)


def test_no_import_hides_its_module():
    """A module imported by a computed name would escape the checks above."""
    hidden = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in modules().values() if path.suffix == ".py"
              for node in ast.walk(ast.parse(path.read_text()))
              if _dynamic_import(node) and not isinstance(node.args[0], ast.Constant)]
    assert not hidden, "imports by a computed name:\n" + "\n".join(hidden)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_underscore_names():
    """``from a import _x`` and importing ``a._b`` from outside package ``a`` are both private access."""
    mods, bad = modules(), []
    for m, path in mods.items():
        for target, names, line in imports(m, path, mods) if path.suffix == ".py" else ():
            parts = target.split(".")
            for i, part in enumerate(parts):
                if _private(part) and not (m + ".").startswith(".".join(parts[:i]) + "."):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports private module {target}")
            bad += [f"{path.relative_to(ROOT)}:{line} imports {n} from {target}" for n in names if _private(n)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c", "a"]]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
])
def test_cycle_finder_finds_cycles(edges, expected):
    assert cycles(edges) == expected


def test_function_level_and_relative_imports_count(tmp_path, monkeypatch):
    mods = {"flfun.x": None, "flfun.x.y": None, "flfun.z": None}
    src = tmp_path / "y.py"
    src.write_text("def f():\n    from flfun.z import thing\n    from . import _p\n    importlib.import_module('flfun.z')\n")
    assert imports("flfun.x.y", src, mods) == [("flfun.z", ["thing"], 2), ("flfun.x", ["_p"], 3), ("flfun.z", [], 4)]
