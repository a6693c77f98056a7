"""The direct PageRank's in-edges laid out four vertices side by side
(kernels/cpu/direct.py ``lanes``) and its ranks against SciPy's power iteration."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.kernels.cpu import direct as kernels
from hetgraph.scheduler import direct
from conftest import examples


@st.composite
def graphs(draw):
    """Isolated vertices, self loops, duplicate edges, hubs; weights or none; N not a
    multiple of the lanes."""
    n = draw(st.integers(1, 40))
    m = draw(st.integers(0, 4 * n))
    ids = st.lists(st.integers(0, n - 1), min_size=m, max_size=m)
    src, dst = np.array(draw(ids), np.int64), np.array(draw(ids), np.int64)
    if draw(st.booleans()):  # a hub: every 3rd edge into vertex 0
        dst[::3] = 0
    weights = None
    if draw(st.booleans()):
        weights = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]),
                                         min_size=m, max_size=m)), np.float64)
    return hg.from_arrays(src, dst, weights, num_vertices=n,
                          directed=draw(st.booleans()), dedup=None)


@examples(150)
@given(graphs(), st.sampled_from([1, 3, 4, 256]))
def test_lanes_hold_every_in_edge_of_each_vertex_in_its_order(graph, window):
    n, lanes = graph.num_vertices, kernels.LANES
    weighted = graph.weighted
    order, starts, sources, factors = kernels.lanes(
        graph.in_indptr, graph.in_indices, graph.in_weights if weighted else None, window)
    assert len(order) == -(-n // lanes) * lanes and len(starts) == len(order) // lanes + 1
    np.testing.assert_array_equal(np.sort(order[:n]), np.arange(n))
    assert np.all(order[n:] == n)
    degree = np.diff(graph.in_indptr)
    for w0 in range(0, n, window):  # each run of ids, by decreasing in-degree
        run = order[w0:min(n, w0 + window)]
        assert set(run) == set(range(w0, min(n, w0 + window)))
        assert np.all(np.diff(degree[run]) <= 0)
    assert len(factors) == (len(sources) if weighted else 0)
    for place, v in enumerate(order):
        c, k = divmod(place, lanes)
        held = sources[starts[c] + k:starts[c + 1]:lanes]
        count = degree[v] if v < n else 0
        lo = graph.in_indptr[v] if v < n else 0
        np.testing.assert_array_equal(held[:count], graph.in_indices[lo:lo + count])
        assert np.all(held[count:] == n)  # the padding reads x[N] = 0
        if weighted:
            w = factors[starts[c] + k:starts[c + 1]:lanes]
            np.testing.assert_array_equal(w[:count], graph.in_weights[lo:lo + count])
            assert np.all(w[count:] == 0)


def power_iteration(graph, iterations, damping=0.85, tol=None):
    """NetworkX's PageRank by SciPy: (ranks, iterations)."""
    S = graph.to_scipy().astype(np.float64)
    out = np.asarray(S.sum(axis=1)).ravel()
    n = graph.num_vertices
    share = np.where(out > 0, 1.0 / np.where(out > 0, out, 1.0), 0.0)
    x = np.full(n, 1.0 / n)
    for it in range(iterations):
        y = (1 - damping) / n + damping * (S.T @ (x * share) + x[out == 0].sum() / n)
        change, x = np.abs(y - x).sum(), y
        if tol is not None and change < n * tol:
            return x, it + 1
    return x, iterations


@examples(100)
@given(graphs(), st.sampled_from([1, 5, 256]), st.sampled_from([(0.85, None, 15),
                                                                 (0.5, 1e-10, 500)]))
def test_direct_pagerank_on_lanes_is_scipys(graph, window, parameters):
    damping, tol, most = parameters
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "DIRECT_LANES_WINDOW", window)
        result = hg.pagerank(graph, damping, most, tol)
    assert isinstance(result, direct._DirectResult)
    want, iterations = power_iteration(graph, most, damping, tol)
    np.testing.assert_allclose(result.values, want, rtol=1e-12, atol=1e-15)
    assert abs(result.iterations - iterations) <= (0 if tol is None else 1)
    assert list(result.history["edges"]) == [graph.num_arcs] * result.iterations


def test_the_layout_is_kept_by_the_graph_for_each_use_of_the_weights():
    graph = hg.generate.grid(9, 7, seed=1)
    weighted = direct._lanes(graph, True)
    assert direct._lanes(graph, True) is weighted
    plain = direct._lanes(graph, False)
    assert len(weighted[3]) == len(weighted[2]) and len(plain[3]) == 0
    np.testing.assert_allclose(hg.pagerank(graph, weighted=False).values,
                               power_iteration(hg.generate.grid(9, 7, weights=None), 100, tol=1e-6)[0],
                               rtol=1e-9)
