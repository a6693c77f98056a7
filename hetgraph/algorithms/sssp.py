"""Single-source shortest paths (Bellman-Ford style relaxation to a fixed point).

    dist'[v] = min(dist[v], min_{u -> v} dist[u] + w_uv),  dist[source] = 0

Unreachable vertices keep inf. Edge weights must be >= 0 (1 on unweighted graphs).
"""

from __future__ import annotations

import time

import numpy as np

from .. import tuning
from ..scheduler import direct
from ..scheduler.entry import run
from ..io.store import as_graph
from ..errors import GraphError
from ..registry import algorithm
from .common import check_nonnegative_weights, MinRelaxation, single_source_state, vertex_id


class ShortestPaths(MinRelaxation):
    """SSSP program from dense vertex id ``source``; ``delta``: the width of the
    distance buckets that CPU iterations run one at a time (delta-stepping; None: see
    :meth:`bucket_width`, inf: none)."""

    needs_weights = True

    def __init__(self, source, dtype=np.float64, delta=None):
        self.source = source
        self.dtype = np.dtype(dtype)
        self.delta = delta

    @staticmethod
    def gather(src, weight, dst):
        return src + weight

    @staticmethod
    def priority(value):
        return value

    def bucket_width(self, graph):
        """``delta`` when given, else twice the mean edge weight (of at most
        ``tuning.WEIGHT_SAMPLE`` weights, evenly spread over the first block of in-edges: the
        whole graph in memory, its first page in a store; 2 on unweighted graphs)."""
        if self.delta is not None:
            return self.delta
        if not graph.weighted:
            return 2.0
        sample = tuning.WEIGHT_SAMPLE
        return graph.kept(("sssp_bucket_width", sample), lambda: _mean_width(graph, sample))

    def init(self, graph, xp=np):
        return single_source_state(graph.num_vertices, self.source, np.inf, self.dtype, xp)


def _mean_width(graph, sample):
    """Twice the mean of ``sample`` weights of ``graph`` (see bucket_width), None when
    not positive; kept by the graph (every run asks for it twice)."""
    _, _, weights = next(iter(graph.in_edge_blocks()))
    weights = weights[::max(1, len(weights) // sample)]
    mean = float(np.mean(weights, dtype=np.float64)) if len(weights) else 0.0
    return 2 * mean if mean > 0 else None


@algorithm("sssp", program=ShortestPaths, needs_source=True, smallest_first=True,
           networkx=("single_source_dijkstra_path_length", "multi_source_dijkstra_path_length",
                     "single_source_bellman_ford_path_length", "shortest_path_length"))
def sssp(graph, source, *, dtype=np.float64, delta=None, max_iterations=None, **options):
    """Shortest-path distance from ``source`` to every vertex, following edge
    direction; edge weights are lengths (1 when unweighted).

    Parameters
    ----------
    graph : Graph or PageStore
        Weights must be >= 0.
    source
        Original label of the source vertex.
    dtype : numpy dtype
        float64 (default) or float32 (half the memory).
    delta : float, optional
        Width of the distance buckets that CPU iterations run one at a time
        (delta-stepping, in weight units); default twice the mean edge weight; inf:
        every active vertex each iteration (Bellman-Ford's order). The distances are
        the same whatever ``delta``; a good one relaxes far fewer edges.
    max_iterations : int, optional
        Default 2N + 1, above what the buckets need (at most one iteration per vertex
        and one per bucket); the run stops when no distance changes.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...).

    Returns
    -------
    Result
        ``values``: the distance of every vertex, inf where unreachable.

    Raises
    ------
    GraphError
        When ``source`` is not a vertex, a weight is negative or NaN, ``dtype`` is not
        a float type, or with float32, when a path could exceed float32's range.

    Examples
    --------
    >>> import numpy as np
    >>> import hetgraph as hg
    >>> dist = hg.sssp(hg.datasets.load("wiki-vote"), 30)
    >>> int(np.isfinite(dist.values).sum())
    2316
    """
    start = time.perf_counter()
    dtype = np.dtype(dtype)
    if dtype not in (np.float64, np.float32):  # integer sums would wrap around silently
        raise GraphError(f"sssp computes distances in float64 or float32, not dtype={dtype}; "
                         "use dtype=np.float64 (exact for integer lengths up to 2**53)")
    graph = as_graph(graph, options.get("host_budget"))
    check_nonnegative_weights(graph, "sssp")
    longest = graph.max_weight() * max(graph.num_vertices - 1, 0)  # a path's bound
    if dtype == np.float32 and longest > float(np.finfo(np.float32).max):
        raise GraphError(f"sssp in float32: a path of up to {graph.num_vertices - 1:,} edges of "
                         f"weight up to {graph.max_weight():.3g} may exceed float32's "
                         f"{np.finfo(np.float32).max:.2g} (it would read as inf); use "
                         "dtype=np.float64")
    program = ShortestPaths(vertex_id(graph, source), dtype, delta)
    if max_iterations is None and direct.applies(graph, options):  # (delta: speed alone)
        return direct.shortest_paths(graph, program.source, dtype, program.name, start)
    limit = 2 * graph.num_vertices + 1 if max_iterations is None else max_iterations
    return run(program, graph, max_iterations=limit, **options)
