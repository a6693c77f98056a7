"""The pull pass (Garaph section 4): the in-edges of the vertices to compute are cut into
equal edge ranges, each run alone (on Numba's threads, or one after the other); a vertex
cut by a range boundary gets a partial accumulator (a replica) in each range it touches,
and the replicas are merged after the ranges are done. Serves pull and notify-pull
alike: the vertices are a contiguous range or a sorted list of ids."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numba
import numpy as np
from numba import prange

from .structs import Cut
from .vertexops import VertexOps


class PullPass(NamedTuple):
    """A program's compiled pull: ``gather_range(t, page, state, cut)`` runs edge range t,
    ``gather_ranges(parts, page, state, cut)`` all of them on Numba's threads (compiled
    only by engines that split their passes, see ``CpuKernel.warm_up``), ``merge(page,
    state, cut)`` applies the vertices cut at a range boundary. Each returns (vertices
    activated, their out-degree sum); gather_ranges a parts x 2 array of them."""
    gather_range: Callable
    gather_ranges: Callable
    merge: Callable

    def run(self, page, state, cut, parallel):
        """The pull of ``cut`` (see :func:`cut_ranges`), its ranges on Numba's threads
        when ``parallel``; returns (vertices activated, their out-degree sum)."""
        parts = cut.head.shape[0]
        if parts == 1:  # one range cuts no vertex: nothing to merge
            activated, degree = self.gather_range(0, page, state, cut)
            return int(activated), int(degree)
        if parallel:  # Numba's threads wait for work spinning: a hand-over in microseconds
            counts = [tuple(c) for c in self.gather_ranges(parts, page, state, cut)]
        else:
            counts = [self.gather_range(t, page, state, cut) for t in range(parts)]
        counts.append(self.merge(page, state, cut))
        return int(sum(c[0] for c in counts)), int(sum(c[1] for c in counts))


def cut_ranges(vertices, prefix, v0, parts, dtype) -> Cut:
    """The Cut of a pull's vertices (ids, or v0.. when empty; in-degree running total
    ``prefix``) into ``parts`` equal edge ranges, with replicas of value type ``dtype``."""
    n = len(prefix) - 1
    if parts == 1:  # (the arithmetic below gives these; microseconds of a small pass)
        bounds, owned = np.array([prefix[0], prefix[-1]]), np.array([0, n])
    else:
        bounds = prefix[0] + ((prefix[-1] - prefix[0]) * np.arange(parts + 1)) // parts
        owned = np.searchsorted(prefix[:-1], bounds)
        owned[0], owned[-1] = 0, n
    return Cut(vertices, prefix, v0, bounds, owned, np.empty(parts, dtype),
               np.empty(parts, dtype), np.zeros(parts, np.bool_))


def build_pull(ops: VertexOps) -> PullPass:
    """The PullPass of a program's VertexOps."""
    head_of = _build_head(ops)
    gather_range = _build_range(ops, head_of)

    @numba.njit(nogil=True, parallel=True)
    def gather_ranges(parts, page, state, cut):
        counts = np.zeros((parts, 2), np.int64)
        for t in prange(parts):
            activated, degree = gather_range(t, page, state, cut)
            counts[t, 0] = activated
            counts[t, 1] = degree
        return counts

    return PullPass(gather_range, gather_ranges, _build_merge(ops))


def _build_head(ops):
    accumulate, settled, vertex, cast, identity = (ops.accumulate, ops.settled, ops.vertex,
                                                   ops.cast, ops.identity)

    @numba.njit(nogil=True, inline="always")
    def head_of(in_indptr, in_indices, weights, base, values, vertices, prefix, v0, a, b,
                lo, sync):
        """The partial accumulator of the vertex cut at the start ``a`` of range a..b
        whose first vertex is the lo-th (identity when none is cut or it is settled in
        a sync pass)."""
        acc = cast(identity)
        if lo > 0 and a < b and prefix[lo] > a:
            v = vertex(vertices, v0, lo - 1)
            if not (sync and settled(values[v])):
                shift = in_indptr[v] - prefix[lo - 1] - base
                acc = accumulate(in_indices, weights, values, a + shift,
                                 min(prefix[lo], b) + shift, values[v], acc)
        return acc

    return head_of


def _build_range(ops, head_of):
    accumulate, finish, keep, settled, vertex, cast, identity = (
        ops.accumulate, ops.finish, ops.keep, ops.settled, ops.vertex, ops.cast,
        ops.identity)

    @numba.njit(nogil=True)
    def gather_range(t, page, state, cut):
        """Edge range t: complete vertices are applied; the partial accumulators of the
        vertex cut at the range start (head) and at its end (tail) are kept. In a sync
        pass a settled vertex is kept as it is by the range that owns it (no tail), and
        the ranges after skip its edges; an async pass computes it (a value reached
        within an iteration, through values of that iteration, need not be final: a BFS
        level can still drop)."""
        in_indptr, in_indices, weights, base, out_indptr = page
        values, new_values, flags, aux, constant, sync = state
        vertices, prefix, v0, bounds, owned, head, tail, has_tail = cut
        b = bounds[t + 1]
        lo = owned[t]
        head[t] = head_of(in_indptr, in_indices, weights, base, values, vertices, prefix,
                          v0, bounds[t], b, lo, sync)
        has_tail[t] = False
        activated = degree = 0
        for i in range(lo, owned[t + 1]):
            v = vertex(vertices, v0, i)
            if sync and settled(values[v]):
                if keep(values, new_values, flags, v):
                    activated += 1
                    degree += out_indptr[v + 1] - out_indptr[v]
                continue
            shift = in_indptr[v] - prefix[i] - base
            last = prefix[i + 1]
            acc = accumulate(in_indices, weights, values, prefix[i] + shift,
                             min(last, b) + shift, values[v], cast(identity))
            if last > b:
                tail[t] = acc
                has_tail[t] = True
            else:  # (counted without a branch: whether v changed is data, unpredictable)
                on = finish(values, new_values, flags, aux, constant, v, acc)
                activated += on
                degree += on * (out_indptr[v + 1] - out_indptr[v])
        return activated, degree

    return gather_range


def _build_merge(ops):
    combine, finish, vertex = ops.combine, ops.finish, ops.vertex

    @numba.njit(nogil=True)
    def merge(page, state, cut):
        """Combine the replicas of every vertex cut at a range boundary, then apply it
        (Garaph 4.1); returns (vertices activated, their out-degree sum)."""
        out_indptr = page.out_indptr
        values, new_values, flags, aux, constant, _ = state
        vertices, _, v0, _, owned, head, tail, has_tail = cut
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
