"""Generators: determinism, sizes, structure against NetworkX/SciPy."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from conftest import assert_csr_matches_csc, edge_set


def test_rmat_deterministic_and_seeded():
    a = hg.generate.rmat(10, seed=5)
    b = hg.generate.rmat(10, seed=5)
    c = hg.generate.rmat(10, seed=6)
    assert np.array_equal(a.in_indices, b.in_indices) and np.array_equal(a.in_indptr, b.in_indptr)
    assert not np.array_equal(a.in_indptr, c.in_indptr)
    assert a.num_vertices == 1024
    assert 0.7 * 16 * 1024 < a.num_arcs <= 16 * 1024
    assert a.num_self_loops == 0
    assert_csr_matches_csc(a)


def test_rmat_is_skewed_and_probabilities_matter():
    g = hg.generate.rmat(14, seed=1)
    deg = g.in_degree() + g.out_degree()
    assert deg.max() > 20 * deg.mean()                   # power-law-like hubs
    flat = hg.generate.rmat(14, a=0.25, b=0.25, c=0.25, seed=1)
    fdeg = flat.in_degree() + flat.out_degree()
    assert fdeg.max() < 4 * fdeg.mean()                  # a = b = c = d is Erdos-Renyi-like


def test_rmat_without_permutation_concentrates_on_vertex_zero():
    g = hg.generate.rmat(10, seed=1, permute=False, dedup=None)
    assert np.argmax(g.out_degree()) == 0


def test_rmat_bad_arguments():
    with pytest.raises(hg.GraphError, match="d=-0.100 < 0"):
        hg.generate.rmat(5, a=0.5, b=0.3, c=0.3)
    with pytest.raises(hg.GraphError, match="scale"):
        hg.generate.rmat(0)


def test_grid_structure():
    g = hg.generate.grid(7, 9, seed=2)
    G = nx.grid_2d_graph(7, 9)
    assert g.num_vertices == 63 and g.num_edges == G.number_of_edges()
    assert not g.directed and g.weighted
    expected = {(i * 9 + j, k * 9 + l) for (i, j), (k, l) in G.edges()}
    expected |= {(v, u) for u, v in expected}
    assert {(u, v) for u, v, _ in edge_set(g)} == expected
    weights = {(u, v): w for u, v, w in edge_set(g)}
    assert all(weights[(u, v)] == weights[(v, u)] for u, v in weights)
    assert 1 <= min(weights.values()) and max(weights.values()) < 100
    n_comp, _ = csgraph.connected_components(g.to_scipy())
    assert n_comp == 1


@pytest.mark.parametrize("directed", [True, False])
def test_erdos_renyi(directed):
    g = hg.generate.erdos_renyi(500, m=3000, directed=directed, seed=4)
    assert g.num_edges == 3000
    assert g.num_self_loops == 0
    src, dst, _ = g.edges()
    assert np.all(src != dst)
    g2 = hg.generate.erdos_renyi(500, m=3000, directed=directed, seed=4)
    assert np.array_equal(g.in_indices, g2.in_indices)
    gp = hg.generate.erdos_renyi(400, p=0.02, directed=directed, seed=1)
    pairs = 400 * 399 // (1 if directed else 2)
    assert abs(gp.num_edges - 0.02 * pairs) < 5 * np.sqrt(0.02 * pairs)
    with pytest.raises(hg.GraphError, match="exactly one"):
        hg.generate.erdos_renyi(10)
