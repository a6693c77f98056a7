"""Connected components by minimum-label propagation.

    label'[v] = min(label[v], min_{u - v} label[u]),  label[v] = v initially

On a directed graph the components are the weakly connected ones (edge directions
ignored). Each vertex ends with the smallest dense id of its component.
"""

from __future__ import annotations

import numpy as np

from ..scheduler.dispatcher import run
from ..io.store import as_graph
from ..registry import algorithm
from .common import MinRelaxation


class MinLabel(MinRelaxation):
    """Label propagation program; run it on an undirected graph."""

    def __init__(self, dtype=np.int64):
        self.dtype = np.dtype(dtype)

    @staticmethod
    def gather(src, weight, dst):
        return src

    def init(self, graph, xp=np):
        return xp.arange(graph.num_vertices, dtype=self.dtype), None


@algorithm("cc", program=MinLabel,
           networkx=("connected_components", "weakly_connected_components",
                     "number_connected_components", "is_connected", "is_weakly_connected",
                     "node_connected_component"))
def connected_components(graph, mode="async", **options):
    """Connected component of every vertex (weakly connected components on a directed
    graph: edge directions are ignored).

    Parameters
    ----------
    graph : Graph or PageStore
    mode : {"async", "sync"}
        "async" (default) gives the same answer as "sync" but a label crosses many
        vertices per iteration, so long paths (road networks) take a few iterations
        instead of their diameter.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...). ``max_iterations`` defaults to N.

    Returns
    -------
    Result
        ``values``: for every vertex, the smallest dense vertex id of its component
        (int32 below 2**31 vertices); ``len(np.unique(result.values))`` is the number
        of components. The result refers to ``graph``.

    Examples
    --------
    >>> import numpy as np
    >>> import hetgraph as hg
    >>> labels = hg.connected_components(hg.datasets.load("wiki-vote")).values
    >>> len(np.unique(labels))
    24
    """
    graph = as_graph(graph, options.get("host_budget"))
    undirected = graph.to_undirected()
    dtype = np.int32 if graph.num_vertices < 2**31 else np.int64
    options.setdefault("max_iterations", max(graph.num_vertices, 1))
    result = run(MinLabel(dtype), undirected, mode=mode, **options)
    result.graph = graph
    return result
