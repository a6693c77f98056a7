"""Connected components by Afforest (Sutton, Ben-Nun, Barak, IPDPS 2018; the GAP
benchmark's cc_afforest): union-find over the edges, every root hooked under a smaller
id, so its work depends on neither the diameter nor the vertex order.

1. *Sample*: link every vertex to its first ``k`` in-neighbours, then compress every
   tree to a star. Most vertices of a large component are then in one tree, ``c``.
2. *Finish*: link the remaining in-edges of the vertices outside ``c`` (an edge into
   ``c`` is also stored at its source: in the other direction on a symmetric graph,
   in the CSR of a directed one, whose out-edges of vertices outside ``c`` are linked
   too). Compress again.

Every pass reads the edges one block of whole vertices at a time (a page of a store,
or the whole CSC or CSR), so a graph on disk is read page by page; union-find does not
care in which order edges come. A root is always the smallest id of its tree, so the
compressed labels are the smallest dense id of each component.

Each pass exists serial (Rem's union-find) and parallel (Numba threads, GAP's link:
hooks by an atomic compare-and-swap, :func:`compare_and_swap`).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ... import tuning


@intrinsic
def compare_and_swap(typingctx, array, index, expected, new):
    """Atomically ``array[index] = new`` if it holds ``expected``; whether it did
    (LLVM cmpxchg, monotonic: the hook needs no ordering with other memory)."""
    def codegen(context, builder, signature, args):
        array_type, index_type, expected_type, new_type = signature.args
        data, index, expected, new = args
        view = context.make_array(array_type)(context, builder, data)
        index = context.cast(builder, index, index_type, types.intp)
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [index],
                                           wraparound=False)
        element = array_type.dtype
        expected = context.cast(builder, expected, expected_type, element)
        new = context.cast(builder, new, new_type, element)
        outcome = builder.cmpxchg(pointer, expected, new, "monotonic", "monotonic")
        return builder.extract_value(outcome, 1)
    return types.boolean(array, index, expected, new), codegen


@intrinsic
def prefetch(typingctx, array, index):
    """Ask the CPU to bring ``array[index]`` into its caches (LLVM's prefetch: a read,
    high locality); nothing else happens."""
    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        view = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], index_type, types.intp)
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [index],
                                           wraparound=False)
        bytes_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [bytes_pointer, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        builder.call(function, [builder.bitcast(pointer, bytes_pointer), ir.Constant(i32, 0),
                                ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.none(array, index), codegen


@numba.njit(nogil=True, inline="always")
def _prefetch_row(indptr, sources, e0, w, parent):
    """Prefetch the parents of vertex ``w``'s first two in-neighbours: a pass asks for
    them some vertices ahead of the one it links, its reads being random."""
    start = indptr[w] - e0
    stop = indptr[w + 1] - e0
    if start < stop:
        prefetch(parent, sources[start])
    if start + 1 < stop:
        prefetch(parent, sources[start + 1])


@numba.njit(nogil=True, inline="always")
def _link_shared(u, v, parent):
    """Union the trees of ``u`` and ``v``, the larger root hooked under the smaller by
    a compare-and-swap (GAP's Link): safe while other threads link."""
    p1 = parent[u]
    p2 = parent[v]
    while p1 != p2:
        high = max(p1, p2)
        low = min(p1, p2)
        above = parent[high]
        if above == low:
            return
        if above == high and compare_and_swap(parent, high, high, low):
            return
        p1 = parent[parent[high]]
        p2 = parent[low]


@numba.njit(nogil=True, inline="always")
def _link_alone(u, v, parent):
    """Union the trees of ``u`` and ``v`` in one thread: Rem's algorithm with splicing,
    every vertex on both paths moved under the smaller parent on the way (the fastest
    serial union-find in Patwary, Blair and Manne's experiments, 2010)."""
    x = u
    y = v
    while parent[x] != parent[y]:
        if parent[x] < parent[y]:
            x, y = y, x
        if x == parent[x]:  # a root: hook it (its parent becomes smaller)
            parent[x] = parent[y]
            return
        above = parent[x]
        parent[x] = parent[y]
        x = above


@numba.njit(nogil=True, inline="always")
def _link(u, v, parent, shared):
    """Union the trees of ``u`` and ``v``; ``shared``: other threads link too."""
    if shared:
        _link_shared(u, v, parent)
    else:
        _link_alone(u, v, parent)


def _sample(indptr, sources, e0, v0, v1, parent, k, shared, ahead):
    """Link every vertex of [v0, v1) to its first ``k`` in-neighbours; ``sources``:
    the in-edges from CSC position ``e0`` on, holding those vertices' in-edges;
    ``ahead``: vertices ahead whose parents are prefetched. Returns the in-edges
    linked."""
    linked = 0
    for v in numba.prange(v0, v1):
        if ahead and v + ahead < v1:  # (0: none, for a graph that stays in cache)
            _prefetch_row(indptr, sources, e0, v + ahead, parent)
        start = indptr[v] - e0
        stop = min(indptr[v + 1] - e0, start + k)
        for j in range(start, stop):
            _link(v, sources[j], parent, shared)
        linked += max(stop - start, 0)
    return linked


def _finish(indptr, sources, e0, v0, v1, parent, k, c, shared):
    """Link the in-edges (or out-edges: ``indptr`` and ``sources`` of the CSR) of the
    vertices of [v0, v1) not in tree ``c``, after each one's first ``k``. Returns the
    edges linked."""
    linked = 0
    for v in numba.prange(v0, v1):
        start = indptr[v] - e0 + k
        stop = indptr[v + 1] - e0
        if start < stop and parent[v] != c:
            for j in range(start, stop):
                _link(v, sources[j], parent, shared)
            linked += stop - start
    return linked


def _link_all(indptr, sources, e0, v0, v1, parent, symmetric, shared, ahead):
    """Link every in-edge of [v0, v1) (plain union-find); ``symmetric``: every edge is
    also stored at its source, so only those from smaller ids are linked: a prefix of
    the vertex's in-edges, sorted by source. ``ahead``: as :func:`_sample`'s. Returns
    the in-edges linked."""
    linked = 0
    for v in numba.prange(v0, v1):
        if ahead and v + ahead < v1:  # (0: none, for a graph that stays in cache)
            _prefetch_row(indptr, sources, e0, v + ahead, parent)
        for j in range(indptr[v] - e0, indptr[v + 1] - e0):
            u = sources[j]
            if symmetric and u >= v:
                break
            _link(v, u, parent, shared)
            linked += 1
    return linked


def _compress(parent, ahead):
    """Make every tree a star: each vertex's parent becomes its root; ``ahead``: as
    :func:`_sample`'s."""
    n = len(parent)
    for v in numba.prange(n):
        if ahead and v + ahead < n:
            prefetch(parent, parent[v + ahead])
        while parent[v] != parent[parent[v]]:
            parent[v] = parent[parent[v]]


class Passes(NamedTuple):
    """The compiled passes of one kind (serial or parallel)."""

    sample: object
    finish: object
    link_all: object
    compress: object


def _compile(parallel):
    jit = numba.njit(parallel=parallel, nogil=True, cache=True)
    return Passes(jit(_sample), jit(_finish), jit(_link_all), jit(_compress))


SERIAL = _compile(False)
PARALLEL = _compile(True)


@numba.njit(nogil=True, cache=True)
def most_frequent_root(parent, samples):
    """The root that most of ``samples`` pseudo-random vertices point to (``parent`` a
    forest of stars): the large component's tree, whose edges the finish skips."""
    seen = np.empty(samples, parent.dtype)
    state = np.uint64(0x9E3779B97F4A7C15)
    for i in range(samples):  # xorshift64: fixed, so a run repeats exactly
        state ^= state << np.uint64(13)
        state ^= state >> np.uint64(7)
        state ^= state << np.uint64(17)
        seen[i] = parent[state % np.uint64(len(parent))]
    seen.sort()
    best, count, run = seen[0], 0, 0
    for i in range(samples):
        run = run + 1 if i and seen[i] == seen[i - 1] else 1
        if run > count:
            best, count = seen[i], run
    return best


def afforest(num_vertices, indptr, blocks, *, out=None, k, samples, parallel,
             dtype=np.int32, clock=None):
    """Component labels (the smallest id of each component, ``dtype``) of the graph
    whose in-edges ``blocks()`` yields as (first CSC position, sources, first vertex,
    end vertex) runs of whole vertices, in any order; ``indptr``: the CSC pointers
    (int64).

    ``out``: None for a symmetric graph (every edge stored in both directions), else
    (CSR pointers, a function yielding the out-edges as ``blocks`` does): the finish
    skips a vertex of the large tree whole, so an edge into it is linked from its
    source's side. ``k``: in-neighbours sampled per vertex; 0: plain union-find, every
    edge linked in one pass (for small graphs, where sampling saves less than its
    passes cost). ``samples``: vertices drawn to find the large tree. ``parallel``:
    the Numba-threaded passes. ``clock``: called with each phase's name, vertices and
    edges linked when the phase ends, for the run's history. Returns the labels."""
    passes = PARALLEL if parallel else SERIAL
    ahead = tuning.CC_PREFETCH_VERTICES if k else 0  # (a small graph stays in cache)
    parent = np.arange(num_vertices, dtype=dtype)
    if num_vertices == 0:
        return parent
    report = clock or (lambda name, vertices, edges: None)
    if k == 0:
        linked = 0
        for e0, sources, v0, v1 in blocks():
            linked += passes.link_all(indptr, sources, e0, v0, v1, parent, out is None,
                                      parallel, ahead)
        passes.compress(parent, ahead)
        report("link", num_vertices, linked)
        return parent
    sampled = 0
    for e0, sources, v0, v1 in blocks():
        sampled += passes.sample(indptr, sources, e0, v0, v1, parent, k, parallel, ahead)
    passes.compress(parent, ahead)
    report("sample", num_vertices, sampled)
    c = most_frequent_root(parent, samples)
    linked = 0
    for e0, sources, v0, v1 in blocks():
        linked += passes.finish(indptr, sources, e0, v0, v1, parent, k, c, parallel)
    for e0, targets, v0, v1 in out[1]() if out is not None else ():
        linked += passes.finish(out[0], targets, e0, v0, v1, parent, 0, c, parallel)
    passes.compress(parent, ahead)
    report("finish", num_vertices, linked)
    return parent
