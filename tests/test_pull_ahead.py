"""The pull that prefetches source values ahead (kernels/cpu/pull.py, ``pull_ahead``):
its values and counts are those of a plain computation, and a whole pull takes it on
graphs of hostile order without hubs only."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.engines import cpu as cpu_engine
from hetgraph.kernels import cpu
from hetgraph.kernels.cpu.pull import cut_ranges, pull_ahead
from hetgraph.program import ProgramSpec
from test_engine import SumOfSources, expected_step
from conftest import examples

pytestmark = pytest.mark.usefixtures("dispatcher_only")


@st.composite
def pulls(draw):
    n = draw(st.integers(1, 60))
    m = draw(st.integers(0, 300))
    src = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    dst = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    weights = np.array(draw(st.lists(st.integers(1, 3), min_size=m, max_size=m)), np.float64)
    graph = hg.from_arrays(src, dst, weight=weights, num_vertices=n, dedup=None)
    v0 = draw(st.integers(0, n - 1))
    return graph, v0, draw(st.integers(1, 9)), draw(st.sampled_from([0, 1, 3, 32, 1000]))


@examples(120)
@given(pulls())
@pytest.mark.parametrize("parallel", [False, True])
def test_a_pull_that_prefetches_ahead_computes_what_a_plain_loop_does(parallel, case):
    """Any distance ahead (past the edges' end included), the range from v0 cut into
    any number of edge ranges, run in this thread or claimed by helpers."""
    graph, v0, parts, ahead = case
    spec = ProgramSpec(SumOfSources())
    values, _, aux = spec.initial_state(graph)
    kernel = cpu.compile_program(spec, aux.dtype)
    prefix = graph.in_indptr[v0:]
    new, flags = values.copy(), np.full(graph.num_vertices, 9, np.uint8)
    cut = cut_ranges(cpu.ALL_VERTICES, prefix, v0, parts, values.dtype, ahead)
    activated, degree = kernel.step(kernel.edges(graph), graph.out_indptr, values, new,
                                    flags, aux, 0.0, cpu.ALL_VERTICES, prefix, v0, parts,
                                    True, parallel, cut=cut)
    want, want_flags = expected_step(graph, values, aux, range(v0, graph.num_vertices))
    np.testing.assert_array_equal(new, want)
    np.testing.assert_array_equal(flags[v0:], want_flags[v0:])
    assert np.all(flags[:v0] == 9)
    assert activated == int(want_flags[v0:].sum())
    assert degree == int(graph.out_degree()[v0:][want_flags[v0:] == 1].sum())


def shuffled_grid(side, seed=3):
    grid = hg.generate.grid(side, side, seed=1)
    return grid, hg.order.renumber(grid, np.random.default_rng(seed).permutation(side * side))


def test_only_a_large_graph_of_hostile_order_without_hubs_prefetches():
    grid, shuffled = shuffled_grid(400)  # (160,000 vertices: above DIRECT_CACHED_VERTICES)
    assert pull_ahead(shuffled) == tuning.PULL_AHEAD > 0
    assert pull_ahead(grid) == 0  # ids in rows: an arc spans a row at most
    small = shuffled_grid(300)[1]  # (90,000 vertices: their values stay cached)
    assert small.num_vertices <= tuning.DIRECT_CACHED_VERTICES and pull_ahead(small) == 0
    rmat = hg.generate.rmat(18, seed=1)  # hubs: their values stay cached
    assert rmat.in_degree_skew() > tuning.PULL_AHEAD_SKEW and pull_ahead(rmat) == 0


@pytest.fixture(scope="module")
def networkx_ranks():
    """NetworkX's PageRank of the grid (unshuffled: its ids are its labels), made once:
    NetworkX's graph of its 640,000 arcs takes most of a test's time."""
    grid = shuffled_grid(400)[0]
    assert grid.labels is None  # (ids are labels)
    src, dst, w = grid.edges()
    G = nx.DiGraph()
    G.add_nodes_from(range(grid.num_vertices))
    G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.astype(float).tolist()))
    want = nx.pagerank(G, tol=1e-12, max_iter=1000)
    return np.array([want[v] for v in range(grid.num_vertices)])


@pytest.mark.parametrize("tol", [None, 1e-9])
@pytest.mark.parametrize("shuffled", [True, False])
def test_pagerank_on_a_grid_matches_networkx_prefetching_where_shuffled(tol, shuffled,
                                                                        monkeypatch,
                                                                        networkx_ranks):
    graph = shuffled_grid(400)[shuffled]
    ahead = tuning.PULL_AHEAD if shuffled else 0
    aheads = []
    cut = cpu_engine.cut_ranges
    monkeypatch.setattr(cpu_engine, "cut_ranges",
                        lambda *a: aheads.append(a[5]) or cut(*a))
    ranks = hg.pagerank(graph, tol=tol, max_iterations=30 if tol is None else 200)
    assert aheads and set(aheads) == {ahead}
    assert ranks.history["mode"].eq("pull").all()
    if tol is None:  # 30 iterations from uniform ranks: their own power iteration
        x = np.full(graph.num_vertices, 1.0 / graph.num_vertices)
        S = graph.to_scipy().astype(np.float64)
        out = np.asarray(S.sum(axis=1)).ravel()
        for _ in range(30):
            x = 0.15 / len(x) + 0.85 * (S.T @ (x / out))
        np.testing.assert_allclose(ranks.values, x, rtol=1e-12)
    else:
        # stopped at an L1 change below N * tol: a few times that from the fixed point
        exact = networkx_ranks[graph.label_of(np.arange(graph.num_vertices))]
        assert ranks.converged and np.abs(ranks.values - exact).sum() <= 20 * len(exact) * tol

