"""NetworkX backend (entry point ``networkx.backends``: ``hetgraph``).

    nx.pagerank(G, backend="hetgraph")
    nx.single_source_dijkstra_path_length(G, source, backend="hetgraph")
    nx.single_source_shortest_path_length(G, source, backend="hetgraph")
    nx.bfs_layers(G, sources, backend="hetgraph")
    nx.connected_components(G, backend="hetgraph")          # undirected G
    nx.weakly_connected_components(G, backend="hetgraph")   # directed G

run on hetgraph (every CPU core and GPU; inside ``with hg.Cluster()`` on that cluster)
and return what NetworkX returns. A call hetgraph cannot answer exactly (another
function, or arguments such as ``personalization``, a weight function, weights float32
cannot hold, negative weights, parallel edges in a shortest-path search) runs NetworkX's
own implementation after a :class:`NetworkXFallbackWarning` that says why. With
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
    attribute (None: unweighted) is built on first use."""

    __networkx_backend__ = "hetgraph"

    def __init__(self, graph):
        self.nx_graph = graph
        self.nodes = list(graph)
        self._graphs = {}
        self._weights = {}

    def is_directed(self):
        return self.nx_graph.is_directed()

    def is_multigraph(self):
        return self.nx_graph.is_multigraph()

    def graph(self, weight=None):
        """hetgraph Graph with the edge attribute ``weight`` as weights (edges without it
        weigh 1), or unweighted."""
        if weight not in self._graphs:
            from .io.objects import from_networkx

            self._graphs[weight] = from_networkx(self.nx_graph, weight=weight)
        return self._graphs[weight]

    def weights(self, weight):
        """(float64 array of edge attribute ``weight``, default 1; whether every value
        is an int), read from the NetworkX edges once per attribute."""
        if weight not in self._weights:
            values = [d.get(weight, 1) for *_, d in self.nx_graph.edges(data=True)]
            self._weights[weight] = (np.array(values, np.float64),
                                     all(isinstance(v, int) for v in values))
        return self._weights[weight]

    def node(self, ids):
        """The NetworkX nodes of dense ids."""
        return [self.nodes[i] for i in ids]

    def dense(self, node):
        """Dense id of ``node`` (its position in the graph's node order)."""
        if not hasattr(self, "_index"):
            self._index = {n: i for i, n in enumerate(self.nodes)}
        return self._index[node]


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


def _nx(graph):
    return graph.nx_graph if isinstance(graph, BackendGraph) else graph


def _fallback(name, reason, args, kwargs):
    """NetworkX's own ``name`` on the original graphs, after a warning saying why."""
    from networkx.utils.backends import _registered_algorithms

    warnings.warn(f"hetgraph: networkx.{name} {reason}; running NetworkX's own "
                  f"implementation", NetworkXFallbackWarning, stacklevel=4)
    args = [_nx(a) for a in args]
    kwargs = {k: _nx(v) for k, v in kwargs.items()}
    return _registered_algorithms[name].orig_func(*args, **kwargs)


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
        given = [k for k in ("personalization", "nstart", "dangling")
                 if kwargs.get(k) is not None]
        if given:
            return f"with {', '.join(given)} is not supported by hetgraph"
    if name == "single_source_dijkstra_path_length":
        weight = kwargs.get("weight", "weight")
        if callable(weight):
            return "with a weight function is not supported by hetgraph"
        if graph.is_multigraph():
            return "on a multigraph (parallel edges) is not supported by hetgraph"
        if weight is not None:
            w = graph.weights(weight)[0]
            if (w < 0).any():
                return "with negative weights is not supported by hetgraph"
            if not np.array_equal(w.astype(np.float32), w):
                return ("with weights float32 cannot hold exactly is not supported by "
                        "hetgraph (it keeps float32 weights)")
    return None


def _run_or_fallback(name, graph, args, kwargs, compute):
    reason = _unsupported(name, graph, kwargs)
    if reason is not None:
        return _fallback(name, reason, (graph, *args), kwargs)
    return compute()


# --- the algorithms ------------------------------------------------------------------------------

def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1e-06, nstart=None,
             weight="weight", dangling=None):
    """networkx.pagerank on hetgraph (same stopping test: L1 change < N * tol)."""
    import networkx as nx

    from .algorithms import pagerank as hg_pagerank

    kwargs = dict(alpha=alpha, personalization=personalization, max_iter=max_iter, tol=tol,
                  nstart=nstart, weight=weight, dangling=dangling)

    def compute():
        if not G.nodes:
            return {}
        result = hg_pagerank(G.graph(weight), damping=alpha, max_iterations=max_iter,
                             tol=tol, **QUIET)
        if not result.converged:
            raise nx.PowerIterationFailedConvergence(max_iter)
        return dict(zip(G.nodes, result.values.tolist()))

    return _run_or_fallback("pagerank", G, (), kwargs, compute)


def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
    """networkx.single_source_dijkstra_path_length on hetgraph: {node: distance} of the
    reached nodes, nearest first; int distances when every weight is an int."""
    import networkx as nx

    from .algorithms import sssp

    kwargs = dict(cutoff=cutoff, weight=weight)

    def compute():
        if source not in G.nx_graph:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        distances = sssp(G.graph(weight), source, **QUIET).values  # labels are the nodes
        integral = weight is None or G.weights(weight)[1]
        return _nearest_first(G, distances, cutoff, int if integral else float)

    return _run_or_fallback("single_source_dijkstra_path_length", G, (source,), kwargs,
                            compute)


def _nearest_first(G, distances, cutoff, kind):
    reached = np.isfinite(distances) & (distances >= 0)
    if cutoff is not None:
        reached &= distances <= cutoff
    ids = np.flatnonzero(reached)
    ids = ids[np.argsort(distances[ids], kind="stable")]
    return {G.nodes[i]: kind(distances[i]) for i in ids}


def _levels(G, sources):
    """BFS levels (-1: unreached) from the dense ids ``sources``, on the unweighted
    graph."""
    from .algorithms.bfs import BreadthFirst
    from .scheduler.dispatcher import run

    graph = G.graph(None)
    result = run(BreadthFirst(np.asarray(sources, np.int64)), graph,
                 max_iterations=max(graph.num_vertices, 1), **QUIET)
    return result.values


def single_source_shortest_path_length(G, source, cutoff=None):
    """networkx.single_source_shortest_path_length on hetgraph (BFS levels)."""
    import networkx as nx

    def compute():
        if source not in G.nx_graph:
            raise nx.NodeNotFound(f"Source {source} is not in G")
        levels = _levels(G, [G.dense(source)]).astype(np.float64)
        return _nearest_first(G, levels, cutoff, int)

    return _run_or_fallback("single_source_shortest_path_length", G, (source,),
                            dict(cutoff=cutoff), compute)


def bfs_layers(G, sources):
    """networkx.bfs_layers on hetgraph: the same layers, each in G's node order
    (NetworkX lists a layer in discovery order)."""
    import networkx as nx

    if sources in G.nx_graph:
        sources = [sources]
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

    labels = hg_components(G.graph(None), **QUIET).values
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return (set(G.node(ids)) for ids in np.split(order, bounds))


def connected_components(G):
    """networkx.connected_components on hetgraph (undirected graphs)."""
    import networkx as nx

    if G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for directed type")
    return iter(()) if not G.nodes else _components(G)


def weakly_connected_components(G):
    """networkx.weakly_connected_components on hetgraph (directed graphs)."""
    import networkx as nx

    if not G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for undirected type")
    return iter(()) if not G.nodes else _components(G)


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
