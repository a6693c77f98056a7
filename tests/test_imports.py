"""The package's import graph (every ``import`` statement, those inside functions too):
the graph type sits below hetgraph.io, and no cycle passes through either."""

import ast
import pathlib

import hetgraph

ROOT = pathlib.Path(hetgraph.__file__).parent


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph():
    """{module: set of hetgraph modules it imports}, read with ast from every file."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    edges = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files]
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(base)
        edges[name] = {m for m in found if m in files and m != name}
    return edges


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _is_io(module):
    return module == "hetgraph.io" or module.startswith("hetgraph.io.")


def test_the_graph_type_imports_nothing_of_io():
    edges = import_graph()
    assert not {m for m in edges["hetgraph.graph"] if _is_io(m)}


def test_no_cycle_passes_through_the_graph_type_or_io():
    """Cycles elsewhere in the package are printed (pytest -s), not failed on."""
    found = cycles(import_graph())
    for component in found:
        print("import cycle:", " -> ".join(component))
    assert not [c for c in found if "hetgraph.graph" in c or any(map(_is_io, c))]


def test_the_import_graph_sees_lazy_imports():
    edges = import_graph()
    assert "hetgraph.io.readers" in edges["hetgraph.datasets"]  # (inside load)
    assert "hetgraph.io.store" in edges["hetgraph.algorithms.sssp"]
