"""The push pass (incremental programs): one whole iteration in one thread from a small
frontier's ids, each active vertex sending along its out-edges and its targets applying
at once, in place."""

from __future__ import annotations

import numba
import numpy as np

from .vertexops import VertexOps


def build_push(ops: VertexOps):
    """The push pass of a program's VertexOps: ``push_pass(frontier, graph, state,
    scratch, found, before, notify_self)`` (the frontier passes' common arguments; it
    reads ``scratch.seen`` and not ``notify_self``) returns (vertices changed, edges
    read, the next frontier, its out-degree sum).

    Every active vertex u sends gather(x[u], w, .) along its out-edges u -> v, and v
    takes apply(x[v], it) at once, in place: one contribution at a time gives what their
    combination applied once gives, since apply combines by an idempotent monoid. A sync
    pass reads every x[u] as it was at the pass's start (their copy, taken first), so it
    computes the iteration a pull would; an async one reads x[u] as it is. A value that
    x[v] absorbs (combine(x[v], g) == x[v]) is dropped. ``seen``: one bit a vertex, all
    clear between passes; the first change to v sets it and keeps v's value before the
    pass, so that activate compares against it (a bit a vertex fits the caches, where an
    array of N accumulators did not). A program that activates on change keeps no value
    before: every vertex changed is active. Without buckets the flags are not touched
    here: a burst clears its frontier's at its start and sets those of the one it
    returns. ``found``, ``before``: scratch of N entries (the changed vertices, their
    values before; none for a program that activates on change)."""
    send = _build_send(ops)
    activate, on_change, buckets_compiled = ops.activate, ops.on_change, ops.buckets

    @numba.njit(nogil=True, inline="always")
    def push_pass(frontier, graph, state, scratch, found, before, notify_self):
        out_indptr = graph.out_indptr
        values, flags, seen = state.values, state.flags, scratch.seen
        k, edges = send(frontier, graph, state, seen, found, before)
        if on_change:  # every vertex changed is active: a copy of found
            following = found[:k].copy()
            next_degree = 0
            for v in following:  # (loads of no other: the reads below overlap)
                seen[v >> 3] = 0
                next_degree += out_indptr[v + 1] - out_indptr[v]
                if buckets_compiled:
                    flags[v] = 1
            return k, edges, following, next_degree
        following = np.empty(k, np.int64)
        count = next_degree = 0
        for i in range(k):
            v = found[i]
            seen[v >> 3] = 0
            if on_change or activate(values[v], before[i]):
                following[count] = v
                count += 1
                next_degree += out_indptr[v + 1] - out_indptr[v]
                if buckets_compiled:
                    flags[v] = 1
        return k, edges, following[:count], next_degree

    return push_pass


def _build_send(ops):
    gather, combine, apply_with, aux_of, cast = (ops.gather, ops.combine, ops.apply,
                                                 ops.aux_of, ops.cast)
    on_change, buckets_compiled = ops.on_change, ops.buckets

    @numba.njit(nogil=True, inline="always")
    def send(frontier, graph, state, seen, found, before):
        """Send along the out-edges of ``frontier``: returns (the vertices changed, in
        found[:k], k; edges read)."""
        out_indptr, out_indices, out_weights = (graph.out_indptr, graph.out_indices,
                                                graph.out_weights)
        values, flags, aux = state.values, state.flags, state.aux
        constant, sync = state.constant, state.sync
        weighted = out_weights.shape[0] > 0
        sources = np.empty(frontier.shape[0] if sync else 0, values.dtype)
        for i in range(sources.shape[0]):
            sources[i] = values[frontier[i]]
        k = edges = 0
        for i in range(frontier.shape[0]):
            u = frontier[i]
            if buckets_compiled:  # a vertex taken from the waiting list has its flag set
                flags[u] = 0
            src = sources[i] if sync else values[u]
            first, last = out_indptr[u], out_indptr[u + 1]
            edges += last - first
            for e in range(np.uint64(first), np.uint64(last)):
                v = out_indices[e]
                old = values[v]
                w = out_weights[e] if weighted else np.float32(1.0)
                gathered = cast(gather(src, w, old))
                if combine(old, gathered) == old:
                    continue
                byte = v >> 3
                bit = np.uint8(1 << (v & 7))
                if not seen[byte] & bit:
                    seen[byte] |= bit
                    found[k] = v
                    if not on_change:
                        before[k] = old
                    k += 1
                values[v] = cast(apply_with(old, gathered, aux_of(aux, v), constant))
        return k, edges

    return send
