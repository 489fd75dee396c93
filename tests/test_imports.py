"""asyncpipe's imports point down: no circle between its subpackages and top-level modules (host, sim,
backend, spec, kernels, tune, model, pipeline, ptx, codegen, ...), counting module-level and
function-level imports alike (read with ``ast``, nothing imported); and the backend door holds: ``host/``
does not import ``sim/``, ``sim/`` does not import ``host/`` (DESIGN.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "asyncpipe"

# Circles known and being removed, each as "a -> b -> ... -> a" starting from its alphabetically first
# unit; add none without saying who removes it. The one first allowed here (kernels -> tune -> model,
# kernels/sgemm.py asking the tuner) was removed by 926e230 (asyncpipe.kernels.options, registered by
# asyncpipe.tune).
ALLOWED_CIRCLES: list[str] = []


def _module_name(path: Path, root: Path) -> tuple[str, str]:
    """(module, package its relative imports start from) of ``path`` in the package at ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def import_edges(root: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """``{(unit, unit imported): ["file:line", ...]}`` over every import statement in the package at
    ``root``, at any depth (functions, methods, ``if`` blocks). A unit is the first name below the package
    (``asyncpipe.host.launch`` -> ``host``); imports inside one unit and of the package itself are left out."""
    top = root.name
    units = {p.stem if p.suffix == ".py" else p.name for p in root.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module, package = _module_name(path, root)
        unit = module.split(".")[1] if "." in module else None
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [base] + [f"{base}.{a.name}" for a in node.names]   # "from . import x": x is a module
            else:
                continue
            for target in targets:
                parts = target.split(".")
                if parts[0] != top or len(parts) < 2 or parts[1] not in units:
                    continue
                if unit is not None and parts[1] != unit:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    sites = edges.setdefault((unit, parts[1]), [])
                    if where not in sites:
                        sites.append(where)
    return edges


def circles(edges) -> list[str]:
    """Every strongly connected group of units (Tarjan), each named by its shortest circle through its
    alphabetically first unit, ``"a -> b -> a"``, with the import sites of each step (and the group's
    other units)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    named = []
    for group in groups:
        start = min(group)
        paths, seen, path = [[start]], {start}, None   # breadth first: the shortest circle through start
        while path is None:
            nxt = []
            for p in paths:
                for w in sorted(graph[p[-1]] & group):
                    if w == start:
                        path = path or [*p, start]
                    elif w not in seen:
                        seen.add(w)
                        nxt.append([*p, w])
            paths = nxt
        steps = [f"{a} -> {b} ({', '.join(edges[(a, b)][:2])})" for a, b in zip(path, path[1:])]
        rest = sorted(group - set(path))
        named.append(" -> ".join(path) + ": " + "; ".join(steps)
                     + (f"; the same group also holds {', '.join(rest)}" if rest else ""))
    return sorted(named)


def test_no_import_circle_between_subpackages():
    found = circles(import_edges())
    unexpected = [c for c in found if c.split(":")[0] not in ALLOWED_CIRCLES]
    assert not unexpected, "import circles in asyncpipe:\n" + "\n".join(unexpected)


def test_the_backend_door_host_and_sim_do_not_import_each_other():
    edges = import_edges()
    for a, b in (("host", "sim"), ("sim", "host"), ("spec", "backend"), ("spec", "host"), ("spec", "sim")):
        assert (a, b) not in edges, f"{a}/ imports {b}/ at {edges[(a, b)]}"


def test_function_level_circles_are_found(tmp_path):
    """The reader sees an import inside a function, and names the circle with its sites."""
    pkg = tmp_path / "pkg"
    for sub, body in (("a", "from ..b import thing\n"),
                      ("b", "def f():\n    from ..c.inner import g\n    return g\n"),
                      ("c", "")):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text(body)
    (pkg / "__init__.py").write_text("")
    (pkg / "c" / "inner.py").write_text("def g():\n    from .. import a\n")
    (pkg / "d.py").write_text("from . import a\n")
    found = circles(import_edges(pkg))
    assert found == ["a -> b -> c -> a: a -> b (pkg/a/__init__.py:1); b -> c (pkg/b/__init__.py:2); "
                     "c -> a (pkg/c/inner.py:2)"], found
