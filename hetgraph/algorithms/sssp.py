"""Single-source shortest paths (Bellman-Ford style relaxation to a fixed point).

    dist'[v] = min(dist[v], min_{u -> v} dist[u] + w_uv),  dist[source] = 0

Unreachable vertices keep inf. Edge weights must be >= 0 (1 on unweighted graphs).
"""

from __future__ import annotations

import numpy as np

from ..scheduler.dispatcher import run
from ..io.store import as_graph
from .common import check_nonnegative_weights, MinRelaxation, single_source_state, vertex_id


class ShortestPaths(MinRelaxation):
    """SSSP program from dense vertex id ``source``."""

    needs_weights = True

    def __init__(self, source, dtype=np.float64):
        self.source = source
        self.dtype = np.dtype(dtype)

    @staticmethod
    def gather(src, weight, dst):
        return src + weight

    def init(self, graph):
        return single_source_state(graph.num_vertices, self.source, np.inf, self.dtype)


def sssp(graph, source, *, dtype=np.float64, max_iterations=None, **options):
    """Shortest-path distance from ``source`` (an original label) to every vertex.

    Distances are float64 by default (``dtype=np.float32`` halves the memory); inf where
    unreachable. Runs until no distance changes (``max_iterations`` default: N).
    Other options go to :func:`hetgraph.run`.
    """
    graph = as_graph(graph, options.get("host_budget"))
    check_nonnegative_weights(graph, "sssp")
    program = ShortestPaths(vertex_id(graph, source), dtype)
    limit = max(graph.num_vertices, 1) if max_iterations is None else max_iterations
    return run(program, graph, max_iterations=limit, **options)
