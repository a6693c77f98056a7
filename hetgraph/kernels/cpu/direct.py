"""Whole algorithms in one compiled call, for graphs small enough that a run's
machinery (the dispatcher, its segments, the engine's passes) would cost more than the
edges: breadth-first levels by a queue, Dijkstra's shortest paths, PageRank's power
iteration with its convergence test, and components by traversals. Each takes the
graph's arrays, writes the values into an array of the caller's and fills ``rows``, a
table of one row per iteration (:data:`ROW_FIELDS`), timed by :mod:`.clock`.

The entry points are cached in hetgraph's compile cache (:func:`.diskcache.attach`),
so a new process loads them instead of compiling them.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from .clock import nanoseconds
from .components import prefetch
from .diskcache import attach

# the columns of ``rows``: vertices active, edges read, vertices activated, nanoseconds
ROW_FIELDS = ("active", "edges", "activated", "nanoseconds")
_ONE, _TWO, _THREE = numba.uint64(1), numba.uint64(2), numba.uint64(3)
_SIX, _LOW = numba.uint64(6), numba.uint64(63)  # (a bit's word, and its place in it)


@numba.njit(nogil=True, inline="always")
def _index(i):
    """``i`` as an unsigned index: the compiled code then skips the wraparound check of
    a negative index on every load (docs/tuning.md, "Direct path")."""
    return numba.uint64(i)


@numba.njit(nogil=True, inline="always")
def _visit(indptr, indices, u, out, unreached, value, queue, tail):
    """Give ``value`` to every neighbour of ``u`` still at ``unreached`` and append it
    to ``queue`` at ``tail``; returns the new tail."""
    first, last = _index(indptr[u]), _index(indptr[u + 1])
    while first < last:
        w = _index(indices[first])
        first += _ONE
        if out[w] == unreached:
            out[w] = value
            queue[tail] = w
            tail += 1
    return tail


@numba.njit(nogil=True)
def levels(indptr, indices, source, out, unreached, work):
    """Breadth-first levels from ``source`` along the CSR (``indptr``, ``indices``) into
    ``out`` (int or float; ``unreached`` where the source cannot reach), in ``work``
    (int64, :func:`level_work` of N: one array, since each costs the caller an
    allocation): first a table of N + 1 rows of 4 (:data:`ROW_FIELDS`), a row per
    level, whose edges (column 1) are left 0 (the caller sums the out-degrees of each
    level's vertices when it needs them: counting them in the loop slows it), then the
    queue (N ids: it ends holding the vertices reached, level by level). Returns the
    levels (rows) used."""
    n = out.shape[0]
    rows = work[:4 * (n + 1)].reshape((n + 1, 4))
    queue = work[4 * (n + 1):]
    for v in range(n):
        out[v] = unreached
    sentinel = out[source]  # (unreached in out's type: a wider compare slows each edge)
    clock = np.zeros(2, np.int64)
    start = nanoseconds(clock)
    out[source] = 0
    queue[0] = source
    # one loop over the queue, a level's row written after its last vertex (nested
    # loops, a level each, ran slower)
    head, tail, begin, end, level = 0, 1, 0, 1, 0
    value = out[source] + 1  # (the next level's, in out's type: no load per vertex)
    while head < tail:
        u = _index(queue[head])
        head += 1
        tail = _visit(indptr, indices, u, out, sentinel, value, queue, tail)
        if head == end:
            now = nanoseconds(clock)
            rows[level, 0], rows[level, 1], rows[level, 2] = end - begin, 0, tail - end
            rows[level, 3], start = now - start, now
            level += 1
            value += 1
            begin, end = end, tail
    return level


@numba.njit(nogil=True)
def far_levels(indptr, indices, source, out, unreached, work, seen, ahead):
    """:func:`levels` for a graph beyond the caches whose ids say nothing of where a
    vertex is: the vertices reached are marked in ``seen`` (zeros, a bit a vertex:
    see :func:`_push`), not by ``out``'s values, whose reads would each miss the
    caches; the rows of the vertex ``ahead`` places on in the queue are prefetched
    (its rows are scattered, and the queue says which come next); ``out`` is written
    from the queue, level by level, once the traversal ends. Returns the levels."""
    n = out.shape[0]
    rows = work[:4 * (n + 1)].reshape((n + 1, 4))
    queue = work[4 * (n + 1):]
    for v in range(n):
        out[v] = unreached
    clock = np.zeros(2, np.int64)
    start = nanoseconds(clock)
    out[source] = 0
    _push(seen, _index(source), queue, 0)
    half = ahead >> 1
    head, tail, begin, end, level = 0, 1, 0, 1, 0
    while head < tail:
        if head + ahead < tail:  # (a helper function for the prefetches ran slower)
            prefetch(indptr, queue[head + ahead])
        if head + half < tail:
            prefetch(indices, indptr[queue[head + half]])
        u = _index(queue[head])
        head += 1
        tail = _reach(indptr, indices, u, seen, queue, tail)
        if head == end:
            now = nanoseconds(clock)
            rows[level, 0], rows[level, 1], rows[level, 2] = end - begin, 0, tail - end
            rows[level, 3], start = now - start, now
            level += 1
            begin, end = end, tail
    value, i = out[source], 0  # (0 in out's type)
    for at in range(level):
        for _ in range(rows[at, 0]):
            out[queue[i]] = value
            i += 1
        value += 1
    return level


def level_work(n):
    """The size of :func:`levels`'s (and :func:`far_levels`'s) ``work`` for N = ``n``
    vertices (the queue one longer than N: a branch-free step stores one past it)."""
    return 5 * n + 5


@numba.njit(nogil=True, inline="always")
def _sift_down(keys, ids, size):
    """Restore the binary min-heap (``keys``, ``ids``) of ``size`` items after its root
    was replaced."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if keys[i] <= keys[child]:
            return
        keys[i], keys[child] = keys[child], keys[i]
        ids[i], ids[child] = ids[child], ids[i]
        i = child


@numba.njit(nogil=True, inline="always")
def _sift_up(keys, ids, i):
    """Restore the binary min-heap (``keys``, ``ids``) after item ``i`` was added."""
    while i > 0:
        parent = (i - 1) // 2
        if keys[parent] <= keys[i]:
            return
        keys[i], keys[parent] = keys[parent], keys[i]
        ids[i], ids[parent] = ids[parent], ids[i]
        i = parent


@numba.njit(nogil=True)
def dijkstra(indptr, indices, weights, source, dist, rows):
    """Shortest-path distances from ``source`` along the CSR with ``weights`` (>= 0)
    into ``dist`` (float; inf where unreachable): Dijkstra's algorithm over a binary
    heap with stale entries skipped. A distance is dist[u] + weight in the arithmetic
    of their types, the relaxation a vertex program applies, so the fixed point is the
    same. One row of ``rows``: the whole run."""
    n = dist.shape[0]
    for v in range(n):
        dist[v] = np.inf
    size_most = indices.shape[0] + 1  # an entry per relaxation at most
    keys = np.empty(size_most, dist.dtype)
    ids = np.empty(size_most, np.int64)
    clock = np.zeros(2, np.int64)
    start = nanoseconds(clock)
    dist[source] = 0
    keys[0], ids[0] = 0, source
    size = 1
    settled = edges = 0
    while size > 0:
        key, u = keys[0], ids[0]
        size -= 1
        keys[0], ids[0] = keys[size], ids[size]
        _sift_down(keys, ids, size)
        if key > dist[u]:  # a stale entry: u was reached shorter since
            continue
        settled += 1
        first, last = indptr[u], indptr[u + 1]
        edges += last - first
        for e in range(first, last):
            w = indices[e]
            candidate = dist[u] + weights[e]
            if candidate < dist[w]:
                dist[w] = candidate
                keys[size], ids[size] = candidate, w
                _sift_up(keys, ids, size)
                size += 1
    rows[0, 0], rows[0, 1], rows[0, 2] = settled, edges, settled - 1
    rows[0, 3] = nanoseconds(clock) - start
    return 1


LANES = 4  # vertices a PageRank pass sums side by side (see lanes)


@numba.njit(nogil=True)
def lanes(indptr, indices, weights, window):
    """The in-edges of the CSC (``indptr``, ``indices``, ``weights``: None or one per
    edge) as :func:`pagerank` reads them: the vertices in groups of :data:`LANES`,
    each group's edges interleaved (the j-th edge of its k-th vertex at ``starts[c] +
    LANES * j + k``), a vertex's edges in their order, the group as long as its
    longest and the rest padded with the id N (whose value is 0) and weight 0; the
    vertices sorted by decreasing in-degree within each run of ``window`` ids, so
    that a group's are alike. Returns (``order``: the vertex of each place, N for the
    padding places, ``starts``, ``sources``, ``factors``: the weights, empty when
    None). A group's vertices are summed at once, each in its own register: their
    adds do not wait for each other, and the loop's end is one guess a group, not
    one a vertex (the branch a CPU mispredicts)."""
    n = indptr.shape[0] - 1
    groups = (n + LANES - 1) // LANES
    order = np.full(groups * LANES, n, np.int64)
    for w0 in range(0, n, window):
        w1 = min(n, w0 + window)
        degrees = indptr[w0 + 1:w1 + 1] - indptr[w0:w1]
        order[w0:w1] = w0 + np.argsort(-degrees, kind="mergesort")
    starts = np.zeros(groups + 1, np.int64)
    for c in range(groups):
        longest = 0
        for k in range(LANES):
            v = order[c * LANES + k]
            if v < n:
                longest = max(longest, indptr[v + 1] - indptr[v])
        starts[c + 1] = starts[c] + LANES * longest
    sources = np.full(starts[groups], n, indices.dtype)
    factors = np.zeros(starts[groups] if weights is not None else 0, np.float32)
    for c in range(groups):
        for k in range(LANES):
            v = order[c * LANES + k]
            if v < n:
                place = starts[c] + k
                for e in range(indptr[v], indptr[v + 1]):
                    sources[place] = indices[e]
                    if weights is not None:
                        factors[place] = weights[e]
                    place += LANES
    return order, starts, sources, factors


@numba.njit(nogil=True, inline="always")
def _apply(v, acc, x, rank, new_x, new_rank, scale, constant):
    """v's new rank, constant + ``acc``, into ``new_rank`` and its internal value (rank
    * scale[v]) into ``new_x``; returns v's change of rank."""
    value = constant + acc
    new_rank[v] = value
    new_x[v] = value * scale[v]
    return abs(value - rank[v])


@numba.njit(nogil=True)
def _pull(order, starts, sources, factors, x, rank, new_x, new_rank, scale, constant):
    """One PageRank iteration over every vertex, :data:`LANES` vertices at once (see
    :func:`lanes`): each sums x[u] * w_uv over its in-edges in their order (the
    padding adds x[N] = 0); returns the sum of the changes of rank. (A function of its
    own, not inlined: beside the clock's call in the iteration loop, the compiled pass
    ran slower.)"""
    n = rank.shape[0]
    weighted = factors.shape[0] > 0
    c0 = c1 = c2 = c3 = 0.0  # (the changes a lane: one sum would wait for each add)
    for c in range(starts.shape[0] - 1):
        a0 = a1 = a2 = a3 = 0.0
        for p in range(_index(starts[c]), _index(starts[c + 1]), _index(LANES)):
            if weighted:
                a0 += x[_index(sources[p])] * factors[p]
                a1 += x[_index(sources[p + _ONE])] * factors[p + _ONE]
                a2 += x[_index(sources[p + _TWO])] * factors[p + _TWO]
                a3 += x[_index(sources[p + _THREE])] * factors[p + _THREE]
            else:
                a0 += x[_index(sources[p])]
                a1 += x[_index(sources[p + _ONE])]
                a2 += x[_index(sources[p + _TWO])]
                a3 += x[_index(sources[p + _THREE])]
        base = c * LANES  # (its first place is a vertex; the last group's others may not)
        c0 += _apply(_index(order[base]), a0, x, rank, new_x, new_rank, scale, constant)
        if order[base + 1] < n:
            c1 += _apply(_index(order[base + 1]), a1, x, rank, new_x, new_rank, scale,
                         constant)
        if order[base + 2] < n:
            c2 += _apply(_index(order[base + 2]), a2, x, rank, new_x, new_rank, scale,
                         constant)
        if order[base + 3] < n:
            c3 += _apply(_index(order[base + 3]), a3, x, rank, new_x, new_rank, scale,
                         constant)
    return (c0 + c1) + (c2 + c3)


@numba.njit(nogil=True)
def pagerank(order, starts, sources, factors, edges, scale, dangling, damping, bound,
             max_iterations, out, rows):
    """PageRank's power iteration as :class:`hetgraph.algorithms.pagerank.PageRank`
    runs it, from uniform ranks, into ``out`` (the ranks, float64): every iteration
    the constant (1 - d) / N + (sum of x over ``dangling``) / N, where x = rank * scale
    (the program's internal values), then rank'[v] = constant + sum_{u -> v} x[u] *
    w_uv over the ``edges`` in-edges as :func:`lanes` lays them out (``factors``: their
    weights, empty when unweighted), until sum |rank' - rank| < ``bound`` (N * tol; a
    negative bound: never) or ``max_iterations``. One pass over the vertices does the pull, the
    new x and the change (keeping the ranks beside x saves the program's division by
    scale). Returns (iterations, converged)."""
    n = out.shape[0]
    # (x[N] = 0: the value the padding reads)
    x, new_x, rank, new_rank = np.zeros(n + 1), np.zeros(n + 1), np.empty(n), out
    for v in range(n):
        rank[v] = 1.0 / n
        x[v] = rank[v] * scale[v]
    clock = np.zeros(2, np.int64)
    start = nanoseconds(clock)
    teleport = (1.0 - damping) / n
    done, converged = max_iterations, False
    for it in range(max_iterations):
        lost = 0.0
        for i in range(dangling.shape[0]):
            lost += x[dangling[i]]
        constant = teleport + (1.0 / n) * lost
        change = _pull(order, starts, sources, factors, x, rank, new_x, new_rank, scale,
                       constant)
        x, new_x = new_x, x  # (no copy: the arrays change roles)
        rank, new_rank = new_rank, rank
        now = nanoseconds(clock)
        rows[it, 0], rows[it, 1], rows[it, 2] = n, edges, n
        rows[it, 3], start = now - start, now
        if change < bound:
            done, converged = it + 1, True
            break
    if done % 2 == 0:  # (the ranks ended in the kernel's own array)
        out[:] = rank
    return done, converged


def _push(seen, w, queue, tail):
    """Mark vertex ``w`` in ``seen`` and append it to ``queue`` at ``tail`` if it was
    not marked yet; returns the new tail. ``seen`` holds a bool per vertex (a graph
    whose arrays stay in cache), or a bit per vertex in uint64 words (a large one: N
    bits stay in a core's cache where N bytes would not), whose step is branch-free:
    on a graph of hostile order whether a neighbour is new is a coin toss, and a
    mispredicted branch cost more than the store."""


@overload(_push, inline="always")
def _push_marks(seen, w, queue, tail):
    if seen.dtype == types.uint64:
        def bits(seen, w, queue, tail):
            word, bit = w >> _SIX, _ONE << (w & _LOW)
            old = seen[word]
            seen[word] = old | bit
            queue[tail] = w
            return tail + ((old & bit) == 0)
        return bits

    def flags(seen, w, queue, tail):
        if seen[w]:
            return tail
        seen[w] = True
        queue[tail] = w
        return tail + 1
    return flags


@numba.njit(nogil=True, inline="always")
def _reach(indptr, indices, u, seen, queue, tail):
    """:func:`_push` every neighbour of ``u``; returns the new tail."""
    for j in range(_index(indptr[u]), _index(indptr[u + 1])):
        tail = _push(seen, _index(indices[j]), queue, tail)
    return tail


@numba.njit(nogil=True)
def _label(queue, firsts, count, labels):
    """Give every vertex the first vertex of its component: component c holds
    queue[firsts[c]:firsts[c + 1]], its first the smallest; the largest's by a pass
    in id order, the others' over it."""
    largest = 0
    for c in range(1, count):
        if firsts[c + 1] - firsts[c] > firsts[largest + 1] - firsts[largest]:
            largest = c
    if count:
        labels[:] = queue[firsts[largest]]
    for c in range(count):
        if c != largest:
            root = queue[firsts[c]]
            for i in range(firsts[c], firsts[c + 1]):
                labels[queue[i]] = root


@numba.njit(nogil=True)
def components(in_indptr, in_indices, out_indptr, out_indices, directed, labels, rows,
               seen, ahead):
    """Weakly connected components into ``labels``: from each vertex not yet reached,
    in id order, a breadth-first traversal gives its component the vertex's id, the
    smallest there (a smaller one would have reached it first). It follows the
    in-edges, and on a ``directed`` graph the out-edges too, marking the vertices it
    reached in ``seen`` (zeros: see :func:`_push`), and prefetches the rows of the
    vertex ``ahead`` places on in its queue (0: none; a large graph's rows are
    scattered, and the queue says which come next). The queue keeps every component,
    one after the other; at the end the largest one's label is written to every
    vertex in id order, and the others' over it from the queue: a random write a
    vertex of the largest, a cache line read and written back each, would cost about
    as much as its traversal. One row of ``rows``."""
    n = labels.shape[0]
    clock = np.zeros(2, np.int64)
    start = nanoseconds(clock)
    queue = np.empty(n + 1, in_indices.dtype)  # (+1: a branch-free push stores one past)
    firsts = np.empty(n + 1, np.int64)  # (where each component starts in the queue)
    half = ahead >> 1
    tail = count = 0
    for s in range(n):
        if _push(seen, _index(s), queue, tail) == tail:
            continue
        firsts[count] = tail
        count += 1
        head, tail = tail, tail + 1
        while head < tail:
            if ahead and head + ahead < tail:  # (a helper function ran slower)
                prefetch(in_indptr, queue[head + ahead])
                if directed:
                    prefetch(out_indptr, queue[head + ahead])
            if ahead and head + half < tail:
                prefetch(in_indices, in_indptr[queue[head + half]])
                if directed:
                    prefetch(out_indices, out_indptr[queue[head + half]])
            u = _index(queue[head])
            head += 1
            tail = _reach(in_indptr, in_indices, u, seen, queue, tail)
            if directed:
                tail = _reach(out_indptr, out_indices, u, seen, queue, tail)
    firsts[count] = n
    _label(queue, firsts, count, labels)
    edges = in_indices.shape[0] * (2 if directed else 1)
    rows[0, 0], rows[0, 1], rows[0, 2] = n, edges, n
    rows[0, 3] = nanoseconds(clock) - start
    return 1


CACHES = attach({"levels": levels, "far_levels": far_levels, "dijkstra": dijkstra,
                 "lanes": lanes, "pagerank": pagerank, "components": components}, "direct")
