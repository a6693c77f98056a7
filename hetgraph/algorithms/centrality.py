"""Katz and eigenvector centrality by power iteration, as NetworkX computes them.

Katz (``networkx.katz_centrality``)::

    x'[v] = alpha * sum_{u -> v} w_uv * x[u] + beta[v]

Eigenvector (``networkx.eigenvector_centrality``, the left eigenvector of A + I)::

    y'[v] = (y[v] + sum_{u -> v} w_uv * y[u]) / ||y||,   x = y / ||y||

Both stop when the L1 change of x is below N * tol (NetworkX's test). The eigenvector
program keeps y unnormalized and divides by the previous norm in apply (the iteration
constant), so one pass per iteration and no rescaling of the values in Python. Their
hooks take the array module ``xp``: a run on one GPU keeps the state there, the norms
and the convergence test computed on the device.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..io.store import as_graph
from ..registry import algorithm
from ..scheduler.entry import run
from ..kernels.arrays import module_of
from .pagerank import (inverse_norm, l1_change, norm_or_one, PowerIteration, unweighted,
                       vertex_weights)

# the eigenvector program's first values are x0 times this (exact, a power of two):
# later values stay far below it (at most 1 + an in-weight sum), so the convergence
# test knows the first iteration, whose x0 NetworkX scales by its sum, not its norm
FIRST_MARK = 2.0 ** 400
FIRST_BELOW = 2.0 ** 350  # a value at least this large is a marked first value
START_MOST = 2.0 ** 64  # |x0| at most, so that x0 * FIRST_MARK squared stays finite


class Katz(PowerIteration):
    """Katz program: ``beta`` a float64 array of length N, ``start`` the starting
    values (None: zeros); it gathers the edge weights (run it on
    :func:`hetgraph.algorithms.pagerank.unweighted` to ignore them)."""

    def __init__(self, alpha, beta, tol=1e-6, start=None):
        self.alpha = float(alpha)
        self.beta = beta
        self.tol = tol
        self.start = start

    @staticmethod
    def apply(old, acc, aux, constant):
        return constant * acc + aux

    def init(self, graph, xp=np):
        n = graph.num_vertices
        return (xp.zeros(n) if self.start is None else xp.asarray(self.start)), None

    def aux(self, graph, xp=np):
        return xp.asarray(self.beta)

    def iteration_constant(self, graph, values):
        return self.alpha

    def converged(self, graph, previous, values):
        return l1_change(previous, values) < graph.num_vertices * self.tol


class Eigenvector(PowerIteration):
    """Eigenvector centrality program (module docstring): ``start`` is x0, summing to
    1; the values are y, unnormalized (see :func:`eigenvector_centrality`)."""

    def __init__(self, start, tol=1e-6):
        if not np.abs(start).max() <= START_MOST:
            raise GraphError(f"nstart scaled to sum 1 has entries beyond {START_MOST:g}; "
                             f"give weights whose sum is not near 0")
        self.start = start
        self.tol = tol

    @staticmethod
    def apply(old, acc, aux, constant):
        return (old + acc) * constant

    def init(self, graph, xp=np):
        return xp.asarray(self.start) * FIRST_MARK, None

    def iteration_constant(self, graph, values):
        return inverse_norm(values)

    def converged(self, graph, previous, values):
        # x0 (marked) was scaled by its sum, a later y by its norm: one device test
        xp = module_of(values)
        divisor = xp.where(abs(previous).max() >= FIRST_BELOW, FIRST_MARK,
                           norm_or_one(previous))
        return l1_change(previous / divisor, unit(values)) < graph.num_vertices * self.tol

    def finalize(self, graph, values, xp=np):
        return xp.divide(values, norm_or_one(values), out=values)  # (the run's own)


def unit(values):
    """``values`` / ||values||_2 (themselves when the norm is 0, as NetworkX), NumPy or
    CuPy."""
    return values / norm_or_one(values)


@algorithm("katz", program=Katz, networkx=("katz_centrality",))
def katz_centrality(graph, alpha=0.1, beta=1.0, max_iterations=1000, tol=1e-6, *,
                    nstart=None, normalized=True, weighted=False, **options):
    """Katz centrality of every vertex, as ``networkx.katz_centrality`` computes it
    (formula in the module docstring).

    Parameters
    ----------
    graph : Graph or PageStore
    alpha : float
        Attenuation factor; below 1 / (the largest eigenvalue of A) for convergence.
        Default 0.1.
    beta : float, dict or array_like
        The weight every vertex gets: one float (default 1.0), a dict {vertex label:
        weight} naming every vertex, or N weights in dense-id order.
    max_iterations : int
        Default 1000.
    tol : float
        Stop when the L1 change is below N * tol. Default 1e-6.
    nstart : dict or array_like, optional
        Starting values ({label: value} for every vertex, or N values in dense-id
        order; not rescaled). Default None: zeros.
    normalized : bool
        Scale the result to unit L2 norm. Default True.
    weighted : bool
        Multiply by the edge weights (NetworkX's ``weight="weight"``). Default False.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ...).

    Returns
    -------
    Result
        ``values``: the centrality of every vertex; ``converged`` False when ``tol``
        was not reached (NetworkX raises then).

    Raises
    ------
    GraphError
        When ``beta`` or ``nstart`` does not give every vertex a finite number.

    Examples
    --------
    >>> import hetgraph as hg
    >>> katz = hg.katz_centrality(hg.generate.grid(3, 3))
    >>> katz.converged, round(float((katz.values ** 2).sum()), 6)
    (True, 1.0)
    """
    graph = as_graph(graph, options.get("host_budget"))
    program = Katz(alpha, _every_vertex(graph, beta, "beta"), tol,
                   _every_vertex(graph, nstart, "nstart"))
    result = run(program, graph if weighted else unweighted(graph),
                 max_iterations=max_iterations, **options)
    result.graph = graph
    if normalized and result.converged:
        result.values = unit(result.values)
    return result


def _every_vertex(graph, given, what):
    """``given`` (None, a number, a dict naming every vertex, or N numbers in dense-id
    order) as a float64 array of length N (None stays None)."""
    n = graph.num_vertices
    if given is None:
        return None
    if np.ndim(given) == 0 and not isinstance(given, dict):
        return np.full(n, float(given))
    if isinstance(given, dict):
        ids = np.atleast_1d(graph.id_of(list(given))) if given else np.zeros(0, int)
        if len(np.unique(ids)) != n:
            raise GraphError(f"{what} must have a value for every vertex ({len(ids)} of "
                             f"{n} given)")
        values = np.empty(n)
        values[ids] = np.array(list(given.values()), np.float64)
    else:
        values = np.array(given, np.float64)
    if values.shape != (n,) or not np.isfinite(values).all():
        raise GraphError(f"{what} must be N={n} finite numbers (got shape {values.shape})")
    return values


@algorithm("eigenvector", program=Eigenvector, networkx=("eigenvector_centrality",))
def eigenvector_centrality(graph, max_iterations=100, tol=1e-6, *, nstart=None,
                           weighted=False, **options):
    """Eigenvector centrality of every vertex (unit L2 norm), as
    ``networkx.eigenvector_centrality`` computes it: power iteration with A + I from the
    in-edges (the left eigenvector), stopping when the L1 change is below N * tol.

    Parameters
    ----------
    graph : Graph or PageStore
    max_iterations : int
        Default 100.
    tol : float
        Default 1e-6.
    nstart : dict or array_like, optional
        Starting vector ({label: value}, missing vertices 0, or N values in dense-id
        order), scaled to sum to 1. Default None: uniform.
    weighted : bool
        Use the edge weights (as NetworkX with ``weight="weight"``); default False.
    **options
        Go to :func:`hetgraph.run`.

    Returns
    -------
    Result
        ``values``: unit L2 norm centralities; ``converged``: whether ``tol`` was met
        within ``max_iterations`` (where NetworkX raises).

    Raises
    ------
    GraphError
        When ``nstart`` sums to 0 or is not finite.

    Examples
    --------
    >>> import hetgraph as hg
    >>> x = hg.eigenvector_centrality(hg.generate.grid(3, 3))
    >>> int(x.values.argmax()), round(float((x.values ** 2).sum()), 6)
    (4, 1.0)
    """
    graph = as_graph(graph, options.get("host_budget"))
    start = vertex_weights(graph, nstart, "nstart")
    if start is None:
        start = np.full(graph.num_vertices, 1.0 / max(graph.num_vertices, 1))
    result = run(Eigenvector(start, tol), graph if weighted else unweighted(graph),
                 max_iterations=max_iterations, **options)
    result.graph = graph
    return result
