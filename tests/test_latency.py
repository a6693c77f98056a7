"""What a call keeps of a graph between calls (issue 49) and the lazy package import:
derived arrays built once per graph and parameters, never shared between graphs."""

import importlib
import pathlib
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

import hetgraph as hg

# (the package's names pagerank and sssp are the functions: the modules by their path)
pagerank_module = importlib.import_module("hetgraph.algorithms.pagerank")
sssp_module = importlib.import_module("hetgraph.algorithms.sssp")


@pytest.fixture
def counted(monkeypatch):
    """{function name: calls} of the algorithms' per-graph builders, counted."""
    calls = {}

    def counting(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counting(pagerank_module, "_derived")
    counting(sssp_module, "_mean_width")
    return calls


def _nx_pagerank(graph):
    edges = zip(graph.label_of(graph.in_indices).tolist(),
                graph.label_of(np.repeat(np.arange(graph.num_vertices),
                                         np.diff(graph.in_indptr))).tolist())
    nxg = nx.DiGraph()
    nxg.add_nodes_from(graph.label_of(np.arange(graph.num_vertices)).tolist())
    nxg.add_edges_from(edges)
    return nx.pagerank(nxg, tol=1e-10)


def test_pagerank_builds_its_graph_arrays_once(counted):
    graph = hg.generate.rmat(9, 8, seed=3)
    first = hg.pagerank(graph, devices="cpu")
    second = hg.pagerank(graph, devices="cpu")
    assert counted["_derived"] == 1
    np.testing.assert_array_equal(first.values, second.values)
    hg.pagerank(graph, damping=0.5, devices="cpu")  # other parameters: their own arrays
    hg.pagerank(graph, damping=0.5, devices="cpu")
    assert counted["_derived"] == 2
    hg.pagerank(graph, dtype=np.float32, devices="cpu")  # (the last parameters' only)
    hg.pagerank(graph, devices="cpu")
    assert counted["_derived"] == 4


def test_pagerank_arrays_are_not_shared_between_graphs(counted):
    graph = hg.generate.rmat(9, 8, seed=3)
    other = hg.generate.rmat(9, 8, seed=4)
    reordered = graph.reorder("degree")
    expected = _nx_pagerank(graph)
    for g in (graph, other, reordered, graph, reordered):
        got = hg.pagerank(g, tol=1e-10, devices="cpu")
        answer = expected if g is not other else _nx_pagerank(other)
        labels = g.label_of(np.arange(g.num_vertices)).tolist()
        assert max(abs(answer[v] - x) for v, x in zip(labels, got.values)) < 1e-8
    assert counted["_derived"] == 3


def test_pagerank_leaves_the_kept_arrays_unchanged():
    graph = hg.generate.rmat(8, 8, seed=5)
    program = pagerank_module.PageRank()
    program.init(graph)
    scale, rank_of = program._scale.copy(), program._rank_of.copy()
    hg.pagerank(graph, devices="cpu")  # finalize divides the run's values by aux
    again = pagerank_module.PageRank()
    again.init(graph)
    assert again._scale is program._scale
    np.testing.assert_array_equal(again._scale, scale)
    np.testing.assert_array_equal(again._rank_of, rank_of)


def test_sssp_bucket_width_is_kept_per_graph(counted):
    graph = hg.generate.rmat(9, 8, seed=3, weights=(1.0, 3.0))
    other = hg.generate.rmat(9, 8, seed=3, weights=(10.0, 30.0))
    widths = [sssp_module.ShortestPaths(0).bucket_width(g) for g in (graph, other, graph)]
    assert counted["_mean_width"] == 2
    assert widths[0] == widths[2] and widths[1] > 5 * widths[0]
    first = hg.sssp(graph, graph.label_of(0), devices="cpu")
    second = hg.sssp(graph, graph.label_of(0), devices="cpu")
    np.testing.assert_array_equal(first.values, second.values)
    assert counted["_mean_width"] == 2


def test_import_loads_no_heavy_module():
    """``import hetgraph`` leaves Numba, pandas and Dask to the first use of a name that
    needs them; every public name is still there."""
    check = ("import sys, hetgraph as hg; "
             "heavy = [m for m in ('numba', 'pandas', 'distributed', 'dask') "
             "if m in sys.modules]; assert not heavy, heavy; "
             "assert hg.pagerank.__module__ == 'hetgraph.algorithms.pagerank'; "
             "assert 'read_mtx' in hg.__all__ and 'sssp' in dir(hg); "
             "assert hg.Graph.__name__ == 'Graph' and hg.generate.grid; "
             "assert hg.cluster.gpu_count and hg.io.detect_format")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          cwd=pathlib.Path(hg.__file__).parents[1], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        hg.no_such_name
