"""PageRank as NetworkX computes it (dangling vertices spread their rank uniformly).

    rank'[v] = (1 - d) / N + d * (sum_{u -> v} rank[u] * w_uv / W_u + D / N)

with d the damping, W_u the out-weight of u (out-degree when unweighted) and D the
total rank of dangling vertices (W_u = 0). Internally a vertex holds
x[u] = d * rank[u] / W_u (d * rank[u] when dangling), so that gather is one multiply:
acc = sum x[u] * w_uv, rank' = c + acc with the iteration constant c = (1 - d) / N +
(sum of dangling x) / N, and x' = rank' * aux with aux = d / W (d when dangling).
Stops when sum |rank' - rank| < N * tol (NetworkX's test) or after max_iterations.

Personalized PageRank (a teleport vector p, dangling rank sent along the dangling
weights q) runs :class:`PersonalizedPageRank` on the graph's transition graph (weights
d * w_uv / W_u): rank' = acc + (1 - d) * p[v] + d * D * q[v]. When q = p (NetworkX's
default) that is rank' = acc + p[v] * ((1 - d) + d * D): p is apply's per-vertex array
and the iteration constant its factor. Otherwise the run adds a teleport vertex T to
the transition graph (:func:`teleport_graph`): T keeps the value 1 - d along a
self-loop and sends it to every v along an edge of weight p[v], so that acc holds the
teleport and apply's array is q, with the constant d * D.
"""

from __future__ import annotations

import hashlib
import logging
import time

import numpy as np

from .. import tuning
from ..errors import GraphError, OutOfCoreError
from ..io.store import as_graph
from ..kernels.arrays import in_module, indexed_sum, module_of, normalize, on_device_of, \
    weighted_change
from ..program import VertexProgram
from ..registry import algorithm
from ..scheduler import direct
from ..scheduler.entry import run
from .common import check_nonnegative_weights

log = logging.getLogger("hetgraph.algorithms")


class PowerIteration(VertexProgram):
    """Base of the power iterations (PageRank, Katz, eigenvector, HITS): every vertex
    sums its in-neighbours' values times the edge weights, every iteration, and the run
    stops by the program's global test. The subclass writes apply (with the iteration
    constant) and init."""

    reduce = "add"
    needs_weights = True  # (an unweighted run goes on unweighted(graph): see there)
    notify_self = True  # apply reads the iteration constant
    dtype = np.float64

    @staticmethod
    def gather(src, weight, dst):
        return src * weight

    @staticmethod
    def activate(new, old):
        return True


def norm_or_one(values):
    """||values||_2, or 1 when it is 0 (NetworkX's guard): a float for NumPy ``values``
    (einsum: NumPy's BLAS dot would spin its threads on every core, see
    scheduler.costmodel.frontier_growth), a 0-d device array for CuPy ``values``
    (computed without waiting for the device)."""
    if isinstance(values, np.ndarray):
        return float(np.sqrt(np.einsum("i,i->", values, values))) or 1.0
    norm = module_of(values).sqrt(values @ values)
    return norm + (norm == 0)


def inverse_norm(values):
    """1 / :func:`norm_or_one` (``values``): an iteration constant the GPU reads where it
    is computed."""
    return 1.0 / norm_or_one(values)


def l1_change(previous, values):
    """sum |values - previous| as a float (NaN once a diverging run overflowed: not
    converged, as in NetworkX, without a warning)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(abs(values - previous).sum())


class PageRank(PowerIteration):
    """PageRank program (see the module docstring); ``tol=None`` runs all iterations.
    ``rescale``: every iteration first scales the values so that the ranks sum to 1,
    which a sync pass keeps and a colored one (``mode="colored"``) does not: there the
    sum's slow return to 1 would set the pace where many vertices are dangling (where
    none is, nothing: the sweep then converges to ranks that sum to 1)."""

    init_side_effects = False  # (init sets only what derived sets)

    def __init__(self, damping=0.85, tol=1e-6, dtype=np.float64, weighted=True, start=None,
                 rescale=False):
        _check_parameters(damping, tol)
        self.rescale = bool(rescale)
        self.damping = float(damping)
        self.tol = tol
        if tol is None:
            self.converged = None  # fixed iterations: no L1 test, no copy of the values
        self.dtype = np.dtype(dtype)
        self.needs_weights = bool(weighted)
        self.start = start  # the starting ranks (summing to 1); None: uniform

    @staticmethod
    def apply(old, acc, aux, constant):
        return (constant + acc) * aux

    def init(self, graph, xp=np):
        n = graph.num_vertices
        self.derived(graph)
        start = xp.full(n, 1.0 / max(n, 1)) if self.start is None else xp.asarray(self.start)
        return start * in_module(xp, self._scale), None

    def derived(self, graph):
        """(dangling vertices, aux, rank per unit of internal value) of ``graph`` for
        this program's parameters (:func:`_derived`), kept by the graph and set on the
        program as ``_dangling``, ``_scale``, ``_rank_of``."""
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
        return kept[1]

    def aux(self, graph, xp=np):
        return in_module(xp, self._scale)  # (the graph keeps it unchanged)

    # the hooks get the values on the device that holds them (NumPy or CuPy arrays)
    def iteration_constant(self, graph, values):
        n = graph.num_vertices
        # rescaled in place (the run's own values, before it reads them) unless no vertex
        # is dangling: a colored sweep is then Gauss-Seidel on the linear system
        # (I - dP) rank = (1 - d) / N, whose ranks sum to 1; on the CPU by the direct
        # path's compiled sums (its colored runs are then this one's, bit for bit)
        if self.rescale and isinstance(values, np.ndarray):
            return direct.colored_constant(self, values)
        if self.rescale and not _empty(self._dangling):
            normalize(values, on_device_of(values, self._rank_of))
        # a 0-d device array on the GPU: no wait for the device here
        return indexed_sum(values, self._dangling, 1.0 / n, (1.0 - self.damping) / n)

    def swept_constant(self, graph):
        """A colored run's constant (``rescale``) as (offset, factor, vertices):
        (1 - d) / N + (sum of the values over the dangling vertices) / N, which a
        colored iteration sums again after each color's pass (the later colors then
        read the dangling rank the earlier ones gave: Gauss-Seidel for the dangling
        term too), the dangling vertices as the graph keeps them (ids or a slice);
        None outside colored runs (one constant an iteration)."""
        if not self.rescale:
            return None
        n = graph.num_vertices
        return (1.0 - self.damping) / n, 1.0 / n, self.derived(graph)[0]

    def change_test(self, graph, values):
        if self.rescale:  # (its constant rescales values that a queued iteration would keep)
            return None
        return on_device_of(values, self._rank_of), graph.num_vertices * self.tol

    def converged(self, graph, previous, values):
        if self.rescale and isinstance(values, np.ndarray):  # (the direct path's sum)
            return direct.colored_change(values, previous, self._rank_of) < \
                graph.num_vertices * self.tol
        change = weighted_change(values, previous, on_device_of(values, self._rank_of))
        return float(change) < graph.num_vertices * self.tol

    def finalize(self, graph, values, xp=np):
        return xp.divide(values, in_module(xp, self._scale), out=values)  # (the run's own)


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


def _empty(dangling):
    """Whether ``dangling`` (as :func:`_as_range` gives it) holds no vertex."""
    return isinstance(dangling, slice) and dangling.stop == dangling.start


def _as_range(index):
    """``index`` (increasing) as a slice when it is a run of consecutive vertices (degree
    order puts the dangling vertices last), else as it is: the sum over a slice reads
    no indices."""
    if len(index) == 0:
        return slice(0, 0)
    first, last = int(index[0]), int(index[-1])
    return slice(first, last + 1) if last - first + 1 == len(index) else index


def _check_parameters(damping, tol):
    if not 0.0 < damping <= 1.0:
        raise GraphError(f"damping={damping} is out of range; use 0 < damping <= 1")
    if tol is not None and not tol > 0:
        raise GraphError(f"tol={tol} must be > 0 or None")


class PersonalizedPageRank(PowerIteration):
    """Personalized PageRank program (module docstring): run it on
    :func:`transition_graph`, or on :func:`teleport_graph` with ``offset`` 0.
    ``weights``: apply's per-vertex array (float64): p, where teleport and dangling rank
    both go (summing to 1), or q alone on a teleport graph (0 for T); ``dangling``: the
    dangling vertices (ids or a slice); ``start``: the starting ranks (None: uniform;
    T's 1 - d included on a teleport graph); ``offset``: the iteration constant's part
    that is not dangling rank (None: 1 - d, the teleport along ``weights``);
    ``vertices``: the vertices of the convergence test (None: the graph's; T's value
    does not change)."""

    init_side_effects = False  # (aux is the weights given)

    def __init__(self, weights, dangling, damping=0.85, tol=1e-6, start=None, *,
                 offset=None, vertices=None):
        _check_parameters(damping, tol)
        self.weights = weights
        self.dangling = dangling
        self.damping = float(damping)
        self.offset = 1.0 - self.damping if offset is None else float(offset)
        self.tol = tol
        self.vertices = vertices
        if tol is None:
            self.converged = None
        self.start = start

    @staticmethod
    def apply(old, acc, aux, constant):
        return acc + aux * constant

    def init(self, graph, xp=np):
        n = graph.num_vertices
        start = xp.full(n, 1.0 / max(n, 1)) if self.start is None else xp.asarray(self.start)
        return start, None

    def aux(self, graph, xp=np):
        return xp.asarray(self.weights)

    def iteration_constant(self, graph, values):
        # offset + d * D: D the dangling rank (a 0-d device array on the GPU)
        return indexed_sum(values, self.dangling, self.damping, self.offset)

    def converged(self, graph, previous, values):
        n = graph.num_vertices if self.vertices is None else self.vertices
        return l1_change(previous, values) < n * self.tol


def transition_graph(graph, damping, weighted=True):
    """``graph`` with the weights d * w_uv / W_u (W_u: u's out-weight sum, its out-degree
    when unweighted or ``weighted`` is False), and its dangling vertices (W_u = 0; ids or
    a slice); kept by the graph for its last ``damping`` only (it costs 4 bytes an edge)."""
    weighted = weighted and graph.weighted
    last = graph.kept("pagerank-transition", dict)
    kept = last.get("graph")
    if kept is None or kept[0] != (damping, weighted):
        out_weight = graph.out_weight_sums() if weighted else \
            graph.out_degree().astype(np.float64)
        with np.errstate(divide="ignore"):
            share = np.where(out_weight > 0, damping / out_weight, 0.0)
        weights = share[graph.in_indices]
        if weighted:
            weights *= graph.in_weights
        derived = graph.with_arrays(graph.in_indptr, graph.in_indices,
                                    weights.astype(np.float32), graph.out_indptr,
                                    graph.out_indices)
        dangling = _as_range(np.flatnonzero(out_weight == 0))
        kept = last["graph"] = ((damping, weighted), (derived, dangling))
    return kept[1]


def teleport_graph(transitions, p):
    """``transitions`` (a :func:`transition_graph`) with a teleport vertex T, id N: an
    edge T -> v of weight p[v] (float32) for every v with p[v] > 0 and a self-loop
    T -> T of weight 1, so that T keeps its value and every v gathers T's value times
    p[v] with its in-edges; labels are the ids. Kept by ``transitions`` for its last p
    (it copies every edge)."""
    last = transitions.kept("pagerank-teleport", dict)
    key = hashlib.sha256(np.ascontiguousarray(p, np.float64).tobytes()).hexdigest()
    if last.get("p") != key:
        last["graph"], last["p"] = _with_teleport(transitions, p), key
    return last["graph"]


def _with_teleport(graph, p):
    """The arrays of :func:`teleport_graph`: T's in-edge goes last in each target's
    CSC run (T has the largest id, so the runs stay sorted by source), its CSR row last."""
    n = graph.num_vertices
    targets = np.flatnonzero(p)
    dtype = graph.index_dtype if n + 1 <= np.iinfo(graph.index_dtype).max else np.int64
    ends = graph.in_indptr[targets + 1]
    in_indices = np.insert(graph.in_indices.astype(dtype, copy=False), ends, n)
    weights = np.insert(graph.in_weights, ends, p[targets].astype(np.float32))
    in_indptr = np.empty(n + 2, np.int64)
    in_indptr[0] = 0
    in_indptr[1:n + 1] = graph.in_indptr[1:] + np.cumsum(p > 0)
    in_indptr[n + 1] = in_indptr[n] + 1
    out_indptr = np.append(graph.out_indptr, graph.out_indptr[-1] + len(targets) + 1)
    out_indices = np.concatenate([graph.out_indices.astype(dtype, copy=False),
                                  targets.astype(dtype), np.array([n], dtype)])
    return graph.with_arrays(in_indptr.astype(graph.in_indptr.dtype),
                             np.append(in_indices, dtype.type(n)),
                             np.append(weights, np.float32(1.0)),
                             out_indptr.astype(graph.out_indptr.dtype), out_indices,
                             directed=True, labels=np.arange(n + 1))


def unweighted(graph):
    """``graph`` without its weights (itself when it has none; kept by the graph): what
    a program that gathers weights runs on when told to ignore them. A program's
    compiled kernel is shared by every instance of its class whatever its
    ``needs_weights``, so an instance must not turn it off."""
    if not graph.weighted:
        return graph
    if graph.in_indices is None:
        raise OutOfCoreError("ignoring the weights of a graph out of core is not "
                             "supported; load it (hg.open_store) or raise host_budget")
    return graph.kept("unweighted", lambda: graph.with_arrays(
        graph.in_indptr, graph.in_indices, None, graph.out_indptr, graph.out_indices))


def vertex_weights(graph, given, what):
    """``given`` (a dict {vertex label: weight}, missing vertices 0, or N weights in
    dense-id order) as float64 summing to 1; None stays None."""
    if given is None:
        return None
    n = graph.num_vertices
    if isinstance(given, dict):
        weights = np.zeros(n)
        if given:
            weights[np.atleast_1d(graph.id_of(list(given)))] = \
                np.array(list(given.values()), np.float64)
    else:
        weights = np.array(given, np.float64)
        if weights.shape != (n,):
            raise GraphError(f"{what} has shape {weights.shape}; give N={n} weights in "
                             f"vertex order, or a dict {{label: weight}}")
    total = weights.sum()
    if not np.isfinite(weights).all() or total == 0:
        raise GraphError(f"{what} must be finite weights with a nonzero sum (sum: {total})")
    return weights / total


@algorithm("pagerank", program=PageRank, networkx=("pagerank",))
def pagerank(graph, damping=0.85, max_iterations=100, tol=1e-6, *, personalization=None,
             nstart=None, dangling=None, weighted=True, dtype=np.float64, **options):
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
        Stop when the L1 change of the ranks is below N * tol (default 1e-6, NetworkX's
        test; from N * tol >= 2 on, any first iteration meets it, and a warning says
        so); None runs ``max_iterations`` exactly.
    personalization : dict or array_like, optional
        Personalized PageRank: the teleport weights, a dict {vertex label: weight}
        (missing vertices weigh 0) or N weights in dense-id order, scaled to sum to 1
        (NetworkX's ``personalization``). Default None: uniform.
    nstart : dict or array_like, optional
        The starting ranks, given as ``personalization`` (scaled to sum to 1).
        Default None: uniform.
    dangling : dict or array_like, optional
        Where the rank of vertices without out-edges goes, given as
        ``personalization`` (NetworkX's ``dangling``). Default None: along the
        personalization.
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
        When ``damping`` or ``tol`` is out of range, (``weighted``) a weight is
        negative or NaN, or a weight vector is malformed or sums to 0.
    OutOfCoreError
        When ``personalization`` or ``dangling`` is given for a graph out of core (the
        transition graph is built in memory).

    Examples
    --------
    >>> import hetgraph as hg
    >>> ranks = hg.pagerank(hg.datasets.load("wiki-vote"))
    >>> ranks.converged, round(float(ranks.values.sum()), 6)
    (True, 1.0)
    >>> ppr = hg.pagerank(hg.datasets.load("wiki-vote"), personalization={30: 1.0})
    >>> bool(ppr.values.argmax() == ppr.graph.id_of(30))
    True
    """
    start = time.perf_counter()
    graph = as_graph(graph, options.get("host_budget"))
    if weighted:  # a negative out-weight makes ranks negative and their sum meaningless
        check_nonnegative_weights(graph, "pagerank")
    _warn_if_tol_stops_at_once(graph.num_vertices, tol)
    program = _program(graph, damping, tol, dtype, weighted, personalization, nstart,
                       dangling, options.get("mode") == "colored")
    if _runs_direct(program, max_iterations, options):
        path = direct.colored_pagerank if program.rescale else direct.pagerank
        result = path(program, program.graph, max_iterations, program.name, start)
    else:
        result = run(program, program.graph, max_iterations=max_iterations, **options)
    if program.graph.num_vertices > graph.num_vertices:  # T of a teleport graph
        result.values, result.graph = result.values[:graph.num_vertices], graph
    if tol is not None and not result.converged:
        log.warning("pagerank did not reach tol=%g in %d iterations", tol, max_iterations)
    return result


def _runs_direct(program, max_iterations, options):
    """Whether the run takes the direct path (:mod:`hetgraph.scheduler.direct`): plain
    PageRank in float64 from uniform ranks, ``max_iterations`` valid; sync, or colored
    (``rescale``)."""
    colored = options.get("mode") == "colored"
    if colored:  # (the other options as a sync run's)
        options = {key: value for key, value in options.items() if key != "mode"}
    return (type(program) is PageRank and program.start is None
            and program.rescale == colored
            and program.dtype == np.float64 and isinstance(max_iterations, (int, np.integer))
            and max_iterations >= 0 and program.graph.num_vertices > 0
            and direct.applies(program.graph, options, tuning.DIRECT_PAGERANK_ARCS))


def _warn_if_tol_stops_at_once(n, tol):
    """Log a warning when NetworkX's test (L1 change < N * tol) holds after any first
    iteration: the ranks sum to 1, so their L1 change is at most 2."""
    if tol is not None and n * tol >= 2:
        log.warning("pagerank: tol=%g on %d vertices stops after the first iteration (the "
                    "L1 change of the ranks, at most 2, is always below N * tol = %g); pass "
                    "a smaller tol (such as %.1g) or tol=None with max_iterations", tol, n,
                    n * tol, 1.0 / n)


def _program(graph, damping, tol, dtype, weighted, personalization, nstart, dangling,
             colored=False):
    """The PageRank program of these arguments, with ``program.graph``, the graph it runs
    on: ``graph`` itself, or its transition graph for personalized PageRank; ``colored``:
    for a colored run (PageRank's ranks rescaled every iteration)."""
    start = vertex_weights(graph, nstart, "nstart")
    if personalization is None and dangling is None:
        if graph.in_indices is not None:  # (in memory: weights off by the graph)
            graph, weighted = (graph if weighted else unweighted(graph)), True
        program = PageRank(damping, tol, dtype, weighted, start, rescale=colored)
        program.graph = graph
        return program
    if graph.in_indices is None:
        raise OutOfCoreError("personalized pagerank needs the graph in memory; load it "
                             "(hg.open_store) or raise host_budget")
    n = graph.num_vertices
    p = vertex_weights(graph, personalization, "personalization")
    p = np.full(n, 1.0 / n) if p is None else p
    transitions, dangling_ids = transition_graph(graph, float(damping), weighted)
    spread = vertex_weights(graph, dangling, "dangling")
    if spread is None or np.array_equal(spread, p) or len(np.arange(n)[dangling_ids]) == 0:
        program = PersonalizedPageRank(p, dangling_ids, damping, tol, start)
        program.graph = transitions
        return program
    # dangling rank along q != p: the teleport comes from T, apply's array is q
    start = np.full(n, 1.0 / n) if start is None else start
    program = PersonalizedPageRank(np.append(spread, 0.0), dangling_ids, damping, tol,
                                   np.append(start, 1.0 - float(damping)), offset=0.0,
                                   vertices=n)
    program.graph = teleport_graph(transitions, p)
    return program
