"""The import graph shows the architecture: arrows point inward, and nothing goes round.

The graph is read from the source with `ast` (imports under `if TYPE_CHECKING:` are left
out: they never run). A module's import of `pkg.sub` counts as an arrow to `pkg.sub`; an
arrow inside one part is free, an arrow between parts must be one `LAYERS` allows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# part -> the parts it may import. The kernel and the simulator stand alone; an adapter
# sees the kernel and the service port, never another adapter (the stores share the
# records' encoding, `amc.adapters.codec`, their writers' hand-off, `amc.adapters.batches`,
# the writer that decides batches, `amc.adapters.writer`, their errors, `amc.adapters.errors`,
# and the check against a replayed log, `amc.adapters.replay`); the Host Agent drives
# devices through the ADB adapter; the clients of the control plane (the Host Agent, the
# CLI, MCP) share how they follow the leader (`amc.leader`); the history recorder and its
# checker (`amc.check`) read only the kernel's lifecycle, and the Host Agent records through
# it when asked; only the CLI, the outermost edge, wires everything.
LAYERS: dict[str, set[str]] = {
    "amc.core": set(),
    "amc.sim": set(),
    "amc.service": {"amc.core"},
    "amc.adapters.codec": {"amc.core"},
    "amc.adapters.batches": {"amc.core"},
    "amc.adapters.errors": {"amc.service"},
    "amc.adapters.writer": {"amc.core", "amc.service", "amc.adapters.batches"},
    "amc.adapters.replay": {"amc.core"},
    "amc.adapters.lmdb": {
        "amc.core",
        "amc.service",
        "amc.adapters.codec",
        "amc.adapters.batches",
        "amc.adapters.errors",
        "amc.adapters.writer",
        "amc.adapters.replay",
    },
    "amc.adapters.postgres": {
        "amc.core",
        "amc.service",
        "amc.adapters.codec",
        "amc.adapters.batches",
        "amc.adapters.errors",
        "amc.adapters.writer",
        "amc.adapters.replay",
    },
    "amc.adapters.http": {"amc.core", "amc.service"},
    "amc.adapters.adb": {"amc.core"},
    "amc.leader": {"amc.core"},
    "amc.check": {"amc.core"},
    "amc.agent": {"amc.core", "amc.adapters.adb", "amc.leader", "amc.check"},
    "amc.conformance": {"amc.core"},
    "amc.mcp": {"amc.core", "amc.leader"},
    "amc.cli": {
        "amc.core",
        "amc.service",
        "amc.adapters.codec",
        "amc.adapters.lmdb",
        "amc.adapters.postgres",
        "amc.adapters.http",
        "amc.adapters.adb",
        "amc.agent",
        "amc.leader",
        "amc.sim",
        "amc.conformance",
        "amc.mcp",
        "amc.check",
    },
    "amc.__main__": {"amc.cli"},
    "amc": set(),
    "amc.adapters": set(),
}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the amc package, by dotted name."""
    found = {}
    for path in (root / "amc").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _runtime_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    type_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(inner) for branch in node.body for inner in ast.walk(branch))
    return (node for node in ast.walk(tree) if id(node) not in type_only)


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The amc modules that `name` imports at run time (at module level or inside functions)."""
    targets: list[str] = []
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target.startswith("amc") and target != name:
            found.add(target)
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def part(module: str) -> str:
    pieces = module.split(".")
    depth = 3 if len(pieces) > 2 and pieces[1] == "adapters" else 2
    return ".".join(pieces[:depth])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(edges.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
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


def test_every_part_is_known():
    unknown = sorted({part(name) for name in modules()} - set(LAYERS))
    assert unknown == [], f"parts with no place in LAYERS: {unknown}"


def test_arrows_point_inward():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph().items()
        for target in targets
        if part(target) != part(name) and part(target) not in LAYERS[part(name)]
    )
    assert wrong == []


def test_no_import_goes_round():
    edges = graph()
    parts: dict[str, set[str]] = {}
    for name, targets in edges.items():
        parts.setdefault(part(name), set()).update(part(t) for t in targets if part(t) != part(name))
    assert cycles(edges) == [], "modules that import each other, directly or round a circle"
    assert cycles(parts) == [], "parts that import each other, directly or round a circle"


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_cycles_finds_circles(edges, expected):
    assert cycles(edges) == expected


def test_the_graph_sees_relative_and_lazy_imports(tmp_path):
    package = tmp_path / "amc" / "adapters" / "x"
    package.mkdir(parents=True)
    for init in (tmp_path / "amc", tmp_path / "amc" / "adapters", package):
        (init / "__init__.py").write_text("")
    (tmp_path / "amc" / "core.py").write_text("")
    (package / "a.py").write_text("from . import b\n\ndef f():\n    import amc.core\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    edges = graph(tmp_path)
    assert edges["amc.adapters.x.a"] == {"amc.adapters.x.b", "amc.core"}
    assert edges["amc.adapters.x.b"] == set()
