"""Personalized PageRank, Katz, eigenvector centrality and HITS (hg.*) against
NetworkX's own implementations, and the pagerank kernel shared across weightings."""

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.errors import GraphError

nx = pytest.importorskip("networkx")

QUIET = {"progress": False}


def to_networkx(graph, weighted=False):
    nx_graph = nx.DiGraph() if graph.directed else nx.Graph()
    labels = graph.label_of(np.arange(graph.num_vertices)).tolist()
    nx_graph.add_nodes_from(labels)
    src, dst, weight = graph.edges()
    for i, (u, v) in enumerate(zip(src.tolist(), dst.tolist())):
        nx_graph.add_edge(labels[u], labels[v],
                          **({"weight": float(weight[i])} if weighted else {}))
    return nx_graph


def by_label(result, values=None):
    return dict(zip(result.labels.tolist(), (result.values if values is None
                                              else values).tolist()))


def assert_close(ours, theirs, tol, rel=0.0):
    assert set(ours) == set(theirs)
    assert max(abs(ours[k] - theirs[k]) - rel * abs(theirs[k]) for k in theirs) <= tol


@pytest.fixture(scope="module")
def graphs():
    """wiki-vote (directed, dangling vertices), a weighted directed random graph, and an
    undirected one."""
    weighted = hg.from_arrays(*np.random.default_rng(3).integers(0, 300, (2, 2000)),
                              weight=np.random.default_rng(4).integers(1, 9, 2000),
                              num_vertices=300)
    undirected = hg.from_arrays(*np.random.default_rng(5).integers(0, 200, (2, 800)),
                                directed=False, num_vertices=200)
    return hg.datasets.load("wiki-vote"), weighted, undirected


def test_personalized_pagerank_equals_networkx(graphs):
    for graph in graphs:
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        personalization = {nodes[0]: 1.0, nodes[7]: 3.0, nodes[-1]: 0.5}
        nstart = {n: 1 + i % 5 for i, n in enumerate(nodes)}
        for kwargs in ({"personalization": personalization},
                       {"personalization": personalization, "nstart": nstart,
                        "dangling": personalization},
                       {"nstart": nstart}):
            theirs = nx.pagerank(reference, tol=1e-10, **kwargs)
            ours = hg.pagerank(graph, tol=1e-10, **kwargs, **QUIET)
            assert ours.converged  # (its transition weights are float32)
            assert_close(by_label(ours), theirs, 1e-12, rel=1e-6)


def test_personalization_as_an_array_and_its_errors(graphs):
    graph = graphs[0]
    vector = np.zeros(graph.num_vertices)
    vector[graph.id_of(30)] = 2.0
    ours = hg.pagerank(graph, personalization=vector, **QUIET).values
    assert np.allclose(ours, hg.pagerank(graph, personalization={30: 1}, **QUIET).values)
    with pytest.raises(GraphError, match="nonzero sum"):
        hg.pagerank(graph, personalization={30: 0.0}, **QUIET)
    with pytest.raises(GraphError, match="shape"):
        hg.pagerank(graph, personalization=[1.0, 2.0], **QUIET)
    with pytest.raises(GraphError, match="not in the graph"):
        hg.pagerank(graph, personalization={-5: 1.0}, **QUIET)
    with pytest.raises(GraphError, match="dangling"):  # wiki-vote has dangling vertices
        hg.pagerank(graph, personalization={30: 1.0}, dangling={28: 1.0}, **QUIET)


def test_pagerank_weightings_share_no_wrong_kernel(graphs):
    """weighted=False then True in one process: each gives NetworkX's answer (a compiled
    kernel is shared by every PageRank instance)."""
    graph = graphs[1]
    reference = to_networkx(graph, weighted=True)
    for weighted in (False, True, False):
        theirs = nx.pagerank(reference, weight="weight" if weighted else None, tol=1e-10)
        ours = hg.pagerank(graph, weighted=weighted, tol=1e-10, **QUIET)
        assert_close(by_label(ours), theirs, 1e-9)


def test_katz_equals_networkx(graphs):
    for graph in graphs:
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        beta = {n: 1 + i % 3 for i, n in enumerate(nodes)}
        for kwargs, weighted in (({}, False), ({"alpha": 0.02, "beta": beta}, False),
                                 ({"alpha": 0.01, "normalized": False}, True),
                                 ({"nstart": dict.fromkeys(nodes, 1.0)}, True)):
            theirs = nx.katz_centrality(reference, weight="weight" if weighted else None,
                                        **{**{"alpha": 0.005}, **kwargs})
            ours = hg.katz_centrality(graph, weighted=weighted, **QUIET,
                                      **{**{"alpha": 0.005}, **kwargs})
            assert ours.converged
            assert_close(by_label(ours), theirs, 1e-12)


def test_eigenvector_equals_networkx(graphs):
    for graph in graphs:
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        for kwargs, weighted in (({}, False), ({}, True),
                                 ({"nstart": {n: 1 + i % 4 for i, n in enumerate(nodes)}},
                                  False)):
            theirs = nx.eigenvector_centrality(reference, max_iter=1000, **kwargs,
                                               weight="weight" if weighted else None)
            ours = hg.eigenvector_centrality(graph, max_iterations=1000, weighted=weighted,
                                             **kwargs, **QUIET)
            assert ours.converged
            assert_close(by_label(ours), theirs, 1e-12)


def test_eigenvector_stops_where_networkx_does():
    """NetworkX's first iterate is nstart scaled by its sum: a graph whose first step
    already meets tol stops after it, as in NetworkX."""
    graph = hg.from_arrays([0], [0], num_vertices=1)
    result = hg.eigenvector_centrality(graph, **QUIET)
    assert result.converged and result.iterations == 1 and result.values.tolist() == [1.0]
    assert nx.eigenvector_centrality(to_networkx(graph)) == {0: 1.0}
    path = hg.from_arrays([0, 1, 2], [1, 2, 3], directed=False)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.eigenvector_centrality(to_networkx(path), max_iter=3)
    assert not hg.eigenvector_centrality(path, max_iterations=3, **QUIET).converged


def test_hits_equals_networkx(graphs):
    for graph in graphs[:2]:
        reference = to_networkx(graph, weighted=graph.weighted)
        hubs, authorities = nx.hits(reference, tol=1e-12, max_iter=10_000)
        ours = hg.hits(graph, max_iterations=10_000, tol=1e-12, **QUIET)
        assert ours.converged
        assert_close(by_label(ours), authorities, 1e-8)
        assert_close(by_label(ours, ours.hubs), hubs, 1e-8)


def test_hits_by_hand():
    """0 -> 1, 0 -> 2, 1 -> 2: A^T A = [[0, 0, 0], [0, 1, 1], [0, 1, 2]], whose top
    eigenvector is (0, 1, golden ratio)."""
    result = hg.hits(hg.from_arrays([0, 0, 1], [1, 2, 2]), **QUIET)
    phi = (1 + 5 ** 0.5) / 2
    assert result.values == pytest.approx([0, 1 / (1 + phi), phi / (1 + phi)], abs=1e-9)
    assert result.hubs == pytest.approx([phi / (1 + phi), 1 / (1 + phi), 0], abs=1e-9)
