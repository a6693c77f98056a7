"""The NetworkX functions issue 57 added to the backend (item 3), each compared with
NetworkX itself: answers, errors, what falls back and why, and the crossover that sends
tiny graphs to NetworkX (item 5)."""

import pytest

nx = pytest.importorskip("networkx")

from hetgraph import nx_backend, tuning  # noqa: E402
from hetgraph.nx_backend import NetworkXFallbackWarning  # noqa: E402
from nx_common import every_call_on_hetgraph, no_fallback  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:Note. conversions to backend graphs")


def close(ours, theirs, rel=1e-6):
    return set(ours) == set(theirs) and all(
        abs(ours[k] - theirs[k]) <= rel * abs(theirs[k]) + 1e-12 for k in theirs)


@pytest.fixture(scope="module")
def directed():
    graph = nx.gnp_random_graph(300, 0.02, seed=7, directed=True)
    for u, v in graph.edges:
        graph.edges[u, v]["weight"] = (u * 3 + v) % 5 + 1
    return graph


@pytest.fixture(scope="module")
def undirected():
    graph = nx.gnp_random_graph(250, 0.01, seed=8)
    graph.add_nodes_from(["isolated", (1, 2)])
    return graph


def test_personalized_pagerank(directed):
    nodes = list(directed)
    personalization = {nodes[3]: 1, nodes[10]: 2}
    nstart = {n: 1 + i % 3 for i, n in enumerate(nodes)}
    with no_fallback():
        for kwargs in ({"personalization": personalization},
                       {"personalization": personalization, "dangling": personalization,
                        "nstart": nstart, "weight": None},
                       {"nstart": nstart}):
            assert close(nx.pagerank(directed, backend="hetgraph", **kwargs),
                         nx.pagerank(directed, **kwargs))


def test_pagerank_dangling_other_than_personalization(directed):
    graph = nx.DiGraph([(0, 1), (1, 2), (0, 2)])  # 2 is dangling
    nodes = list(directed)
    directed_with_dangling = directed.copy()
    directed_with_dangling.remove_edges_from(list(directed.out_edges(nodes[:40])))
    with no_fallback():
        for g, kwargs in ((graph, {"personalization": {0: 1}, "dangling": {1: 1}}),
                          (directed_with_dangling, {"dangling": {nodes[5]: 1, nodes[9]: 3}}),
                          (directed_with_dangling, {"personalization": {nodes[2]: 1},
                                                    "dangling": {nodes[7]: 2},
                                                    "weight": None, "alpha": 0.7})):
            assert close(nx.pagerank(g, backend="hetgraph", **kwargs),
                         nx.pagerank(g, **kwargs))
    with pytest.warns(NetworkXFallbackWarning, match="personalization"):
        with pytest.raises(ZeroDivisionError):  # NetworkX's own error
            nx.pagerank(graph, personalization={0: 0}, backend="hetgraph")


def test_hits(directed, undirected):
    with no_fallback():
        hubs, authorities = nx.hits(directed, backend="hetgraph")
    theirs = nx.hits(directed)
    assert close(hubs, theirs[0], 1e-5) and close(authorities, theirs[1], 1e-5)
    assert nx.hits(nx.DiGraph(), backend="hetgraph") == ({}, {})
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.hits(directed, max_iter=0, backend="hetgraph")
    with no_fallback():  # NetworkX's sign is ARPACK's: hetgraph's is nonnegative
        ours = nx.hits(directed, normalized=False, backend="hetgraph")
    theirs = nx.hits(directed, normalized=False)
    sign = 1 if sum(theirs[1].values()) > 0 else -1
    for mine, reference in zip(ours, theirs):
        assert min(mine.values()) >= 0
        assert close(mine, {k: sign * v for k, v in reference.items()}, 1e-5)
    # a star's top singular value has two vectors: the power iterations from the hubs
    # and from the authorities go to different ones (NetworkX's ARPACK, from a random
    # start, returns any vector of the two)
    star = nx.star_graph(3)
    with pytest.warns(NetworkXFallbackWarning, match="did not converge"):
        hubs, authorities = nx.hits(star, backend="hetgraph")
    assert set(hubs) == set(authorities) == set(star)


def test_eigenvector_and_katz(directed, undirected):
    with no_fallback():
        for graph in (directed, undirected):
            for weight in (None, "weight"):
                assert close(nx.eigenvector_centrality(graph, max_iter=500, weight=weight,
                                                       backend="hetgraph"),
                             nx.eigenvector_centrality(graph, max_iter=500, weight=weight),
                             1e-12)
                assert close(nx.katz_centrality(graph, alpha=0.02, weight=weight,
                                                backend="hetgraph"),
                             nx.katz_centrality(graph, alpha=0.02, weight=weight), 1e-12)
        beta = {n: 1 + i % 4 for i, n in enumerate(undirected)}
        assert close(nx.katz_centrality(undirected, beta=beta, normalized=False,
                                        backend="hetgraph"),
                     nx.katz_centrality(undirected, beta=beta, normalized=False), 1e-12)
    with pytest.raises(nx.NetworkXPointlessConcept):
        nx.eigenvector_centrality(nx.Graph(), backend="hetgraph")
    assert nx.katz_centrality(nx.Graph(), backend="hetgraph") == {}
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.katz_centrality(undirected, alpha=0.9, backend="hetgraph")
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.eigenvector_centrality(directed, max_iter=2, backend="hetgraph")
    with pytest.warns(NetworkXFallbackWarning, match="beta"):
        with pytest.raises(nx.NetworkXError, match="beta dictionary"):
            nx.katz_centrality(undirected, beta={0: 1.0}, backend="hetgraph")
    with pytest.warns(NetworkXFallbackWarning, match="nstart"):
        with pytest.raises(nx.NetworkXError, match="all zero"):
            nx.eigenvector_centrality(undirected, nstart=dict.fromkeys(undirected, 0),
                                      backend="hetgraph")


def test_shortest_path_functions(directed, undirected):
    nodes = list(directed)
    with no_fallback():
        for graph in (directed, undirected):
            source = next(iter(graph))
            for weight in ("weight", None):
                ours = nx.single_source_bellman_ford_path_length(graph, source, weight=weight,
                                                                 backend="hetgraph")
                assert ours == nx.single_source_bellman_ford_path_length(graph, source,
                                                                         weight=weight)
            for method in ("dijkstra", "bellman-ford"):
                for weight in ("weight", None):
                    assert nx.shortest_path_length(graph, source, weight=weight,
                                                   method=method, backend="hetgraph") == \
                        nx.shortest_path_length(graph, source, weight=weight, method=method)
        sources = iter(nodes[:4])  # an iterator: read once
        ours = nx.multi_source_dijkstra_path_length(directed, sources, cutoff=6,
                                                    backend="hetgraph")
        assert ours == nx.multi_source_dijkstra_path_length(directed, set(nodes[:4]),
                                                            cutoff=6)
        assert all(ours[s] == 0 and type(ours[s]) is int for s in nodes[:4])
    with pytest.raises(ValueError, match="empty"):
        nx.multi_source_dijkstra_path_length(directed, [], backend="hetgraph")
    with pytest.raises(nx.NodeNotFound):
        nx.multi_source_dijkstra_path_length(directed, [0, "nowhere"], backend="hetgraph")
    with pytest.raises(nx.NodeNotFound):
        nx.single_source_bellman_ford_path_length(directed, "nowhere", backend="hetgraph")
    with pytest.raises(ValueError, match="method not supported"):
        nx.shortest_path_length(directed, 0, weight="weight", method="astar",
                                backend="hetgraph")
    with pytest.warns(NetworkXFallbackWarning, match="with both"):
        assert nx.shortest_path_length(directed, 0, 5, backend="hetgraph") == \
            nx.shortest_path_length(directed, 0, 5)
    with pytest.warns(NetworkXFallbackWarning, match="all pairs"):
        assert dict(nx.shortest_path_length(undirected, backend="hetgraph")) == \
            dict(nx.shortest_path_length(undirected))


def test_shortest_path_length_to_a_target(directed, undirected):
    """Only a target: from every node, the reversed graph's single-source run."""
    multi = nx.MultiDiGraph(directed)
    multi.add_edge(nodes_of(directed)[1], nodes_of(directed)[0], weight=0)
    negative = nx.DiGraph([(0, 1, {"weight": -2}), (2, 1, {"weight": 3}), (1, 3, {"weight": 1})])
    with no_fallback():
        for graph in (directed, undirected, multi, negative):
            target = nodes_of(graph)[1]
            for method in ("dijkstra", "bellman-ford"):
                for weight in ("weight", None):
                    if graph is negative and method == "dijkstra" and weight:
                        continue  # (NetworkX's Dijkstra: negative weights fall back)
                    ours = nx.shortest_path_length(graph, target=target, weight=weight,
                                                   method=method, backend="hetgraph")
                    assert ours == nx.shortest_path_length(graph, target=target,
                                                           weight=weight, method=method)
        assert nx.shortest_path_length(negative, target=1, weight="weight",
                                       method="bellman-ford", backend="hetgraph") == \
            {1: 0, 0: -2, 2: 3}
    with pytest.raises(nx.NodeNotFound):
        nx.shortest_path_length(directed, target="nowhere", backend="hetgraph")


def nodes_of(graph):
    return list(graph)


def test_bellman_ford_negative_weights():
    """Native: the distances, and NetworkXUnbounded for a negative cycle the source
    reaches (a negative undirected edge or self-loop is one), as NetworkX's own."""
    graph = nx.DiGraph()
    graph.add_weighted_edges_from([(0, 1, 4), (1, 2, -2), (0, 2, 3), (3, 0, -9)])
    undirected = nx.Graph([(0, 1, {"weight": 2}), (1, 2, {"weight": -1})])
    undirected.add_node(3)
    with no_fallback():
        assert nx.single_source_bellman_ford_path_length(graph, 0, backend="hetgraph") == \
            nx.single_source_bellman_ford_path_length(graph, 0) == {0: 0, 1: 4, 2: 2}
        assert nx.shortest_path_length(graph, 3, weight="weight", method="bellman-ford",
                                       backend="hetgraph") == {3: 0, 0: -9, 1: -5, 2: -7}
        assert nx.single_source_bellman_ford_path_length(undirected, 3,
                                                         backend="hetgraph") == {3: 0}
        for g, source in ((undirected, 0), (nx.DiGraph([(1, 1, {"weight": -1})]), 1)):
            with pytest.raises(nx.NetworkXUnbounded):
                nx.single_source_bellman_ford_path_length(g, source)
            with pytest.raises(nx.NetworkXUnbounded, match="Negative cycle"):
                nx.single_source_bellman_ford_path_length(g, source, backend="hetgraph")
        graph.add_weighted_edges_from([(2, 0, -3)])  # 0 -> 1 -> 2 -> 0: -1 a turn
        for source in (0, 3):
            with pytest.raises(nx.NetworkXUnbounded):
                nx.single_source_bellman_ford_path_length(graph, source, backend="hetgraph")
        graph.add_weighted_edges_from([(2, 0, -2)])  # a zero cycle: no error
        assert nx.single_source_bellman_ford_path_length(graph, 0, backend="hetgraph") == \
            nx.single_source_bellman_ford_path_length(graph, 0)
    with pytest.warns(NetworkXFallbackWarning, match="negative weights"):  # Dijkstra's
        with pytest.raises(ValueError, match="negative weights"):  # NetworkX's own error
            nx.single_source_dijkstra_path_length(graph, 0, backend="hetgraph")


def test_component_functions(directed, undirected):
    with no_fallback():
        assert nx.number_connected_components(undirected, backend="hetgraph") == \
            nx.number_connected_components(undirected)
        assert nx.is_connected(undirected, backend="hetgraph") is False
        assert nx.is_connected(nx.path_graph(5), backend="hetgraph") is True
        assert nx.is_weakly_connected(directed, backend="hetgraph") == \
            nx.is_weakly_connected(directed)
        assert nx.is_weakly_connected(nx.path_graph(5, nx.DiGraph), backend="hetgraph")
        isolated_first = nx.DiGraph()
        isolated_first.add_nodes_from(["alone", 1, 2])
        isolated_first.add_edge(1, 2)
        assert nx.is_weakly_connected(isolated_first, backend="hetgraph") is False
        assert nx.is_connected(isolated_first.to_undirected(), backend="hetgraph") is False
        assert nx.is_connected(nx.empty_graph(1), backend="hetgraph") is True
        for node in (0, "isolated", (1, 2)):
            assert nx.node_connected_component(undirected, node, backend="hetgraph") == \
                nx.node_connected_component(undirected, node)
    assert nx.number_connected_components(nx.Graph(), backend="hetgraph") == 0
    for function, graph in ((nx.is_connected, nx.Graph()),
                            (nx.is_weakly_connected, nx.DiGraph())):
        with pytest.raises(nx.NetworkXPointlessConcept, match="null graph"):
            function(graph, backend="hetgraph")
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.is_connected(directed, backend="hetgraph")
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.is_weakly_connected(undirected, backend="hetgraph")
    with pytest.warns(NetworkXFallbackWarning), pytest.raises(KeyError):
        nx.node_connected_component(undirected, "nowhere", backend="hetgraph")


def test_small_graphs_go_to_networkx(monkeypatch, undirected):
    """Below a function's NX_MIN_ARCS the call runs NetworkX's own, silently, and
    should_run says why; at or above it, hetgraph."""
    ran = []
    monkeypatch.setattr(nx_backend, "_labels", lambda G: ran.append(G) or
                        pytest.fail("hetgraph ran"))
    arcs = 2 * undirected.number_of_edges()
    monkeypatch.setattr(tuning, "NX_MIN_ARCS", {"number_connected_components": arcs + 1})
    with no_fallback():
        assert nx.number_connected_components(undirected, backend="hetgraph") == \
            nx.number_connected_components(undirected)
    assert "too small" in nx_backend.should_run("number_connected_components",
                                                (undirected,), {})
    monkeypatch.setattr(tuning, "NX_MIN_ARCS", {"number_connected_components": arcs})
    assert nx_backend.should_run("number_connected_components", (undirected,), {}) is True
    with pytest.raises(pytest.fail.Exception):
        nx.number_connected_components(undirected, backend="hetgraph")
    assert ran


def test_can_run_outside_networkx_test_harness():
    """can_run declines only under NetworkX's test harness with fallback_to_nx: an
    explicit backend="hetgraph" call of any function must still run."""
    assert nx_backend.can_run("betweenness_centrality", (nx.path_graph(3),), {}) is True
    assert nx_backend.can_run("is_connected", (nx.path_graph(3),), {}) is True
