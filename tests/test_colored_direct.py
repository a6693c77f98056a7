"""Colored PageRank on the direct path (scheduler/direct.py ``colored_pagerank``, one
compiled call for the whole run): bitwise the engine's colored run, however its passes
run, and close to SciPy's exact ranks."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from conftest import data_path, examples
from hetgraph import coloring as hc
from hetgraph import tuning
from hetgraph.kernels.cpu import direct as kernels
from hetgraph.scheduler import direct
from test_coloring import exact_pagerank
from test_direct_lanes import graphs as random_graphs


def small_graphs():
    wiki = hg.read(data_path("wiki-Vote.txt"))
    return {"wiki": wiki, "wiki-color": wiki.reorder("color"),
            "grid-color": hg.generate.grid(30, 40, seed=2).reorder("color"),
            "rmat": hg.generate.rmat(11, seed=3, weights=(1.0, 9.0)).reorder("color")}


def engine_run(monkeypatch, call):
    """``call()`` with the direct path off (the dispatcher's engine runs it)."""
    with monkeypatch.context() as patch:
        patch.setattr(tuning, "DIRECT_PAGERANK_ARCS", -1)
        return call()


def assert_same_run(direct_result, engine_result):
    assert isinstance(direct_result, direct._DirectResult)
    assert not isinstance(engine_result, direct._DirectResult)
    assert direct_result.values.tobytes() == engine_result.values.tobytes()
    assert direct_result.iterations == engine_result.iterations
    assert direct_result.converged == engine_result.converged
    assert direct_result.mode == engine_result.mode == "colored"
    assert direct_result.history["mode"].tolist() == engine_result.history["mode"].tolist()
    assert direct_result.history["edges"].tolist() == engine_result.history["edges"].tolist()


@pytest.mark.parametrize("name", ["wiki", "wiki-color", "grid-color", "rmat"])
def test_colored_direct_pagerank_is_the_engines_bit_for_bit(name, monkeypatch):
    """Contiguous colors or id lists (wiki: not reordered), weighted (rmat) or not,
    dangling vertices (rescaled) or none (the grid): the same values, iterations and
    test, to a tolerance and for a fixed count of iterations (0 included)."""
    g = small_graphs()[name]
    for options in ({"tol": 1e-9, "max_iterations": 1000}, {"tol": 1e-6},
                    {"tol": None, "max_iterations": 7}, {"tol": None, "max_iterations": 0},
                    {"tol": 1e-12, "max_iterations": 4}):
        def call():
            return hg.pagerank(g, mode="colored", **options)
        assert_same_run(call(), engine_run(monkeypatch, call))


@examples(40)
@given(random_graphs(), st.sampled_from([None, 1e-8]))
def test_colored_direct_pagerank_on_random_graphs(graph, tol):
    """Isolated vertices, self-loops, duplicate edges, hubs, weights with zeros, N not a
    multiple of the lanes: the engine's run, bit for bit."""
    def call():
        return hg.pagerank(graph, mode="colored", tol=tol, max_iterations=9)

    saved = tuning.DIRECT_PAGERANK_ARCS
    fast = call()
    tuning.DIRECT_PAGERANK_ARCS = -1
    try:
        slow = call()
    finally:
        tuning.DIRECT_PAGERANK_ARCS = saved
    assert_same_run(fast, slow)


@pytest.mark.parametrize("name", ["wiki-color", "rmat", "grid-color"])
def test_colored_direct_pagerank_reaches_scipys_exact_ranks(name):
    g = small_graphs()[name]
    exact = exact_pagerank(g)
    r = hg.pagerank(g, mode="colored", tol=1e-10, max_iterations=1000)
    assert isinstance(r, direct._DirectResult) and r.converged
    # (Gauss-Seidel's last step changes the ranks less than sync's at the same error:
    # the test may stop it further from the fixed point, docs/tuning.md)
    assert np.abs(r.values - exact).sum() < g.num_vertices * 1e-10 * 10
    assert abs(r.values.sum() - 1.0) < 1e-6  # (rescaled before the last sweep)
    # and fewer iterations than sync to the same test (Gauss-Seidel by color)
    assert r.iterations < hg.pagerank(g, tol=1e-10, max_iterations=1000).iterations


@pytest.mark.parametrize("partitions", [None, 3])
def test_colors_spread_over_threads_are_the_direct_paths_bit_for_bit(partitions,
                                                                      monkeypatch):
    """The engine's colored passes cut over threads (every color from 2,000 in-edges
    spread, or each cut into 3 ranges) cut them at vertices: each vertex sums its
    in-edges in order in one range, so the direct path (one thread, one range a color)
    gives the same values bit for bit, and takes such a graph too."""
    g = small_graphs()["wiki-color"]
    monkeypatch.setattr(tuning, "SERIAL_EDGES", 2000)
    assert np.diff(g.in_indptr[hc.coloring_of(g).bounds]).max() > 2000

    def call():
        return hg.pagerank(g, mode="colored", tol=1e-10, max_iterations=1000)

    spread = engine_run(monkeypatch, lambda: hg.pagerank(
        g, mode="colored", tol=1e-10, max_iterations=1000, threads=2,
        partitions=partitions))
    fast = call()
    assert isinstance(fast, direct._DirectResult) and fast.iterations > 5
    assert fast.values.tobytes() == spread.values.tobytes()
    assert fast.iterations == spread.iterations
    assert np.abs(fast.values - exact_pagerank(g)).sum() < g.num_vertices * 1e-10


def python_lane_sum(terms):
    """The four interleaved sums of ``terms`` (the j-th to sum j % 4), each added in
    order, then (s0 + s1) + (s2 + s3): plain Python floats."""
    sums = [0.0] * 4
    for j, term in enumerate(terms):
        sums[j % 4] += term
    return (sums[0] + sums[1]) + (sums[2] + sums[3])


@examples(60)
@given(st.integers(0, 23), st.integers(0, 2 ** 31))
def test_the_shared_sums_add_in_four_interleaved_lanes(n, seed):
    """The sums a colored PageRank's constant and test take on both paths: four
    interleaved sums, exactly as plain Python adds them."""
    rng = np.random.default_rng(seed)
    x, previous, weights = rng.random(n + 1), rng.random(n + 1), rng.random(n)
    ids = np.sort(rng.choice(n, size=n // 2, replace=False)).astype(np.int64) if n else \
        np.zeros(0, np.int64)
    want = python_lane_sum([abs(x[i] - previous[i]) * weights[i] for i in range(n)])
    assert kernels.lane_change(x, previous, weights) == want
    work = x.copy()
    damping, lost = 0.85, python_lane_sum(
        [x[i] / python_lane_sum([x[k] * weights[k] for k in range(n)]) for i in ids])
    if n and len(ids):
        inverse = 1.0 / python_lane_sum([x[k] * weights[k] for k in range(n)])
        lost = python_lane_sum([x[i] * inverse for i in ids])
        constant = kernels.rescaled_constant(work, weights, ids, 0, 0, True, damping)
        assert constant == (1.0 - damping) / n + (1.0 / n) * lost
        np.testing.assert_array_equal(work[:n], x[:n] * inverse)
    if n:  # a range of dangling vertices, no rescale
        work = x.copy()
        constant = kernels.rescaled_constant(work, weights, np.zeros(0, np.int64), 1, n,
                                             False, damping)
        assert constant == (1.0 - damping) / n + (1.0 / n) * python_lane_sum(
            [x[i] for i in range(1, n)])
        np.testing.assert_array_equal(work, x)


@examples(80)
@given(random_graphs(), st.sampled_from([1, 4, 256]))
def test_segment_lanes_keep_each_segment_and_every_in_edge(graph, window):
    """Every vertex of a segment in that segment's groups, each vertex's in-edges in
    their order in its lane, the rest padding (id N, weight 0)."""
    n, lanes = graph.num_vertices, kernels.LANES
    rng = np.random.default_rng(n)
    vertices = rng.permutation(n).astype(np.int64)
    cuts = np.unique(np.concatenate(([0, n], rng.integers(0, n + 1, 3)))).astype(np.int64)
    weights = graph.in_weights if graph.weighted else None
    order, starts, sources, factors, groups = kernels.segment_lanes(
        graph.in_indptr, graph.in_indices, weights, vertices, cuts, window)
    assert len(groups) == len(cuts) and groups[-1] * lanes == len(order)
    for s in range(len(cuts) - 1):
        places = order[groups[s] * lanes:groups[s + 1] * lanes]
        assert sorted(places[places < n].tolist()) == sorted(vertices[cuts[s]:cuts[s + 1]])
    for c in range(groups[-1]):
        for k in range(lanes):
            v = order[c * lanes + k]
            lane = slice(starts[c] + k, starts[c + 1], lanes)
            got = sources[lane]
            if v == n:
                assert (got == n).all()
                continue
            edges = graph.in_indices[graph.in_indptr[v]:graph.in_indptr[v + 1]]
            assert got[:len(edges)].tolist() == edges.tolist()
            assert (got[len(edges):] == n).all()
            if weights is not None:
                w = factors[lane]
                np.testing.assert_array_equal(
                    w[:len(edges)], weights[graph.in_indptr[v]:graph.in_indptr[v + 1]])
                assert (w[len(edges):] == 0).all()
