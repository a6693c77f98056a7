"""HITS hubs and authorities (Kleinberg) by power iteration, as ``networkx.hits``
defines them: the authorities a are the top right singular vector of A (A[u, v] = w_uv
for u -> v), the hubs h = A a, each scaled to sum to 1.

A vertex program gathers along in-edges only, and a HITS step needs both directions
(a = A^T h, h = A a), so the program runs on the bipartite double of the graph: hub
copies 0..N-1 and authority copies N..2N-1, an undirected edge u - (v + N) of weight
w_uv per arc u -> v. One sync iteration updates both halves::

    h'[u] = c * sum_{u -> v} w_uv * a[v],   a'[v] = c * sum_{u -> v} w_uv * h[u]

(c = 1 / ||(h, a)||_2, the iteration constant, keeps the values bounded). a then runs
two interleaved power iterations of A^T A (from a0 and from A^T h0), both towards the
top singular vector; the run stops when a, scaled to sum 1, changes by less than tol
in L1 between two iterations. The hooks take the array module ``xp``: a run on one
GPU keeps the state there, the norms and the convergence test computed on the device.
"""

from __future__ import annotations

import numpy as np

from ..errors import OutOfCoreError
from ..io.store import as_graph
from ..registry import algorithm
from ..scheduler.entry import run
from .pagerank import inverse_norm, l1_change, PowerIteration, vertex_weights


class Hits(PowerIteration):
    """HITS program on :func:`bipartite_double`: ``start``, the starting authorities
    (summing to 1; None: uniform), the hubs start uniform."""

    def __init__(self, tol=1e-8, start=None):
        self.tol = tol
        self.start = start

    @staticmethod
    def apply(old, acc, aux, constant):
        return acc * constant

    def init(self, graph, xp=np):
        n = graph.num_vertices // 2
        values = xp.full(2 * n, 1.0 / max(n, 1))
        if self.start is not None:
            values[n:] = xp.asarray(self.start)
        return values, None

    def iteration_constant(self, graph, values):
        return inverse_norm(values)

    def converged(self, graph, previous, values):
        n = graph.num_vertices // 2
        return l1_change(summing_to_one(previous[n:]), summing_to_one(values[n:])) < self.tol


def summing_to_one(values):
    """``values`` / their sum (themselves when it is 0), NumPy or CuPy (no wait for the
    device)."""
    total = values.sum()
    return values / (total + (total == 0))


def bipartite_double(graph, weighted=True):
    """The undirected bipartite double of ``graph`` (module docstring): hubs 0..N-1,
    authorities N..2N-1, labels their ids; kept by the graph."""
    weighted = weighted and graph.weighted

    def build():  # (unweighted: Hits gathers 1.0 on a graph without weights)
        n, arcs = graph.num_vertices, graph.num_arcs
        dtype = graph.index_dtype if 2 * n < np.iinfo(graph.index_dtype).max else np.int64
        # a hub's neighbours are its out-edges' authorities, an authority's its in-edges'
        # hubs: the CSR then the CSC, each sorted by neighbour, and the same both ways
        indptr = np.concatenate([graph.out_indptr, graph.in_indptr[1:] + arcs])
        indices = np.concatenate([graph.out_indices.astype(dtype) + dtype.type(n),
                                  graph.in_indices.astype(dtype)])
        weights = np.concatenate([graph.out_weights(), graph.in_weights]) \
            if weighted else None
        return graph.with_arrays(indptr, indices, weights, indptr, indices,
                                 directed=False, labels=np.arange(2 * n))

    return graph.kept(("hits-double", weighted), build)


@algorithm("hits", program=Hits, networkx=("hits",))
def hits(graph, max_iterations=100, tol=1e-8, *, nstart=None, weighted=True, **options):
    """HITS authorities and hubs of every vertex, each summing to 1 (module docstring).

    Parameters
    ----------
    graph : Graph or PageStore
        An undirected graph's A is symmetric: hubs and authorities are then equal.
    max_iterations : int
        HITS steps at most (each is two iterations of the program). Default 100.
    tol : float
        Stop when the authorities change by less than this in L1 (scaled to sum 1).
        Default 1e-8.
    nstart : dict or array_like, optional
        Starting authorities ({label: value}, missing vertices 0, or N values in
        dense-id order). Default None: uniform.
    weighted : bool
        Use the edge weights (NetworkX reads the attribute "weight"). Default True.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ...).

    Returns
    -------
    Result
        ``values``: the authority of every vertex; ``hubs``: the hub value of every
        vertex (an array of length N); ``converged`` False when ``tol`` was not reached.

    Raises
    ------
    OutOfCoreError
        For a store too large for ``host_budget`` (the bipartite double is built in
        memory).

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.from_arrays([0, 0, 1], [1, 2, 2])
    >>> result = hg.hits(g)
    >>> [round(float(x), 4) for x in result.values], [round(float(x), 4) for x in result.hubs]
    ([0.0, 0.382, 0.618], [0.618, 0.382, 0.0])
    """
    graph = as_graph(graph, options.get("host_budget"))
    if graph.in_indices is None:
        raise OutOfCoreError("hits needs the graph in memory (it runs on the graph's "
                             "bipartite double, built in memory); load the store with "
                             "hg.open_store or raise host_budget")
    n = graph.num_vertices
    double = bipartite_double(graph, weighted)
    program = Hits(tol, vertex_weights(graph, nstart, "nstart"))
    result = run(program, double, max_iterations=2 * max_iterations, **options)
    values = result.values
    result.graph = graph
    result.values, result.hubs = summing_to_one(values[n:]), summing_to_one(values[:n])
    return result
