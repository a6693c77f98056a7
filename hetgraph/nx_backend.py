"""NetworkX backend (entry point ``networkx.backends``: ``hetgraph``).

    nx.pagerank(G, backend="hetgraph")
    nx.single_source_dijkstra_path_length(G, source, backend="hetgraph")
    nx.single_source_shortest_path_length(G, source, backend="hetgraph")
    nx.bfs_layers(G, sources, backend="hetgraph")
    nx.connected_components(G, backend="hetgraph")          # undirected G
    nx.weakly_connected_components(G, backend="hetgraph")   # directed G

run on hetgraph (every CPU core and GPU; inside ``with hg.Cluster()`` on that cluster)
and return what NetworkX returns (a multigraph's parallel edges add their weights in
pagerank and the lightest counts in Dijkstra, as in NetworkX). A call hetgraph cannot
answer exactly (another function, or arguments such as ``personalization``, ``alpha=0``,
a weight function, weights float32 cannot hold, negative or non-numeric weights) runs
NetworkX's own implementation after a :class:`NetworkXFallbackWarning` that says why. With
``nx.config.backend_priority = ["hetgraph"]`` such calls go to NetworkX silently
(``should_run`` says no).

The NetworkX graph is converted on first use, per weight attribute, and the converted
graph is kept in NetworkX's cache of the graph.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import algorithms as _builtin  # noqa: F401 (registers the built-in algorithms)
from .registry import algorithms as _registered

QUIET = {"progress": False}  # no progress bar inside NetworkX calls

#: the NetworkX functions this module answers: those the registered algorithms declare
#: (``networkx=`` of :func:`hetgraph.registry.algorithm`), each with its adapter below
FUNCTIONS = tuple(name for a in _registered() for name in a.networkx)


class NetworkXFallbackWarning(UserWarning):
    """hetgraph ran NetworkX's own implementation of a call it cannot answer exactly."""


class BackendGraph:
    """A NetworkX graph seen by the hetgraph backend; the hetgraph Graph of each weight
    attribute (None: unweighted) is built on first use. Reads of NetworkX's graph API
    (``number_of_nodes``, ``edges`` ...) go to the NetworkX graph, so NetworkX code
    handed this wrapper still works."""

    __networkx_backend__ = "hetgraph"

    def __init__(self, graph):
        self.nx_graph = graph
        self.node_list = list(graph)
        self._graphs = {}
        self._weights = {}

    def __getattr__(self, name):
        if name.startswith("_") or name == "nx_graph":  # (unpickling: no nx_graph yet)
            raise AttributeError(name)
        return getattr(self.nx_graph, name)

    def __iter__(self):
        return iter(self.nx_graph)

    def __len__(self):
        return len(self.nx_graph)

    def __contains__(self, node):
        return node in self.nx_graph

    def converted(self, weight=None, dedup="first"):
        """hetgraph Graph with the edge attribute ``weight`` as weights (edges without it
        weigh 1), or unweighted; a multigraph's parallel edges combined by ``dedup``
        (see :func:`hetgraph.io.objects.from_networkx`)."""
        key = (weight, dedup if self.nx_graph.is_multigraph() else "first")
        if key not in self._graphs:
            from .io.objects import from_networkx

            self._graphs[key] = from_networkx(self.nx_graph, weight=key[0], dedup=key[1])
        return self._graphs[key]

    def weights(self, weight):
        """(float64 array of edge attribute ``weight``, default 1, or None when a value
        is not a number float64 holds; int or float when every value is that kind, else
        None), read from the NetworkX edges once per attribute."""
        if weight not in self._weights:
            values = [d.get(weight, 1) for *_, d in self.nx_graph.edges(data=True)]
            kinds = {_number_kind(v) for v in values} or {int}  # no edges: sums are 0
            try:
                array = np.array(values, np.float64) if None not in kinds else None
            except OverflowError:  # an int beyond float64
                array = None
            self._weights[weight] = (array, kinds.pop() if len(kinds) == 1 else None)
        return self._weights[weight]

    def edge_kinds(self, weight):
        """(dense tail ids, dense head ids, whether the edge's ``weight`` is a float) of
        the NetworkX edges."""
        edges = [(self.dense(u), self.dense(v), _number_kind(d.get(weight, 1)) is float)
                 for u, v, d in self.nx_graph.edges(data=True)]
        tails, heads, floats = zip(*edges)
        return np.array(tails), np.array(heads), np.array(floats)

    def node(self, ids):
        """The NetworkX nodes of dense ids."""
        return [self.node_list[i] for i in ids]

    def dense(self, node):
        """Dense id of ``node`` (its position in the graph's node order)."""
        if "_index" not in self.__dict__:
            self._index = {n: i for i, n in enumerate(self.node_list)}
        return self._index[node]


def _number_kind(value):
    """int or float: the type a sum of such values has in Python; None: neither."""
    if isinstance(value, (int, np.integer)):
        return int
    if isinstance(value, (float, np.floating)):
        return float
    return None


# --- the backend interface NetworkX calls ------------------------------------------------------

def convert_from_nx(graph, *args, **kwargs):
    """Wrap a NetworkX graph (nothing is converted until an algorithm needs it)."""
    return BackendGraph(graph)


def convert_to_nx(result, *, name=None):
    """Results are already NetworkX's types."""
    return result


def can_run(name, args, kwargs):
    return True  # what hetgraph cannot do exactly falls back inside the call


def should_run(name, args, kwargs):
    """For automatic dispatch: only the functions hetgraph implements, with arguments it
    answers exactly (else NetworkX runs its own, silently)."""
    if name not in FUNCTIONS:
        return f"hetgraph does not implement {name}"
    import inspect

    from networkx.utils.backends import _registered_algorithms

    bound = inspect.signature(_registered_algorithms[name].orig_func).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    graph = arguments.pop("G")
    reason = _unsupported(name, graph if isinstance(graph, BackendGraph) else
                          BackendGraph(graph), arguments)
    return True if reason is None else reason


def _nx(value):
    """``value`` with every BackendGraph in it, also inside lists, tuples, sets and dict
    values (``union_all([G1, G2])``), replaced by its NetworkX graph; other iterables are
    left unread (reading would consume them)."""
    if isinstance(value, BackendGraph):
        return value.nx_graph
    if type(value) in (list, tuple, set, frozenset):  # (a subclass may not rebuild so)
        return type(value)(_nx(v) for v in value)
    if type(value) is dict:
        return {k: _nx(v) for k, v in value.items()}
    return value


def _fallback(name, reason, args, kwargs):
    """NetworkX's own ``name`` on the original graphs, after a warning saying why."""
    from networkx.utils.backends import _registered_algorithms

    warnings.warn(f"hetgraph: networkx.{name} {reason}; running NetworkX's own "
                  f"implementation", NetworkXFallbackWarning, stacklevel=4)
    return _registered_algorithms[name].orig_func(*_nx(args), **_nx(kwargs))


def __getattr__(name):
    """Every other NetworkX algorithm: NetworkX's own, with a NetworkXFallbackWarning."""
    if name.startswith("_"):
        raise AttributeError(name)
    from networkx.utils.backends import _registered_algorithms

    if name not in _registered_algorithms:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def fallback(*args, **kwargs):
        return _fallback(name, "is not implemented by hetgraph", args, kwargs)

    fallback.__name__ = name
    return fallback


# --- what each function cannot do exactly ---------------------------------------------------

def _unsupported(name, graph, kwargs):
    """Why hetgraph cannot answer ``name`` on ``graph`` (a BackendGraph) with ``kwargs``
    exactly (None: it can)."""
    if name == "pagerank":
        return _pagerank_unsupported(graph, kwargs)
    if name == "single_source_dijkstra_path_length":
        return _dijkstra_unsupported(graph, kwargs.get("weight", "weight"))
    return None


def _pagerank_unsupported(graph, kwargs):
    given = [k for k in ("personalization", "nstart", "dangling")
             if kwargs.get(k) is not None]
    if given:
        return f"with {', '.join(given)} is not supported by hetgraph"
    alpha, tol = kwargs.get("alpha", 0.85), kwargs.get("tol", 1e-6)
    if not 0 < alpha <= 1:
        return f"with alpha={alpha} is not supported by hetgraph (it needs 0 < alpha <= 1)"
    if not tol > 0:
        return f"with tol={tol} is not supported by hetgraph (it needs tol > 0)"
    weight = kwargs.get("weight", "weight")
    return None if weight is None else _weights_unsupported(graph, weight)


def _dijkstra_unsupported(graph, weight):
    if callable(weight):
        return "with a weight function is not supported by hetgraph"
    if weight is None:
        return None
    reason = _weights_unsupported(graph, weight)
    if reason is not None:
        return reason
    w = graph.weights(weight)[0]
    if not np.array_equal(w.astype(np.float32), w):
        return ("with weights float32 cannot hold exactly is not supported by "
                "hetgraph (it keeps float32 weights)")
    return None


def _weights_unsupported(graph, weight):
    """Why hetgraph cannot read the edge attribute ``weight`` (None: it can)."""
    w = graph.weights(weight)[0]
    if w is None:
        return "with weights that are not float64 numbers is not supported by hetgraph"
    if not (np.abs(w) <= np.finfo(np.float32).max).all():  # (NaN fails it too)
        return ("with weights that are not finite float32 numbers is not supported by "
                "hetgraph")
    if (w < 0).any():
        return "with negative weights is not supported by hetgraph"
    return None


def _run_or_fallback(name, graph, args, kwargs, compute):
    reason = _unsupported(name, graph, kwargs)
    if reason is not None:
        return _fallback(name, reason, (graph, *args), kwargs)
    return compute()


# --- the algorithms ------------------------------------------------------------------------------

def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1e-06, nstart=None,
             weight="weight", dangling=None):
    """networkx.pagerank on hetgraph (same stopping test: L1 change < N * tol; a
    multigraph's parallel edges add their weights, as in NetworkX)."""
    import networkx as nx

    from .algorithms import pagerank as hg_pagerank

    kwargs = dict(alpha=alpha, personalization=personalization, max_iter=max_iter, tol=tol,
                  nstart=nstart, weight=weight, dangling=dangling)

    def compute():
        if not G.node_list:
            return {}
        result = hg_pagerank(G.converted(weight, "sum"), damping=alpha,
                             max_iterations=max_iter, tol=tol, **QUIET)
        if not result.converged:
            raise nx.PowerIterationFailedConvergence(max_iter)
        return dict(zip(G.node_list, result.values.tolist()))

    return _run_or_fallback("pagerank", G, (), kwargs, compute)


def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
    """networkx.single_source_dijkstra_path_length on hetgraph: {node: distance} of the
    reached nodes, nearest first; the types NetworkX gives (the source's 0 an int, the
    others ints when every weight is an int, else floats); a multigraph's lightest
    parallel edge counts, as in NetworkX."""
    import networkx as nx

    from .algorithms import sssp

    kwargs = dict(cutoff=cutoff, weight=weight)

    def compute():
        if source not in G.nx_graph:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        graph = G.converted(weight, "min")
        distances = sssp(graph, source, **QUIET).values  # labels are the nodes
        reached = np.isfinite(distances) & (distances >= 0)
        if cutoff is not None:
            reached &= distances <= cutoff
        kind = _distance_kind(G, weight, reached)
        if kind is None:
            return _fallback("single_source_dijkstra_path_length",
                             "with int and float weights on the searched edges is not "
                             "supported by hetgraph (NetworkX's distance type follows its "
                             "path)", (G, source), kwargs)
        return _nearest_first(G, source, distances, reached, kind)

    return _run_or_fallback("single_source_dijkstra_path_length", G, (source,), kwargs,
                            compute)


def _distance_kind(G, weight, reached):
    """int or float: the type of NetworkX's distances to the ``reached`` nodes (the
    type of a sum of the weights); None when the edges leaving them mix both, as the
    type then follows the path NetworkX took."""
    kind = int if weight is None else G.weights(weight)[1]
    if kind is not None:
        return kind
    tails, heads, floats = G.edge_kinds(weight)
    searched = reached[tails] if G.is_directed() else reached[tails] | reached[heads]
    floats = floats[searched]
    return float if floats.all() else int if not floats.any() else None


def _nearest_first(G, source, distances, reached, kind):
    """{node: distance as ``kind``} of the ``reached`` nodes, nearest first, beginning
    with ``source`` at int 0 (NetworkX's start value, whatever the weights)."""
    ids = np.flatnonzero(reached)
    ids = ids[np.argsort(distances[ids], kind="stable")]
    found = {source: 0}
    start = G.dense(source)
    found.update((G.node_list[i], kind(distances[i])) for i in ids if i != start)
    return found


def _levels(G, sources):
    """BFS levels (-1: unreached) from the dense ids ``sources``, on the unweighted
    graph."""
    from .algorithms.bfs import BreadthFirst
    from .scheduler.dispatcher import run

    graph = G.converted(None)
    result = run(BreadthFirst(np.asarray(sources, np.int64)), graph,
                 max_iterations=max(graph.num_vertices, 1), **QUIET)
    return result.values


def single_source_shortest_path_length(G, source, cutoff=None):
    """networkx.single_source_shortest_path_length on hetgraph (BFS levels; as in
    NetworkX, level L is kept when L - 1 < cutoff, and the source always)."""
    import networkx as nx

    def compute():
        if source not in G.nx_graph:
            raise nx.NodeNotFound(f"Source {source} is not in G")
        levels = _levels(G, [G.dense(source)]).astype(np.float64)
        reached = levels >= 0
        if cutoff is not None:
            reached &= levels - 1 < cutoff
        return _nearest_first(G, source, levels, reached, int)

    return _run_or_fallback("single_source_shortest_path_length", G, (source,),
                            dict(cutoff=cutoff), compute)


def bfs_layers(G, sources):
    """networkx.bfs_layers on hetgraph: the same layers, each in G's node order
    (NetworkX lists a layer in discovery order)."""
    import networkx as nx

    sources = [sources] if sources in G.nx_graph else list(sources)  # (may be an iterator)
    for source in sources:
        if source not in G.nx_graph:
            raise nx.NetworkXError(f"The node {source} is not in the graph.")
    if G.nx_graph.number_of_nodes() == 0:
        return iter(())
    levels = _levels(G, [G.dense(s) for s in sources])
    return (G.node(np.flatnonzero(levels == level)) for level in
            range(int(levels.max()) + 1))


def _components(G):
    from .algorithms import connected_components as hg_components

    labels = hg_components(G.converted(None), **QUIET).values
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return (set(G.node(ids)) for ids in np.split(order, bounds))


def connected_components(G):
    """networkx.connected_components on hetgraph (undirected graphs)."""
    import networkx as nx

    if G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for directed type")
    return iter(()) if not G.node_list else _components(G)


def weakly_connected_components(G):
    """networkx.weakly_connected_components on hetgraph (directed graphs)."""
    import networkx as nx

    if not G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for undirected type")
    return iter(()) if not G.node_list else _components(G)


def get_info():
    """Backend metadata for NetworkX (entry point ``networkx.backend_info``)."""
    return {"backend_name": "hetgraph", "project": "hetgraph",
            "package": "hetgraph",
            "url": "https://github.com/hetgraph/hetgraph",
            "short_summary": "Garaph-style CPU + GPU graph analytics on Dask",
            "default_config": {},
            "functions": {name: {"extra_docstring": f"Runs on hetgraph.{a.function.__name__} "
                                                    "(CPU cores and GPUs); see "
                                                    "hetgraph.nx_backend."}
                          for a in _registered() for name in a.networkx}}
