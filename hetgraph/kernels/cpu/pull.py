"""The pull pass (Garaph section 4): the in-edges of the vertices to compute are cut into
equal edge ranges, each run alone (claimed by helper threads, see :mod:`.threads`, or one
after the other); a vertex
cut by a range boundary gets a partial accumulator (a replica) in each range it touches,
and the replicas are merged after the ranges are done. Serves pull and notify-pull
alike: the vertices are a contiguous range or a sorted list of ids."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numba
import numpy as np

from ... import tuning
from ...order import median_arc_span
from .components import prefetch
from .direct import swept_pass
from .structs import ALL_VERTICES, Cut, Page, State
from .threads import run_parts
from .vertexops import VertexOps


class PullPass(NamedTuple):
    """A program's compiled pull: ``gather_range(t, page, state, cut)`` runs edge range t
    (releasing the GIL), ``merge(out_indptr, state, cut)`` applies the vertices cut at a
    range boundary, ``sweep_colors(page, state, bounds, scratch, swept, first)`` a colored
    iteration's passes over contiguous colors, each in one range (see
    :func:`_build_colors`). Each returns (vertices activated, their out-degree sum). A
    compiled entry point takes only the arrays it reads: each array argument adds to its
    compile (its unboxing). They take the Page, State and Cut as plain tuples (see
    :mod:`.structs`), which :meth:`run` passes. ``gather_all(page, state, cut, counts)``
    runs every range on Numba's OpenMP threads (a parallel loop, compiled on first use),
    writing each range's two counts into a row of ``counts``."""
    gather_range: Callable
    merge: Callable
    sweep_colors: Callable
    gather_all: Callable

    def run(self, page, state, cut, threads=1, openmp=False):
        """The pull of ``cut`` (see :func:`cut_ranges`), its ranges claimed by up to
        ``threads`` threads (see :mod:`.threads`), or with ``openmp`` (and ``threads``
        > 1) run on Numba's OpenMP threads, a static share each: no hand-over through
        the GIL, but their waits spin, which a machine busy with other work punishes
        (the engines choose by speed, :class:`hetgraph.engines.cpu_modes.SpreadBySize`).
        ``page``, ``state``, ``cut``: a Page's, a State's and a Cut's fields as plain
        tuples. Returns (vertices activated, their out-degree sum)."""
        parts = len(cut[5])  # (the Cut's head: one replica a range)
        if parts == 1:  # one range cuts no vertex: nothing to merge
            activated, degree = self.gather_range(0, page, state, cut)
            return int(activated), int(degree)
        if threads > 1 and openmp:
            counts = np.zeros((parts + 1, 2), np.int64)
            self.gather_all(page, state, cut, counts)
            counts[parts] = self.merge(page[4], state, cut)
            activated, degree = counts.sum(axis=0)
            return int(activated), int(degree)
        if threads > 1:
            gather_range = self.gather_range
            counts = run_parts(lambda t: gather_range(t, page, state, cut), parts, threads)
        else:
            counts = [self.gather_range(t, page, state, cut) for t in range(parts)]
        counts.append(self.merge(page[4], state, cut))
        return int(sum(c[0] for c in counts)), int(sum(c[1] for c in counts))


def cut_ranges(vertices, prefix, v0, parts, dtype, ahead=0) -> tuple:
    """The Cut of a pull's vertices (ids, or v0.. when empty; in-degree running total
    ``prefix``) into ``parts`` equal edge ranges, with replicas of value type ``dtype``,
    as a plain tuple of its fields (what the compiled pull takes); ``ahead``: edges
    ahead whose source values a pull over a contiguous range prefetches (0: none; see
    :func:`pull_ahead`)."""
    n = len(prefix) - 1
    if parts == 1:  # (the arithmetic below gives these; microseconds of a small pass)
        bounds, owned = np.array([prefix[0], prefix[-1]]), np.array([0, n])
    else:
        bounds = prefix[0] + ((prefix[-1] - prefix[0]) * np.arange(parts + 1)) // parts
        owned = np.searchsorted(prefix[:-1], bounds)
        owned[0], owned[-1] = 0, n
    return _cut(vertices, prefix, v0, bounds, owned, dtype, ahead)


def _cut(vertices, prefix, v0, bounds, owned, dtype, ahead) -> tuple:
    """A Cut's fields as a plain tuple: its ranges' ``bounds`` (edges) and ``owned``
    (vertices), with fresh replica scratch of value type ``dtype``."""
    parts = len(bounds) - 1
    return (vertices, prefix, v0, bounds, owned, np.empty(parts, dtype),
            np.empty(parts, dtype), np.zeros(parts, np.bool_), ahead)


def arc_span(graph) -> float:
    """The median arc span of ``graph`` in memory (:func:`hetgraph.order.median_arc_span`
    of ``tuning.DIRECT_SPAN_SAMPLES`` arcs), found once and kept by the graph."""
    return graph.kept(_SPAN, lambda: median_arc_span(graph,
                                                        samples=tuning.DIRECT_SPAN_SAMPLES))


_SPAN = "direct-span"  # (its key in Graph.kept)


def pull_ahead(graph) -> int:
    """Edges ahead whose source values a whole pull of ``graph`` prefetches:
    ``tuning.PULL_AHEAD`` on a graph in memory whose values outgrow a core's cache (more
    than ``tuning.DIRECT_CACHED_VERTICES`` vertices), whose ids say nothing of where a
    vertex is (a median arc span above ``tuning.DIRECT_HOSTILE_SPAN``) and without
    hubs (an in-degree skew of at most ``tuning.PULL_AHEAD_SKEW``): there each of a
    few in-edges reads a value far from the last, which the CPU cannot guess; hubs'
    values stay cached and an ordered graph's reads are near. Else 0."""
    if (graph.in_indices is None or graph.num_vertices <= tuning.DIRECT_CACHED_VERTICES
            or graph.in_degree_skew() > tuning.PULL_AHEAD_SKEW):
        return 0
    return tuning.PULL_AHEAD if arc_span(graph) > tuning.DIRECT_HOSTILE_SPAN else 0


def cut_by_cost(in_indptr, parts, cap, dtype, ahead=0) -> tuple:
    """The Cut of a pull over every vertex into ``parts`` ranges of equal cost at vertex
    boundaries (no vertex cut), a vertex costing 1 plus its in-degree up to ``cap``
    edges: the work of a sync pull that stops reading a vertex once it is settled
    (Beamer's bottom-up BFS), where a hub settles after a few edges and a low-degree
    vertex reads them all, so that equal edge ranges would leave the low-degree end's
    ranges most of the work. ``ahead``: as :func:`cut_ranges`'s."""
    degree = np.diff(in_indptr)
    cost = np.concatenate(([0], np.cumsum(np.minimum(degree, cap) + 1)))
    return _cut_at(ALL_VERTICES, in_indptr, 0, cost, parts, dtype, ahead)


def cut_at_vertices(vertices, prefix, v0, parts, dtype) -> tuple:
    """The Cut of a pull's vertices (as :func:`cut_ranges`'s) into ``parts`` ranges of
    about equal cost at vertex boundaries, a vertex costing 1 plus its in-degree: no
    vertex is cut, so each vertex sums its in-edges in order in one range and the
    values do not depend on ``parts`` (a colored pass's, which may run spread or
    alone)."""
    cost = np.asarray(prefix, np.int64) + np.arange(len(prefix))
    return _cut_at(vertices, prefix, v0, cost, parts, dtype, 0)


def _cut_at(vertices, prefix, v0, cost, parts, dtype, ahead) -> tuple:
    """The Cut of the vertices counted by ``prefix`` into ``parts`` ranges of equal
    ``cost`` (a running total a vertex, as long as ``prefix``) at vertex boundaries."""
    n = len(prefix) - 1
    owned = np.searchsorted(cost, cost[0] + (cost[-1] - cost[0]) * np.arange(parts + 1)
                            // parts)
    owned[0], owned[-1] = 0, n
    return _cut(vertices, prefix, v0, np.asarray(prefix)[owned], owned, dtype, ahead)


def build_pull(ops: VertexOps) -> PullPass:
    """The PullPass of a program's VertexOps."""
    complete = _build_complete(ops)
    gather, merge = _build_range(ops, complete), _build_merge(ops)
    colors = _build_colors(complete)

    @numba.njit(nogil=True)
    def gather_range(t, page, state, cut):
        return gather(t, Page(*page), State(*state), Cut(*cut))

    @numba.njit(nogil=True)
    def merge_cut(out_indptr, state, cut):
        return merge(out_indptr, State(*state), Cut(*cut))

    @numba.njit(nogil=True)
    def sweep_colors(page, state, bounds, scratch, swept, first):
        return colors(Page(*page), State(*state), bounds, scratch, swept, first)

    @numba.njit(nogil=True, parallel=True)
    def gather_all(page, state, cut, counts):
        for t in numba.prange(len(cut[5])):
            counts[t, 0], counts[t, 1] = gather(t, Page(*page), State(*state), Cut(*cut))

    return PullPass(gather_range, merge_cut, sweep_colors, gather_all)


def _build_complete(ops):
    finish, keep, settled, cast, identity = (
        ops.finish, ops.keep, ops.settled, ops.cast, ops.identity)
    settling, aux_of = ops.settling, ops.aux_of

    @numba.njit(nogil=True, inline="always")
    def complete(page, state, vertices, v0, lo, end, ahead=0):
        """Apply the vertices lo..end-1 of a pull (none cut by a range boundary); returns
        (vertices activated, their out-degree sum). A contiguous range (``vertices``
        empty) carries its edge and out-edge positions from one vertex to the next: one
        read of each index array a vertex, and a loop the compiler keeps tight; there
        the source values of the edges ``ahead`` places on are prefetched (0: none)."""
        in_indptr, in_indices, weights = page.indptr, page.indices, page.weights
        base, out_indptr = page.base, page.out_indptr
        values, new_values, flags = state.values, state.new_values, state.flags
        aux, constant, sync = state.aux, state.constant, state.sync
        activated = degree = 0
        one = np.uint64(1)  # (unsigned ids: no negative-index wrap-around test on each)
        if vertices.shape[0] == 0:
            first, out_first = in_indptr[v0 + lo] - base, out_indptr[v0 + lo]
            stop, step = np.uint64(in_indices.shape[0]), np.uint64(ahead)
            for v in range(np.uint64(v0 + lo), np.uint64(v0 + end)):
                last, out_last = in_indptr[v + one] - base, out_indptr[v + one]
                if step > 0:  # (v's edges shifted by ahead: every edge's once)
                    for e in range(np.uint64(first) + step, min(np.uint64(last) + step, stop)):
                        prefetch(values, in_indices[e])
                if sync and settled(values[v]):
                    on = keep(values, new_values, flags, v)
                else:
                    acc = settling(in_indices, weights, values, first, last, values[v],
                                   cast(identity), aux_of(aux, v), constant, sync)
                    on = finish(values, new_values, flags, aux, constant, v, acc)
                # (counted without a branch: whether v changed is data, unpredictable)
                activated += on
                degree += on * (out_last - out_first)
                first, out_first = last, out_last
            return activated, degree
        for i in range(np.uint64(lo), np.uint64(end)):
            v = np.uint64(vertices[i])
            if sync and settled(values[v]):
                on = keep(values, new_values, flags, v)
            else:
                acc = settling(in_indices, weights, values, in_indptr[v] - base,
                               in_indptr[v + one] - base, values[v], cast(identity),
                               aux_of(aux, v), constant, sync)
                on = finish(values, new_values, flags, aux, constant, v, acc)
            activated += on
            degree += on * (out_indptr[v + one] - out_indptr[v])
        return activated, degree

    return complete


def _build_range(ops, complete):
    accumulate, keep, settled, cast, identity = (
        ops.accumulate, ops.keep, ops.settled, ops.cast, ops.identity)

    @numba.njit(nogil=True)
    def gather_range(t, page, state, cut):
        """Edge range t: complete vertices are applied; the partial accumulators of the
        vertex cut at the range start (head) and at its end (tail) are kept. In a sync
        pass a settled vertex is kept as it is by the range that owns it (no tail), and
        the ranges after skip its edges; an async pass computes it (a value reached
        within an iteration, through values of that iteration, need not be final: a BFS
        level can still drop)."""
        in_indptr, in_indices, weights, base = page.indptr, page.indices, page.weights, \
            page.base
        values, sync = state.values, state.sync
        vertices, prefix, v0, bounds = cut.vertices, cut.prefix, cut.v0, cut.bounds
        owned, head, tail, has_tail = cut.owned, cut.head, cut.tail, cut.has_tail
        a, b, lo, hi = bounds[t], bounds[t + 1], owned[t], owned[t + 1]
        head[t] = cast(identity)
        has_tail[t] = False
        if lo > 0 and a < b and prefix[lo] > a:  # the head: v cut at the range start
            v = vertices[lo - 1] if vertices.shape[0] > 0 else v0 + lo - 1
            if not (sync and settled(values[v])):
                shift = in_indptr[v] - prefix[lo - 1] - base
                head[t] = accumulate(in_indices, weights, values, a + shift,
                                     min(prefix[lo], b) + shift, values[v], head[t])
        # only the last vertex owned can run past the range's end (owned: see cut_ranges)
        cut_last = hi > lo and prefix[hi] > b
        activated, degree = complete(page, state, vertices, v0, lo,
                                     hi - 1 if cut_last else hi, cut.ahead)
        if cut_last:  # the tail, or a settled vertex kept whole by its owner
            v = vertices[hi - 1] if vertices.shape[0] > 0 else v0 + hi - 1
            if sync and settled(values[v]):
                on = keep(values, state.new_values, state.flags, v)
                activated += on
                degree += on * (page.out_indptr[v + 1] - page.out_indptr[v])
            else:
                shift = in_indptr[v] - prefix[hi - 1] - base
                tail[t] = accumulate(in_indices, weights, values, prefix[hi - 1] + shift,
                                     b + shift, values[v], cast(identity))
                has_tail[t] = True
        return activated, degree

    return gather_range


def _build_colors(complete):
    @numba.njit(nogil=True)
    def colors(page, state, bounds, scratch, swept, first):
        """A colored iteration's passes in one call (see :mod:`hetgraph.engines.colored`),
        each in one range: color c is the vertices ``bounds[c]`` .. ``bounds[c + 1]`` - 1;
        the last (the hybrid partition) first, into ``scratch``, then copied into the
        values, then the others from the last to the first, in place (``state``: an
        async one, its constant the first pass's); after each pass the constant
        :func:`~hetgraph.kernels.cpu.direct.swept_pass` gives for the pass's color,
        ``first`` + c (``swept``: as there). Returns (vertices activated, their
        out-degree sum)."""
        whole = np.empty(0, np.int64)  # (no id list: ranges)
        values, flags, aux, sync = state.values, state.flags, state.aux, state.sync
        last = bounds.shape[0] - 2
        a, b = bounds[last], bounds[last + 1]
        activated, degree = complete(page, State(values, scratch, flags, aux,
                                                 state.constant, sync), whole, a, 0, b - a)
        values[a:b] = scratch[a:b]
        constant = swept_pass(values, swept, first + last, state.constant) if a < b \
            else state.constant
        for c in range(last - 1, -1, -1):
            on, out = complete(page, State(values, values, flags, aux, constant, sync),
                               whole, bounds[c], 0, bounds[c + 1] - bounds[c])
            activated += on
            degree += out
            constant = swept_pass(values, swept, first + c, constant)
        return activated, degree

    return colors


def _build_merge(ops):
    combine, finish, vertex = ops.combine, ops.finish, ops.vertex

    @numba.njit(nogil=True)
    def merge(out_indptr, state, cut):
        """Combine the replicas of every vertex cut at a range boundary, then apply it
        (Garaph 4.1); returns (vertices activated, their out-degree sum by
        ``out_indptr``)."""
        values, new_values, flags, aux, constant = (state.values, state.new_values,
                                                    state.flags, state.aux, state.constant)
        vertices, v0, owned, head, tail, has_tail = (cut.vertices, cut.v0, cut.owned,
                                                     cut.head, cut.tail, cut.has_tail)
        parts = head.shape[0]
        activated = degree = 0
        for t in range(parts):
            if has_tail[t]:
                i = owned[t + 1] - 1
                acc = tail[t]
                s = t + 1
                while s < parts and owned[s] == i + 1:
                    acc = combine(acc, head[s])
                    s += 1
                v = vertex(vertices, v0, i)
                if finish(values, new_values, flags, aux, constant, v, acc):
                    activated += 1
                    degree += out_indptr[v + 1] - out_indptr[v]
        return activated, degree

    return merge
