"""Vertex renumbering (hetgraph.order): the renumbered graph is the same graph under
its labels, and every algorithm keyed by label gives the same answer on it."""

import numba
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from conftest import assert_csr_matches_csc, edge_set, examples
from hetgraph import order as order_module
from hetgraph import tuning
from hetgraph.order import (auto_reordered, degree_order, is_skewed, median_arc_span,
                               rcm_order, renumber)

arcs = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30),
                          st.floats(0.5, 100.0, width=32)), min_size=1, max_size=120)


@examples(60)
@given(rows=arcs, directed=st.booleans(), weighted=st.booleans(), labelled=st.booleans(),
       seed=st.integers(0, 2**31))
def test_a_renumbered_graph_is_the_same_graph_under_its_labels(rows, directed, weighted,
                                                              labelled, seed):
    src = np.array([r[0] for r in rows])
    dst = np.array([r[1] for r in rows])
    w = np.array([r[2] for r in rows]) if weighted else None
    if labelled:  # string labels through from_pandas' factorization
        import pandas as pd

        frame = pd.DataFrame({"s": [f"v{u}" for u in src], "t": [f"v{v}" for v in dst]})
        if weighted:
            frame["w"] = w
        g = hg.from_pandas(frame, source="s", target="t", weight="w" if weighted else None,
                           directed=directed)
    else:
        g = hg.from_arrays(src, dst, w, directed=directed)
    for h in (g.reorder("degree"), g.reorder("rcm"),
              renumber(g, np.random.default_rng(seed).permutation(g.num_vertices))):
        assert edge_set(h) == edge_set(g)
        assert (h.num_vertices, h.num_arcs, h.directed, h.weighted, h.name) == \
            (g.num_vertices, g.num_arcs, g.directed, g.weighted, g.name)
        assert_csr_matches_csc(h)
        for v in range(h.num_vertices):  # sources sorted within every vertex's in-edges
            row = h.in_indices[h.in_indptr[v]:h.in_indptr[v + 1]]
            assert np.all(np.diff(row) > 0)
        assert sorted(h.label_of(np.arange(h.num_vertices)).tolist()) == \
            sorted(g.label_of(np.arange(g.num_vertices)).tolist())
    degree = g.reorder("degree").out_degree()
    assert np.all(np.diff(degree) <= 0)


def test_equal_degrees_are_ordered_by_their_lowest_neighbour():
    # 0 -> 1, 2, 3 (degree 3); 4 -> 0, 5 -> 2, 6 -> 1 (degree 1); 1, 2, 3 (degree 0).
    # By degree alone: 0, 4, 5, 6, 1, 2, 3, where 4's neighbour is 1st, 5's 6th, 6's 5th
    g = hg.from_arrays([0, 0, 0, 4, 5, 6], [1, 2, 3, 0, 2, 1], num_vertices=7)
    assert degree_order(g).tolist() == [0, 4, 6, 5, 1, 2, 3]


def test_reverse_cuthill_mckee_numbers_a_shuffled_path_along_the_path():
    """A path 0 - 1 - ... - 9 under shuffled ids: RCM's order from one end gives every
    edge ids one apart (a median span of 1); arcs one way only (directed) too."""
    rng = np.random.default_rng(4)
    for directed in (False, True):
        perm = rng.permutation(10)
        g = renumber(hg.from_arrays(np.arange(9), np.arange(1, 10), directed=directed), perm)
        assert median_arc_span(g) > 1
        order = rcm_order(g)
        assert sorted(order.tolist()) == list(range(10))
        assert median_arc_span(g, order) == 1.0
        h = g.reorder("rcm")
        assert np.all(np.abs(np.diff(h.labels.astype(int))) == 1)  # labels along the path
        assert edge_set(h) == edge_set(g)


def test_median_arc_span_by_hand():
    # arcs 0->3 (span 3), 1->2 (1), 2->0 (2): median 2; in the order (new id -> old id)
    # [3, 0, 1, 2] they become 1->0, 2->3, 3->1: spans 1, 1, 2
    g = hg.from_arrays([0, 1, 2], [3, 2, 0], num_vertices=4)
    assert median_arc_span(g) == 2.0
    assert median_arc_span(g, np.array([3, 0, 1, 2])) == 1.0
    assert median_arc_span(g, samples=1) == 3.0  # the first arc only
    assert median_arc_span(hg.from_arrays(np.array([], int), np.array([], int),
                                          num_vertices=2)) == 0.0


def test_auto_takes_rcm_only_where_the_ids_have_no_locality():
    """A grid in row order keeps it (median span 500 against RCM's 707 on 1000 x 1000);
    with its ids shuffled, "auto" renumbers it by RCM."""
    grid = hg.generate.grid(30, 30, seed=2)
    assert grid.reorder("auto") is grid
    shuffled = renumber(grid, np.random.default_rng(0).permutation(grid.num_vertices))
    h = shuffled.reorder("auto")
    assert h is not shuffled and edge_set(h) == edge_set(shuffled)
    assert median_arc_span(h) * 4 <= median_arc_span(shuffled)
    assert median_arc_span(h) == median_arc_span(shuffled, rcm_order(shuffled))
    # the order chosen, by name (the benchmarks report it)
    rmat = hg.generate.rmat(10, seed=1)
    assert [auto_reordered(x)[1] for x in (grid, shuffled, rmat)] == ["none", "rcm", "degree"]
    assert auto_reordered(grid)[0] is grid
    assert np.array_equal(auto_reordered(rmat)[0].in_indices, rmat.reorder("degree").in_indices)


def test_orders_and_bad_input():
    grid = hg.generate.grid(20, 20)
    rmat = hg.generate.rmat(12, seed=3)
    assert not is_skewed(grid) and is_skewed(rmat)
    assert grid.reorder("auto") is grid and rmat.reorder("none") is rmat
    assert rmat.reorder("auto").out_degree()[0] == rmat.out_degree().max()
    with pytest.raises(hg.GraphError, match="not a vertex order"):
        rmat.reorder("random")
    with pytest.raises(hg.GraphError, match="permutation of 0..4"):
        renumber(hg.from_arrays([0, 1], [1, 4]), [0, 1, 2, 3, 3])
    assert not is_skewed(hg.from_arrays(np.array([], int), np.array([], int),
                                        num_vertices=3))


def test_every_algorithm_keyed_by_label_is_unchanged_by_the_order():
    g = hg.generate.rmat(12, seed=7, weights=(1.0, 9.0))
    h = g.reorder()
    assert not np.array_equal(h.labels, np.arange(g.num_vertices))
    source = int(np.argmax(g.out_degree()))
    assert h.label_of(0) == source  # the biggest hub comes first
    for run in (lambda x: hg.pagerank(x, tol=None, max_iterations=15),
                lambda x: hg.sssp(x, source), lambda x: hg.bfs(x, source)):
        a, b = run(g).to_series(), run(h).to_series().reindex(np.arange(g.num_vertices))
        np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-12)
    dist = csgraph.dijkstra(g.to_scipy(), indices=source)
    np.testing.assert_array_equal(hg.sssp(h, source).to_series().sort_index().to_numpy(),
                                  dist)
    a = hg.connected_components(g).to_series()
    b = hg.connected_components(h).to_series().reindex(a.index)
    assert len(set(zip(a, b))) == a.nunique() == b.nunique()  # the same partition


def test_algorithms_keyed_by_label_are_unchanged_by_the_rcm_order():
    g = renumber(hg.generate.grid(25, 20, seed=3),
                 np.random.default_rng(2).permutation(500))
    h = g.reorder("rcm")
    source = int(g.labels[0])
    for run in (lambda x: hg.pagerank(x, tol=None, max_iterations=15),
                lambda x: hg.sssp(x, source), lambda x: hg.bfs(x, source)):
        a, b = run(g).to_series(), run(h).to_series().reindex(run(g).to_series().index)
        np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-12)
    dist = csgraph.dijkstra(g.to_scipy(), indices=g.id_of(source))
    np.testing.assert_array_equal(
        hg.sssp(h, source).to_series().reindex(g.label_of(np.arange(500))).to_numpy(), dist)
    a = hg.connected_components(g).to_series()
    b = hg.connected_components(h).to_series().reindex(a.index)
    assert len(set(zip(a, b))) == a.nunique() == b.nunique()


def test_a_graph_read_page_by_page_is_not_renumbered(tmp_path):
    g = hg.generate.rmat(10, seed=1)
    store = g.save(tmp_path / "s", page_bytes=4 << 10)
    graph = hg.io.store.as_graph(store, store.data_bytes // 4)
    with pytest.raises(hg.OutOfCoreError, match="reorder before saving"):
        graph.reorder()


@pytest.mark.parametrize("order", ["auto", "degree", "rcm", "color"])
def test_a_small_graph_is_reordered_on_one_thread(order, monkeypatch):
    g = hg.generate.rmat(10, seed=4, directed=False)
    seen = []
    for name in ("renumber", "median_arc_span", "hybrid_coloring"):
        original = getattr(order_module, name)
        monkeypatch.setattr(order_module, name, lambda *a, f=original, **k: seen.append(
            numba.get_num_threads()) or f(*a, **k))
    threads = numba.get_num_threads()
    results = []
    for serial_arcs in (g.num_arcs + 1, g.num_arcs):  # (one thread, then all of them)
        monkeypatch.setattr(tuning, "ORDER_SERIAL_ARCS", serial_arcs)
        seen.clear()
        results.append(g.reorder(order))
        assert seen and set(seen) == {1 if serial_arcs > g.num_arcs else threads}
        assert numba.get_num_threads() == threads
    one, many = results
    np.testing.assert_array_equal(one.labels, many.labels)  # (the same order)
    np.testing.assert_array_equal(one.in_indices, many.in_indices)
