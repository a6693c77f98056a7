"""The NetworkX backend gives NetworkX's own answer where issue 57 found it did not:
multigraphs, iterator arguments, lists of graphs, labels beyond int64, alpha=0, negative
cutoffs, the type of each distance, negative pagerank weights. Each case is compared with
NetworkX itself."""

import pytest

nx = pytest.importorskip("networkx")

from hetgraph.nx_backend import NetworkXFallbackWarning  # noqa: E402
from nx_common import every_call_on_hetgraph, no_fallback  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:Note. conversions to backend graphs")


def assert_ranks_equal(ours, theirs):
    assert list(ours) == list(theirs)
    assert ours == pytest.approx(theirs, rel=1e-5)


def multigraphs():
    """NetworkX's own multigraph test case, and weighted directed parallel edges."""
    unweighted = nx.MultiGraph([(1, 2), (1, 2), (1, 2), (2, 3), (2, 3), ("3", 3), ("3", 3)])
    weighted = nx.MultiDiGraph()
    weighted.add_weighted_edges_from([(0, 1, 5), (0, 1, 1), (1, 2, 2), (2, 0, 1), (2, 2, 3),
                                      (2, 2, 4), (1, 0, 1)])
    loops = nx.MultiGraph([(0, 1), (0, 1), (1, 1), (1, 1), (1, 2)])
    return unweighted, weighted, loops


@pytest.mark.parametrize("graph", multigraphs())
def test_pagerank_adds_parallel_edges(graph):
    with no_fallback():
        assert_ranks_equal(nx.pagerank(graph, backend="hetgraph"), nx.pagerank(graph))
        assert_ranks_equal(nx.pagerank(graph, weight=None, backend="hetgraph"),
                           nx.pagerank(graph, weight=None))
    if 1 in graph and "3" in graph:  # networkx's test_pagerank.py::test_multigraph
        assert nx.pagerank(graph, backend="hetgraph")[1] == pytest.approx(0.21066, abs=1e-4)


@pytest.mark.parametrize("graph", multigraphs())
def test_other_functions_on_multigraphs(graph):
    """Dijkstra reads the lightest parallel edge, BFS and components the structure."""
    source = next(iter(graph))
    with no_fallback():
        ours = nx.single_source_dijkstra_path_length(graph, source, backend="hetgraph")
        theirs = nx.single_source_dijkstra_path_length(graph, source)
        assert ours == theirs and [type(d) for d in ours.values()] == \
            [type(theirs[v]) for v in ours]
        assert nx.single_source_shortest_path_length(graph, source, backend="hetgraph") == \
            nx.single_source_shortest_path_length(graph, source)
        assert [set(x) for x in nx.bfs_layers(graph, source, backend="hetgraph")] == \
            [set(x) for x in nx.bfs_layers(graph, source)]
        components = (nx.weakly_connected_components if graph.is_directed() else
                      nx.connected_components)
        assert canonical(components(graph, backend="hetgraph")) == \
            canonical(components(graph))


def canonical(components):
    """Components as sorted lists of sorted node names (nodes may mix ints and str)."""
    return sorted(sorted(map(str, c)) for c in components)


def test_bfs_layers_reads_an_iterator_once():
    graph = nx.path_graph(5)
    with no_fallback():
        ours = dict(enumerate(nx.bfs_layers(graph, (i for i in [0]), backend="hetgraph")))
        assert ours == dict(enumerate(nx.bfs_layers(graph, (i for i in [0]))))
        ours = list(nx.bfs_layers(graph, iter([0, 4]), backend="hetgraph"))
        assert [set(x) for x in ours] == [set(x) for x in nx.bfs_layers(graph, [0, 4])]


@pytest.mark.parametrize("name", ["union_all", "compose_all", "disjoint_union_all"])
def test_fallback_unwraps_lists_of_graphs(name):
    graphs = [nx.path_graph(3), nx.relabel_nodes(nx.path_graph(4), lambda v: v + 10)]
    with pytest.warns(NetworkXFallbackWarning, match="not implemented by hetgraph"):
        ours = getattr(nx, name)(graphs, backend="hetgraph")
    theirs = getattr(nx, name)(graphs)
    assert set(ours.nodes) == set(theirs.nodes) and set(ours.edges) == set(theirs.edges)


def test_fallback_unwraps_graphs_in_tuples_and_dicts():
    from hetgraph import nx_backend

    g, h = nx.path_graph(3), nx.path_graph(2)
    wrapped = (nx_backend.convert_from_nx(g), [nx_backend.convert_from_nx(h)],
               {"k": nx_backend.convert_from_nx(g)}, iter([1]))
    plain = nx_backend._nx(wrapped)
    assert plain[0] is g and plain[1][0] is h and plain[2]["k"] is g
    assert list(plain[3]) == [1]  # an iterator is passed on unread


def test_backend_graph_answers_networkx_reads():
    """NetworkX's test dispatcher compares a mutated backend graph with NetworkX's."""
    from hetgraph import nx_backend

    graph = nx.path_graph(4)
    wrapped = nx_backend.convert_from_nx(graph)
    assert wrapped.number_of_nodes() == 4 and set(wrapped.edges) == set(graph.edges)
    assert set(wrapped) == set(graph) and len(wrapped) == 4 and 3 in wrapped


@pytest.mark.parametrize("labels", [[2**63, 2**64 + 5, 7, 8, 9], [-2**63 - 1, 0, 1, 2, 3]])
def test_labels_beyond_int64(labels):
    graph = nx.relabel_nodes(nx.gnp_random_graph(5, 0.6, seed=1, directed=True),
                             dict(enumerate(labels)))
    source = labels[0]
    with no_fallback():
        assert_ranks_equal(nx.pagerank(graph, backend="hetgraph"), nx.pagerank(graph))
        for function in (nx.single_source_dijkstra_path_length,
                         nx.single_source_shortest_path_length):
            assert function(graph, source, backend="hetgraph") == function(graph, source)
        assert [set(x) for x in nx.bfs_layers(graph, source, backend="hetgraph")] == \
            [set(x) for x in nx.bfs_layers(graph, source)]
        assert canonical(nx.weakly_connected_components(graph, backend="hetgraph")) == \
            canonical(nx.weakly_connected_components(graph))


@pytest.mark.parametrize("alpha", [0, 1.5])
def test_pagerank_alpha_outside_hetgraph_range(alpha):
    graph = nx.gnp_random_graph(20, 0.2, seed=3, directed=True)
    with pytest.warns(NetworkXFallbackWarning, match=f"alpha={alpha}"):
        ours = nx.pagerank(graph, alpha=alpha, backend="hetgraph")
    assert ours == nx.pagerank(graph, alpha=alpha)


def test_pagerank_negative_weights_fall_back():
    graph = nx.DiGraph()
    graph.add_weighted_edges_from([(0, 1, 2.0), (0, 2, -0.5), (1, 2, 1.0), (2, 0, 3.0),
                                   (1, 0, 4.0)])
    with pytest.warns(NetworkXFallbackWarning, match="negative weights"):
        ours = nx.pagerank(graph, backend="hetgraph")
    assert ours == nx.pagerank(graph)


@pytest.mark.parametrize("cutoff", [-1, -0.5, 0, 0.5, 1, 1.5, 2])
def test_cutoff_like_networkx(cutoff):
    graph = nx.path_graph(5)
    with no_fallback():
        for function in (nx.single_source_dijkstra_path_length,
                         nx.single_source_shortest_path_length):
            assert function(graph, 0, cutoff=cutoff, backend="hetgraph") == \
                function(graph, 0, cutoff=cutoff)


def test_dijkstra_value_types_like_networkx():
    """The source's 0 is an int; a node's distance is a float when its path has a float
    weight; weights mixing both on the searched edges run NetworkX's own search."""
    floats = nx.DiGraph()
    floats.add_weighted_edges_from([(0, 1, 1.0), (1, 2, 2.0), (3, 0, 1)])
    mixed = nx.DiGraph()
    mixed.add_weighted_edges_from([(0, 1, 1.0), (1, 2, 2), (0, 3, 2)])
    with no_fallback():
        ours = nx.single_source_dijkstra_path_length(floats, 0, backend="hetgraph")
        theirs = nx.single_source_dijkstra_path_length(floats, 0)
        assert ours == theirs and [type(d) for d in ours.values()] == \
            [type(theirs[v]) for v in ours]
    with pytest.warns(NetworkXFallbackWarning, match="int and float weights"):
        ours = nx.single_source_dijkstra_path_length(mixed, 0, backend="hetgraph")
    theirs = nx.single_source_dijkstra_path_length(mixed, 0)
    assert ours == theirs and [type(d) for d in ours.values()] == \
        [type(theirs[v]) for v in ours]


@pytest.mark.parametrize("value", [float("nan"), 1e300, 10**400, "heavy"])
def test_weights_hetgraph_cannot_hold_fall_back(value):
    graph = nx.DiGraph()
    graph.add_weighted_edges_from([(0, 1, 2.0), (1, 2, value), (2, 0, 1.0)])
    for function, args in ((nx.pagerank, ()), (nx.single_source_dijkstra_path_length, (0,))):
        try:
            theirs = function(graph, *args)
        except Exception as error:  # NetworkX's own error must come back
            with pytest.warns(NetworkXFallbackWarning), pytest.raises(type(error)):
                function(graph, *args, backend="hetgraph")
            continue
        with pytest.warns(NetworkXFallbackWarning, match="weights"):
            ours = function(graph, *args, backend="hetgraph")
        assert ours == pytest.approx(theirs, nan_ok=True)
