"""The floors of the house hold: imports only point down, and no modules import each other in a circle.

Floors, from the ground up: ``plant_models`` (physics, ports, configs) ->
``io_adapters`` (transports) -> ``server`` (loop, runtime, CLI).  A module
may import from its own floor or a lower one, never a higher one; this
counts every import statement, also those inside functions, which Python
only runs when the function is called and which therefore hide from a
reader of the file's head.  Within and across floors the import graph has
no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("plant_models", "io_adapters", "server")  # ground floor first


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path, packages=FLOORS) -> dict[str, dict[str, int]]:
    """module -> {imported module of ``packages``: line of the first such import}, every import statement."""
    files = {module_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # ``from pkg import sub`` imports the module pkg.sub when there is one
                targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in files else stem for a in node.names]
            for t in targets:
                while t and t not in files and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in files and t != mod:
                    edges.setdefault(t, node.lineno)
        graph[mod] = edges
    return graph


def upward_imports(graph: dict[str, dict[str, int]], floors=FLOORS) -> list[str]:
    """Imports from a lower floor to a higher one, as 'module:line -> module'."""
    level = {f: k for k, f in enumerate(floors)}
    out = []
    for mod, edges in graph.items():
        for target, line in edges.items():
            if level[target.split(".")[0]] > level[mod.split(".")[0]]:
                out.append(f"{mod}:{line} -> {target}")
    return sorted(out)


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
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
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# -- the project ------------------------------------------------------------------
GRAPH = import_graph(ROOT)


def test_the_scan_sees_the_project():
    assert "plant_models.core.handle" in GRAPH and "server.loop" in GRAPH and "io_adapters.base" in GRAPH
    assert "plant_models.plant" in GRAPH["io_adapters.base"]


def test_no_import_runs_back_up_a_floor():
    assert upward_imports(GRAPH) == []


def test_no_modules_import_each_other_in_a_circle():
    assert cycles(GRAPH) == []


# -- the checks catch what they are for -----------------------------------------------
def _plant(tmp_path: Path, files: dict[str, str]) -> dict[str, dict[str, int]]:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for pkg in FLOORS:
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return import_graph(tmp_path)


def test_a_planted_function_local_upward_import_is_reported(tmp_path):
    graph = _plant(tmp_path, {
        "plant_models/plant.py": "def tunables():\n    from server.params import Param\n    return Param\n",
        "server/params.py": "from plant_models.plant import tunables\nParam = object\n",
        "io_adapters/base.py": "import server.params as p\n",
    })
    assert upward_imports(graph) == ["io_adapters.base:1 -> server.params", "plant_models.plant:2 -> server.params"]
    assert cycles(graph) == [["plant_models.plant", "server.params"]]


def test_a_planted_relative_import_cycle_is_reported(tmp_path):
    graph = _plant(tmp_path, {
        "server/loop.py": "from .control import ControlHandler\n",
        "server/control.py": "def handle():\n    from . import loop\n",
        "server/status.py": "from . import loop\n",
    })
    assert upward_imports(graph) == []
    assert cycles(graph) == [["server.control", "server.loop"]]
