"""NetworkX backend (entry point ``networkx.backends``: ``hetgraph``).

    nx.pagerank(G, personalization={0: 1}, backend="hetgraph")
    nx.hits(G, backend="hetgraph")
    nx.single_source_dijkstra_path_length(G, source, backend="hetgraph")
    nx.connected_components(G, backend="hetgraph")          # undirected G

and the other functions of :data:`FUNCTIONS` run on hetgraph (every CPU core and GPU;
inside ``with hg.Cluster()`` on that cluster) and return what NetworkX returns (a
multigraph's parallel edges add their weights in pagerank and hits and the lightest
counts in Dijkstra, as in NetworkX). A call hetgraph cannot answer exactly (another
function, or arguments such as ``alpha=0``, a weight function, weights float32 cannot
hold, negative or non-numeric weights) runs NetworkX's own implementation after a
:class:`NetworkXFallbackWarning` that says why. A graph with fewer arcs than the
function's ``hetgraph.tuning.NX_MIN_ARCS`` goes to NetworkX silently (its answer is
NetworkX's; hetgraph's per-call cost would exceed NetworkX's whole call). With
``nx.config.backend_priority = ["hetgraph"]`` such calls go to NetworkX silently
(``should_run`` says no).

The NetworkX graph is converted on first use, per weight attribute, and the converted
graph is kept in NetworkX's cache of the graph.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from . import tuning
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

    def reversed(self):
        """This graph with every edge reversed (NetworkX's ``G.reverse(copy=False)``;
        itself when undirected), kept."""
        if not self.nx_graph.is_directed():
            return self
        if "_reverse" not in self.__dict__:
            self._reverse = _Reversed(self)
        return self._reverse

    def node(self, ids):
        """The NetworkX nodes of dense ids."""
        return [self.node_list[i] for i in ids]

    def dense(self, node):
        """Dense id of ``node`` (its position in the graph's node order)."""
        if "_index" not in self.__dict__:
            self._index = {n: i for i, n in enumerate(self.node_list)}
        return self._index[node]


class _Reversed(BackendGraph):
    """A directed BackendGraph with its edges reversed: its hetgraph graphs are the
    original's with the CSC and CSR swapped (no conversion), its weights the
    original's."""

    def __init__(self, original):
        super().__init__(original.nx_graph.reverse(copy=False))
        self.original = original

    def converted(self, weight=None, dedup="first"):
        key = (weight, dedup if self.nx_graph.is_multigraph() else "first")
        if key not in self._graphs:
            g = self.original.converted(weight, dedup)
            self._graphs[key] = g.with_arrays(g.out_indptr, g.out_indices, g.out_weights(),
                                              g.in_indptr, g.in_indices)
        return self._graphs[key]

    def weights(self, weight):
        return self.original.weights(weight)


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
    """True: what hetgraph cannot do exactly, or faster, runs NetworkX's own inside the
    call (declining would make ``backend="hetgraph"`` raise NotImplementedError). Under
    NetworkX's own test harness with ``fallback_to_nx`` (``NETWORKX_TEST_BACKEND=hetgraph
    NETWORKX_FALLBACK_TO_NX=1``), where a declined call just runs NetworkX's own, the
    calls hetgraph would hand to NetworkX anyway (functions it does not implement, graphs
    below the crossover) are declined: the harness then spares its conversion and copies
    of the graphs, which cost more than the call."""
    import networkx as nx
    from networkx.utils.backends import _dispatchable

    if not (getattr(_dispatchable, "_is_testing", False) and nx.config.fallback_to_nx):
        return True
    if name not in FUNCTIONS:
        return f"hetgraph does not implement {name}"
    graph = args[0] if args else kwargs.get("G")
    if isinstance(graph, BackendGraph) or hasattr(graph, "_adj"):
        if _small(name, graph):
            return _SMALL
    return True


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
    if _small(name, graph):
        return _SMALL
    reason = _unsupported(name, graph if isinstance(graph, BackendGraph) else
                          BackendGraph(graph), arguments)
    return True if reason is None else reason


_SMALL = "the graph is too small for hetgraph to beat NetworkX (tuning.NX_MIN_ARCS)"


def _small(name, graph):
    """Whether ``graph`` (a NetworkX graph or a BackendGraph) has fewer arcs than the
    crossover of ``name`` (an undirected edge counts twice; counting stops at the bound:
    a large graph costs no more than a small one)."""
    bound = tuning.NX_MIN_ARCS.get(name, 0)
    nx_graph = graph.nx_graph if isinstance(graph, BackendGraph) else graph
    if bound <= 0 or len(nx_graph) >= bound:
        return False
    arcs = 0
    for neighbours in nx_graph._adj.values():
        arcs += len(neighbours)
        if arcs >= bound:
            return False
    return True


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
    warnings.warn(f"hetgraph: networkx.{name} {reason}; running NetworkX's own "
                  f"implementation", NetworkXFallbackWarning, stacklevel=4)
    return _networkx(name, args, kwargs)


def _networkx(name, args, kwargs):
    """NetworkX's own ``name`` on the original graphs."""
    from networkx.utils.backends import _registered_algorithms

    return _registered_algorithms[name].orig_func(*_nx(args), **_nx(kwargs))


def _small_to_networkx(function):
    """An adapter that sends a graph below its crossover (:func:`_small`) to NetworkX's
    own function, silently (the answer is NetworkX's either way)."""
    name = function.__name__

    @functools.wraps(function)
    def adapter(G, *args, **kwargs):
        if _small(name, G):
            return _networkx(name, (G, *args), kwargs)
        return function(G, *args, **kwargs)

    return adapter


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
    check = _CHECKS.get(name)
    return None if check is None else check(graph, kwargs)


def _pagerank_unsupported(graph, kwargs):
    alpha, tol = kwargs.get("alpha", 0.85), kwargs.get("tol", 1e-6)
    if not 0 < alpha <= 1:
        return f"with alpha={alpha} is not supported by hetgraph (it needs 0 < alpha <= 1)"
    if not tol > 0:
        return f"with tol={tol} is not supported by hetgraph (it needs tol > 0)"
    weight = kwargs.get("weight", "weight")
    reason = None if weight is None else _weights_unsupported(graph, weight)
    if reason is not None:
        return reason
    for key in ("personalization", "nstart", "dangling"):
        if _node_vector(graph, kwargs.get(key), scaled=True) is False:
            return (f"with a {key} that is not a dict of numbers with a nonzero sum is "
                    f"not supported by hetgraph")
    return None


def _node_vector(graph, given, scaled=False):
    """``given`` (a dict {node: number}, missing nodes 0) as float64 in the graph's node
    order, scaled to sum 1 when ``scaled``; None for None; False when it is not such a
    dict (or its sum is 0 or not finite, when ``scaled``)."""
    if given is None:
        return None
    if not isinstance(given, dict):
        return False
    try:
        vector = np.array([given.get(n, 0) for n in graph.node_list], np.float64)
    except (TypeError, ValueError, OverflowError):
        return False
    if not scaled:
        return vector
    total = vector.sum()
    return vector / total if np.isfinite(vector).all() and total != 0 else False


def _every_node(graph, given):
    """:func:`_node_vector` of a dict naming exactly the graph's nodes, False otherwise."""
    if not isinstance(given, dict) or len(given) != len(graph.node_list) or \
            any(n not in given for n in graph.node_list):
        return False
    vector = _node_vector(graph, given)
    return vector if vector is not False and np.isfinite(vector).all() else False


def _hits_unsupported(graph, kwargs):
    if kwargs.get("nstart") is not None and _every_node(graph, kwargs["nstart"]) is False:
        return "with an nstart that does not give every node a number is not supported"
    if graph.node_list and graph.nx_graph.number_of_edges() == 0:
        return "on a graph without edges is not supported by hetgraph"
    return _weights_unsupported(graph, "weight")


def _eigenvector_unsupported(graph, kwargs):
    nstart = kwargs.get("nstart")
    if nstart is not None:
        vector = _every_node(graph, nstart)
        if vector is False or not vector.sum() != 0:
            return "with an nstart not giving every node a number, summing to nonzero, " \
                   "is not supported by hetgraph"
    return _signed_weights_unsupported(graph, kwargs.get("weight"))


def _katz_unsupported(graph, kwargs):
    beta, nstart = kwargs.get("beta", 1.0), kwargs.get("nstart")
    if not isinstance(beta, (int, float, np.number)) and _every_node(graph, beta) is False:
        return "with a beta that is not a number or a dict of every node's number is " \
               "not supported by hetgraph"
    if nstart is not None and _every_node(graph, nstart) is False:
        return "with an nstart that does not give every node a number is not supported"
    return _signed_weights_unsupported(graph, kwargs.get("weight"))


def _dijkstra_unsupported(graph, kwargs, signed=False):
    """Why hetgraph cannot run Dijkstra (or, ``signed``: Bellman-Ford, whose weights
    may be negative) on ``graph`` exactly."""
    weight = kwargs.get("weight", "weight")
    if callable(weight):
        return "with a weight function is not supported by hetgraph"
    if weight is None:
        return None
    reason = (_signed_weights_unsupported if signed else _weights_unsupported)(graph, weight)
    if reason is not None:
        return reason
    w = graph.weights(weight)[0]
    if not np.array_equal(w.astype(np.float32), w):
        return ("with weights float32 cannot hold exactly is not supported by "
                "hetgraph (it keeps float32 weights)")
    return None


def _shortest_path_length_unsupported(graph, kwargs):
    if (kwargs.get("source") is None) == (kwargs.get("target") is None):
        return ("with neither a source nor a target (all pairs), or with both (one pair, "
                "where NetworkX's bidirectional search stops early), is not supported by "
                "hetgraph")
    return None


def _node_unsupported(graph, kwargs):
    if kwargs.get("n") not in graph.nx_graph:
        return "with a node not in the graph is not supported by hetgraph"
    return None


def _signed_weights_unsupported(graph, weight):
    """Why hetgraph cannot read the edge attribute ``weight``, negative values allowed
    (None: it can, or ``weight`` is None)."""
    if weight is None:
        return None
    w = graph.weights(weight)[0]
    if w is None:
        return "with weights that are not float64 numbers is not supported by hetgraph"
    if not (np.abs(w) <= np.finfo(np.float32).max).all():  # (NaN fails it too)
        return ("with weights that are not finite float32 numbers is not supported by "
                "hetgraph")
    return None


def _weights_unsupported(graph, weight):
    """Why hetgraph cannot read the edge attribute ``weight`` (None: it can)."""
    reason = _signed_weights_unsupported(graph, weight)
    if reason is None and (graph.weights(weight)[0] < 0).any():
        return "with negative weights is not supported by hetgraph"
    return reason


_CHECKS = {
    "pagerank": _pagerank_unsupported,
    "hits": _hits_unsupported,
    "eigenvector_centrality": _eigenvector_unsupported,
    "katz_centrality": _katz_unsupported,
    "single_source_dijkstra_path_length": _dijkstra_unsupported,
    "multi_source_dijkstra_path_length": _dijkstra_unsupported,
    "single_source_bellman_ford_path_length": functools.partial(_dijkstra_unsupported,
                                                                signed=True),
    "shortest_path_length": _shortest_path_length_unsupported,
    "node_connected_component": _node_unsupported,
}


def _run_or_fallback(name, graph, args, kwargs, compute):
    reason = _unsupported(name, graph, kwargs)
    if reason is not None:
        return _fallback(name, reason, (graph, *args), kwargs)
    return compute()


# --- the algorithms ------------------------------------------------------------------------------

@_small_to_networkx
def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1e-06, nstart=None,
             weight="weight", dangling=None):
    """networkx.pagerank on hetgraph (same stopping test: L1 change < N * tol; a
    multigraph's parallel edges add their weights, as in NetworkX); personalized when
    ``personalization`` is given."""
    from .algorithms import pagerank as hg_pagerank

    kwargs = dict(alpha=alpha, personalization=personalization, max_iter=max_iter, tol=tol,
                  nstart=nstart, weight=weight, dangling=dangling)

    def compute():
        if not G.node_list:
            return {}
        vectors = {key: _node_vector(G, kwargs[key])
                   for key in ("personalization", "nstart", "dangling")}
        result = hg_pagerank(G.converted(weight, "sum"), damping=alpha,
                             max_iterations=max_iter, tol=tol, **vectors, **QUIET)
        return _converged_values(G, result, max_iter)

    return _run_or_fallback("pagerank", G, (), kwargs, compute)


def _converged_values(G, result, max_iter):
    """{node: float value} of a converged ``result``; NetworkX's error if not."""
    import networkx as nx

    if not result.converged:
        raise nx.PowerIterationFailedConvergence(max_iter)
    return dict(zip(G.node_list, result.values.tolist()))


@_small_to_networkx
def hits(G, max_iter=100, tol=1.0e-8, nstart=None, normalized=True):
    """networkx.hits on hetgraph: (hubs, authorities), each summing to 1, by power
    iteration to an L1 change below ``tol`` (NetworkX runs ARPACK's svds to ``tol``);
    ``normalized=False``: the authorities of unit L2 norm and the hubs A times them, as
    NetworkX's, with the nonnegative sign (NetworkX's is ARPACK's, from a random
    start). What does not converge in ``max_iter`` steps (a top singular value shared
    by two vectors, as on bipartite undirected graphs) runs NetworkX's own."""
    import networkx as nx

    from .algorithms import hits as hg_hits
    from .algorithms.centrality import unit

    kwargs = dict(max_iter=max_iter, tol=tol, nstart=nstart, normalized=normalized)

    def compute():
        if not G.node_list:
            return {}, {}
        if max_iter <= 0:
            raise nx.PowerIterationFailedConvergence(max_iter)
        graph = G.converted("weight", "sum")
        result = hg_hits(graph, max_iter, tol, nstart=_node_vector(G, nstart), **QUIET)
        if not result.converged:
            return _fallback("hits", f"did not converge by power iteration in {max_iter} "
                             f"steps", (G,), kwargs)
        hubs, authorities = result.hubs, result.values
        if not normalized:  # NetworkX's: a of unit L2 norm, h = A a
            authorities = unit(authorities)
            hubs = _adjacency_times(graph, authorities)
        return (dict(zip(G.node_list, hubs.tolist())),
                dict(zip(G.node_list, authorities.tolist())))

    return _run_or_fallback("hits", G, (), kwargs, compute)


def _adjacency_times(graph, x):
    """A x (A[u, v] = w_uv for each arc u -> v of ``graph``), float64."""
    heads = np.repeat(np.arange(graph.num_vertices), np.diff(graph.in_indptr))
    along = x[heads] if graph.in_weights is None else x[heads] * graph.in_weights
    return np.bincount(graph.in_indices, weights=along, minlength=graph.num_vertices)


@_small_to_networkx
def eigenvector_centrality(G, max_iter=100, tol=1.0e-6, nstart=None, weight=None):
    """networkx.eigenvector_centrality on hetgraph (the same iterates and stopping
    test)."""
    import networkx as nx

    from .algorithms import eigenvector_centrality as hg_eigenvector

    kwargs = dict(max_iter=max_iter, tol=tol, nstart=nstart, weight=weight)

    def compute():
        if not G.node_list:
            raise nx.NetworkXPointlessConcept("cannot compute centrality for the null graph")
        result = hg_eigenvector(G.converted(weight), max_iter, tol,
                                nstart=_node_vector(G, nstart), weighted=weight is not None,
                                **QUIET)
        return _converged_values(G, result, max_iter)

    return _run_or_fallback("eigenvector_centrality", G, (), kwargs, compute)


@_small_to_networkx
def katz_centrality(G, alpha=0.1, beta=1.0, max_iter=1000, tol=1.0e-6, nstart=None,
                    normalized=True, weight=None):
    """networkx.katz_centrality on hetgraph (the same iterates and stopping test)."""
    from .algorithms import katz_centrality as hg_katz

    kwargs = dict(alpha=alpha, beta=beta, max_iter=max_iter, tol=tol, nstart=nstart,
                  normalized=normalized, weight=weight)

    def compute():
        if not G.node_list:
            return {}
        beta_vector = float(beta) if isinstance(beta, (int, float, np.number)) else \
            _node_vector(G, beta)
        result = hg_katz(G.converted(weight), alpha, beta_vector, max_iter, tol,
                         nstart=_node_vector(G, nstart), normalized=normalized,
                         weighted=weight is not None, **QUIET)
        return _converged_values(G, result, max_iter)

    return _run_or_fallback("katz_centrality", G, (), kwargs, compute)


def _path_lengths(name, G, sources, cutoff, weight, kwargs):
    """{node: distance} from the nearest of ``sources`` (nodes of G) for the Dijkstra
    and Bellman-Ford adapters of ``name``: nearest first, the types NetworkX gives (see
    :func:`single_source_dijkstra_path_length`). Negative weights (Bellman-Ford only)
    run sync rounds without distance buckets: without a negative cycle the distances
    settle within N rounds; a negative cycle the sources reach raises NetworkX's
    NetworkXUnbounded, as NetworkX's own."""
    import networkx as nx

    from .algorithms.sssp import ShortestPaths
    from .scheduler.dispatcher import run

    graph = G.converted(weight, "min")
    ids = np.array([G.dense(s) for s in sources], np.int64)
    if weight is not None and (G.weights(weight)[0] < 0).any():
        result = run(ShortestPaths(ids, delta=np.inf), graph, mode="sync",
                     max_iterations=graph.num_vertices + 1, **QUIET)
        if not result.converged:
            raise nx.NetworkXUnbounded("Negative cycle detected.")
    else:
        result = run(ShortestPaths(ids), graph, max_iterations=2 * graph.num_vertices + 1,
                     **QUIET)
    distances = result.values
    reached = np.isfinite(distances)
    if cutoff is not None:
        reached &= distances <= cutoff
    kind = _distance_kind(G, weight, reached)
    if kind is None:
        return _fallback(name, "with int and float weights on the searched edges is not "
                         "supported by hetgraph (NetworkX's distance type follows its "
                         "path)", (G,), kwargs)
    return _nearest_first(G, sources, distances, reached, kind)


@_small_to_networkx
def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
    """networkx.single_source_dijkstra_path_length on hetgraph: {node: distance} of the
    reached nodes, nearest first; the types NetworkX gives (the source's 0 an int, the
    others ints when every weight is an int, else floats); a multigraph's lightest
    parallel edge counts, as in NetworkX."""
    import networkx as nx

    name = "single_source_dijkstra_path_length"
    kwargs = dict(source=source, cutoff=cutoff, weight=weight)

    def compute():
        if source not in G.nx_graph:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        return _path_lengths(name, G, [source], cutoff, weight, kwargs)

    return _run_or_fallback(name, G, (), kwargs, compute)


@_small_to_networkx
def multi_source_dijkstra_path_length(G, sources, cutoff=None, weight="weight"):
    """networkx.multi_source_dijkstra_path_length on hetgraph: distances from the
    nearest source (as :func:`single_source_dijkstra_path_length`)."""
    import networkx as nx

    name = "multi_source_dijkstra_path_length"
    sources = list(sources) if not isinstance(sources, (set, frozenset, list, tuple)) \
        else sources  # (may be an iterator: read once)
    kwargs = dict(sources=sources, cutoff=cutoff, weight=weight)

    def compute():
        if not sources:
            raise ValueError("sources must not be empty")
        for s in sources:
            if s not in G.nx_graph:
                raise nx.NodeNotFound(f"Node {s} not found in graph")
        return _path_lengths(name, G, list(sources), cutoff, weight, kwargs)

    return _run_or_fallback(name, G, (), kwargs, compute)


@_small_to_networkx
def single_source_bellman_ford_path_length(G, source, weight="weight"):
    """networkx.single_source_bellman_ford_path_length on hetgraph, negative weights
    included (NetworkXUnbounded when the source reaches a negative cycle)."""
    import networkx as nx

    name = "single_source_bellman_ford_path_length"
    kwargs = dict(source=source, weight=weight)

    def compute():
        if source not in G.nx_graph:
            raise nx.NodeNotFound(f"Source {source} not in G")
        return _path_lengths(name, G, [source], None, weight, kwargs)

    return _run_or_fallback(name, G, (), kwargs, compute)


@_small_to_networkx
def shortest_path_length(G, source=None, target=None, weight=None, method="dijkstra"):
    """networkx.shortest_path_length on hetgraph with a source and no target, or a
    target and no source (from every node: the source's run on the reversed graph);
    BFS, Dijkstra or Bellman-Ford as NetworkX chooses them."""
    if method not in ("dijkstra", "bellman-ford"):
        raise ValueError(f"method not supported: {method}")
    kwargs = dict(source=source, target=target, weight=weight, method=method)

    def compute():
        graph, start = (G, source) if source is not None else (G.reversed(), target)
        if weight is None:
            return single_source_shortest_path_length(graph, start)
        if method == "dijkstra":
            return single_source_dijkstra_path_length(graph, start, weight=weight)
        return single_source_bellman_ford_path_length(graph, start, weight=weight)

    return _run_or_fallback("shortest_path_length", G, (), kwargs, compute)


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


def _nearest_first(G, sources, distances, reached, kind):
    """{node: distance as ``kind``} of the ``reached`` nodes, nearest first, beginning
    with ``sources`` at int 0 (NetworkX's start value, whatever the weights)."""
    ids = np.flatnonzero(reached)
    ids = ids[np.argsort(distances[ids], kind="stable")]
    found = dict.fromkeys(sources, 0)
    starts = {G.dense(s) for s in sources}
    found.update((G.node_list[i], kind(distances[i])) for i in ids if i not in starts)
    return found


def _levels(G, sources, undirected=False):
    """BFS levels (-1: unreached) from the dense ids ``sources``, on the unweighted
    graph (its undirected view when ``undirected``)."""
    from .algorithms.bfs import BreadthFirst
    from .scheduler.dispatcher import run

    graph = G.converted(None).to_undirected() if undirected else G.converted(None)
    result = run(BreadthFirst(np.asarray(sources, np.int64)), graph,
                 max_iterations=max(graph.num_vertices, 1), **QUIET)
    return result.values


@_small_to_networkx
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
        return _nearest_first(G, [source], levels, reached, int)

    return _run_or_fallback("single_source_shortest_path_length", G, (source,),
                            dict(cutoff=cutoff), compute)


@_small_to_networkx
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


def _labels(G):
    """Component label of every node (dense order): the smallest dense id in it."""
    from .algorithms import connected_components as hg_components

    return hg_components(G.converted(None), **QUIET).values


def _components(G):
    labels = _labels(G)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return (set(G.node(ids)) for ids in np.split(order, bounds))


def _check_direction(G, directed):
    """NetworkX's error for a graph of the other direction (its decorator raises it
    before dispatch; a direct call of the adapter gets it here)."""
    import networkx as nx

    if G.is_directed() != directed:
        kind = "undirected" if directed else "directed"
        raise nx.NetworkXNotImplemented(f"not implemented for {kind} type")


@_small_to_networkx
def connected_components(G):
    """networkx.connected_components on hetgraph (undirected graphs)."""
    _check_direction(G, False)
    return iter(()) if not G.node_list else _components(G)


@_small_to_networkx
def weakly_connected_components(G):
    """networkx.weakly_connected_components on hetgraph (directed graphs)."""
    _check_direction(G, True)
    return iter(()) if not G.node_list else _components(G)


@_small_to_networkx
def number_connected_components(G):
    """networkx.number_connected_components on hetgraph (undirected graphs)."""
    _check_direction(G, False)
    return 0 if not G.node_list else len(np.unique(_labels(G)))


def _connected(G):
    """Whether a BFS from the first node, edge directions ignored, reaches every node:
    as NetworkX's test, it stops as soon as the first node's component is done (a
    graph with a small one answers at once; component labels would cost a whole run)."""
    import networkx as nx

    if not G.node_list:
        raise nx.NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
    if G.nx_graph.degree(G.node_list[0]) == 0:  # isolated: no run needed
        return len(G.node_list) == 1
    return bool((_levels(G, [0], undirected=True) >= 0).all())


@_small_to_networkx
def is_connected(G):
    """networkx.is_connected on hetgraph (undirected graphs)."""
    _check_direction(G, False)
    return _connected(G)


@_small_to_networkx
def is_weakly_connected(G):
    """networkx.is_weakly_connected on hetgraph (directed graphs)."""
    _check_direction(G, True)
    return _connected(G)


@_small_to_networkx
def node_connected_component(G, n):
    """networkx.node_connected_component on hetgraph (undirected graphs): the set of
    nodes a BFS from ``n`` reaches (it stops with ``n``'s component, as NetworkX's)."""
    _check_direction(G, False)

    def compute():
        return set(G.node(np.flatnonzero(_levels(G, [G.dense(n)]) >= 0)))

    return _run_or_fallback("node_connected_component", G, (), dict(n=n), compute)


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
