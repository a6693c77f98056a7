"""The NetworkX backend: nx.<function>(G, backend="hetgraph") equals NetworkX's own
answer on real and generated graphs; what hetgraph cannot answer exactly runs NetworkX's
own after a NetworkXFallbackWarning; NetworkX's errors stay NetworkX's errors."""

import pytest

nx = pytest.importorskip("networkx")

from hetgraph import nx_backend  # noqa: E402
from hetgraph.nx_backend import NetworkXFallbackWarning  # noqa: E402
from nx_common import every_call_on_hetgraph, no_fallback  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:Note. conversions to backend graphs")


@pytest.fixture(scope="module")
def wiki(request):
    from conftest import data_path

    return nx.read_edgelist(data_path("wiki-Vote.txt"), create_using=nx.DiGraph,
                            nodetype=int)


@pytest.fixture(scope="module")
def power():
    from conftest import data_path
    import hetgraph as hg

    g = hg.read(data_path("power.graph"))
    src, dst, _ = g.edges()
    graph = nx.Graph()
    graph.add_edges_from(zip(g.label_of(src).tolist(), g.label_of(dst).tolist()))
    return graph


def weighted_grid():
    """Undirected 12 x 9 grid with tuple nodes and int weights 1..7."""
    graph = nx.grid_2d_graph(12, 9)
    for u, v in graph.edges:
        graph.edges[u, v]["weight"] = (u[0] * 7 + v[1] * 3 + u[1]) % 7 + 1
    return graph


def test_backend_is_registered():
    from networkx.utils.backends import backend_info, backends

    assert "hetgraph" in backends and "pagerank" in backend_info["hetgraph"]["functions"]


def test_pagerank_real_and_generated(wiki):
    with no_fallback():
        for graph in (wiki, nx.gnp_random_graph(300, 0.02, seed=4, directed=True),
                      weighted_grid()):
            ours, theirs = nx.pagerank(graph, backend="hetgraph"), nx.pagerank(graph)
            assert list(ours) == list(theirs)  # the same nodes, in G's order
            assert all(abs(ours[v] - theirs[v]) <= 1e-6 * theirs[v] for v in theirs)
        ours = nx.pagerank(wiki, alpha=0.7, weight=None, tol=1e-9, backend="hetgraph")
        theirs = nx.pagerank(wiki, alpha=0.7, weight=None, tol=1e-9)
        assert all(abs(ours[v] - theirs[v]) <= 1e-6 * theirs[v] for v in theirs)


def test_dijkstra_exact():
    graph = weighted_grid()
    with no_fallback():
        for source in ((0, 0), (5, 4)):
            ours = nx.single_source_dijkstra_path_length(graph, source, backend="hetgraph")
            theirs = nx.single_source_dijkstra_path_length(graph, source)
            assert ours == theirs and all(type(d) is int for d in ours.values())
            assert list(ours.values()) == sorted(ours.values())  # nearest first
        ours = nx.single_source_dijkstra_path_length(graph, (0, 0), cutoff=9,
                                                     backend="hetgraph")
        assert ours == nx.single_source_dijkstra_path_length(graph, (0, 0), cutoff=9)
        halves = nx.DiGraph()  # float weights float32 holds exactly; unreachable nodes
        halves.add_weighted_edges_from([(0, 1, 0.5), (1, 2, 0.25), (0, 2, 1.0), (3, 0, 1)])
        assert nx.single_source_dijkstra_path_length(halves, 0, backend="hetgraph") == \
            {0: 0, 1: 0.5, 2: 0.75}


def test_bfs_real(wiki, power):
    with no_fallback():
        for graph, source in ((wiki, 30), (power, 1)):
            assert nx.single_source_shortest_path_length(graph, source, backend="hetgraph") \
                == nx.single_source_shortest_path_length(graph, source)
            ours = list(nx.bfs_layers(graph, source, backend="hetgraph"))
            theirs = list(nx.bfs_layers(graph, source))
            assert [set(layer) for layer in ours] == [set(layer) for layer in theirs]
        sources = [1, 100, 2000]
        assert [set(x) for x in nx.bfs_layers(power, sources, backend="hetgraph")] == \
            [set(x) for x in nx.bfs_layers(power, sources)]
        assert nx.single_source_shortest_path_length(wiki, 30, cutoff=2,
                                                     backend="hetgraph") == \
            nx.single_source_shortest_path_length(wiki, 30, cutoff=2)


def test_components(wiki, power):
    def canonical(components):
        return sorted(sorted(c) for c in components)

    islands = nx.disjoint_union_all([power, nx.path_graph(5), nx.empty_graph(3)])
    with no_fallback():
        for graph in (power, islands):
            assert canonical(nx.connected_components(graph, backend="hetgraph")) == \
                canonical(nx.connected_components(graph))
        assert canonical(nx.weakly_connected_components(wiki, backend="hetgraph")) == \
            canonical(nx.weakly_connected_components(wiki))


@pytest.mark.parametrize("name, args, why", [
    ("shortest_path_length", {"source": 0, "target": 5}, "with both"),
    ("single_source_dijkstra_path_length", {"source": 0, "weight": lambda u, v, d: 2},
     "with a weight function"),
    ("single_source_dijkstra_path_length", {"source": 0}, "weights float32 cannot hold"),
    ("betweenness_centrality", {"k": 10, "seed": 1}, "is not implemented by hetgraph"),
])
def test_fallback_gives_networkx_answer(name, args, why):
    graph = nx.gnp_random_graph(60, 0.1, seed=2, directed=True)
    for u, v in graph.edges:
        graph.edges[u, v]["weight"] = 0.1 * (u % 7 + 1)  # 0.1 is not a float32
    function = getattr(nx, name)
    with pytest.warns(NetworkXFallbackWarning, match=why):
        got = function(graph, backend="hetgraph", **args)
    assert got == function(graph, **args)


def test_fallback_on_negative_weights_and_multigraphs():
    graph = nx.MultiDiGraph()
    graph.add_weighted_edges_from([(0, 1, 5), (0, 1, 2), (1, 2, 1)])
    with no_fallback():  # the lightest parallel edge counts, as in NetworkX
        assert nx.single_source_dijkstra_path_length(graph, 0, backend="hetgraph") == \
            {0: 0, 1: 2, 2: 3}
    negative = nx.DiGraph()
    negative.add_weighted_edges_from([(0, 1, 2), (1, 2, -1)])
    with pytest.warns(NetworkXFallbackWarning, match="negative weights"):
        assert nx.single_source_dijkstra_path_length(negative, 0, backend="hetgraph") == \
            nx.single_source_dijkstra_path_length(negative, 0)


def test_networkx_errors_are_kept():
    directed = nx.gnp_random_graph(30, 0.1, seed=1, directed=True)
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.connected_components(directed, backend="hetgraph")
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.weakly_connected_components(directed.to_undirected(), backend="hetgraph")
    with pytest.raises(nx.NodeNotFound):
        nx.single_source_dijkstra_path_length(directed, 99, backend="hetgraph")
    with pytest.raises(nx.NodeNotFound):
        nx.single_source_shortest_path_length(directed, 99, backend="hetgraph")
    with pytest.raises(nx.NetworkXError, match="not in the graph"):
        list(nx.bfs_layers(directed, [0, 99], backend="hetgraph"))
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(directed, max_iter=2, backend="hetgraph")
    assert nx.pagerank(nx.DiGraph(), backend="hetgraph") == {}
    assert list(nx.connected_components(nx.Graph(), backend="hetgraph")) == []


def test_automatic_dispatch(monkeypatch):
    """With backend_priority = ["hetgraph"], supported calls run on hetgraph and the rest
    on NetworkX without a warning."""
    calls = []
    original = nx_backend.pagerank
    monkeypatch.setattr(nx_backend, "pagerank",
                        lambda *a, **k: calls.append(k) or original(*a, **k))
    graph = nx.gnp_random_graph(80, 0.05, seed=3, directed=True)
    expected = nx.pagerank(graph)
    monkeypatch.setattr(nx.config.backend_priority, "algos", ["hetgraph"])
    with no_fallback():
        assert nx.pagerank(graph) == pytest.approx(expected, rel=1e-6)
        assert len(calls) == 1
        assert nx.pagerank(graph, alpha=0) == \
            pytest.approx(nx.pagerank(graph, alpha=0, backend="networkx"))
        assert len(calls) == 1  # should_run said no: NetworkX ran it
        nx.average_clustering(graph.to_undirected())
