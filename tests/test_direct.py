"""The direct path (issue 49): a built-in algorithm's whole run as one compiled call on
a small graph in memory, against SciPy and NetworkX (the bundled graphs, random graphs
by hypothesis with isolated vertices, self loops, unreachable sources, weights or
none, directed or not) and against the dispatcher's own run of the same call; the
options only the dispatcher honours still go to it; the compiled code loads from the
compile cache in a new process."""

import os
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.result import HISTORY_COLUMNS
from hetgraph.scheduler import direct
from conftest import examples

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dispatcher_run(monkeypatch, call):
    """``call()`` with the direct path off: the dispatcher's run."""
    with monkeypatch.context() as patch:
        patch.setattr(tuning, "DIRECT_ARCS", -1)
        patch.setattr(tuning, "DIRECT_LEVELS_ARCS", -1)
        patch.setattr(tuning, "DIRECT_PAGERANK_ARCS", -1)
        return call()


def scipy_distances(graph, source, unweighted=False):
    matrix = graph.to_scipy()
    if unweighted:
        matrix.data[:] = 1.0
    return csgraph.dijkstra(matrix, indices=source)


def check_levels(graph, source, values):
    expected = scipy_distances(graph, source, unweighted=True)
    assert values.dtype == np.int32
    np.testing.assert_array_equal(values, np.where(np.isinf(expected), -1, expected))


def check_components(graph, values):
    count, ref = csgraph.connected_components(graph.to_scipy(), directed=True,
                                              connection="weak")
    n = graph.num_vertices
    smallest = np.full(count, n, np.int64)
    np.minimum.at(smallest, ref, np.arange(n))
    assert values.dtype == np.int32
    np.testing.assert_array_equal(values, smallest[ref])


def check_history(result, mode):
    """A direct run's history: a row per iteration, on the CPU, every column."""
    history = result.history
    assert list(history.columns) == list(HISTORY_COLUMNS)
    assert len(history) == result.iterations
    assert (history["placement"] == "cpu").all() and (history["mode"] == mode).all()
    assert (history["seconds"] >= history["cpu_seconds"]).all()
    assert (history["cpu_seconds"] >= 0).all() and (history["overhead"] >= 0).all()
    assert result.seconds == pytest.approx(history["seconds"].sum())
    np.testing.assert_array_equal(history["cpu_edges"], history["edges"])


@pytest.fixture(scope="module", params=["wiki-vote", "power"])
def bundled(request):
    graph = hg.datasets.load(request.param)
    source = 30 if request.param == "wiki-vote" else int(graph.label_of(0))
    return graph, source


def test_bundled_bfs_and_sssp(bundled, monkeypatch):
    graph, label = bundled
    source = int(graph.id_of(label))
    levels = hg.bfs(graph, label)
    assert levels.program == "BreadthFirst" and levels.converged
    check_levels(graph, source, levels.values)
    check_history(levels, "push")
    assert levels.history["active"].sum() == (levels.values >= 0).sum()
    engine = dispatcher_run(monkeypatch, lambda: hg.bfs(graph, label))
    assert engine.history["mode"].isin(["pull", "notify-pull", "push"]).all()
    np.testing.assert_array_equal(levels.values, engine.values)
    assert levels.iterations == engine.iterations
    dist = hg.sssp(graph, label)
    np.testing.assert_array_equal(dist.values, scipy_distances(graph, source))
    np.testing.assert_array_equal(dist.values,
                                  dispatcher_run(monkeypatch, lambda: hg.sssp(graph, label)).values)


def test_bundled_components_and_pagerank(bundled, monkeypatch):
    graph, _ = bundled
    labels = hg.connected_components(graph)
    assert (labels.program, labels.mode, labels.iterations) == ("BFS", "direct", 1)
    check_components(graph, labels.values)
    check_history(labels, "traverse")
    ranks = hg.pagerank(graph)
    check_history(ranks, "pull")
    engine = dispatcher_run(monkeypatch, lambda: hg.pagerank(graph))
    assert (ranks.iterations, ranks.converged) == (engine.iterations, engine.converged)
    np.testing.assert_allclose(ranks.values, engine.values, rtol=0, atol=1e-15)
    nxg = nx.DiGraph() if graph.directed else nx.Graph()
    nxg.add_nodes_from(range(graph.num_vertices))
    src, dst, _ = graph.edges()
    nxg.add_edges_from(zip(src.tolist(), dst.tolist()))
    expected = nx.pagerank(nxg)
    assert max(abs(ranks.values[v] - expected[v]) for v in expected) < 1e-6


@st.composite
def small_graphs(draw):
    """(graph, source): isolated vertices, self loops, duplicate edges, sources that
    reach nothing; weights or none, directed or not."""
    n = draw(st.integers(1, 30))
    m = draw(st.integers(0, 3 * n))
    ids = st.lists(st.integers(0, n - 1), min_size=m, max_size=m)
    src, dst = np.array(draw(ids), np.int64), np.array(draw(ids), np.int64)
    weights = None
    if draw(st.booleans()):
        weights = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]),
                                         min_size=m, max_size=m)), np.float64)
    graph = hg.from_arrays(src, dst, weights, num_vertices=n, directed=draw(st.booleans()))
    return graph, draw(st.integers(0, n - 1))


@examples(120)
@given(small_graphs())
def test_random_graphs_against_scipy(case):
    graph, source = case
    check_levels(graph, source, hg.bfs(graph, source).values)
    np.testing.assert_array_equal(hg.sssp(graph, source).values,
                                  scipy_distances(graph, source))
    dist32 = hg.sssp(graph, source, dtype=np.float32).values
    assert dist32.dtype == np.float32
    np.testing.assert_allclose(dist32, scipy_distances(graph, source), rtol=1e-6)
    check_components(graph, hg.connected_components(graph).values)


@examples(120)
@given(small_graphs(), st.sampled_from([0, 2, 64]))
def test_far_levels_against_scipy(case, ahead):
    """BFS levels and unweighted SSSP by the kernel for large graphs of hostile order
    (bit marks, rows prefetched ``ahead``, levels written from the queue)."""
    graph, source = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "DIRECT_CACHED_VERTICES", -1)
        patch.setattr(tuning, "DIRECT_HOSTILE_SPAN", -1)
        patch.setattr(tuning, "DIRECT_AHEAD", ahead)
        levels = direct.levels(graph, source, np.empty(graph.num_vertices, np.int32), -1,
                               "BreadthFirst", 0.0)
        dist = direct.levels(graph, source, np.empty(graph.num_vertices), np.inf, "SSSP",
                             0.0)
    check_levels(graph, source, levels.values)
    np.testing.assert_array_equal(dist.values, scipy_distances(graph, source, True))
    assert levels.history["edges"].sum() == graph.out_degree()[levels.values >= 0].sum()


def test_a_shuffled_grid_takes_the_far_levels(monkeypatch):
    grid = hg.generate.grid(400, 400, weights=None)  # (above DIRECT_CACHED_VERTICES)
    graph = hg.order.renumber(grid, np.random.default_rng(3).permutation(160_000))
    assert direct._scattered(graph) and not direct._scattered(grid)
    calls = []
    far = direct._kernels().far_levels
    monkeypatch.setattr(direct._kernels(), "far_levels", lambda *a: calls.append(1) or far(*a))
    for g in (graph, grid):
        result = hg.bfs(g, 7)  # (a label: the renumbered grid keeps the grid's)
        check_levels(g, int(g.id_of(7)), result.values)
        assert isinstance(result, direct._DirectResult)
    assert calls == [1]


@examples(60)
@given(small_graphs(), st.sampled_from([(0.85, 1e-6, 100), (0.5, None, 7), (1.0, 1e-3, 0),
                                        (0.85, 1e-12, 3)]))
def test_random_graphs_pagerank_as_the_dispatcher(case, parameters):
    graph, _ = case
    damping, tol, most = parameters
    for weighted in (True, False):
        ranks = hg.pagerank(graph, damping, most, tol, weighted=weighted)
        assert ranks.program == "PageRank" and len(ranks.history) == ranks.iterations
        tuning_before = tuning.DIRECT_PAGERANK_ARCS
        tuning.DIRECT_PAGERANK_ARCS = -1
        try:
            engine = hg.pagerank(graph, damping, most, tol, weighted=weighted)
        finally:
            tuning.DIRECT_PAGERANK_ARCS = tuning_before
        assert not isinstance(engine, direct._DirectResult)
        assert (ranks.iterations, ranks.converged) == (engine.iterations, engine.converged)
        np.testing.assert_allclose(ranks.values, engine.values, rtol=1e-12, atol=1e-15)


def test_levels_deeper_than_the_first_table():
    """A path of 200 vertices: 200 levels, more rows than the kernel's first table."""
    n = 200
    path = hg.from_arrays(np.arange(n - 1), np.arange(1, n), num_vertices=n)
    result = hg.bfs(path, 0)
    np.testing.assert_array_equal(result.values, np.arange(n))
    assert result.iterations == n and list(result.history["activated"]) == [1] * (n - 1) + [0]


# options only the dispatcher honours: each must take the normal way
FALLBACK = [
    ("bfs", {"max_iterations": 3}), ("bfs", {"mode": "async"}), ("bfs", {"cpu_mode": "pull"}),
    ("bfs", {"threads": 1}), ("bfs", {"devices": "hybrid"}), ("sssp", {"max_iterations": 50}),
    ("sssp", {"mode": "colored"}), ("pagerank", {"dtype": np.float32}),
    ("pagerank", {"nstart": {0: 1.0}}), ("pagerank", {"personalization": {1: 1.0}}),
    ("pagerank", {"mode": "async"}), ("pagerank", {"max_iterations": 2.5}),
    ("cc", {"threads": 1}), ("cc", {"algorithm": "union-find"}),
    ("cc", {"algorithm": "label-propagation"}), ("cc", {"max_iterations": 500}),
]


@pytest.mark.parametrize("name,options", FALLBACK)
def test_dispatcher_options_go_the_normal_way(name, options, monkeypatch):
    graph = hg.generate.grid(6, 6)
    calls = []
    for kernel in ("levels", "shortest_paths", "pagerank", "components"):
        monkeypatch.setattr(direct, kernel, lambda *a, **k: calls.append(a))
    call = {"bfs": hg.bfs, "sssp": hg.sssp}.get(name)
    try:
        if call is not None:
            result = call(graph, 0, **options)
        elif name == "pagerank":
            result = hg.pagerank(graph, **options)
        else:
            result = hg.connected_components(graph, **options)
    except hg.HetGraphError:  # (refused by the dispatcher's own checks)
        result = None
    assert calls == []
    if result is not None:
        assert result.program not in ("BFS",)


def test_neutral_options_take_the_direct_path(monkeypatch):
    graph = hg.generate.grid(6, 6)
    assert direct.applies(graph, {"devices": "cpu", "mode": "sync", "checkpoint": None,
                                  "progress": False})
    assert not direct.applies(graph, {"progress": True})  # (the dispatcher's bar)
    assert not direct.applies(graph, {"colour": "red"})
    monkeypatch.setattr(tuning, "DIRECT_ARCS", graph.num_arcs - 1)
    assert not direct.applies(graph, {})


def test_a_cluster_context_goes_the_normal_way(monkeypatch):
    from hetgraph import cluster

    monkeypatch.setattr(cluster, "_CURRENT", [object()])
    assert not direct.applies(hg.generate.grid(4, 4), {})


def test_store_goes_the_normal_way(tmp_path):
    graph = hg.generate.grid(5, 5)
    store = graph.save(tmp_path / "g")
    result = hg.bfs(store, 0, host_budget=1 << 12)
    assert result.history["mode"].isin(["pull", "notify-pull", "push"]).all()
    check_levels(graph, 0, result.values)


def test_bad_inputs_still_refused():
    graph = hg.generate.grid(4, 4)
    with pytest.raises(hg.GraphError, match="source"):
        hg.bfs(graph, 99)
    with pytest.raises(hg.GraphError, match="threads=0"):
        hg.connected_components(graph, threads=0)
    with pytest.raises(hg.GraphError, match="max_iterations"):
        hg.pagerank(graph, max_iterations=-1)


def test_small_id_matches_id_of():
    graph = hg.from_arrays([0, 1], [1, 2], labels=np.array([10, 20, 30]))
    assert direct.small_id(graph, 20) == 1 == graph.id_of(20)
    assert direct.small_id(graph, 11) is None
    assert direct.small_id(graph, np.int64(30)) == 2
    assert direct.small_id(graph, True) is None and direct.small_id(graph, 20.0) is None
    with pytest.raises(hg.GraphError, match="not in the graph"):
        hg.bfs(graph, 11)


def test_the_kept_checks_take_the_same_calls(monkeypatch):
    """small_levels, the BFS's checks kept per graph, takes what applies takes and
    leaves every other call (and label) to the normal way's own checks."""
    from hetgraph import cluster

    graph = hg.generate.grid(5, 5)

    def levels(label, options=None):
        return direct.small_levels(graph, label, options or {}, np.int32, -1, "BFS", 0.0)

    check_levels(graph, 3, levels(3).values)
    check_levels(graph, 4, levels(np.int64(4)).values)
    for label in (True, 3.0, 25, -1, None, "3"):
        assert levels(label) is None
    assert levels(3, {"threads": 1}) is None and levels(3, {"devices": "cpu"}) is not None
    monkeypatch.setattr(cluster, "_CURRENT", [object()])
    assert levels(3) is None
    monkeypatch.setattr(cluster, "_CURRENT", [])
    monkeypatch.setattr(tuning, "DIRECT_ARCS", graph.num_arcs - 1)
    assert levels(3) is None
    with pytest.raises(hg.GraphError, match="source"):
        hg.bfs(graph, 25)


def test_bfs_and_pagerank_take_the_direct_path_on_larger_graphs(monkeypatch):
    """A BFS runs direct up to tuning.DIRECT_LEVELS_ARCS arcs, PageRank up to
    tuning.DIRECT_PAGERANK_ARCS, the others up to tuning.DIRECT_ARCS: a grid above
    the last, within the first two."""
    graph = hg.generate.grid(12, 12)
    monkeypatch.setattr(tuning, "DIRECT_ARCS", graph.num_arcs - 1)
    monkeypatch.setattr(tuning, "DIRECT_LEVELS_ARCS", graph.num_arcs)
    monkeypatch.setattr(tuning, "DIRECT_PAGERANK_ARCS", graph.num_arcs)
    assert direct.applies(graph, {}, tuning.DIRECT_LEVELS_ARCS)
    assert not direct.applies(graph, {})
    result, ranks = hg.bfs(graph, 5), hg.pagerank(graph)
    check_levels(graph, 5, result.values)
    check_history(result, "push")
    check_history(ranks, "pull")
    assert isinstance(result, direct._DirectResult) and isinstance(ranks, direct._DirectResult)
    assert not isinstance(hg.connected_components(graph), direct._DirectResult)
    monkeypatch.setattr(tuning, "DIRECT_LEVELS_ARCS", graph.num_arcs - 1)
    monkeypatch.setattr(tuning, "DIRECT_PAGERANK_ARCS", graph.num_arcs - 1)
    engine, engine_ranks = hg.bfs(graph, 5), hg.pagerank(graph)
    assert not isinstance(engine, direct._DirectResult)
    assert not isinstance(engine_ranks, direct._DirectResult)
    np.testing.assert_array_equal(engine.values, result.values)
    np.testing.assert_allclose(engine_ranks.values, ranks.values, rtol=1e-12)


def test_a_larger_graph_goes_the_normal_way_where_a_gpu_can_run(monkeypatch):
    """Above tuning.SMALL_ARCS, devices="auto" may place a run on a GPU: the direct
    path takes it only where none can run, or with devices="cpu"."""
    from hetgraph.kernels.gpu import device

    graph = hg.generate.grid(12, 12)
    most = graph.num_arcs
    monkeypatch.setattr(tuning, "SMALL_ARCS", graph.num_arcs - 1)
    monkeypatch.setattr(device, "available", lambda: False)
    assert direct.applies(graph, {}, most)
    monkeypatch.setattr(device, "available", lambda: True)
    assert not direct.applies(graph, {}, most)
    assert not direct.applies(graph, {"devices": "auto"}, most)
    assert direct.applies(graph, {"devices": "cpu"}, most)
    monkeypatch.setattr(tuning, "SMALL_ARCS", graph.num_arcs)
    assert direct.applies(graph, {}, most)


def test_a_kept_result_keeps_its_history():
    """Calls reuse the kernel's work array only when no Result holds it: a Result
    read after later calls from other sources still has its own levels."""
    graph = hg.generate.grid(9, 3)
    first = hg.bfs(graph, 0)
    later = [hg.bfs(graph, source) for source in (13, 26)]
    del later
    hg.bfs(graph, 13)
    reference = hg.bfs(hg.generate.grid(9, 3), 0)  # (another graph: its own arrays)
    columns = ["active", "edges", "activated"]
    assert first.history[columns].equals(reference.history[columns])
    check_levels(graph, 0, first.values)


COLD = """
import hetgraph as hg
from hetgraph.kernels.cpu import direct
g = hg.datasets.load("power")
hg.bfs(g, 1); hg.sssp(g, 1); hg.pagerank(g); hg.connected_components(g)
print(sum(c.loaded for c in direct.CACHES.values()), sum(c.saved for c in direct.CACHES.values()))
"""


def test_a_new_process_loads_the_compiled_code(tmp_path):
    env = dict(os.environ, HETGRAPH_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def counts():
        done = subprocess.run([sys.executable, "-c", COLD], env=env, capture_output=True,
                              text=True, check=True, cwd=ROOT)
        return tuple(int(x) for x in done.stdout.split()[-2:])

    loaded, saved = counts()
    assert loaded == 0 and saved >= 4
    assert counts() == (saved, 0)


def test_the_larger_bounds_shrink_with_the_threads(monkeypatch):
    """BFS's and PageRank's bounds were measured against the engine on two threads: with
    sixteen the engine's passes are shorter, and a graph of a few million arcs goes to
    it; never below DIRECT_ARCS."""
    import numba

    from hetgraph import tuning
    from hetgraph.scheduler import direct

    g = hg.generate.rmat(17, edge_factor=8, seed=4)  # (about 1M arcs)
    assert tuning.DIRECT_ARCS < g.num_arcs <= tuning.DIRECT_LEVELS_ARCS
    monkeypatch.setattr(direct, "_gpu_available", lambda: False)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    assert direct.applies(g, {}, tuning.DIRECT_LEVELS_ARCS)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 16)
    assert not direct.applies(g, {}, tuning.DIRECT_LEVELS_ARCS)
    small = hg.generate.rmat(12, edge_factor=8, seed=4)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1024)
    assert direct.applies(small, {}, tuning.DIRECT_PAGERANK_ARCS)  # (DIRECT_ARCS's)
