"""The package's import graph (every ``import`` statement, those inside functions too):
imports point down the layers of docs/architecture.md, the graph type sits below
hetgraph.io, and there is no cycle."""

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


def test_no_import_cycle():
    assert cycles(import_graph()) == []


# docs/architecture.md's layers, top first: a module imports only from its own layer or
# those below it
LAYERS = (
    ("entry points", ("hetgraph", "hetgraph.__main__", "hetgraph.cli", "hetgraph.nx_backend")),
    ("algorithms", ("hetgraph.algorithms",)),
    ("scheduler", ("hetgraph.scheduler",)),
    ("cluster", ("hetgraph.cluster", "hetgraph.dashboard")),
    ("engines", ("hetgraph.engines",)),
    ("kernels", ("hetgraph.kernels",)),
    ("readers and store", ("hetgraph.io", "hetgraph.datasets")),
    ("graph", ("hetgraph.graph", "hetgraph.csr", "hetgraph.order", "hetgraph.partition",
               "hetgraph.coloring",
               "hetgraph.program", "hetgraph.result", "hetgraph.events", "hetgraph.plot")),
    ("base", ("hetgraph.errors", "hetgraph.registry", "hetgraph.tuning", "hetgraph.version",
              "hetgraph.cachedir", "hetgraph.threadcount")),
)


def layer_of(module):
    """Index in LAYERS of ``module``: the layer of its longest matching prefix."""
    matches = [(len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS)
               for prefix in prefixes if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer of docs/architecture.md"
    return max(matches)[1]


def test_imports_point_down_the_layers():
    upward = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
              for m, deps in sorted(import_graph().items()) for d in sorted(deps)
              if layer_of(d) < layer_of(m)]
    assert upward == []


def test_the_layer_check_sees_an_upward_import():
    assert layer_of("hetgraph.engines.cpu") > layer_of("hetgraph.scheduler.tasks")
    assert layer_of("hetgraph") < layer_of("hetgraph.io.store")


def test_the_import_graph_sees_lazy_imports():
    edges = import_graph()
    assert "hetgraph.io.readers" in edges["hetgraph.datasets"]  # (inside load)
    assert "hetgraph.io.store" in edges["hetgraph.algorithms.sssp"]
