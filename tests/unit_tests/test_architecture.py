"""The layering of the code, checked from the source (no import of it, no server).

Arrows point one way: testing -> apps -> wiring -> nodes -> declarations -> domain ->
services -> local/storage -> core. ``graph/`` holds the wiring; its declarations (state,
context, prompts, tools) are what nodes may import from it.
``memory_graph_agent.testing`` (the public fake chat model) is on top: nothing of the
project imports it; tests, benchmarks and users' tests do. ``bench/`` never imports
``tests/``. Every import counts: the lazy ones inside functions and the ``if
TYPE_CHECKING:`` ones too (a type is a dependency). Nothing below ``graph/`` imports
``graph`` or ``nodes``, and the domain's sub-packages (``recall``, ``turn``,
``formation``, ``profile``, ``storage``...) form no cycle. The checks are functions of a
source tree, so the tests at the end run them on small synthetic trees too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("graph", "nodes", "memory_graph_agent")
P = "memory_graph_agent"

# lowest first; a module belongs to the most specific (longest) prefix that matches
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", (f"{P}.core",)),
    ("storage", (f"{P}.storage",)),
    ("local", (f"{P}.local",)),
    ("services", (f"{P}.services",)),
    ("domain", (P,)),
    (
        "declarations",
        (
            "graph.state",
            "graph.context",
            "graph.prompts",
            "graph.tools",
            "graph.maintenance_state",
        ),
    ),  # fmt: skip
    ("nodes", ("nodes",)),
    ("wiring", ("graph",)),
    ("apps", (f"{P}.cli", f"{P}.webapp", f"{P}.auth")),
    ("testing", (f"{P}.testing",)),
]  # and the package itself, `memory_graph_agent` exactly: FRONT_DOORS
FRONT_DOORS = {P: "apps"}
"""Modules whose layer is their exact name: the package's public API (lazy imports of the
wiring), while its sub-packages keep the layers above."""
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# what the same rank may import sideways: storage and local are peers, not a stack
PEERS_FORBIDDEN = {("storage", "local")}
KEY_AND_SQL_MARKERS = (":window:", ":seen:", ":owner:", ":pending:", ":profile:", "SELECT ",
                       "INSERT INTO", "DELETE FROM")  # fmt: skip
DRIVERS = ("redis", "psycopg", "psycopg_pool", "sqlalchemy", "langchain_postgres")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    if module in FRONT_DOORS:
        return FRONT_DOORS[module]
    best, best_len = "", -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = name, len(prefix)
    return best


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, ``TYPE_CHECKING`` ones too (``from x import y`` may
    name x.y)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def source_files(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    return sorted(p for pkg in packages for p in (root / pkg).rglob("*.py"))


def project_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    modules = {module_name(p, root): p for p in source_files(root, packages)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {i for i in imports_of(path) if i in modules and i != name}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a higher layer (or a forbidden peer)."""
    wrong = []
    for module, imported in graph.items():
        here = layer_of(module)
        for target in imported:
            there = layer_of(target)
            if RANK[there] > RANK[here] or (here, there) in PEERS_FORBIDDEN:
                wrong.append(f"{module} ({here}) imports {target} ({there})")
    return sorted(wrong)


def imports_of_the_wiring_below_it(graph: dict[str, set[str]]) -> list[str]:
    """Each import of ``graph`` or ``nodes`` by a module below the declarations."""
    below = RANK["declarations"]
    return sorted(
        f"{module} imports {target}"
        for module, imported in graph.items()
        if RANK[layer_of(module)] < below
        for target in imported
        if target.split(".")[0] in ("graph", "nodes")
    )


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of ``graph``: its strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


def sub_package(module: str) -> str:
    """``memory_graph_agent.recall.linking`` -> ``memory_graph_agent.recall``."""
    return ".".join(module.split(".")[:2])


def sub_package_cycles(graph: dict[str, set[str]], package: str = P) -> list[list[str]]:
    """The cycles between the sub-packages (and top-level modules) of ``package``."""
    units: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if module.split(".")[0] != package or module == package:
            continue
        here = sub_package(module)
        units.setdefault(here, set())
        units[here] |= {
            sub_package(t) for t in imported
            if t.split(".")[0] == package and t != package and sub_package(t) != here
        }  # fmt: skip
    return strongly_connected(units)


def test_every_module_has_a_layer() -> None:
    assert [m for m in project_graph() if not layer_of(m)] == []


def test_imports_only_point_down_the_layers() -> None:
    assert upward_imports(project_graph()) == []


def test_nothing_below_the_wiring_imports_graph_or_nodes() -> None:
    assert imports_of_the_wiring_below_it(project_graph()) == []


def test_no_import_cycle_between_modules() -> None:
    assert strongly_connected(project_graph()) == []


def test_no_cycle_between_the_domains_sub_packages() -> None:
    assert sub_package_cycles(project_graph()) == []


def test_a_node_never_imports_another_node() -> None:
    wrong = [
        f"{m} imports {t}"
        for m, imported in project_graph().items()
        if m.startswith("nodes.")
        for t in imported
        if t.startswith("nodes.")
    ]
    assert wrong == []


def test_the_domain_imports_neither_langgraph_nor_a_driver() -> None:
    wrong = []
    for path in source_files():
        module = module_name(path)
        if layer_of(module) not in ("core", "domain"):
            continue
        for name in imports_of(path):
            top = name.split(".")[0]
            if top == "langgraph" or top in DRIVERS:
                wrong.append(f"{module} imports {name}")
    assert wrong == []


def test_the_public_fake_needs_only_langchain_core_and_pydantic() -> None:
    """Users import `memory_graph_agent.testing` in their own tests: it starts nothing."""
    path = ROOT / P / "testing.py"
    tops = {name.split(".")[0] for name in imports_of(path)}
    allowed = {"langchain_core", "pydantic", "__future__", *sys.stdlib_module_names}
    assert tops - allowed == set()


def test_bench_and_the_package_never_import_tests() -> None:
    wrong = []
    for path in sorted((ROOT / "bench").rglob("*.py")) + source_files():
        for name in imports_of(path):
            if name == "tests" or name.startswith("tests."):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


def test_only_storage_knows_redis_keys_and_sql() -> None:
    """Key names are built by `storage.keys`; SQL text lives in storage modules."""
    wrong = []
    for path in source_files():
        module = module_name(path)
        if layer_of(module) in ("storage",) or module.startswith(f"{P}.local"):
            continue
        text = path.read_text()
        for needle in KEY_AND_SQL_MARKERS:
            if needle in text:
                wrong.append(f"{module}: {needle.strip()}")
    assert wrong == []


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_source_files_stay_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    limit = 80 if path.parent.name == "nodes" else 400
    assert lines <= limit, f"{path.relative_to(ROOT)} has {lines} lines (limit {limit})"


def test_the_package_itself_is_the_public_front_door_and_its_sub_packages_keep_their_layers():
    assert layer_of(P) == "apps"
    assert layer_of(f"{P}.turn.admission") == "domain"
    assert layer_of(f"{P}.providers.tiered") == "domain"
    assert layer_of(f"{P}.storage.window") == "storage"


# ---------------------------------------------------------------- tests of the checks


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


UPWARD_TYPE_CHECKING = """from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph.context import Context


def recall(ctx: Context) -> None: ...
"""


def test_the_checks_see_an_upward_import_made_only_for_type_checking(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "graph/__init__.py": "",
            "graph/context.py": "class Context: ...\n",
            f"{P}/__init__.py": "",
            f"{P}/recall/__init__.py": "",
            f"{P}/recall/retrieval.py": UPWARD_TYPE_CHECKING,
        },
    )
    graph = project_graph(root, ("graph", P))
    assert graph[f"{P}.recall.retrieval"] == {"graph.context"}
    assert upward_imports(graph) == [
        f"{P}.recall.retrieval (domain) imports graph.context (declarations)"
    ]
    assert imports_of_the_wiring_below_it(graph) == [f"{P}.recall.retrieval imports graph.context"]


def test_the_checks_see_a_cycle_between_sub_packages(tmp_path: Path) -> None:
    """recall -> turn at module level, turn -> recall lazily: no module cycle, but one of
    sub-packages."""
    root = _tree(
        tmp_path,
        {
            f"{P}/__init__.py": "",
            f"{P}/recall/__init__.py": "",
            f"{P}/recall/ranking.py": f"from {P}.turn.budgets import cap\n",
            f"{P}/recall/weights.py": "W = 1\n",
            f"{P}/turn/__init__.py": "",
            f"{P}/turn/budgets.py": "cap = 1\n",
            f"{P}/turn/closing.py": f"def end():\n    from {P}.recall.weights import W\n",
            f"{P}/core/__init__.py": "",
            f"{P}/core/ids.py": "X = 1\n",
        },
    )
    graph = project_graph(root, (P,))
    assert strongly_connected(graph) == []
    assert sub_package_cycles(graph) == [[f"{P}.recall", f"{P}.turn"]]
    # moving what both share down (into core) breaks it
    (root / P / "turn" / "closing.py").write_text(f"from {P}.core.ids import X\n")
    assert sub_package_cycles(project_graph(root, (P,))) == []
