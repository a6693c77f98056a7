"""PageRank as NetworkX computes it (dangling vertices spread their rank uniformly).

    rank'[v] = (1 - d) / N + d * (sum_{u -> v} rank[u] * w_uv / W_u + D / N)

with d the damping, W_u the out-weight of u (out-degree when unweighted) and D the
total rank of dangling vertices (W_u = 0). Internally a vertex holds
x[u] = d * rank[u] / W_u (d * rank[u] when dangling), so that gather is one multiply:
acc = sum x[u] * w_uv, rank' = c + acc with the iteration constant c = (1 - d) / N +
(sum of dangling x) / N, and x' = rank' * aux with aux = d / W (d when dangling).
Stops when sum |rank' - rank| < N * tol (NetworkX's test) or after max_iterations.
"""

from __future__ import annotations

import logging

import numpy as np

from ..errors import GraphError
from ..io.store import as_graph
from ..kernels.arrays import indexed_sum, on_device_of
from ..program import VertexProgram
from ..registry import algorithm
from ..scheduler.dispatcher import run
from .common import check_nonnegative_weights

log = logging.getLogger("hetgraph.algorithms")


class PageRank(VertexProgram):
    """PageRank program (see the module docstring); ``tol=None`` runs all iterations."""

    reduce = "add"
    notify_self = True  # every rank depends on the dangling total

    def __init__(self, damping=0.85, tol=1e-6, dtype=np.float64, weighted=True):
        if not 0.0 < damping <= 1.0:
            raise GraphError(f"damping={damping} is out of range; use 0 < damping <= 1")
        if tol is not None and not tol > 0:
            raise GraphError(f"tol={tol} must be > 0 or None")
        self.damping = float(damping)
        self.tol = tol
        if tol is None:
            self.converged = None  # fixed iterations: no L1 test, no copy of the values
        self.dtype = np.dtype(dtype)
        self.needs_weights = bool(weighted)

    @staticmethod
    def gather(src, weight, dst):
        return src * weight

    @staticmethod
    def apply(old, acc, aux, constant):
        return (constant + acc) * aux

    @staticmethod
    def activate(new, old):
        return True

    def init(self, graph):
        n = graph.num_vertices
        weighted = self.needs_weights and graph.weighted
        parameters = (self.damping, self.dtype.str, weighted)
        # the arrays of the graph's last PageRank parameters only (a sweep over the
        # damping keeps one set), swapped in as one tuple: runs in threads may race
        last = graph.kept("pagerank", dict)
        kept = last.get("arrays")
        if kept is None or kept[0] != parameters:
            kept = last["arrays"] = (parameters, _derived(graph, self.damping, self.dtype,
                                                          weighted))
        self._dangling, self._scale, self._rank_of = kept[1]
        return np.full(n, 1.0 / max(n, 1)) * self._scale, None

    def aux(self, graph):
        return self._scale

    # the hooks get the values on the device that holds them (NumPy or CuPy arrays)
    def iteration_constant(self, graph, values):
        n = graph.num_vertices
        # a 0-d device array on the GPU: no wait for the device here
        return indexed_sum(values, self._dangling, 1.0 / n, (1.0 - self.damping) / n)

    def converged(self, graph, previous, values):
        change = abs(values.astype(np.float64) - previous)
        rank_of = on_device_of(values, self._rank_of)
        # on the host einsum, not NumPy's BLAS dot, whose threads would then spin on
        # every core (see scheduler.costmodel.frontier_growth)
        total = np.einsum("i,i->", change, rank_of) if isinstance(change, np.ndarray) \
            else change @ rank_of
        return float(total) < graph.num_vertices * self.tol

    def finalize(self, graph, values):
        return np.divide(values, self._scale, out=values)  # (the run's own array)


def _derived(graph, damping, dtype, weighted):
    """(dangling vertices, aux = d / W (d when dangling) in ``dtype``, rank per unit of
    internal value) of ``graph``: what every call on the graph with these parameters
    shares, kept by the graph (not to be written; aux stays writeable, as the compiled
    passes are typed for writeable arrays)."""
    out_weight = graph.out_weight_sums() if weighted else graph.out_degree().astype(np.float64)
    dangling = _as_range(np.flatnonzero(out_weight == 0))
    with np.errstate(divide="ignore"):
        scale = np.where(out_weight > 0, damping / out_weight, damping)
    rank_of = 1.0 / scale
    scale = scale.astype(dtype)
    for array in (rank_of,) + ((dangling,) if isinstance(dangling, np.ndarray) else ()):
        array.flags.writeable = False
    return dangling, scale, rank_of


def _as_range(index):
    """``index`` (increasing) as a slice when it is a run of consecutive vertices (degree
    order puts the dangling vertices last), else as it is: the sum over a slice reads
    no indices."""
    if len(index) == 0:
        return slice(0, 0)
    first, last = int(index[0]), int(index[-1])
    return slice(first, last + 1) if last - first + 1 == len(index) else index


@algorithm("pagerank", program=PageRank, networkx=("pagerank",))
def pagerank(graph, damping=0.85, max_iterations=100, tol=1e-6, *, weighted=True,
             dtype=np.float64, **options):
    """PageRank of every vertex (the ranks sum to 1), as ``networkx.pagerank``
    computes it (formula in the module docstring).

    Parameters
    ----------
    graph : Graph or PageStore
    damping : float
        d, in (0, 1]. Default 0.85.
    max_iterations : int
        Default 100.
    tol : float or None
        Stop when the L1 change of the ranks is below N * tol (default 1e-6); None
        runs ``max_iterations`` exactly.
    weighted : bool
        Use the edge weights when the graph has them (NetworkX's weight="weight").
        Default True.
    dtype : numpy dtype
        float64 (default) or float32.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...).

    Returns
    -------
    Result
        ``values``: the rank of every vertex. ``converged`` is False when ``tol`` was
        not reached (NetworkX raises then; hetgraph logs a warning).

    Raises
    ------
    GraphError
        When ``damping`` or ``tol`` is out of range, or (``weighted``) a weight is
        negative or NaN.

    Examples
    --------
    >>> import hetgraph as hg
    >>> ranks = hg.pagerank(hg.datasets.load("wiki-vote"))
    >>> ranks.converged, round(float(ranks.values.sum()), 6)
    (True, 1.0)
    """
    graph = as_graph(graph, options.get("host_budget"))
    if weighted:  # a negative out-weight makes ranks negative and their sum meaningless
        check_nonnegative_weights(graph, "pagerank")
    result = run(PageRank(damping, tol, dtype, weighted), graph,
                 max_iterations=max_iterations, **options)
    if tol is not None and not result.converged:
        log.warning("pagerank did not reach tol=%g in %d iterations", tol, max_iterations)
    return result
