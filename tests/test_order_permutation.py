"""The renumbering kernels of hetgraph.order against independent oracles: SciPy's
permuted matrix P A P^T, NumPy's lexsort for the degree order, SciPy's reverse
Cuthill-McKee for the locality of RCM's order, and the answers of algorithms run on the
original graph."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import reverse_cuthill_mckee

import hetgraph as hg
from conftest import assert_csr_matches_csc, examples
from hetgraph import tuning
from hetgraph.order import degree_order, median_arc_span, rcm_order, renumber

arcs = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40),
                          st.floats(0.5, 100.0, width=32)), min_size=1, max_size=200)


def build(rows, directed, weighted):
    src = np.array([r[0] for r in rows])
    dst = np.array([r[1] for r in rows])
    w = np.array([r[2] for r in rows]) if weighted else None
    return hg.from_arrays(src, dst, w, directed=directed)


# both ways of renaming rows: sorted again (no hubs) and transposed twice (hubs)
@pytest.mark.parametrize("skew_bound", [0.0, np.inf])
@examples(40)
@given(rows=arcs, directed=st.booleans(), weighted=st.booleans(), seed=st.integers(0, 2**31))
def test_renumbering_is_the_permuted_matrix(skew_bound, rows, directed, weighted, seed):
    g = build(rows, directed, weighted)
    perm = np.random.default_rng(seed).permutation(g.num_vertices)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "SKEW_FOR_DEGREE_ORDER", skew_bound)
        h = renumber(g, perm)
    a, b = g.to_scipy(), h.to_scipy()
    expected = a[perm][:, perm]  # new i -> new j wherever old perm[i] -> old perm[j]
    assert (b != expected).nnz == 0 and b.nnz == expected.nnz
    assert_csr_matches_csc(h)
    for ptr, idx in ((h.in_indptr, h.in_indices), (h.out_indptr, h.out_indices)):
        assert all(np.all(np.diff(idx[ptr[v]:ptr[v + 1]]) > 0) for v in range(h.num_vertices))
    np.testing.assert_array_equal(h.labels, g.label_of(perm))
    assert (h.directed, h.weighted, h.in_indices.dtype) == (g.directed, g.weighted,
                                                            g.in_indices.dtype)


@examples(25)
@given(rows=arcs, directed=st.booleans(), seed=st.integers(0, 2**31))
def test_answers_on_a_renumbered_graph_map_back_to_the_original(rows, directed, seed):
    g = build(rows, directed, True)
    h = renumber(g, np.random.default_rng(seed).permutation(g.num_vertices))
    source = int(g.label_of(0))
    for run in (lambda x: hg.pagerank(x, tol=None, max_iterations=10),
                lambda x: hg.bfs(x, source), lambda x: hg.sssp(x, source)):
        a = run(g).to_series()
        b = run(h).to_series().reindex(a.index)
        np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-12)
    a = hg.connected_components(g).to_series()
    b = hg.connected_components(h).to_series().reindex(a.index)
    assert len(set(zip(a, b))) == a.nunique() == b.nunique()


@examples(40)
@given(rows=arcs, directed=st.booleans())
def test_degree_order_is_numpys_lexsort(rows, directed):
    g = build(rows, directed, False)
    degree = g.out_degree()
    rank = np.empty(g.num_vertices, np.int64)
    rank[np.argsort(-degree, kind="stable")] = np.arange(g.num_vertices)
    first = np.array([rank[g.out_indices[g.out_indptr[v]:g.out_indptr[v + 1]]].min(
        initial=g.num_vertices) for v in range(g.num_vertices)])
    np.testing.assert_array_equal(degree_order(g), np.lexsort((first, -degree)))


def scipy_rcm(g):
    n = g.num_vertices
    both = csr_matrix((np.ones(g.num_arcs), g.out_indices, g.out_indptr), shape=(n, n))
    both = both + both.T
    return reverse_cuthill_mckee(both.tocsr(), symmetric_mode=True).astype(np.int64)


@examples(40)
@given(rows=arcs, directed=st.booleans())
def test_rcm_order_is_a_permutation_that_keeps_each_part_together(rows, directed):
    g = build(rows, directed, False)
    order = rcm_order(g)
    assert sorted(order.tolist()) == list(range(g.num_vertices))
    # breadth-first per part: each connected part's vertices take consecutive ids
    labels = hg.connected_components(g).values[order]
    assert np.count_nonzero(np.diff(labels)) == len(np.unique(labels)) - 1


@pytest.mark.parametrize("rows, cols, seed", [(30, 30, 0), (60, 17, 1), (100, 100, 2)])
def test_rcm_order_narrows_a_shuffled_grid_as_scipys_does(rows, cols, seed):
    grid = hg.generate.grid(rows, cols, seed=seed)
    g = renumber(grid, np.random.default_rng(seed).permutation(grid.num_vertices))
    ours, theirs = median_arc_span(g, rcm_order(g)), median_arc_span(g, scipy_rcm(g))
    assert ours <= 1.1 * theirs and ours * 4 < median_arc_span(g)
    # its bandwidth too: the largest span over all arcs
    spans = []
    for order in (rcm_order(g), scipy_rcm(g)):
        new = np.empty(g.num_vertices, np.int64)
        new[order] = np.arange(g.num_vertices)
        src, dst, _ = g.edges()
        spans.append(np.abs(new[src] - new[dst]).max())
    assert spans[0] <= 1.1 * spans[1]
