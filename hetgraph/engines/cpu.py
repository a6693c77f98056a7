"""The CPU engine: one iteration of a program on the Numba kernels, in pull or
notify-pull mode as :mod:`.cpu_modes` says (Garaph section 4), or push for incremental
programs.

It keeps the vertex state, the frontier's ids when it is small or pushes, and chooses
between a push from the frontier in one thread, a whole notify-pull iteration in one
thread (small frontiers), a notify-pull pass through the active flags, and a pull pass
over every vertex. Iterations of the first two kinds in a row may run as one burst
(:meth:`CpuEngine.burst`): a high-diameter graph's BFS is thousands of iterations of
microseconds, each of which would otherwise cost microseconds of Python.
"""

from __future__ import annotations

import functools
import time
import weakref

import numpy as np

from .. import tuning
from ..kernels import cpu
from ..kernels.cpu.pull import cut_by_cost, cut_ranges, pull_ahead
from .base import Engine
from .colored import MODE as COLORED, NO_SWEPT, ColorSweep, swept_of
from .cpu_modes import (ALONE, HELPERS, OPENMP, SpreadBySize, SpreadChoice,
                        choose_cpu_mode, notify_fraction, push_factor)


def chunk_count(num_vertices, threads):
    """Chunks of the vertex range for the parallel per-vertex helpers (frontier, notify,
    compact): about 4096 vertices each, at most 8 per thread."""
    return max(1, min(num_vertices // 4096, 8 * threads))


def parts_of(edges, threads, partitions=None):
    """Edge ranges of a pass over ``edges`` edges: ``partitions`` when given, else from
    :data:`hetgraph.tuning.SERIAL_EDGES` edges on (with more than one thread) one a
    thread, and up to :data:`hetgraph.tuning.PULL_PARTS_PER_THREAD` a thread while each
    keeps :data:`hetgraph.tuning.PULL_PART_EDGES` edges; 1 below."""
    if partitions:
        return partitions
    if threads < 2 or edges < tuning.SERIAL_EDGES:
        return 1
    return min(threads * tuning.PULL_PARTS_PER_THREAD,
               max(threads, edges // tuning.PULL_PART_EDGES))


def pull_threads(num_arcs, threads, partitions=None) -> int:
    """Threads that a pull over all ``num_arcs`` arcs keeps busy."""
    return min(threads, parts_of(num_arcs, threads, partitions))


@functools.lru_cache(maxsize=256)
def mode_limits(arcs, rho, skew, push, cpu_mode, sparse, threads):
    """{CPU mode: the largest frontier degree (out-edges) it is chosen for} (see
    :func:`choose_cpu_mode` for the arguments): modes follow one another as f grows
    (push, notify-pull, pull), so the degrees of each are a range, whose end is found
    by bisection (30 questions each: kept)."""
    def mode(d):
        return choose_cpu_mode(notify_fraction(d, arcs), rho, skew, push, cpu_mode, sparse,
                               threads)

    limits, low = {}, 0
    while low <= arcs:
        chosen, high = mode(low), arcs + 1  # mode(low) is chosen; high is past the graph
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if mode(middle) == chosen else (low, middle)
        limits[chosen] = low
        low += 1
    return limits


class CpuEngine(Engine):
    """A program's kernels on the CPU over a :class:`VertexState`.

    ``threads``: threads of the passes; ``partitions``: edge ranges per pass (default =
    threads for passes over at least ``tuning.SERIAL_EDGES`` edges, else 1);
    ``cpu_mode``: "auto", "pull", "notify-pull" or "push" (incremental programs);
    ``rho``: read-cost ratio of the storage (1 in memory); ``coloring``: a colored
    run's (:mod:`.colored`: every iteration a pass per color). It serves one run at a
    time, and later runs of its compiled program on its graph (:meth:`bind`).
    """

    def __init__(self, spec, graph, state, aux, *, threads, partitions=None,
                 cpu_mode="auto", rho=1.0, coloring=None):
        self.threads = threads
        self.partitions = partitions
        self.cpu_mode = cpu_mode
        self.rho = rho
        self.skew = graph.in_degree_skew()
        self.pull_threads = pull_threads(graph.num_arcs, threads, partitions)
        self.parallel = self.pull_threads > 1  # passes may run on several threads
        # spread or alone, by their speed lately (partitions= given: always spread)
        self.spread = SpreadBySize(openmp=threads >= tuning.OPENMP_MIN_THREADS) \
            if self.parallel and not partitions else None
        self.sparse_edges = tuning.SPARSE_EDGES  # (read once: see _from_ids)
        self.sparse = notify_fraction(self.sparse_edges, graph.num_arcs)  # (choose_cpu_mode's)
        self._seen = None  # scratch of a push, made by the first
        self._deferred = None  # scratch of the buckets, made by the first burst
        self.chunks = chunk_count(graph.num_vertices, threads)
        # (a colored iteration's passes that would each run in one range: in one call)
        self.sweep = None if coloring is None else ColorSweep(
            coloring, graph, sparse=spec.incremental and not spec.notify_self,
            alone=lambda edges: parts_of(edges, threads, partitions) == 1)
        # a colored iteration's passes one by one (the large ones spread) or all in one
        # call, by their speed lately (the same values either way: see ColorSweep.cut_of)
        self.together = SpreadChoice() if self.spread is not None and self.sweep is not None \
            and self.sweep.fusible and not self.sweep.whole else None
        start = time.perf_counter()
        self.kernel = cpu.compile_program(spec, aux.dtype)
        self.bind(spec, graph, state, aux)
        self._warm_up()
        self.compile_seconds = time.perf_counter() - start

    reusable = True  # (see bind)
    _bound_to = staticmethod(lambda: None)  # the graph of _cuts and _in_edges, weakly

    def bind(self, spec, graph, state, aux):
        """See :meth:`Engine.bind`: ``spec`` compiles to this engine's kernel
        (``cpu.compile_program`` gives it for ``spec`` and ``aux.dtype``). A kept engine
        serves the run without building its kernel, scratch or limits again; its scratch
        arrays are as every burst and push leaves them (clear)."""
        self.spec, self.graph, self.state, self.aux = spec, graph, state, aux
        self.push = push_factor(spec.incremental, self.pull_threads)
        self.delta = spec.bucket_width(graph)  # priority buckets (0: none)
        self._last_mode = (-1, None)  # (degree, mode) of the last mode asked (see mode)
        self._frontier = None  # sorted ids of the active vertices, when known
        self._degree = 0  # sum of the frontier's out-degrees, when known
        self._counted = None  # (active vertices, their out-degree sum), when known
        if self.sweep is not None:
            self.sweep.reset()
            self.sweep.swept = None if self.sweep.sparse else \
                swept_of(spec.program, graph, self.sweep.coloring)
        if self._bound_to() is not graph:  # what depends on the graph alone, kept
            self._bound_to = weakref.ref(graph)  # (weakly: the graph keeps its engines)
            self._cuts = {}  # {(parts, stops): a whole pull's cut (see _whole_cut)}
            self._in_edges = None  # the graph's in-edges as the pull reads them, once asked
            self._ahead = pull_ahead(graph)  # edges a whole pull prefetches ahead

    def unbind(self):
        """See :meth:`Engine.unbind`."""
        self.spec = self.graph = self.state = self.aux = None

    # (``front``, the frontier's lowest priority, is not kept here: bursts record it in
    # their rows, see burst)

    def _warm_up(self):
        self.kernel.warm_up(self.kernel.edges(self.graph), self.state.values,
                            self.state.flags, self.aux, graph=self.graph,
                            parallel=self.parallel)
        # and the gathering of a frontier's ids, which a run whose first frontier is
        # pulled needs only once the CPU takes over a sparse one (not in that row's time)
        cpu.active_ids(self.state.flags[:0])

    @property
    def values(self):
        return self.state.values

    def keeps_previous(self, frontier):
        """See :meth:`Engine.keeps_previous`: a sync pull of :meth:`iterate` (it swaps
        the state's arrays), or a colored iteration that computes every vertex (asked
        before it, it then copies the values it starts from into an array it keeps: no
        new array an iteration); a subclass that iterates its own way keeps nothing."""
        if type(self).iterate is not CpuEngine.iterate:
            return False
        if self.sweep is not None:
            self._keep = not self.sweep.sparse
            return self._keep
        return self.state.sync and self.mode(frontier[1]) == "pull"

    _previous = None  # (a colored iteration's kept copy, made by the first)
    _keep = False  # (whether the next colored iteration keeps the values it starts from)

    @property
    def previous(self):
        if self.sweep is not None:
            return self._previous
        return self.state.new_values  # (after a sync pull's swap: the values before it)

    def reset_frontier(self, counted=None):
        """See :meth:`Engine.reset_frontier`."""
        self._frontier = None
        self._counted = counted
        if self.sweep is not None:
            self.sweep.reset()

    def frontier(self):
        """(active vertices, sum of their out-degrees). After the state changed
        elsewhere, a frontier small enough for a sparse iteration is also gathered into
        its id list here (a pass over all vertices), so that the iteration's own time
        is the work that grows with the frontier."""
        graph = self.graph
        if self._frontier is not None:
            return len(self._frontier), self._degree
        if self._counted is None:
            self._counted = cpu.frontier_size(self.state.flags, graph.out_indptr)
        active, degree = self._counted
        if self.sweep is None and self._from_ids(self.mode(degree), active, degree):
            self._frontier = cpu.active_ids(self.state.flags)
            self._degree = degree
        return active, degree

    def _from_ids(self, mode, active, degree):
        """Whether an iteration in ``mode`` runs from the frontier's id list."""
        return mode == "push" or (mode == "notify-pull" and
                                  degree + active <= self.sparse_edges)

    def mode(self, degree):
        """The CPU mode of an iteration whose frontier has ``degree`` out-edges (the last
        answer kept: a pull's every iteration asks about the same degree three times)."""
        last_degree, chosen = self._last_mode
        if degree != last_degree:
            chosen = choose_cpu_mode(notify_fraction(degree, self.graph.num_arcs), self.rho,
                                     self.skew, self.push, self.cpu_mode, self.sparse,
                                     self.pull_threads)
            self._last_mode = (degree, chosen)
        return chosen

    @property
    def bursts(self) -> bool:
        """Whether :meth:`burst` can run (see :attr:`CpuKernel.bursts`; not colored)."""
        return self.kernel.bursts and self.sweep is None

    def burst(self, iterations, seconds, max_degree=cpu.NO_LIMIT):
        """The next iterations, while they push or notify-pull from the frontier's ids in
        the mode chosen for the first, run in one compiled call
        (:meth:`CpuKernel.burst`): ``iterations`` and about ``seconds`` at most (a small
        graph's iteration takes microseconds, less than the Python around it), from
        frontiers of at most ``max_degree`` out-edges (edges; within the mode's). Returns
        (mode, stats, fronts: a row and a lowest priority an iteration, see there), or
        None when the next iteration is not such one. Only where :attr:`bursts`."""
        active, degree = self.frontier()
        chosen = self.mode(degree)
        if active == 0 or not self._from_ids(chosen, active, degree):
            return None
        push = chosen == "push"
        state = self.state
        stats, fronts, self._frontier, self._degree = self.kernel.burst(
            self.graph, self._frontier, degree, push, min(self._mode_limit(chosen), max_degree),
            cpu.NO_LIMIT if push else self.sparse_edges, iterations, seconds, state.values,
            state.new_values, state.flags, state.marks,
            self._push_scratch() if push else state.marks, self.aux, state.sync,
            0.0, *self._buckets())
        return (chosen, stats, fronts) if len(stats) else None

    def _buckets(self):
        """(delta, deferred) of a push or sparse iteration (see :meth:`CpuKernel.burst`)."""
        if self.delta and self._deferred is None:
            self._deferred = np.zeros(self.graph.num_vertices, np.uint8)
        return self.delta, self._deferred

    def _mode_limit(self, chosen):
        """The largest frontier degree whose mode is ``chosen``."""
        return mode_limits(self.graph.num_arcs, self.rho, self.skew, self.push,
                           self.cpu_mode, self.sparse, self.pull_threads)[chosen]

    def _push_scratch(self):
        """A push's bits (made by the first push)."""
        if self._seen is None:
            self._seen = self.kernel.push_scratch(self.graph.num_vertices)
        return self._seen

    def iterate(self, constant, frontier):
        """One iteration from ``frontier`` = :meth:`frontier`'s (active, degree) with the
        program's iteration constant; returns (mode, vertices computed, edges read,
        vertices activated)."""
        active, degree = frontier
        constant = float(constant)
        if self.sweep is not None:
            return self._colored(constant)
        chosen = self.mode(degree)
        state = self.state
        if self._from_ids(chosen, active, degree):
            if self._frontier is None:
                self._frontier = cpu.active_ids(state.flags)
            if chosen == "push":
                computed, edges, self._frontier, self._degree = self.kernel.push_step(
                    self.graph, self._frontier, state.values, state.flags, state.marks,
                    self._push_scratch(), self.aux, constant, state.sync,
                    *self._buckets())
            else:
                computed, edges, self._frontier, self._degree = self.kernel.sparse_step(
                    self.graph, self._frontier, state.values, state.new_values,
                    state.flags, state.marks, self.aux, constant, state.sync,
                    *self._buckets())
            activated = len(self._frontier)
        else:
            self._frontier = None
            computed, edges, self._counted = self._dense_pass(constant, chosen)
            activated = self._counted[0]
        return chosen, computed, edges, activated

    def _colored(self, constant):
        """A colored iteration (:class:`ColorSweep`); returns :meth:`iterate`'s result."""
        self._frontier = None
        if self._keep:
            values, kept = self.state.values, self._previous
            if kept is None or kept.shape != values.shape or kept.dtype != values.dtype:
                kept = self._previous = np.empty_like(values)
            np.copyto(kept, values)
            self._keep = False
        choice = self.together
        apart = choice is None or choice.way()
        start = time.perf_counter()
        computed, edges, activated, degree = self.sweep.iterate(
            lambda vertices, prefix, v0, written, constant: self._step(
                constant, vertices, prefix, v0, written=written), self.state, self.graph,
            self.chunks, constant, sweep=self._sweep_colors(), together=not apart)
        if choice is not None:
            choice.record(apart, time.perf_counter() - start, edges)
        self._counted = (activated, degree)
        return COLORED, computed, edges, activated

    def _sweep_colors(self):
        """``ColorSweep.iterate``'s ``sweep``: the kernel's passes of the colors its
        bounds delimit in one call, from the given constant (its ``swept``'s after
        each pass, if any)."""
        state, swept = self.state, self.sweep.swept or NO_SWEPT
        return lambda bounds, scratch, constant, first: self.kernel.colors(
            self._edges(), self.graph.out_indptr, state.values, state.flags, self.aux,
            constant, bounds, scratch, swept, first)

    def describe(self):
        """A colored run's coloring and passes per iteration (else nothing)."""
        return {} if self.sweep is None else {"mode": COLORED, **self.sweep.describe()}

    def pull_pages(self, ranges, constant):
        """Pull the vertex ``ranges`` [(v0, v1), ...] (pages) with the iteration
        constant, writing the state's new values and flags; returns (edges read,
        vertices activated)."""
        edges = activated = 0
        for v0, v1 in ranges:
            prefix = self.graph.in_indptr[v0:v1 + 1]
            edges += int(prefix[-1] - prefix[0])
            activated += self._step(float(constant), cpu.ALL_VERTICES, prefix, v0)[0]
        self.reset_frontier()
        return edges, activated

    def _step(self, constant, vertices, prefix, v0, edges=None, written=None):
        """The kernel over ``vertices`` (or the range from v0) counted by ``prefix``, its
        edges cut over the threads or run in this one (see :class:`.cpu_modes.SpreadBySize`);
        ``edges``: what :meth:`CpuKernel.step` reads (default: the graph's in-edges);
        ``written``: the array written (default the state's new values). Returns
        (vertices activated, their out-degree sum)."""
        count = int(prefix[-1] - prefix[0])
        parts = parts_of(count, self.threads, self.partitions)
        learn = parts > 1 and self.spread is not None
        way = self.spread.way(count) if learn else HELPERS if self.parallel else ALONE
        spread = way != ALONE
        state = self.state
        parts = parts if spread else 1
        cut = None
        if edges is None:  # the graph's own edges; a whole pull's cut is kept
            edges = self._edges()
            if prefix is self.graph.in_indptr and not len(vertices):
                cut = self._whole_cut(parts)
            elif self.sweep is not None:  # (a color's ranges: the same every iteration)
                cut = self.sweep.cut_of(vertices, prefix, v0, parts, state.values.dtype)
        start = time.perf_counter()
        counted = self.kernel.step(edges, self.graph.out_indptr, state.values,
                                   state.new_values if written is None else written,
                                   state.flags, self.aux, constant, vertices, prefix, v0,
                                   parts, state.sync, spread, cut=cut, openmp=way == OPENMP)
        if learn:
            self.spread.record(way, time.perf_counter() - start, count)
        return counted

    def _edges(self):
        """The graph's in-edges as the kernel reads them (made once)."""
        if self._in_edges is None:
            self._in_edges = self.kernel.edges(self.graph)
        return self._in_edges

    def _whole_cut(self, parts):
        """The cut of a pull over every vertex into ``parts`` ranges (made once per
        graph, part count and kind; its replica arrays are scratch that each pass
        rewrites): equal edge ranges, or, for a sync pull that stops reading a settled
        vertex's in-edges, ranges of equal cost (:func:`cut_by_cost`, in-degrees capped
        at ``tuning.PULL_STOP_EDGES``)."""
        stops = self.kernel.stops and self.state.sync
        cut = self._cuts.get((parts, stops))
        if cut is None:
            graph, dtype = self.graph, self.state.values.dtype
            cut = cut_by_cost(graph.in_indptr, parts, tuning.PULL_STOP_EDGES, dtype,
                              self._ahead) if stops else \
                cut_ranges(cpu.ALL_VERTICES, graph.in_indptr, 0, parts, dtype, self._ahead)
            self._cuts[parts, stops] = cut
        return cut

    def _dense_pass(self, constant, chosen):
        """A pull pass, or a notify-pull pass through the active flags, with the edges
        cut into ranges over the threads; returns (vertices computed, edges read,
        (vertices activated, their out-degree sum))."""
        graph, state = self.graph, self.state
        if chosen == "pull":
            vertices, prefix = cpu.ALL_VERTICES, graph.in_indptr
        else:
            cpu.notify(state.flags, graph.out_indptr, graph.out_indices, 0, 0,
                       graph.num_vertices, state.marks, self.spec.notify_self, self.chunks)
            vertices = cpu.compact(state.marks, self.chunks)
            prefix = cpu.edge_prefix(graph.in_indptr, vertices)
        edges = int(prefix[-1] - prefix[0])
        counted = (0, 0)
        if chosen == "pull" or len(vertices):
            counted = self._step(constant, vertices, prefix, 0)
        if chosen == "pull":
            state.swap()
        elif state.sync:
            cpu.commit(state.values, state.new_values, vertices)
        computed = graph.num_vertices if chosen == "pull" else len(vertices)
        return computed, edges, counted
