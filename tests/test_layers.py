"""Imports run one way: corpus → index → tools → harness → reward → eval/train.

Every ``import`` in ``src/sleuth`` (module level or inside a function) is an edge between two
modules. A module may import from its own layer or a lower one, never a higher one, and no chain
of imports may lead back to where it started.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sleuth

SRC = Path(sleuth.__file__).parent

# Each top-level package or module of sleuth and its layer; a module imports only from layers
# at or below its own.
LAYERS: dict[str, int] = {
    "errors": 0,
    "progress": 0,
    "extras": 0,
    "tokens": 0,
    "io": 0,
    "memory": 0,
    "recent": 0,
    "corpus": 1,
    "embed": 2,
    "tasks": 2,
    "index": 3,
    "ranking": 4,
    "tools": 5,
    "harness": 6,
    "policies": 7,
    "metrics": 8,
    "reward": 9,
    "eval": 10,
    "datagen": 10,
    "train": 10,
    "api": 11,  # the Python API: the one entry that the CLI, MCP and the adapters all call
    "serve": 12,
    "integrations": 12,
    "demo": 13,
    "cli": 14,
}

# Edges that run upward today, each with why; the list only shrinks (it is empty: the policy
# builder's heuristic agent, baselines and CTranslate2 engine moved into policies/).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)  # `from pkg import module`
    return {t for t in out if t == "sleuth" or t.startswith("sleuth.")}


def import_graph() -> dict[str, set[str]]:
    """Module → the sleuth modules it imports (names that are not modules are dropped)."""
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    return {m: {t for t in _imports(p, m) if t in files and t != m} for m, p in files.items()}


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "sleuth"
    return LAYERS.get(top, max(LAYERS.values()) + 1)


def upward_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in graph.items() for b in targets if _layer(b) > _layer(a)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_package_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in SRC.iterdir()}
    tops = {t for t in tops if t.isidentifier() and t not in {"__init__", "data", "__pycache__"}}
    tops = {t for t in tops if (SRC / t).is_dir() or (SRC / f"{t}.py").is_file()}
    assert tops <= set(LAYERS), f"give these a layer in LAYERS: {sorted(tops - set(LAYERS))}"


def test_no_import_runs_upward():
    extra = upward_edges(import_graph()) - KNOWN_UPWARD
    assert not extra, (
        "imports against corpus → index → tools → harness → reward → eval/train:\n"
        + ("\n".join(f"{a} -> {b}" for a, b in sorted(extra)))
    )


def test_known_upward_edges_still_exist():
    """An allowed upward edge that is gone must leave KNOWN_UPWARD too."""
    assert upward_edges(import_graph()) >= KNOWN_UPWARD


def test_no_import_cycles():
    assert cycles(import_graph()) == []


ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"
BASE = 0  # the layer of the base modules, which the flow line names apart


def _flow_line() -> str:
    """The ``LAYERS`` above the base as docs/ARCHITECTURE.md's flow line spells them."""
    by_layer: dict[int, list[str]] = {}
    for name, layer in LAYERS.items():
        if layer > BASE:
            by_layer.setdefault(layer, []).append(name)
    return " → ".join("/".join(by_layer[layer]) for layer in sorted(by_layer))


def test_architecture_doc_follows_the_layers():
    """The doc's flow line is ``LAYERS`` in order, and its package table lists every package
    once, in layer order: the map a newcomer reads is the one this file enforces."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert f"Data flows one way: {_flow_line()}." in text, f"flow line: {_flow_line()}"
    base = [name for name, layer in LAYERS.items() if layer == BASE]
    assert all(f"`{name}`" in text.split("\n\n")[1] for name in base)
    rows = [row.split("|")[1] for row in text.splitlines() if row.startswith("| `sleuth.")]
    table = [name for cell in rows for name in re.findall(r"`sleuth\.(\w+)`", cell)]
    assert sorted(table) == sorted(LAYERS), "every package in LAYERS has one row, and no other"
    layers = [LAYERS[name] for name in table]
    assert layers == sorted(layers), f"table rows out of layer order: {table}"
