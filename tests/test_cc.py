"""Connected components by union-find (Afforest on the CPU) against
scipy.sparse.csgraph.connected_components (connection="weak"): random graphs
(hypothesis), the bundled graphs, a grid with shuffled ids, RMAT, page stores read out
of core; the options, their errors, and label propagation kept beside it."""

import numba
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.cc import MinLabel, _blocks
from hetgraph.io.store import StoredGraph
from hetgraph.kernels.cpu import components
from hetgraph.order import median_arc_span, renumber
from hetgraph.scheduler import direct
from conftest import examples

pytestmark = pytest.mark.usefixtures("dispatcher_only")  # (union-find itself)


def reference(graph):
    """SciPy's weak components: (count, labels)."""
    return csgraph.connected_components(graph.to_scipy(), directed=True, connection="weak")


def check(graph, values):
    """``values`` are SciPy's partition, each component named by its smallest id."""
    count, ref = reference(graph)
    n = graph.num_vertices
    assert values.shape == (n,) and values.dtype == np.int32
    pairs = np.unique(np.stack([values, ref]), axis=1).shape[1] if n else 0
    assert pairs == len(np.unique(values)) == count
    smallest = np.full(count, n, np.int64)
    np.minimum.at(smallest, ref, np.arange(n))
    np.testing.assert_array_equal(values, smallest[ref])


def shuffled_grid(side, seed=1):
    grid = hg.generate.grid(side, side, weights=None)
    return renumber(grid, np.random.default_rng(seed).permutation(grid.num_vertices))


@st.composite
def edge_lists(draw):
    """(src, dst, n, directed): isolated vertices, self loops and duplicate edges
    (dedup=None keeps them), 0 and 1 vertices."""
    n = draw(st.integers(0, 40))
    m = draw(st.integers(0, 3 * n)) if n else 0
    ids = st.lists(st.integers(0, max(n - 1, 0)), min_size=m, max_size=m)
    return np.array(draw(ids), np.int64), np.array(draw(ids), np.int64), n, \
        draw(st.booleans())


@examples(150)
@given(edge_lists(), st.sampled_from([(0, False), (1, False), (2, False), (2, True),
                                      (3, True)]))
def test_afforest_equals_scipy_on_random_graphs(edges, variant):
    src, dst, n, directed = edges
    k, parallel = variant  # (every pass kind, serial and parallel, small graphs too)
    g = hg.from_arrays(src, dst, num_vertices=n, directed=directed, dedup=None)
    values = components.afforest(n, g.in_indptr, _blocks(g),
                                 out=(g.out_indptr, _blocks(g, out=True)) if directed else None,
                                 k=k, samples=16, parallel=parallel)
    check(g, values)


@examples(60)
@given(edge_lists())
def test_connected_components_equals_scipy_on_random_graphs(edges):
    src, dst, n, directed = edges
    g = hg.from_arrays(src, dst, num_vertices=n, directed=directed, dedup=None)
    result = hg.connected_components(g)
    check(g, result.values)
    assert result.converged and result.mode == "union-find" and result.graph is g


@examples(150)
@given(edge_lists(), st.sampled_from([(0, 0), (1 << 62, 0), (0, 2), (0, 5)]))
def test_traversal_equals_scipy_on_random_graphs(edges, variant):
    src, dst, n, directed = edges
    cached, ahead = variant  # (bit marks and prefetched rows at these sizes too, or not)
    g = hg.from_arrays(src, dst, num_vertices=n, directed=directed, dedup=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "DIRECT_CACHED_VERTICES", cached)
        patch.setattr(tuning, "DIRECT_HOSTILE_SPAN", -1)
        patch.setattr(tuning, "DIRECT_AHEAD", ahead)
        result = direct.components(g, np.int32, 0.0)
    check(g, result.values)
    assert result.program == "BFS" and result.history["edges"].sum() == \
        g.num_arcs * (2 if directed else 1)


def traversal_on(monkeypatch, span, cores):
    """Components of large graphs traverse where union-find would run on one thread
    (fewer Numba threads than ``cores``), the median arc spans more than ``span``."""
    monkeypatch.setattr(tuning, "CC_TRAVERSE_DEGREE", 5.0)
    monkeypatch.setattr(tuning, "DIRECT_HOSTILE_SPAN", span)
    monkeypatch.setattr(tuning, "CC_PARALLEL_MIN_THREADS", cores)
    monkeypatch.setattr(tuning, "DIRECT_CACHED_VERTICES", 1000)  # (bits and prefetch)


def test_hostile_sparse_graphs_traverse(monkeypatch):
    traversal_on(monkeypatch, 1000, 1 << 20)
    for g in (shuffled_grid(150), hg.generate.erdos_renyi(30_000, m=35_000, seed=4, directed=False),
              hg.generate.erdos_renyi(30_000, m=20_000, seed=5, directed=True)):
        assert median_arc_span(g) > 1000
        result = hg.connected_components(g)
        check(g, result.values)
        assert result.program == "BFS" and result.mode == "direct"
        assert list(result.history["mode"]) == ["traverse"]


def test_union_find_where_the_traversal_loses(monkeypatch):
    traversal_on(monkeypatch, 1000, 1 << 20)
    ordered = hg.generate.grid(150, 150, weights=None)  # (a median span of 1)
    dense = hg.generate.erdos_renyi(3000, p=0.01, seed=6)  # (60 arcs a vertex)
    for g in (ordered, dense):
        assert hg.connected_components(g).program == "Afforest"
    g = shuffled_grid(150)
    for options in ({"threads": 1}, {"devices": "cpu", "progress": True}):
        assert hg.connected_components(g, **options).program == "Afforest"
    traversal_on(monkeypatch, 1000, 1)  # threads enough for the threaded union-find
    assert hg.connected_components(g).program == "Afforest"
    traversal_on(monkeypatch, 1 << 40, 1 << 20)  # any order taken as friendly
    assert hg.connected_components(g).program == "Afforest"


@pytest.mark.parametrize("name", ["wiki-vote", "power"])
def test_bundled_graphs(name, monkeypatch):
    g = hg.datasets.load(name)
    check(g, hg.connected_components(g).values)
    monkeypatch.setattr(tuning, "CC_SAMPLE_ARCS", 0)  # sampled at this size too
    monkeypatch.setattr(tuning, "CC_PARALLEL_ARCS", 0)  # threaded at this size too
    result = hg.connected_components(g, threads=numba.config.NUMBA_NUM_THREADS)
    check(g, result.values)
    assert list(result.history["mode"]) == ["sample", "finish"]


@pytest.mark.parametrize("threads", [1, None, "all"])
def test_shuffled_grid_and_rmat(threads, monkeypatch):
    monkeypatch.setattr(tuning, "CC_PARALLEL_ARCS", 0)  # (all: the threaded passes)
    threads = numba.config.NUMBA_NUM_THREADS if threads == "all" else threads
    for g in (shuffled_grid(120), hg.generate.rmat(14, seed=3),
              hg.generate.rmat(13, seed=5, directed=False),
              hg.generate.erdos_renyi(5000, m=3000, seed=9)):  # many small components
        result = hg.connected_components(g, threads=threads, devices="cpu")
        check(g, result.values)
        assert result.program == "Afforest"
        history = result.history
        assert list(history["placement"]) == ["cpu"] * result.iterations
        assert (history["seconds"] >= 0).all() and history["edges"].sum() > 0


def test_finish_skips_the_large_component():
    g = shuffled_grid(200)  # one component: sampling joins most of it in one tree
    history = hg.connected_components(g, devices="cpu").history
    sampled, finished = history["edges"]
    assert sampled <= tuning.CC_SAMPLE_NEIGHBOURS * g.num_vertices
    assert finished < g.num_arcs / 4


@pytest.mark.parametrize("directed", [True, False])
def test_page_store_out_of_core(tmp_path, directed, monkeypatch):
    g = hg.generate.rmat(12, edge_factor=4, seed=2, directed=directed)
    store = g.save(tmp_path / "s", page_bytes=4 << 10, shared_bytes=4096)
    assert store.num_pages > 3
    for sample_arcs, phases in ((0, ["sample", "finish"]), (1 << 62, ["link"])):
        monkeypatch.setattr(tuning, "CC_SAMPLE_ARCS", sample_arcs)
        result = hg.connected_components(store, host_budget=1)  # read page by page
        check(g, result.values)
        assert isinstance(result.graph, StoredGraph)
        assert list(result.history["mode"]) == phases
    np.testing.assert_array_equal(hg.connected_components(store).values,
                                  hg.connected_components(g).values)


def test_empty_and_single_vertex_graphs():
    for n in (0, 1):
        g = hg.from_arrays(np.array([], int), np.array([], int), num_vertices=n)
        result = hg.connected_components(g)
        np.testing.assert_array_equal(result.values, np.arange(n, dtype=np.int32))


def test_label_propagation_stays_available():
    g = shuffled_grid(30)
    lp = hg.connected_components(g, algorithm="label-propagation", devices="cpu")
    assert lp.program == "MinLabel" and lp.mode == "async" and lp.iterations > 1
    check(g, lp.values)
    check(g, hg.run(MinLabel(np.int32), g.to_undirected(), max_iterations=10_000).values)
    # an option only label propagation has chooses it under "auto"
    synced = hg.connected_components(g, mode="async", devices="cpu")
    assert synced.program == "MinLabel"
    np.testing.assert_array_equal(synced.values, lp.values)
    # options at run()'s defaults (what the command line passes) change nothing
    plain = hg.connected_components(g, mode="sync", checkpoint=None, resume=False)
    assert plain.program == "Afforest"


def test_bad_options_are_refused():
    g = hg.generate.grid(5, 5)
    with pytest.raises(hg.GraphError, match="algorithm='bfs'.*union-find"):
        hg.connected_components(g, algorithm="bfs")
    with pytest.raises(hg.GraphError, match="unknown option.*colour"):
        hg.connected_components(g, colour="red")
    with pytest.raises(hg.GraphError, match="takes no checkpoint.*label-propagation"):
        hg.connected_components(g, algorithm="union-find", checkpoint="x")
    with pytest.raises(hg.GraphError, match="devices='hybrid'"):
        hg.connected_components(g, algorithm="union-find", devices="hybrid")
    with pytest.raises(hg.GraphError, match="devices='tpu'"):
        hg.connected_components(g, devices="tpu")
    with pytest.raises(hg.GraphError, match="threads=0"):
        hg.connected_components(g, threads=0)
    with pytest.raises(hg.GraphError, match="host_budget=-1 must be a positive"):
        hg.connected_components(g, host_budget=-1)


def test_gpu_without_a_gpu_says_why():
    from hetgraph.kernels.gpu import device

    if device.available():
        pytest.skip("a GPU is here: tests/test_cc_gpu.py runs it")
    with pytest.raises(device.GpuUnavailableError, match="devices='cpu'"):
        hg.connected_components(hg.generate.grid(5, 5), devices="gpu")
    # "auto" falls back to the CPU
    assert hg.connected_components(hg.generate.grid(5, 5), devices="auto").program == \
        "Afforest"
