"""What runs keep on a graph (``Graph.kept``, its partitions, its undirected and
reordered graphs) travels with it when it is pickled to worker processes: after any
kind of call it must still pickle with the standard pickle and carry nothing that
belongs to one process (a program, a class, a function, a compiled dispatcher, a
lock, a thread)."""

import pickle
import threading
import types

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.program import VertexProgram


_LOCKS = (type(threading.Lock()), type(threading.RLock()))


def _process_objects(obj, path="graph", seen=None):
    """The paths (``path`` first) to what in ``obj`` belongs to one process."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (np.ndarray, str, bytes, int, float)):
        return []
    seen.add(id(obj))
    kind = type(obj)
    if isinstance(obj, (VertexProgram, type, types.FunctionType, types.MethodType,
                        threading.Thread, *_LOCKS)) or kind.__module__.startswith("numba"):
        return [f"{path}: {kind.__module__}.{kind.__qualname__}"]
    if isinstance(obj, dict):
        items = [(f"{path} key {k!r:.60}", k) for k in obj] + \
            [(f"{path}[{k!r:.60}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    else:
        items = [(f"{path}.{name}", value) for name, value in getattr(obj, "__dict__",
                                                                      {}).items()]
        items += [(f"{path}.{name}", getattr(obj, name)) for name in
                  getattr(kind, "__slots__", ()) if hasattr(obj, name)]
    return [found for where, value in items for found in
            _process_objects(value, where, seen)]


def _calls(graph):
    """(name, call) of every kind of call on ``graph`` (label 0 and 1 are vertices)."""
    return [
        ("pagerank", lambda: hg.pagerank(graph)),
        ("pagerank float32", lambda: hg.pagerank(graph, dtype=np.float32)),
        ("pagerank personalized", lambda: hg.pagerank(graph, personalization={0: 1.0})),
        ("pagerank cpu", lambda: hg.pagerank(graph, devices="cpu", tol=None,
                                             max_iterations=5)),
        ("pagerank async", lambda: hg.pagerank(graph, mode="async")),
        ("pagerank colored", lambda: hg.pagerank(graph, mode="colored")),
        ("sssp", lambda: hg.sssp(graph, 0)),
        ("sssp cpu async", lambda: hg.sssp(graph, 0, devices="cpu", mode="async")),
        ("sssp colored", lambda: hg.sssp(graph, 0, mode="colored")),
        ("bfs", lambda: hg.bfs(graph, 0)),
        ("bfs cpu", lambda: hg.bfs(graph, 0, devices="cpu", max_iterations=50)),
        ("components", lambda: hg.connected_components(graph)),
        ("label propagation", lambda: hg.connected_components(
            graph, algorithm="label-propagation", mode="colored")),
        ("hits", lambda: hg.hits(graph)),
        ("katz", lambda: hg.katz_centrality(graph, alpha=0.01)),
        ("eigenvector", lambda: hg.eigenvector_centrality(graph, tol=1e-3)),
        ("nn", lambda: hg.nn(graph)),
        ("heat", lambda: hg.heat(graph, [0])),
        ("circuit", lambda: hg.circuit(graph, {0: 1.0, 1: 0.0})),
        ("a user program", lambda: hg.run(_Reach(), graph, devices="cpu")),
        ("reordered", lambda: hg.pagerank(graph.reorder("color"), mode="colored")),
    ]


class _Reach(BreadthFirst):
    """BFS levels from vertex 0, a user's program (of this test module; its functions
    are BFS's: compiled once for both)."""

    def __init__(self):
        super().__init__(0)


def _check_pickles(graph, name):
    copy = pickle.loads(pickle.dumps(graph))
    assert _process_objects(copy) == [], f"after {name}"
    assert copy.token == graph.token and copy.num_arcs == graph.num_arcs


@pytest.mark.parametrize("directed", [True, False])
def test_a_graph_pickles_without_process_objects_after_every_kind_of_call(directed):
    graph = hg.generate.rmat(8, 8, seed=3, weights=(1.0, 4.0))
    graph = graph if directed else graph.to_undirected()
    for name, call in _calls(graph):
        call()
        _check_pickles(graph, name)


def test_a_graph_pickles_without_process_objects_after_auto_calls_on_a_gpu(monkeypatch):
    """Under "auto" with a GPU worker (an in-process stand-in: tests/gpu_standin.py) the
    dispatcher's calibration and placement run too."""
    import gpu_standin

    gpu_standin.in_process(monkeypatch)
    graph = hg.generate.rmat(8, 8, seed=3, weights=(1.0, 4.0))
    with hg.Cluster(gpus=1, dashboard_address=None):
        for name, call in (("pagerank", lambda: hg.pagerank(graph, tol=None)),
                           ("sssp", lambda: hg.sssp(graph, 0)),
                           ("a user program", lambda: hg.run(_Reach(), graph))):
            call()
            _check_pickles(graph, name)
