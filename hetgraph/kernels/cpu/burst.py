"""Bursts: many frontier passes (push or sparse notify-pull) one after the other in one
compiled call, with no Python between them, each iteration timed by the C library's
clock, optionally over priority buckets (delta-stepping)."""

from __future__ import annotations

import numba
import numpy as np

from .buckets import Buckets, defer, rejoin
from .clock import nanoseconds
from .structs import Graph, Scratch, State
from .vertexops import VertexOps


def build_burst(ops: VertexOps, one_pass, buckets: Buckets, push: bool):
    """The burst of one frontier pass kind: ``one_pass`` (the push's when ``push``, else
    the sparse notify-pull's; both take the frontier passes' common arguments).

    ``burst(frontier, degree, limits, graph, state, scratch, stats, fronts, notify_self,
    delta)`` runs iterations from the active ids ``frontier`` (out-degree sum ``degree``)
    while it is not empty and within ``limits`` (a Limits), one row of ``stats`` each at
    most: stats[i] = (active, degree, computed, edges, active after, nanoseconds of the
    pass, nanoseconds since the one before ended, or since the call), and fronts[i] its
    lowest priority run (NaN without buckets). ``delta`` > 0 (delta-stepping, Meyer and
    Sanders 2003): an iteration runs only the active vertices of the lowest priority
    bucket [i * delta, (i + 1) * delta); the others wait (``scratch.deferred``: 1 for a
    waiting vertex, zeros on entry and on return), counted in the frontier (its size and
    degree, the limits, the rows' active and degree). Returns (iterations run, the next
    frontier, its degree). The compiled function returned takes ``limits``, ``graph``,
    ``state`` and ``scratch`` as plain tuples (see :mod:`.structs`)."""
    lowest_bucket, split_bucket = buckets
    buckets_compiled, on_change = ops.buckets, ops.on_change

    @numba.njit(nogil=True)
    def burst(frontier, degree, limits, graph, state, scratch, stats, fronts, notify_self,
              delta):
        max_degree, max_sparse, seconds = limits
        out_indptr, values, flags = graph.out_indptr, state.values, state.flags
        marks, deferred = scratch.marks, scratch.deferred
        timespec = np.zeros(2, np.int64)
        ended = nanoseconds(timespec)
        limit = ended + np.int64(seconds * 1e9)
        count = 0
        buckets = buckets_compiled and delta > 0.0
        later = np.empty(0, np.int64)
        waiting = waiting_degree = entries = 0  # (waiting: counted, not run)
        end = np.inf
        front = np.nan  # the lowest priority of the vertices run (buckets only)
        size = out_indptr.shape[0] - 1 if push else 0  # (see push_pass)
        found = np.empty(size, np.int64)
        before = np.empty(0 if on_change else size, values.dtype)
        if push and not buckets_compiled:
            for v in frontier:
                flags[v] = 0
        if buckets:  # everything waits; the first iteration takes the lowest bucket
            for v in frontier:
                later, entries, added = defer(v, later, entries, deferred)
                waiting += added
            waiting_degree, degree, frontier = degree, 0, frontier[:0]
        while count < stats.shape[0] and ended < limit:
            if buckets and frontier.shape[0] == 0 and waiting > 0:
                frontier, degree, end, entries, front = lowest_bucket(
                    later, entries, deferred, marks, values, out_indptr, delta)
                waiting -= frontier.shape[0]
                waiting_degree -= degree
            active = frontier.shape[0] + waiting
            all_degree = degree + waiting_degree
            if (frontier.shape[0] == 0 or all_degree > max_degree
                    or all_degree + active > max_sparse):
                break
            began = nanoseconds(timespec)
            computed, edges, following, next_degree = one_pass(
                frontier, graph, state, scratch, found, before, notify_self)
            fronts[count] = front
            if buckets:
                following, next_degree, later, entries, change, change_degree, front \
                    = split_bucket(following, end, later, entries, deferred, values,
                                   out_indptr)
                waiting += change
                waiting_degree += change_degree
            now = nanoseconds(timespec)
            stats[count, 0] = active
            stats[count, 1] = all_degree
            stats[count, 2] = computed
            stats[count, 3] = edges
            stats[count, 4] = following.shape[0] + waiting
            stats[count, 5] = now - began
            stats[count, 6] = now - ended
            frontier, degree, ended = following, next_degree, now
            count += 1
        if buckets:
            frontier, degree = rejoin(frontier, later, entries, deferred, out_indptr)
        if push and not buckets_compiled:
            for v in frontier:
                flags[v] = 1
        return count, frontier, degree

    @numba.njit(nogil=True)
    def burst_of_tuples(frontier, degree, limits, graph, state, scratch, stats, fronts,
                        notify_self, delta):
        return burst(frontier, degree, limits, Graph(*graph), State(*state),
                     Scratch(*scratch), stats, fronts, notify_self, delta)

    return burst_of_tuples
