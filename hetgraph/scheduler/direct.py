"""The direct path: a built-in algorithm's whole run as one compiled call in the calling
thread (:mod:`hetgraph.kernels.cpu.direct`), for a graph in memory of at most
``tuning.DIRECT_ARCS`` arcs, where the dispatcher's machinery would cost more than
the edges (a BFS: ``tuning.DIRECT_LEVELS_ARCS``, where a serial queue still beats the
engine's passes, one a level; PageRank: ``tuning.DIRECT_PAGERANK_ARCS``; both scaled
down on machines with more threads). It is taken only when the run's options ask for
nothing that only the dispatcher gives (a cluster, a GPU, a mode other than "sync",
checkpoints, ...; a colored PageRank is taken too): the values are those of the
dispatcher's run, and the history has a row per iteration with placement "cpu".
"""

from __future__ import annotations

import itertools
import sys
import time

import numba
import numpy as np

from .. import tuning
from ..graph import Graph
from ..io.store import StoredGraph
from ..kernels.cpu.pull import arc_span as _span
from ..result import Result, device_row

# the options of a run the direct path takes, with the values it takes for each; any
# other option, or value, goes the normal way (progress=True: the dispatcher's bar)
NEUTRAL = {"cluster": (None,), "devices": ("auto", "cpu"), "mode": ("sync",),
           "threads": (None,), "partitions": (None,), "cpu_mode": ("auto",), "rho": (None,),
           "page_bytes": (None,), "gpu": (None,), "host_budget": (None,),
           "checkpoint": (None,), "resume": (False,), "progress": (None, False)}
_NAN = float("nan")
_CLUSTER_MODULE = __package__.rpartition(".")[0] + ".cluster"


def applies(graph, options, most=None) -> bool:
    """Whether a run of a built-in algorithm on ``graph`` (as :func:`as_graph` gave it)
    with ``options`` (the keywords of :func:`hetgraph.run`) takes the direct path: a
    graph in memory of at most ``most`` arcs (default ``tuning.DIRECT_ARCS``; a BFS's
    ``tuning.DIRECT_LEVELS_ARCS``, PageRank's ``tuning.DIRECT_PAGERANK_ARCS``), outside
    any ``with hg.Cluster()``, every option at a value in :data:`NEUTRAL`, and above
    ``tuning.SMALL_ARCS`` arcs under ``devices="auto"`` only where no GPU can run."""
    most = tuning.DIRECT_ARCS if most is None else _for_these_threads(most)
    if (not isinstance(graph, Graph) or isinstance(graph, StoredGraph)
            or graph.num_arcs > most or _inside_cluster()):
        return False
    if (graph.num_arcs > tuning.SMALL_ARCS and options.get("devices", "auto") == "auto"
            and _gpu_available()):
        return False  # (under "auto" the dispatcher may run it on the GPU)
    for name, value in options.items():
        if not any(value is v or (type(value) is type(v) and value == v)
                   for v in NEUTRAL.get(name, ())):
            return False
    return True


def traverses_components(graph, options) -> bool:
    """Whether connected components of ``graph`` with ``options`` take the direct
    path (:func:`components`): where :func:`applies`, or on a larger graph in memory
    that union-find would link on one thread (fewer Numba threads than
    ``tuning.CC_PARALLEL_MIN_THREADS``), with at most ``tuning.CC_TRAVERSE_DEGREE``
    edges to read per vertex (in and out on a directed graph) and a median arc span
    above ``tuning.DIRECT_HOSTILE_SPAN`` ids: there union-find's dependent reads
    miss the caches one after another, where a traversal's are known ahead
    (docs/tuning.md)."""
    if applies(graph, options):
        return True
    if (numba.get_num_threads() >= tuning.CC_PARALLEL_MIN_THREADS
            or not applies(graph, options, most=sys.maxsize)):
        return False
    read = graph.num_arcs * (2 if graph.directed else 1)
    return (read <= tuning.CC_TRAVERSE_DEGREE * graph.num_vertices
            and _span(graph) > tuning.DIRECT_HOSTILE_SPAN)


def _scattered(graph):
    """Whether a traversal of ``graph`` marks vertices in bits and prefetches rows:
    more than ``tuning.DIRECT_CACHED_VERTICES`` vertices, a median arc span above
    ``tuning.DIRECT_HOSTILE_SPAN`` (see the kernels' :func:`far_levels`)."""
    return (graph.num_vertices > tuning.DIRECT_CACHED_VERTICES
            and _span(graph) > tuning.DIRECT_HOSTILE_SPAN)


def _for_these_threads(most):
    """A bound of arcs measured against the engine on ``tuning.DIRECT_BOUND_THREADS``
    threads, for this process's Numba threads: the engine's passes shorten with more
    threads, a serial call does not (never below ``tuning.DIRECT_ARCS``)."""
    if most <= tuning.DIRECT_ARCS:  # (a bound set lower, to turn it off, stays)
        return most
    threads = max(1, numba.config.NUMBA_NUM_THREADS)
    return max(tuning.DIRECT_ARCS, most * tuning.DIRECT_BOUND_THREADS // threads)


def small_levels(graph, label, options, dtype, unreached, name, program_start):
    """:func:`levels` from the vertex of ``label`` when a run with ``options`` takes
    the direct path (:func:`applies`) and ``label`` is an integer label (or, on a graph
    without labels, an integer id) of ``graph``; None otherwise, which leaves the
    checks of the label and the choice of the path to the caller. What the call needs
    of the graph is found once and kept by it (:class:`_Small`)."""
    if type(graph) is not Graph or (options and not applies(graph, options)):
        return None  # (a StoredGraph, a subclass: the checks of applies)
    small = graph.kept(_SMALL, lambda: _Small(graph))
    if small.size > tuning.DIRECT_ARCS or _inside_cluster():
        return None
    source = small.id_of(label)
    if source is None:
        return None
    return levels(graph, source, np.empty(small.vertices, dtype), unreached, name,
                  program_start, small.work())


_SMALL = "direct-small"  # (the key of a graph's _Small in Graph.kept)


class _Small:
    """What a direct call reads of one graph beyond its arrays, found once: its
    vertices, max(vertices, arcs) (at most ``tuning.DIRECT_ARCS`` on the direct path)
    and its labels, with {integer label: dense id} made on first use."""

    __slots__ = ("vertices", "size", "_labels", "_ids", "_work")

    def __init__(self, graph):
        self.vertices = graph.num_vertices
        self.size = max(self.vertices, graph.num_arcs)
        self._labels, self._ids, self._work = graph.labels, False, None

    def work(self):
        """A BFS's ``work`` array (:func:`hetgraph.kernels.cpu.direct.levels`): the one
        kept here while nothing else holds it (the Result of the call that used it
        keeps it for its history, alive or not), else a new one, kept instead."""
        work = self._work
        if work is None or sys.getrefcount(work) > 3:  # (here, `work` and the argument)
            work = self._work = np.empty(_kernels().level_work(self.vertices), np.int64)
        return work

    def id_of(self, label):
        """The dense id of ``label`` (an int or NumPy integer, never a bool: True is no
        vertex label here), a Python int; None for any other label, or one not there
        (:meth:`Graph.id_of` says why). A graph without labels: its ids."""
        if type(label) is not int and not isinstance(label, np.integer):
            return None
        if self._labels is None:
            return int(label) if 0 <= label < self.vertices else None
        if self._ids is False:  # (a hash lookup: the label index's is slower)
            self._ids = _id_table(self._labels)
        return None if self._ids is None else self._ids.get(label)


def small_id(graph, label):
    """The dense id of ``label`` (see :meth:`_Small.id_of`) on a graph in memory of at
    most ``tuning.DIRECT_ARCS`` vertices and arcs, by what the graph keeps; None
    otherwise, and for a label not there."""
    if not isinstance(graph, Graph):
        return None
    small = graph.kept(_SMALL, lambda: _Small(graph))
    return None if small.size > tuning.DIRECT_ARCS else small.id_of(label)


def _id_table(labels):
    """{label: dense id} of integer ``labels``; None for labels of another kind."""
    if labels.dtype.kind not in "iu":
        return None
    return dict(zip(labels.tolist(), range(len(labels))))


def _gpu_available() -> bool:
    """Whether a GPU can run here (found once a process; only for graphs above
    ``tuning.SMALL_ARCS``, whose calls take milliseconds)."""
    from ..kernels.gpu.device import available

    return available()


def _inside_cluster() -> bool:
    """Whether a ``with hg.Cluster()`` is open (its runs go to it: its dashboard shows
    them); a process that never imported the cluster module has none."""
    cluster = sys.modules.get(_CLUSTER_MODULE)
    return cluster is not None and bool(cluster._CURRENT)


_KERNELS = []  # the compiled module, once imported (it sets up Numba's target)


def _kernels():
    if not _KERNELS:
        from ..kernels.cpu import direct

        _KERNELS.append(direct)
    return _KERNELS[0]


def levels(graph, source, out, unreached, name, program_start, work=None):
    """Breadth-first levels from dense id ``source`` into ``out`` (the values' dtype,
    ``unreached`` where the source cannot reach: a Python int or float, which the
    compiled call types faster than a NumPy scalar): a Result of program
    ``name`` whose values are ``out``; ``program_start``: time.perf_counter() when the
    call began; ``work``: the kernel's (None: a new one)."""
    kernels = _KERNELS[0] if _KERNELS else _kernels()
    if work is None:  # (the table, then the queue)
        work = np.empty(kernels.level_work(len(out)), np.int64)
    if _scattered(graph):
        count = kernels.far_levels(graph.out_indptr, graph.out_indices, source, out,
                                   unreached, work, _marks(graph, True), tuning.DIRECT_AHEAD)
    else:
        count = kernels.levels(graph.out_indptr, graph.out_indices, source, out, unreached,
                               work)
    return _DirectResult(graph, out, name, count, (work, "push", time.perf_counter() -
                                                   program_start, True))


def _marks(graph, bits):
    """A traversal's marks of the vertices it reached, all clear: a bit a vertex
    (uint64 words) or a bool."""
    n = graph.num_vertices
    return np.zeros((n + 63) >> 6, np.uint64) if bits else np.zeros(n, np.bool_)


def _level_edges(indptr, queue, rows):
    """The out-edges a BFS read at each level: its vertices' out-degrees summed (the
    ``queue`` holds them level by level, ``rows`` their counts)."""
    if not len(rows):
        return []
    reached = queue[:rows[:, 0].sum()]
    degrees = indptr[reached + 1] - indptr[reached]
    return np.add.reduceat(degrees, np.cumsum(rows[:, 0]) - rows[:, 0]).tolist()


def shortest_paths(graph, source, dtype, name, program_start):
    """Shortest-path distances from dense id ``source`` in ``dtype`` (inf where
    unreachable): breadth-first levels on an unweighted graph (every edge 1),
    Dijkstra's algorithm on a weighted one."""
    dist = np.empty(graph.num_vertices, dtype)
    if not graph.weighted:
        return levels(graph, source, dist, np.inf, name, program_start)
    rows = np.empty((1, 4), np.int64)
    _kernels().dijkstra(graph.out_indptr, graph.out_indices, graph.out_weights(), source,
                        dist, rows)
    return _result(graph, dist, name, rows, "push", True, program_start)


def pagerank(program, graph, max_iterations, name, program_start):
    """The run of ``program`` (a PageRank program of float64 values, without a start
    vector of its own) on ``graph``: its ranks; converged as its test says (never with
    ``tol`` None)."""
    dangling, scale, _ = program.derived(graph)
    if isinstance(dangling, slice):
        dangling = np.arange(dangling.start, dangling.stop)
    bound = -1.0 if program.tol is None else graph.num_vertices * program.tol
    weighted = program.needs_weights and graph.weighted
    ranks = np.empty(graph.num_vertices)
    rows = np.empty((max(max_iterations, 0), 4), np.int64)
    count, converged = _kernels().pagerank(
        *_lanes(graph, weighted), graph.num_arcs, scale, dangling, program.damping, bound,
        max(max_iterations, 0), ranks, rows)
    return _result(graph, ranks, name, rows, "pull", converged, program_start, count)


def _lanes(graph, weighted):
    """``graph``'s in-edges (with their weights when ``weighted``) as the direct
    PageRank reads them (:func:`hetgraph.kernels.cpu.direct.lanes`, vertices sorted
    within runs of ``tuning.DIRECT_LANES_WINDOW`` ids), made once and kept by the
    graph (about 4 bytes an edge, 8 with weights)."""
    return graph.kept((_LANES, weighted), lambda: _kernels().lanes(
        graph.in_indptr, graph.in_indices, graph.in_weights if weighted else None,
        tuning.DIRECT_LANES_WINDOW))


_LANES = "direct-lanes"


def colored_pagerank(program, graph, max_iterations, name, program_start):
    """The colored run (``mode="colored"``) of ``program`` (as :func:`pagerank`'s, with
    ``rescale``) on ``graph``: its ranks, bitwise the engine's (whose passes sum each
    vertex's in-edges in order in one range, however they run; its rescale, its
    constants, summed again after each pass (``swept_of``), and its test as the
    engine's on the CPU)."""
    from ..engines.colored import swept_of

    dangling, scale, rank_of = program.derived(graph)
    lanes = _color_lanes(graph, program.needs_weights and graph.weighted)
    bound = -1.0 if program.tol is None else graph.num_vertices * program.tol
    ranks = np.empty(graph.num_vertices)
    rows = np.empty((max(max_iterations, 0), 4), np.int64)
    count, converged = _kernels().colored_pagerank(
        *lanes, graph.num_arcs, scale, rank_of,
        swept_of(program, graph, _colors_kept(graph)["coloring"], empty=True),
        _rescales(program, dangling), bound, max(max_iterations, 0), ranks, rows)
    result = _result(graph, ranks, name, rows, COLORED, converged, program_start, count)
    result.mode = COLORED
    return result


COLORED = "colored"  # (the run's mode and its rows', as an engine's colored run has)


def _colors_kept(graph):
    """What the direct path keeps of :func:`hetgraph.coloring.coloring_of` (``graph``),
    kept by the graph and made again for a new coloring: {"coloring", and per weighted
    or not, the in-edges as :func:`_color_lanes` gives them}."""
    from ..coloring import coloring_of

    coloring = coloring_of(graph)
    kept = graph.kept(_COLOR_LANES, dict)
    if kept.get("coloring") is not coloring:
        kept.clear()
        kept.update(coloring=coloring)
    return kept


def _sweep_order(coloring):
    """The vertices of each color of ``coloring`` in the order a colored iteration
    sweeps them: the hybrid partition, then the colors from the last to the first."""
    return [coloring.order[coloring.bounds[c]:coloring.bounds[c + 1]]
            for c in (coloring.count - 1, *range(coloring.count - 2, -1, -1))]


def _color_lanes(graph, weighted):
    """The in-edges (with their weights when ``weighted``) of the graph's colors in
    sweep order (:func:`_sweep_order`), one segment a color, as ``segment_lanes`` lays
    them out (order, starts, sources, factors, groups), then the vertices without
    in-edges (ids, and each color's first of them and their count: ``cuts``), made once
    for the graph's coloring. Each color's vertices are sorted by in-degree as one
    window (not in runs of ``tuning.DIRECT_LANES_WINDOW``): the small colors of the
    later levels hold hubs of unlike degrees, which then pad a group less, and the
    values of a graph the direct path takes fit a core's cache, where the writes'
    scatter costs nothing. A vertex without in-edges takes no place in a group (a
    group of four such cost as much as four of its places: wiki-Vote's first color
    holds 4,524 of them)."""
    kept = _colors_kept(graph)
    if weighted not in kept:
        degree = np.diff(graph.in_indptr)
        colors = [ids.astype(np.int64) for ids in _sweep_order(kept["coloring"])]
        fed = [ids[degree[ids] > 0] for ids in colors]
        cuts, zero_cuts = (np.zeros(len(colors) + 1, np.int64) for _ in range(2))
        np.cumsum([len(ids) for ids in fed], out=cuts[1:])
        np.cumsum([len(ids) - len(f) for ids, f in zip(colors, fed)], out=zero_cuts[1:])
        zeros = np.concatenate([ids[degree[ids] == 0] for ids in colors] or [_NO_IDS])
        kept[weighted] = _kernels().segment_lanes(
            graph.in_indptr, graph.in_indices, graph.in_weights if weighted else None,
            np.concatenate(fed or [_NO_IDS]), cuts, max(graph.num_vertices, 1)) + \
            (zeros, zero_cuts)
    return kept[weighted]


_COLOR_LANES = "direct-color-lanes"


def _rescales(program, dangling):
    """Whether a colored PageRank ``program`` rescales its values (see
    :meth:`PageRank.iteration_constant`): ``rescale`` and some vertex dangling."""
    return program.rescale and not (isinstance(dangling, slice) and
                                    dangling.stop == dangling.start)


def _dangling_args(dangling):
    """(ids, lo, hi) of the dangling vertices (an id array, or a slice: its range)."""
    if isinstance(dangling, slice):
        return _NO_IDS, dangling.start, dangling.stop
    return dangling, 0, 0


_NO_IDS = np.zeros(0, np.int64)


def colored_constant(program, values):
    """A colored PageRank ``program``'s iteration constant on the CPU, rescaling
    ``values`` in place (:func:`hetgraph.kernels.cpu.direct.rescaled_constant`, the
    direct path's)."""
    dangling = program._dangling
    return _kernels().rescaled_constant(values, program._rank_of, *_dangling_args(dangling),
                                        _rescales(program, dangling), program.damping)


def colored_change(values, previous, rank_of):
    """A colored PageRank's L1 change of the ranks on the CPU (the direct path's)."""
    return _kernels().lane_change(values, previous, rank_of)


def components(graph, dtype, program_start):
    """Weakly connected components: each vertex gets the smallest id of its component,
    in ``dtype``, by breadth-first traversals in id order; a Result of program "BFS" in
    mode "direct", one row ("traverse")."""
    labels = np.empty(graph.num_vertices, dtype)
    rows = np.empty((1, 4), np.int64)
    far = _scattered(graph)
    _kernels().components(graph.in_indptr, graph.in_indices, graph.out_indptr,
                          graph.out_indices, graph.directed, labels, rows, _marks(graph, far),
                          tuning.DIRECT_AHEAD if far else 0)
    result = _result(graph, labels, "BFS", rows, "traverse", True, program_start)
    result.mode = "direct"
    return result


def _result(graph, values, name, rows, mode, converged, program_start, count=1):
    """The Result of a direct run, whose history has a row per row of ``rows``
    (active, edges, activated, nanoseconds), the first ``count``."""
    result = _DirectResult(graph, values, name, count,
                           (rows, mode, time.perf_counter() - program_start, False))
    result.converged = converged
    return result


class _DirectResult(Result):
    """A direct run's Result: its history rows are made when first read (making them
    would cost as much as a small graph's run) from ``call``: (table, the CPU mode of
    its rows, wall, levels), the table holding active, edges, activated and nanoseconds
    per iteration in its first ``iterations`` rows, wall the call's seconds (those
    beyond the compiled code counted as the first row's overhead), and levels whether
    it is a BFS's ``work`` (:func:`hetgraph.kernels.cpu.direct.levels`), whose queue
    gives the edges of every row (the table's then unused)."""

    # (Result's attributes, for every direct run: a small graph's call is short, and
    # the keywords of Result's __init__ cost as much as the rest of the call's Python)
    compile_seconds, converged, mode, _history, _made = 0.0, True, "sync", None, None

    def __init__(self, graph, values, name, count, call):
        self.graph, self.values, self.program, self.iterations = graph, values, name, count
        self._call = call

    @property
    def _rows(self):
        if self._made is None:
            table, mode, wall, levels = self._call
            edges = None
            if levels:
                n = len(self.values)
                table, queue = table[:4 * (n + 1)].reshape(n + 1, 4), table[4 * (n + 1):]
                edges = _level_edges(self.graph.out_indptr, queue, table[:self.iterations])
            self._made = _rows(table[:self.iterations], mode, wall, self.graph.num_arcs,
                               edges)
        return self._made

    @_rows.setter
    def _rows(self, rows):
        self._made = rows


def _rows(table, mode, wall, arcs, edges=None):
    """History rows of ``table`` (see :class:`_DirectResult`), with ``edges`` per row
    when given."""
    count = len(table)
    active, counted, activated, nanoseconds = table.T.tolist() if count else ([],) * 4
    edges = counted if edges is None else edges
    kernel = [ns * 1e-9 for ns in nanoseconds]
    seconds, overhead = list(kernel), [0.0] * count
    if count:  # (the call's own work: its first row's, as a segment's count is)
        overhead[0] = max(wall - sum(kernel), 0.0)
        seconds[0] += overhead[0]
    repeat = itertools.repeat
    return list(zip(*device_row(
        "cpu", range(count), repeat("cpu"), repeat(mode), [e / max(arcs, 1) for e in edges],
        repeat(1.0), repeat(_NAN), active, active, edges, activated, repeat(1), repeat(0),
        seconds, overhead, kernel, repeat(_NAN), zero=repeat(0), zero_seconds=repeat(0.0))))
