"""Circuit simulation (the CS workload of Garaph / CuSha): node voltages of a resistor
network by Jacobi iteration on Kirchhoff's current law.

    V'[v] = sum_{u -> v} g_uv * V[u] / sum_{u -> v} g_uv   for a free node v
    V'[v] = V[v]                                           for a node held by a source

with g the edge weights as conductances (1 when unweighted). Free nodes start at 0.
At the fixed point no current is lost at any free node: on an undirected network this
is the solution of the Laplacian system with the held voltages as boundary values.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..scheduler.entry import run
from ..io.store import as_graph
from ..registry import algorithm
from .common import in_weight_sums, vertex_id, WeightedInputs


class Circuit(WeightedInputs):
    """Jacobi program; aux = 1 / in-conductance, 0 for held or isolated nodes."""

    def __init__(self, held, dtype=np.float64):
        self.held = held  # {dense id: volts}
        self.dtype = np.dtype(dtype)

    @staticmethod
    def apply(old, acc, aux):
        return acc * aux if aux > 0 else old

    def init(self, graph):
        values = np.zeros(graph.num_vertices, self.dtype)
        for v, volts in self.held.items():
            values[v] = volts
        return values, None

    def aux(self, graph):
        conductance = in_weight_sums(graph)
        with np.errstate(divide="ignore"):
            aux = np.where(conductance > 0, 1.0 / conductance, 0.0)
        aux[list(self.held)] = 0
        return aux.astype(self.dtype)


@algorithm("circuit", program=Circuit, cli=False)  # (its held voltages are a mapping)
def circuit(graph, voltages, iterations=10, *, dtype=np.float64, **options):
    """Node voltages of a resistor network after ``iterations`` Jacobi steps (module
    docstring), with some nodes held at fixed voltages.

    Parameters
    ----------
    graph : Graph or PageStore
        Edge weights are conductances (1 when unweighted).
    voltages : dict
        {original label: volts} held fixed, e.g. {source: 1.0, ground: 0.0}.
    iterations : int
        Steps to run (default 10); a large number runs to the fixed point.
    dtype : numpy dtype
        float64 (default) or float32.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...).

    Returns
    -------
    Result
        ``values``: the voltage of every node; free nodes start at 0.

    Raises
    ------
    GraphError
        When ``voltages`` is empty or names a node not in the graph.

    Examples
    --------
    >>> import hetgraph as hg
    >>> line = hg.generate.grid(1, 3, weights=None)  # nodes 0 - 1 - 2
    >>> hg.circuit(line, {0: 1.0, 2: 0.0}, iterations=50).values.tolist()
    [1.0, 0.5, 0.0]
    """
    if not voltages:
        raise GraphError("circuit needs at least one held voltage, e.g. {source: 1.0}")
    graph = as_graph(graph, options.get("host_budget"))
    held = {vertex_id(graph, label, "circuit node"): float(v) for label, v in voltages.items()}
    return run(Circuit(held, dtype), graph, max_iterations=iterations, **options)
