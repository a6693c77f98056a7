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


def lanes(indptr, indices, weights, window):
    """The in-edges of the CSC (``indptr``, ``indices``, ``weights``: None or one per
    edge) as :func:`pagerank` reads them: :func:`segment_lanes` of every vertex in id
    order, one segment. Returns its (order, starts, sources, factors)."""
    n = indptr.shape[0] - 1
    return segment_lanes(indptr, indices, weights, np.arange(n, dtype=np.int64),
                         np.array([0, n], np.int64), window)[:4]


@numba.njit(nogil=True)
def segment_lanes(indptr, indices, weights, vertices, cuts, window):
    """The in-edges of the CSC (``indptr``, ``indices``, ``weights``: None or one per
    edge) of ``vertices`` (ids, cut into segments at the positions ``cuts``) as the
    direct PageRanks read them: the vertices in groups of :data:`LANES`, no group
    across a segment's end, each group's edges interleaved (the j-th edge of its k-th
    vertex at ``starts[c] + LANES * j + k``), a vertex's edges in their order, the
    group as long as its longest and the rest padded with the id N (whose value is 0)
    and weight 0; the vertices sorted by decreasing in-degree within each run of
    ``window`` places of a segment, so that a group's are alike. Returns (``order``:
    the vertex of each place, N for the padding places, ``starts``, ``sources``,
    ``factors``: the weights, empty when None, ``groups``: each segment's first group
    and the groups in all). A group's vertices are summed at once, each in its own
    register: their adds do not wait for each other, and the loop's end is one guess a
    group, not one a vertex (the branch a CPU mispredicts)."""
    n = indptr.shape[0] - 1
    segments = cuts.shape[0] - 1
    groups = np.zeros(segments + 1, np.int64)
    for s in range(segments):
        groups[s + 1] = groups[s] + (cuts[s + 1] - cuts[s] + LANES - 1) // LANES
    order = np.full(groups[segments] * LANES, n, np.int64)
    for s in range(segments):
        place = groups[s] * LANES
        for w0 in range(cuts[s], cuts[s + 1], window):
            w1 = min(cuts[s + 1], w0 + window)
            ids = vertices[w0:w1]
            degrees = indptr[ids + 1] - indptr[ids]
            order[place:place + w1 - w0] = ids[np.argsort(-degrees, kind="mergesort")]
            place += w1 - w0
    total = groups[segments]
    starts = np.zeros(total + 1, np.int64)
    for c in range(total):
        longest = 0
        for k in range(LANES):
            v = order[c * LANES + k]
            if v < n:
                longest = max(longest, indptr[v + 1] - indptr[v])
        starts[c + 1] = starts[c] + LANES * longest
    sources = np.full(starts[total], n, indices.dtype)
    factors = np.zeros(starts[total] if weights is not None else 0, np.float32)
    for c in range(total):
        for k in range(LANES):
            v = order[c * LANES + k]
            if v < n:
                place = starts[c] + k
                for e in range(indptr[v], indptr[v + 1]):
                    sources[place] = indices[e]
                    if weights is not None:
                        factors[place] = weights[e]
                    place += LANES
    return order, starts, sources, factors, groups


@numba.njit(nogil=True, inline="always")
def _apply(v, acc, x, rank, new_x, new_rank, scale, constant):
    """v's new rank, constant + ``acc``, into ``new_rank`` and its internal value (rank
    * scale[v]) into ``new_x``; returns v's change of rank. Without ranks (``rank`` and
    ``new_rank`` None: a colored sweep, which keeps x alone) only x, and 0."""
    value = constant + acc
    new_x[v] = value * scale[v]
    if rank is None:  # (pruned when compiled: a run keeps ranks or not)
        return 0.0
    new_rank[v] = value
    return abs(value - rank[v])


@numba.njit(nogil=True)
def _pull(order, starts, sources, factors, g0, g1, x, rank, new_x, new_rank, scale,
          constant):
    """A PageRank pass over the groups ``g0`` .. ``g1`` - 1, :data:`LANES` vertices at
    once (see :func:`segment_lanes`): each sums x[u] * w_uv over its in-edges in their
    order (the padding adds x[N] = 0); returns the sum of the changes of rank (see
    :func:`_apply`). (A function of its own, not inlined: beside the clock's call in
    the iteration loop, the compiled pass ran slower.)"""
    n = scale.shape[0]
    weighted = factors.shape[0] > 0
    c0 = c1 = c2 = c3 = 0.0  # (the changes a lane: one sum would wait for each add)
    for c in range(g0, g1):
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
        change = _pull(order, starts, sources, factors, 0, starts.shape[0] - 1, x, rank,
                       new_x, new_rank, scale, constant)
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


DOT, CHANGE, BOTH = 1, 2, 3  # (what _lane_sums adds)


@numba.njit(nogil=True, inline="always")
def _terms(a, b, weights, ids, j, what):
    """:func:`_lane_sums`'s j-th terms (0 for a sum not asked)."""
    i = ids[j] if ids.shape[0] > 0 else j
    w = weights[i] if weights.shape[0] > 0 else 1.0
    dot = a[i] * w if what & DOT else 0.0
    change = abs(a[i] - b[i]) * w if what & CHANGE else 0.0
    return dot, change


@numba.njit(nogil=True, inline="always")
def _lane_sums(a, b, weights, ids, lo, hi, what):
    """(sum of a[i] * weights[i], sum of |a[i] - b[i]| * weights[i]), the first where
    ``what`` & DOT, the second where & CHANGE, else 0, over i = ids[j] (``ids`` empty:
    i = j) for j in lo .. hi - 1: each in :data:`LANES` interleaved sums (j's the
    (j - lo) % LANES-th), added in pairs at the end (the adds of one sum wait for each
    other, four need not); ``weights`` empty: 1. A colored PageRank's sums, on either
    path, are these."""
    d0 = d1 = d2 = d3 = c0 = c1 = c2 = c3 = 0.0
    j = lo
    while j + LANES <= hi:
        d, c = _terms(a, b, weights, ids, j, what)
        d0, c0 = d0 + d, c0 + c
        d, c = _terms(a, b, weights, ids, j + 1, what)
        d1, c1 = d1 + d, c1 + c
        d, c = _terms(a, b, weights, ids, j + 2, what)
        d2, c2 = d2 + d, c2 + c
        d, c = _terms(a, b, weights, ids, j + 3, what)
        d3, c3 = d3 + d, c3 + c
        j += LANES
    if j < hi:
        d, c = _terms(a, b, weights, ids, j, what)
        d0, c0 = d0 + d, c0 + c
    if j + 1 < hi:
        d, c = _terms(a, b, weights, ids, j + 1, what)
        d1, c1 = d1 + d, c1 + c
    if j + 2 < hi:
        d, c = _terms(a, b, weights, ids, j + 2, what)
        d2, c2 = d2 + d, c2 + c
    return (d0 + d1) + (d2 + d3), (c0 + c1) + (c2 + c3)


_NOTHING = np.zeros(0)  # (an empty array: no weights, no ids)
_NO_IDS = np.zeros(0, np.int64)


@numba.njit(nogil=True)
def rescaled_constant(x, rank_of, dangling, lo, hi, rescale, damping):
    """A colored PageRank's iteration constant on the CPU (see
    :meth:`hetgraph.algorithms.pagerank.PageRank.iteration_constant`): where
    ``rescale``, the internal values ``x`` (the first N of them) scaled in place so
    that the ranks x * ``rank_of`` sum to 1, then :func:`_colored_constant`. The sums
    are :func:`_lane_sums`', whichever path runs it."""
    n = rank_of.shape[0]
    if rescale:
        inverse = 1.0 / _lane_sums(x, x, rank_of, _NO_IDS, 0, n, DOT)[0]
        for v in range(n):
            x[v] *= inverse
    return _colored_constant(x, n, dangling, lo, hi, damping)


@numba.njit(nogil=True, inline="always")
def _colored_constant(x, n, dangling, lo, hi, damping):
    """(1 - d) / N + (sum of x over the dangling vertices) / N: the ids ``dangling``,
    or (empty) the range ``lo`` .. ``hi`` - 1."""
    lost = _lane_sums(x, x, _NOTHING, dangling, 0, dangling.shape[0], DOT)[0] \
        if dangling.shape[0] > 0 else _lane_sums(x, x, _NOTHING, _NO_IDS, lo, hi, DOT)[0]
    return (1.0 - damping) / n + (1.0 / n) * lost


@numba.njit(nogil=True, inline="always")
def _color_sum(x, ids, at, c):
    """The sum of x over color ``c``'s ids, ids[at[c]:at[c + 1]], in their order."""
    total = 0.0
    for j in range(at[c], at[c + 1]):
        total += x[ids[j]]
    return total


@numba.njit(nogil=True, inline="always")
def swept_pass(x, swept, c, constant):
    """A colored iteration's constant after the pass of color ``c`` (a PageRank's
    dangling rank summed again, so that the passes after it see the rank its
    vertices just got: Gauss-Seidel for the constant too): ``swept`` = (ids, at,
    sums, offset, factor), color c's vertices of the constant at ids[at[c]:at[c + 1]],
    sums[c] their x summed again (:func:`_color_sum`) and sums[-1] the colors' total
    (less the old sum, plus the new: one add a pass, not one a color), the constant
    offset + factor * total; ``constant`` as it is where color c holds none of them,
    ``at`` is empty (one constant an iteration) or c is 0: color 0's pass is every
    sweep's last, the constant after it is never read, and the next iteration's
    :func:`swept_begin` sums every color again (on a power-law graph color 0 holds
    most of the dangling vertices)."""
    ids, at, sums, offset, factor = swept
    if c == 0 or at.shape[0] == 0 or at[c] == at[c + 1]:
        return constant
    new = _color_sum(x, ids, at, c)
    last = sums.shape[0] - 1
    sums[last] = (sums[last] - sums[c]) + new
    sums[c] = new
    return offset + factor * sums[last]


@numba.njit(nogil=True, inline="always")
def swept_begin(x, swept):
    """A colored iteration's first constant (``swept`` as :func:`swept_pass`'s): each
    color's sum of x over its vertices of the constant and their total (added in
    color order), then offset + factor * total."""
    ids, at, sums, offset, factor = swept
    last = sums.shape[0] - 1
    total = 0.0
    for c in range(last):
        sums[c] = _color_sum(x, ids, at, c)
        total += sums[c]
    sums[last] = total
    return offset + factor * total


@numba.njit(nogil=True)
def swept_entry(x, swept, c, constant):
    """The engine's :func:`swept_begin` (``c`` negative) or :func:`swept_pass` (color
    ``c``), from Python."""
    return swept_begin(x, swept) if c < 0 else swept_pass(x, swept, c, constant)


@numba.njit(nogil=True)
def swept_total(swept):
    """The constant of ``swept``'s sums as they are (:func:`swept_pass`), from Python."""
    sums, offset, factor = swept[2], swept[3], swept[4]
    return offset + factor * sums[sums.shape[0] - 1]


@numba.njit(nogil=True)
def lane_change(values, previous, weights):
    """sum |values - previous| * weights over the N = len(``weights``) vertices, by
    :func:`_lane_sums`: a colored PageRank's stopping test on the CPU, whichever path
    runs it."""
    return _lane_sums(values, previous, weights, _NO_IDS, 0, weights.shape[0], CHANGE)[1]


@numba.njit(nogil=True, inline="always")
def _unfed(zeros, cuts, s, x, scale, constant):
    """x of segment ``s``'s vertices without in-edges, zeros[cuts[s]:cuts[s + 1]], as
    their pull would give it (:func:`_apply` of an empty sum)."""
    for i in range(cuts[s], cuts[s + 1]):
        _apply(_index(zeros[i]), 0.0, x, None, x, None, scale, constant)


@numba.njit(nogil=True)
def colored_pagerank(order, starts, sources, factors, groups, zeros, zero_cuts, edges,
                     scale, rank_of, swept, rescale, bound, max_iterations, out, rows):
    """PageRank's colored run (``mode="colored"``, :mod:`hetgraph.engines.colored`) as
    the engine runs it, from uniform ranks, into ``out`` (the ranks): every iteration
    the values rescaled where ``rescale`` (:func:`rescaled_constant`'s; its rank total
    summed with the last iteration's change, its scaling with the copy of x the change
    reads), then a pass per color over the in-edges laid out by
    :func:`segment_lanes`, one segment a color in sweep order (``groups``: each one's
    first group), each color's vertices without in-edges apart (``zeros``, segment s's
    at zero_cuts[s] .. zero_cuts[s + 1] - 1: x'[v] = (constant + 0) * scale[v], after
    the color's pull): the first (the hybrid partition, the last color) reads the
    values before it and writes a second array, copied into x once it is done
    (Jacobi), the others (the colors from the last to the first) write x in place,
    each seeing those before it (Gauss-Seidel by color); x'[v] = (constant +
    sum_{u -> v} x[u] * w_uv) * scale[v], the constant :func:`swept_begin`'s, then
    :func:`swept_pass`'s after each pass (``swept``: the dangling vertices by color,
    as there); until
    :func:`lane_change` of x, weighted by ``rank_of``, is below ``bound`` (N * tol;
    negative: never) or ``max_iterations``; the ranks x / scale. The engine's values,
    bit for bit, wherever each of its passes runs in one range (the arithmetic of a
    vertex is its pull's). ``edges``, ``rows``: as :func:`pagerank`'s. Returns
    (iterations, converged)."""
    n = out.shape[0]
    x, previous, scratch = np.zeros(n + 1), np.empty(n), np.empty(n)  # (x[N] = 0)
    for v in range(n):
        x[v] = (1.0 / n) * scale[v]
    clock = np.zeros(2, np.int64)
    start = nanoseconds(clock)
    count = groups.shape[0] - 1  # (colors: one segment each)
    # the rank total for the next rescale, summed with each iteration's change
    sums = _lane_sums(x, x, rank_of, _NO_IDS, 0, n, DOT)
    done, converged = max_iterations, False
    for it in range(max_iterations):
        inverse = 1.0 / sums[0] if rescale else 1.0  # (rescaled_constant's, and the copy)
        for v in range(n):
            if rescale:
                x[v] *= inverse
            previous[v] = x[v]
        constant = swept_begin(x, swept)
        _pull(order, starts, sources, factors, 0, groups[1], x, None, scratch, None, scale,
              constant)  # (no ranks: the sweep keeps x alone)
        for p in range(groups[1] * LANES):
            v = order[p]
            if v < n:
                x[v] = scratch[v]
        _unfed(zeros, zero_cuts, 0, x, scale, constant)
        constant = swept_pass(x, swept, count - 1, constant)
        for s in range(1, count):  # (segment s: color count - 1 - s)
            _pull(order, starts, sources, factors, groups[s], groups[s + 1], x, None, x,
                  None, scale, constant)
            _unfed(zeros, zero_cuts, s, x, scale, constant)
            constant = swept_pass(x, swept, count - 1 - s, constant)
        sums = _lane_sums(x, previous, rank_of, _NO_IDS, 0, n, BOTH)
        now = nanoseconds(clock)
        rows[it, 0], rows[it, 1], rows[it, 2] = n, edges, n
        rows[it, 3], start = now - start, now
        if sums[1] < bound:
            done, converged = it + 1, True
            break
    for v in range(n):
        out[v] = x[v] / scale[v]
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
                 "segment_lanes": segment_lanes, "pagerank": pagerank,
                 "colored_pagerank": colored_pagerank, "rescaled_constant": rescaled_constant,
                 "lane_change": lane_change, "swept_entry": swept_entry,
                 "swept_total": swept_total, "components": components}, "direct")
