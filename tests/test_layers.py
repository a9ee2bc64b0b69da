"""The package layout shows the architecture: no import cycle between packages, the root
modules never reach up into the Dagster layer, the run machinery or the CLI, and no module
imports another package's private module.

Nodes are the layers a reader sees in the tree: the root modules of `notarius_dagster` form the
node `notarius_dagster`; each direct subpackage (`notarius_dagster.engine`,
`notarius_dagster.run`, `notarius_dagster.cli`, ...) is its own node, with its nested packages
folded in (`engine/inputs/` belongs to `notarius_dagster.engine`, `dnd/npcs/` to
`notarius_dagster.dnd`); `assets` and `resources` are a node each. Edges come from every import
statement, also those inside functions (`tests/test_architecture.py: imports_of`)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.test_architecture import Import, imports_of, module_name

REPO = Path(__file__).resolve().parent.parent
TOP_PACKAGES = ("notarius_dagster", "assets", "resources")

ROOT_MAY_NOT_IMPORT = (
    "assets",
    "resources",
    "notarius_dagster.run",
    "notarius_dagster.cli",
)
"""The root modules (store, settings, staleness, sessions, inbox, ...) are the plain-Python
services the upper layers share; they never import those layers."""


def node_of(module: str, root: Path) -> str | None:
    """The layer a module belongs to, or None for a module outside the product."""
    parts = module.split(".")
    if parts[0] in ("assets", "resources"):
        return parts[0]
    if parts[0] != "notarius_dagster":
        return None
    if len(parts) > 1 and (root / "notarius_dagster" / parts[1]).is_dir():
        return f"notarius_dagster.{parts[1]}"
    return "notarius_dagster"


def layer_edges(root: Path) -> dict[tuple[str, str], list[Import]]:
    """Every import from one layer into another, with the statements that make it."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for top in TOP_PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            source = node_of(module_name(path, root), root)
            for imp in imports_of(path, root):
                target = node_of(imp.module, root)
                if source and target and target != source:
                    edges.setdefault((source, target), []).append(imp)
    return edges


def cycles(edges: Mapping[tuple[str, str], object]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _explain(component: Iterable[str], edges: Mapping[tuple[str, str], list[Import]]) -> str:
    members = set(component)
    lines = []
    for (source, target), imports in sorted(edges.items()):
        if source in members and target in members:
            lines.append(f"{source} -> {target}: " + "; ".join(map(str, imports[:3])))
    return "\n".join(lines)


def private_imports(root: Path) -> list[Import]:
    """Imports of a private module (`_name.py`) from outside the package that holds it."""
    private: set[str] = set()
    for top in TOP_PACKAGES:
        for path in (root / top).rglob("_*.py"):
            if path.name not in ("__init__.py", "__main__.py"):
                private.add(module_name(path, root))
    found: list[Import] = []
    for top in TOP_PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            importer = module_name(path, root)
            for imp in imports_of(path, root):
                owner = imp.module.rsplit(".", 1)[0]
                if imp.module in private and not importer.startswith(owner + "."):
                    found.append(imp)
    return found


# ---- the checks


def test_no_import_cycle_between_packages() -> None:
    edges = layer_edges(REPO)
    found = cycles(edges)
    assert not found, "package-level import cycles:\n" + "\n\n".join(
        _explain(component, edges) for component in found
    )


@pytest.mark.parametrize("layer", ROOT_MAY_NOT_IMPORT)
def test_the_root_modules_do_not_import_an_upper_layer(layer: str) -> None:
    imports = layer_edges(REPO).get(("notarius_dagster", layer), [])
    assert not imports, "\n".join(map(str, imports))


def test_no_module_imports_another_packages_private_module() -> None:
    found = private_imports(REPO)
    assert not found, "\n".join(map(str, found))


def test_the_walk_sees_every_layer() -> None:
    nodes = {node for edge in layer_edges(REPO) for node in edge}
    assert {
        "notarius_dagster",
        "notarius_dagster.engine",
        "notarius_dagster.llm",
        "notarius_dagster.dnd",
        "notarius_dagster.run",
        "notarius_dagster.cli",
        "assets",
        "resources",
    } <= nodes


# ---- the walker finds what it must (a check that cannot fail is no check)


PLANTED = {
    "notarius_dagster/__init__.py": "",
    "notarius_dagster/store.py": "def helper():\n    from resources.bundle_store import X\n",
    "notarius_dagster/engine/__init__.py": "",
    "notarius_dagster/engine/inputs/__init__.py": "from notarius_dagster.engine import models\n",
    "notarius_dagster/engine/models.py": "from notarius_dagster.engine.inputs import base\n",
    "notarius_dagster/llm/__init__.py": "",
    "notarius_dagster/llm/_wire.py": "",
    "notarius_dagster/llm/client.py": "from notarius_dagster.llm._wire import x\n",
    "assets/__init__.py": "",
    "assets/summary.py": "from notarius_dagster.llm import _wire\n",
    "resources/__init__.py": "",
    "resources/bundle_store.py": "from notarius_dagster import store\n",
}


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    for relative, text in PLANTED.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def test_the_walker_finds_a_cycle_through_a_function_level_import(planted: Path) -> None:
    edges = layer_edges(planted)
    # engine <-> engine.inputs is one layer: nested packages fold into their parent.
    assert cycles(edges) == [["notarius_dagster", "resources"]]
    assert [str(imp) for imp in edges[("notarius_dagster", "resources")]] == [
        "notarius_dagster/store.py:2 imports resources.bundle_store",
        "notarius_dagster/store.py:2 imports resources.bundle_store.X",
    ]


def test_the_walker_finds_a_private_module_imported_from_another_package(
    planted: Path,
) -> None:
    assert [str(imp) for imp in private_imports(planted)] == [
        "assets/summary.py:1 imports notarius_dagster.llm._wire"
    ]
