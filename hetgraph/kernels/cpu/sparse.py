"""The sparse notify-pull pass: one whole notify-pull iteration in one thread from a
small frontier's ids, touching only its neighbourhood (no pass over all N vertices):
the out-neighbours of the frontier are found through the CSR, then each gathers its
in-edges through the CSC."""

from __future__ import annotations

import numba
import numpy as np

from .vertexops import VertexOps


@numba.njit(nogil=True, inline="always")
def _take_frontier(frontier, flags, out_indptr):
    """Clear the active flags of the ids ``frontier``; returns their out-degree sum."""
    degree = 0
    for u in frontier:
        flags[u] = 0
        degree += out_indptr[u + 1] - out_indptr[u]
    return degree


@numba.njit(nogil=True, inline="always")
def _notified(frontier, out_indptr, out_indices, flags, marks, notify_self):
    """The sorted ids of the out-neighbours of ``frontier`` (and the frontier itself if
    ``notify_self``), whose flags are cleared; ``marks`` is left set on them."""
    bound = frontier.shape[0] + _take_frontier(frontier, flags, out_indptr)
    found = np.empty(bound, np.int64)
    k = 0
    for u in frontier:
        if notify_self and marks[u] == 0:
            marks[u] = 1
            found[k] = u
            k += 1
        for e in range(out_indptr[u], out_indptr[u + 1]):
            v = out_indices[e]
            if marks[v] == 0:
                marks[v] = 1
                found[k] = v
                k += 1
    return np.sort(found[:k])


def build_sparse(ops: VertexOps):
    """The sparse notify-pull pass of a program's VertexOps: ``sparse_pass(frontier,
    graph, state, scratch, found, before, notify_self)`` (the frontier passes' common
    arguments; it reads ``scratch.marks`` and neither ``found`` nor ``before``) returns
    (vertices computed, edges read, the next frontier, the sum of its out-degrees)."""
    accumulate, finish, cast, identity = ops.accumulate, ops.finish, ops.cast, ops.identity
    buckets_compiled = ops.buckets  # (a constant: no bucket code without a priority)

    @numba.njit(nogil=True, inline="always")
    def sparse_pass(frontier, graph, state, scratch, found, before, notify_self):
        out_indptr, out_indices = graph.out_indptr, graph.out_indices
        in_indptr, in_indices, weights = graph.in_indptr, graph.in_indices, graph.in_weights
        values, new_values, flags = state.values, state.new_values, state.flags
        aux, constant, sync = state.aux, state.constant, state.sync
        marks = scratch.marks
        computed = _notified(frontier, out_indptr, out_indices, flags, marks, notify_self)
        following = np.empty(computed.shape[0], np.int64)
        count = edges = degree = 0
        for v in computed:
            marks[v] = 0
            first = in_indptr[v]
            last = in_indptr[v + 1]
            edges += last - first
            acc = accumulate(in_indices, weights, values, first, last, values[v],
                             cast(identity))
            waits = flags[v] if buckets_compiled else 0  # a vertex waiting for its
            # bucket stays active
            if finish(values, new_values, flags, aux, constant, v, acc):
                following[count] = v
                count += 1
                degree += out_indptr[v + 1] - out_indptr[v]
            elif buckets_compiled:
                flags[v] = waits
        if sync:
            for v in computed:
                values[v] = new_values[v]
        return computed.shape[0], edges, following[:count], degree

    return sparse_pass
