"""Heat simulation (the HS workload of Garaph / CuSha): explicit diffusion in which
each vertex takes the conductance-weighted mean of itself and its in-neighbours.

    T'[v] = (T[v] + sum_{u -> v} w_uv * T[u]) / (1 + sum_{u -> v} w_uv)

Heat sources are held at temperature 1; every other vertex starts at 0. The step
never leaves [0, 1] (it is a weighted average). Fixed iterations (default 10).
"""

from __future__ import annotations

import numpy as np

from ..scheduler.entry import run
from ..io.store import as_graph
from ..registry import algorithm
from .common import in_weight_sums, vertex_id, WeightedInputs


class HeatDiffusion(WeightedInputs):
    """Diffusion program; aux = 1 / (1 + in-weight), 0 for held sources."""

    def __init__(self, sources, dtype=np.float32):
        self.sources = np.asarray(sources, np.int64)
        self.dtype = np.dtype(dtype)

    @staticmethod
    def apply(old, acc, aux):
        return (old + acc) * aux if aux > 0 else old

    def init(self, graph):
        values = np.zeros(graph.num_vertices, self.dtype)
        values[self.sources] = 1
        return values, None

    def aux(self, graph):
        aux = 1.0 / (1.0 + in_weight_sums(graph))
        aux[self.sources] = 0
        return aux.astype(self.dtype)


@algorithm("heat", program=HeatDiffusion, needs_source=True)
def heat(graph, sources, iterations=10, *, dtype=np.float32, **options):
    """Temperatures after ``iterations`` diffusion steps, with ``sources`` held at 1
    and every other vertex starting at 0 (formula in the module docstring).

    Parameters
    ----------
    graph : Graph or PageStore
        Edge weights are conductances (1 when unweighted).
    sources
        Original label, or labels, of the heat sources.
    iterations : int
        Steps to run. Default 10.
    dtype : numpy dtype
        float32 (default) or float64.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...).

    Returns
    -------
    Result
        ``values``: the temperature of every vertex, in [0, 1].

    Raises
    ------
    GraphError
        When a source is not a vertex.

    Examples
    --------
    >>> import hetgraph as hg
    >>> t = hg.heat(hg.datasets.load("wiki-vote"), 30)
    >>> float(t.values.max()), float(t.values.min())
    (1.0, 0.0)
    """
    graph = as_graph(graph, options.get("host_budget"))
    ids = [vertex_id(graph, s, "heat source") for s in np.atleast_1d(sources)]
    return run(HeatDiffusion(ids, dtype), graph, max_iterations=iterations, **options)
