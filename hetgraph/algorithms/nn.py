"""Neural network simulation (the NN workload of Garaph / CuSha): each vertex is a
neuron whose activation is the logistic function of its weighted inputs.

    a'[v] = sigma(sum_{u -> v} w_uv * a[u] + b[v]),  sigma(z) = 1 / (1 + exp(-z))

Weights are the edge weights (1 when unweighted), b the per-vertex bias (default 0),
a = 0.5 everywhere initially. Runs a fixed number of iterations (default 10).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import GraphError
from ..scheduler.entry import run
from ..registry import algorithm
from .common import WeightedInputs


class NeuralNetwork(WeightedInputs):
    """Logistic neuron program; ``bias`` is a float or an array of length N."""

    def __init__(self, bias=0.0, initial=0.5, dtype=np.float32):
        self.bias = bias
        self.initial = initial
        self.dtype = np.dtype(dtype)

    @staticmethod
    def apply(old, acc, aux):
        return 1.0 / (1.0 + math.exp(-(acc + aux)))

    def init(self, graph):
        return np.full(graph.num_vertices, self.initial, self.dtype), None

    def aux(self, graph):
        bias = np.asarray(self.bias, dtype=np.float64)
        if bias.ndim == 0:
            return np.full(graph.num_vertices, float(bias), self.dtype)
        if bias.shape != (graph.num_vertices,):
            raise GraphError(f"nn bias has shape {bias.shape}; give a float or an array of "
                             f"length {graph.num_vertices}")
        return bias.astype(self.dtype)


@algorithm("nn", program=NeuralNetwork)
def nn(graph, iterations=10, *, bias=0.0, initial=0.5, dtype=np.float32, **options):
    """Activations of the logistic neuron network after ``iterations`` synchronous
    steps (formula in the module docstring).

    Parameters
    ----------
    graph : Graph or PageStore
        Edge weights are the synapse weights (1 when unweighted).
    iterations : int
        Steps to run. Default 10.
    bias : float or array_like
        b, one value or one per vertex. Default 0.
    initial : float
        Every activation at the start. Default 0.5.
    dtype : numpy dtype
        float32 (default) or float64.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...).

    Returns
    -------
    Result
        ``values``: the activation of every vertex, between 0 and 1.

    Raises
    ------
    GraphError
        When ``bias`` is an array of another length than N.

    Examples
    --------
    >>> import hetgraph as hg
    >>> a = hg.nn(hg.datasets.load("wiki-vote"), iterations=3)
    >>> a.iterations, bool(((a.values >= 0.5) & (a.values <= 1)).all())
    (3, True)
    """
    return run(NeuralNetwork(bias, initial, dtype), graph, max_iterations=iterations,
               **options)
