"""CPU kernels (Numba): a VertexProgram's gather / apply / activate over the CSC.

Garaph section 4. The in-edges of the vertices to compute are cut into ``parts`` equal
edge ranges, run in parallel on Numba's threads (a prange over the ranges); a vertex
cut by a range boundary gets a partial accumulator (a replica) in each range it
touches, and the replicas are merged after the ranges are done. The vertices to
compute are either a contiguous range (pull mode) or a sorted list (notify-pull mode:
the out-neighbours of the vertices active last iteration, found through the CSR).
Writing to a second array gives sync execution; writing to the values themselves gives
async execution (values visible at once); a push writes in place either way (its gathers
all read before any vertex applies). Small frontiers run whole iterations in one
thread (a push, or a sparse notify-pull from the frontier's ids), and many of those in a
row run as one burst, one compiled call timing each iteration by the C library's clock.

``compile_program`` returns a :class:`CpuKernel`, compiled once per program and kept
in memory for the process (keyed by the program's functions, their closure constants
and its dtype); the program-independent notify / compact helpers are cached on disk.
"""

from __future__ import annotations

import ctypes
import time

import numba
import numpy as np
from numba import prange

from ..program import ProgramError, ProgramSpec


# --- monoids --------------------------------------------------------------------------

@numba.njit(nogil=True)
def _add(a, b):
    return a + b


@numba.njit(nogil=True)
def _min(a, b):
    return b if b < a else a


@numba.njit(nogil=True)
def _max(a, b):
    return b if b > a else a


@numba.njit(nogil=True)
def _or(a, b):
    return a | b


@numba.njit(nogil=True)
def _and(a, b):
    return a & b


COMBINE = {"add": _add, "min": _min, "max": _max, "or": _or, "and": _and}


# --- a clock for compiled code ------------------------------------------------------------

def _monotonic_clock():
    """The C library's clock_gettime, callable from Numba code through ctypes (the clock
    of time.perf_counter on Linux), or None where there is none (Windows): runs there
    go without bursts (see :meth:`CpuKernel.burst`)."""
    if not hasattr(time, "CLOCK_MONOTONIC"):
        return None
    try:
        clock_gettime = ctypes.CDLL(None).clock_gettime
    except (OSError, AttributeError):
        return None
    clock_gettime.argtypes = [ctypes.c_int, ctypes.c_void_p]
    clock_gettime.restype = ctypes.c_int
    return clock_gettime


_CLOCK_GETTIME = _monotonic_clock()
_CLOCK_ID = getattr(time, "CLOCK_MONOTONIC", 0)


if _CLOCK_GETTIME is not None:
    @numba.njit(nogil=True, inline="always")
    def _nanoseconds(timespec):
        """The clock's nanoseconds, read into ``timespec`` (int64[2]: s, ns)."""
        _CLOCK_GETTIME(_CLOCK_ID, timespec.ctypes.data)
        return timespec[0] * 1_000_000_000 + timespec[1]
else:
    @numba.njit(nogil=True, inline="always")
    def _nanoseconds(timespec):
        """No clock: 0 (bursts are off; one iteration is timed by its caller)."""
        return np.int64(0)

NO_LIMIT = np.iinfo(np.int64).max  # a burst's degree limits when there are none
_FOREVER = 1e9  # seconds: a burst's time limit when there is none


# --- program-independent helpers (cached on disk) -----------------------------------------

ALL_SET = np.uint64(0x0101010101010101)  # eight flags of 1, read as one 8-byte word


def frontier_size(flags, out_indptr):
    """(active vertices, sum of their out-degrees) of the nonzero ``flags`` (uint8), in
    this thread, 8 flags at a time: a stretch of words of eight 1 flags adds its
    vertices' degrees as one difference of ``out_indptr``. The dispatcher counts a
    frontier at a run's start (mostly one vertex or all of them) and after an
    iteration of pages spread over devices. On the H100 host, RMAT-22 (4M vertices),
    medians: one, all, every 7th and a random half active 1.0, 0.8, 7.2 and 6.6 ms,
    against 0.4, 4.8, 1.4 and 4.5 ms for the parallel region over 16 cores it replaced,
    whose threads must be woken: over 1M flags that took 0.3 ms in some processes and
    1.5-8 ms, every time, in others."""
    words = flags[:len(flags) // 8 * 8].view(np.uint64)
    return _count_frontier(flags, words, out_indptr)


@numba.njit(nogil=True, cache=True)
def _count_frontier(flags, words, out_indptr):
    active = degree = 0
    stretch = -1  # first vertex of the current stretch of all-1 words (-1: none)
    for w in range(words.shape[0] + 1):  # (one more: a zero word ends the last stretch)
        word = words[w] if w < words.shape[0] else np.uint64(0)
        if word == ALL_SET:
            if stretch < 0:
                stretch = 8 * w
            continue
        if stretch >= 0:
            active += 8 * w - stretch
            degree += out_indptr[8 * w] - out_indptr[stretch]
            stretch = -1
        if word:
            for u in range(8 * w, 8 * w + 8):  # without branches: a random mix of
                # flags would mispredict half of them
                on = flags[u] != 0
                active += on
                degree += on * (out_indptr[u + 1] - out_indptr[u])
    for u in range(8 * words.shape[0], flags.shape[0]):
        on = flags[u] != 0
        active += on
        degree += on * (out_indptr[u + 1] - out_indptr[u])
    return active, degree


@numba.njit(parallel=True, nogil=True, cache=True)
def notify(flags, out_indptr, out_indices, base, v0, v1, marks, notify_self, chunks):
    """Mark the out-neighbours of the active vertices of v0..v1-1 (and the active vertices
    themselves if ``notify_self``) in ``marks``; clear their ``flags``. The out-edges of
    u are out_indices[out_indptr[u] - base ...] (base: the first out-edge held)."""
    n = v1 - v0
    for c in prange(chunks):
        for u in range(v0 + n * c // chunks, v0 + n * (c + 1) // chunks):
            if flags[u]:
                flags[u] = 0
                if notify_self:
                    marks[u] = 1
                for e in range(out_indptr[u] - base, out_indptr[u + 1] - base):
                    marks[out_indices[e]] = 1


@numba.njit(parallel=True, nogil=True, cache=True)
def compact(marks, chunks):
    """Sorted ids of the marked vertices (int64); clears ``marks`` (:func:`active_ids`
    gathers without clearing)."""
    n = marks.shape[0]
    counts = np.zeros(chunks + 1, np.int64)
    for c in prange(chunks):
        for u in range(n * c // chunks, n * (c + 1) // chunks):
            counts[c + 1] += marks[u] != 0
    offsets = np.cumsum(counts)
    vertices = np.empty(offsets[chunks], np.int64)
    for c in prange(chunks):
        k = offsets[c]
        for u in range(n * c // chunks, n * (c + 1) // chunks):
            if marks[u]:
                marks[u] = 0
                vertices[k] = u
                k += 1
    return vertices


@numba.njit(nogil=True, cache=True)
def _set_flags(flags, words, ids):
    """The nonzero bytes of ``flags`` counted, skipping its zero 8-byte ``words`` (its
    view); their ids are written into ``ids`` as far as it has room."""
    k = 0
    for w in range(words.shape[0]):
        if words[w]:
            for u in range(8 * w, 8 * w + 8):
                if flags[u]:
                    if k < ids.shape[0]:
                        ids[k] = u
                    k += 1
    for u in range(8 * words.shape[0], flags.shape[0]):
        if flags[u]:
            if k < ids.shape[0]:
                ids[k] = u
            k += 1
    return k


def active_ids(flags):
    """Sorted ids (int64) of the nonzero ``flags`` (uint8), in this thread, reading 8
    flags at a time: for a small frontier's ids. 1M flags, one set: 0.1 ms on 2 cores,
    where :func:`compact` takes 0.8-1 ms (0.2 ms on 16); in an in-process cluster with
    a GPU, its parallel region waited 4-50 ms for its threads (H100 host: the first CPU
    iteration of grid-1000 BFS auto runs took 24-43 ms in 7 of 8, 0.4-0.6 ms since)."""
    words = flags[:len(flags) // 8 * 8].view(np.uint64)
    ids = np.empty(_set_flags(flags, words, np.empty(0, np.int64)), np.int64)
    _set_flags(flags, words, ids)
    return ids


@numba.njit(nogil=True, cache=True)
def replace_value(values, old, new):
    """Set the elements of ``values`` equal to ``old`` to ``new``, in place, in this
    thread (a loop the compiler vectorizes): 0.4 ms on 4M int32 on the 2-core VM, where
    NumPy's masked copies (copyto with where=, putmask, boolean indexing) took 7-17 ms
    with 40% of them to replace at random (a BFS's unreached vertices on RMAT) and
    1 ms with few."""
    for i in range(values.size):
        if values[i] == old:
            values[i] = new


@numba.njit(parallel=True, nogil=True, cache=True)
def commit(values, new_values, vertices):
    """values[v] = new_values[v] for v in vertices (sync notify-pull)."""
    for i in prange(vertices.shape[0]):
        v = vertices[i]
        values[v] = new_values[v]


@numba.njit(nogil=True, inline="always")
def _take_frontier(frontier, flags, out_indptr):
    """Clear the active flags of the ids ``frontier``; returns their out-degree sum."""
    degree = 0
    for u in frontier:
        flags[u] = 0
        degree += out_indptr[u + 1] - out_indptr[u]
    return degree


def edge_prefix(in_indptr, vertices):
    """Running total of the in-degrees of ``vertices`` (length len(vertices) + 1)."""
    prefix = np.zeros(len(vertices) + 1, np.int64)
    np.cumsum(in_indptr[vertices + 1] - in_indptr[vertices], out=prefix[1:])
    return prefix


# --- priority buckets (delta-stepping; see CpuKernel.burst) -------------------------------

@numba.njit(nogil=True, cache=True)
def _defer(v, later, count, deferred):
    """Put active vertex v in the waiting list ``later`` (its first ``count``
    entries; grown when full) unless it is there: returns (later, count, 1 if it
    was added)."""
    if deferred[v]:
        return later, count, 0
    deferred[v] = 1
    if count == later.shape[0]:
        grown = np.empty(2 * count + 64, np.int64)
        grown[:count] = later[:count]
        later = grown
    later[count] = v
    return later, count + 1, 1


@numba.njit(nogil=True, cache=True)
def _rejoin(now, later, count, deferred, out_indptr):
    """Every active vertex again: ``now`` and those waiting in ``later`` (no longer
    marked waiting); returns (ids, out-degree sum)."""
    ids = np.empty(now.shape[0] + count, np.int64)
    ids[:now.shape[0]] = now
    k = now.shape[0]
    degree = 0
    for v in now:
        degree += out_indptr[v + 1] - out_indptr[v]
    for i in range(count):
        v = later[i]
        if deferred[v]:
            deferred[v] = 0
            ids[k] = v
            k += 1
            degree += out_indptr[v + 1] - out_indptr[v]
    return ids[:k], degree


# --- the program's step kernel ------------------------------------------------------------

@numba.njit(nogil=True, inline="always")
def _never_settled(value):
    return False


@numba.njit(nogil=True, inline="always")
def _no_priority(value):
    return 0.0


def _build_step(gather, combine, apply, activate, settled, priority, cast, identity,
                uses_constant, on_change):
    # The helpers are inlined into the passes (inline="always"): called, each one took
    # and dropped a reference to every array argument per vertex, atomic operations on
    # counters that all threads share (RMAT-20 PageRank pass: 1.5-2x a bare loop, now 1.1x)
    # (a constant: without a priority the buckets' code is not compiled, which would add
    # seconds to every program's first run)
    buckets_compiled = priority is not _no_priority
    if uses_constant:
        @numba.njit(nogil=True, inline="always")
        def apply_with(old, acc, aux, constant):
            return apply(old, acc, aux, constant)
    else:
        @numba.njit(nogil=True, inline="always")
        def apply_with(old, acc, aux, constant):
            return apply(old, acc, aux)

    @numba.njit(nogil=True, inline="always")
    def accumulate(indices, weights, values, first, last, dst_value, acc):
        weighted = weights.shape[0] > 0
        # unsigned positions: no negative-index wrap-around test on every edge
        for e in range(np.uint64(first), np.uint64(last)):
            w = weights[e] if weighted else np.float32(1.0)
            acc = combine(acc, cast(gather(values[indices[e]], w, dst_value)))
        return acc

    @numba.njit(nogil=True, inline="always")
    def aux_of(aux, v):
        """v's aux value (one value for all when aux has one)."""
        return aux[v] if aux.shape[0] > 1 else aux[0]

    @numba.njit(nogil=True, inline="always")
    def store(new_values, flags, v, new, old):
        """Write v's new value and its flag activate(new, old); returns the flag."""
        new_values[v] = new
        on = activate(new, old)
        flags[v] = 1 if on else 0
        return 1 if on else 0

    @numba.njit(nogil=True, inline="always")
    def finish(values, new_values, flags, aux, constant, v, acc):
        old = values[v]
        new = cast(apply_with(old, acc, aux_of(aux, v), constant))
        return store(new_values, flags, v, new, old)

    @numba.njit(nogil=True, inline="always")
    def keep(values, new_values, flags, v):
        """A settled vertex: its value stays, its flag is activate(old, old)."""
        return store(new_values, flags, v, values[v], values[v])

    @numba.njit(nogil=True, inline="always")
    def vertex(vertices, v0, i):
        return vertices[i] if vertices.shape[0] > 0 else v0 + i

    @numba.njit(nogil=True)
    def gather_range(t, in_indptr, in_indices, weights, base, out_indptr, values,
                     new_values, flags, aux, constant, vertices, prefix, v0, bounds, owned,
                     head, tail, has_tail, sync):
        """Edge range t: complete vertices are applied; the partial accumulators of the
        vertex cut at the range start (head) and at its end (tail) are kept. The in-edges
        of v are in_indices[in_indptr[v] - base ...] (base: the first edge held). Returns
        (vertices activated, their out-degree sum). In a sync pass a settled vertex is
        kept as it is by the range that owns it (no tail), and the ranges after skip its
        edges; an async pass computes it (a value reached within an iteration, through
        values of that iteration, need not be final: a BFS level can still drop)."""
        a = bounds[t]
        b = bounds[t + 1]
        lo = owned[t]
        hi = owned[t + 1]
        head[t] = cast(identity)
        has_tail[t] = False
        if lo > 0 and a < b and prefix[lo] > a:
            v = vertex(vertices, v0, lo - 1)
            if not (sync and settled(values[v])):
                shift = in_indptr[v] - prefix[lo - 1] - base
                head[t] = accumulate(in_indices, weights, values, a + shift,
                                     min(prefix[lo], b) + shift, values[v], head[t])
        activated = degree = 0
        for i in range(lo, hi):
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

    @numba.njit(nogil=True, parallel=True)
    def gather_ranges(parts, in_indptr, in_indices, weights, base, out_indptr, values,
                      new_values, flags, aux, constant, vertices, prefix, v0, bounds, owned,
                      head, tail, has_tail, sync):
        """gather_range over the ranges 0..parts-1 on Numba's threads (the calling
        thread's count); returns each one's (vertices activated, out-degree sum), a
        parts x 2 array. Compiled (about 2 s a program) only by engines that split
        their passes (see CpuKernel.warm_up)."""
        counts = np.zeros((parts, 2), np.int64)
        for t in prange(parts):
            activated, degree = gather_range(
                t, in_indptr, in_indices, weights, base, out_indptr, values, new_values,
                flags, aux, constant, vertices, prefix, v0, bounds, owned, head, tail,
                has_tail, sync)
            counts[t, 0] = activated
            counts[t, 1] = degree
        return counts

    @numba.njit(nogil=True)
    def merge_replicas(out_indptr, values, new_values, flags, aux, constant, vertices, v0,
                       owned, head, tail, has_tail):
        """Combine the replicas of every vertex cut at a range boundary, then apply it
        (Garaph 4.1); returns (vertices activated, their out-degree sum)."""
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

    @numba.njit(nogil=True, inline="always")
    def sparse_pass(frontier, out_indptr, out_indices, in_indptr, in_indices, weights,
                    values, new_values, flags, marks, aux, constant, notify_self, sync):
        """One whole notify-pull iteration in this thread for a small frontier (sorted
        active ids): no pass over all N vertices. Returns (vertices computed, edges read,
        the next frontier, the sum of its out-degrees)."""
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
        computed = np.sort(found[:k])
        following = np.empty(k, np.int64)
        count = 0
        edges = 0
        degree = 0
        for v in computed:
            marks[v] = 0
            first = in_indptr[v]
            last = in_indptr[v + 1]
            edges += last - first
            acc = accumulate(in_indices, weights, values, first, last, values[v],
                             cast(identity))
            # a vertex waiting for its bucket stays active (grid-1000 BFS, which has
            # no buckets, lost 3-5 ms to these two lines when they were always compiled)
            waits = flags[v] if buckets_compiled else 0
            if finish(values, new_values, flags, aux, constant, v, acc):
                following[count] = v
                count += 1
                degree += out_indptr[v + 1] - out_indptr[v]
            elif buckets_compiled:
                flags[v] = waits
        if sync:
            for v in computed:
                values[v] = new_values[v]
        return k, edges, following[:count], degree

    @numba.njit(nogil=True, inline="always")
    def push_pass(frontier, out_indptr, out_indices, out_weights, values, flags, seen,
                  found, before, aux, constant, sync):
        """One whole push iteration in this thread (incremental programs): every active
        vertex u sends gather(x[u], w, .) along its out-edges u -> v, and v takes
        apply(x[v], it) at once, in place: one contribution at a time gives what
        their combination applied once gives, since apply combines by an idempotent
        monoid. A sync pass reads every x[u] as it was at the pass's start (their
        copy, taken first), so it computes the iteration a pull would; an async one
        reads x[u] as it is. A value that x[v] absorbs (combine(x[v], g) == x[v]) is
        dropped. ``seen``: one bit a vertex, all clear between passes; the first
        change to v sets it and keeps v's value before the pass, so that activate
        compares against it (against combining into an array of N accumulators and
        applying afterwards, 2-core VM, runs in turn: grid-1000 BFS 44-53 -> 40-41 ms,
        RMAT-20 SSSP 51-69 -> 48-50 ms; a bit a vertex fits the caches, an accumulator
        did not). A program that activates on change (``on_change``, a constant) keeps
        no value before: every vertex changed is active. Without buckets the flags are
        not touched here: a burst clears its frontier's at its start and sets those of
        the one it returns. ``found``, ``before``: scratch of N entries (the changed
        vertices, their values before; none with ``on_change``).
        Returns (vertices changed, edges read, the next frontier, its out-degree
        sum)."""
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
        following = np.empty(k, np.int64)
        count = 0
        next_degree = 0
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

    @numba.njit(nogil=True)
    def lowest_bucket(later, count, deferred, marks, values, out_indptr, delta):
        """Take the waiting vertices of the lowest priority bucket [i * delta, (i + 1) *
        delta) out of ``later``: returns (their ids, their out-degree sum, the bucket's
        end, the entries left in ``later``, the lowest priority among them). Entries
        whose vertex no longer waits, and repeated ones, are dropped. A priority of
        -inf is a bucket of its own (a widest path's source); when none is below inf
        (inf, NaN), all are taken."""
        lowest = np.inf
        for i in range(count):
            v = later[i]
            if deferred[v] and marks[v] == 0:
                marks[v] = 1
                p = np.float64(priority(values[v]))
                if p < lowest:
                    lowest = p
        end = (np.floor(lowest / delta) + 1.0) * delta if np.isfinite(lowest) else lowest
        everything = lowest == np.inf
        taken = np.empty(count, np.int64)
        k = kept = degree = 0
        for i in range(count):
            v = later[i]
            if marks[v]:
                marks[v] = 0
                p = np.float64(priority(values[v]))
                # (p <= lowest: the lowest, should ``end`` round down to it)
                if p < end or p <= lowest or everything:
                    deferred[v] = 0
                    taken[k] = v
                    k += 1
                    degree += out_indptr[v + 1] - out_indptr[v]
                else:
                    later[kept] = v
                    kept += 1
        return taken[:k], degree, end, kept, lowest

    @numba.njit(nogil=True)
    def split_bucket(following, end, later, count, deferred, values, out_indptr):
        """The vertices of ``following`` whose priority is below ``end`` (their ids and
        out-degree sum); the others wait in ``later``. Returns (ids, degree, later,
        count, change in the number waiting, change in their out-degree sum, the lowest
        priority among the ids: inf when there is none)."""
        now = np.empty(following.shape[0], np.int64)
        k = degree = change = change_degree = 0
        lowest = np.inf
        for v in following:
            d = out_indptr[v + 1] - out_indptr[v]
            p = np.float64(priority(values[v]))
            if p < end:
                lowest = min(lowest, p)
                if deferred[v]:  # it waited; it is due now
                    deferred[v] = 0
                    change -= 1
                    change_degree -= d
                now[k] = v
                k += 1
                degree += d
            else:
                later, count, added = _defer(v, later, count, deferred)
                change += added
                change_degree += added * d
        return now[:k], degree, later, count, change, change_degree, lowest

    def make_burst(push):
        @numba.njit(nogil=True)
        def burst(frontier, degree, max_degree, max_sparse, seconds, stats, fronts,
                  out_indptr, out_indices, out_weights, in_indptr, in_indices, in_weights,
                  values, new_values, flags, marks, seen, aux, constant, notify_self, sync,
                  delta, deferred):
            """Push (``push``, a constant: the other pass is not compiled) or sparse
            notify-pull iterations one after the other from the active ids
            ``frontier`` (out-degree sum ``degree``) while it is not empty, its degree
            is at most ``max_degree`` and its degree plus its size at most
            ``max_sparse``, for about ``seconds`` and one row of ``stats`` each at most:
            stats[i] = (active, degree, computed, edges, active after, nanoseconds of
            the pass, nanoseconds since the one before ended, or since the call), and
            fronts[i] its lowest priority run (NaN without buckets).

            ``delta`` > 0 (delta-stepping, Meyer and Sanders 2003): an iteration runs
            only the active vertices of the lowest priority bucket [i * delta, (i + 1)
            * delta); the others wait (``deferred``: 1 for a waiting vertex, zeros on
            entry and on return), counted in the frontier (its size and degree, the
            limits, the rows' active and degree). Returns (iterations run, the next
            frontier, its degree)."""
            timespec = np.zeros(2, np.int64)
            ended = _nanoseconds(timespec)
            limit = ended + np.int64(seconds * 1e9)
            count = 0
            buckets = buckets_compiled and delta > 0.0
            later = np.empty(0, np.int64)
            waiting = waiting_degree = entries = 0  # (waiting: counted, not run)
            end = np.inf
            front = np.nan  # the lowest priority of the vertices run (buckets only)
            scratch = out_indptr.shape[0] - 1 if push else 0  # (see push_pass)
            found = np.empty(scratch, np.int64)
            before = np.empty(0 if on_change else scratch, values.dtype)
            if push and not buckets_compiled:
                for v in frontier:
                    flags[v] = 0
            if buckets:  # everything waits; the first iteration takes the lowest bucket
                for v in frontier:
                    later, entries, added = _defer(v, later, entries, deferred)
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
                began = _nanoseconds(timespec)
                if push:
                    computed, edges, following, next_degree = push_pass(
                        frontier, out_indptr, out_indices, out_weights, values, flags,
                        seen, found, before, aux, constant, sync)
                else:
                    computed, edges, following, next_degree = sparse_pass(
                        frontier, out_indptr, out_indices, in_indptr, in_indices,
                        in_weights, values, new_values, flags, marks, aux, constant,
                        notify_self, sync)
                fronts[count] = front
                if buckets:
                    following, next_degree, later, entries, change, change_degree, front \
                        = split_bucket(following, end, later, entries, deferred, values,
                                       out_indptr)
                    waiting += change
                    waiting_degree += change_degree
                now = _nanoseconds(timespec)
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
                frontier, degree = _rejoin(frontier, later, entries, deferred, out_indptr)
            if push and not buckets_compiled:
                for v in frontier:
                    flags[v] = 1
            return count, frontier, degree
        return burst

    return gather_range, gather_ranges, merge_replicas, (make_burst(False), make_burst(True))


def _jit_user(spec, name, fn, argtypes, returns):
    """Compile one user function alone so that a failure names it."""
    dispatcher = numba.njit(nogil=True)(fn)
    try:
        dispatcher.compile(tuple(argtypes))
    except Exception as exc:  # Numba raises many error classes
        first = str(exc).strip().splitlines()
        detail = next((line for line in first if line.strip()), type(exc).__name__)
        raise ProgramError(f"{spec.name}.{name} cannot be compiled for the CPU "
                           f"({', '.join(str(t) for t in argtypes)}): {detail}") from None
    result = dispatcher.nopython_signatures[-1].return_type
    if not isinstance(result, (numba.types.Number, numba.types.Boolean)):
        raise ProgramError(f"{spec.name}.{name} returns {result}; it must return "
                           f"{returns} for every input (is a return statement missing?)")
    return dispatcher


def _function_key(fn):
    cells = fn.__closure__ or ()
    try:
        contents = tuple(c.cell_contents for c in cells)
        hash(contents)
    except (TypeError, ValueError):
        return id(fn)
    return fn.__code__, contents, fn.__module__


class CpuKernel:
    """A program compiled for the CPU; :meth:`step` runs one pull or notify-pull pass."""

    def __init__(self, spec: ProgramSpec, aux_dtype):
        value = numba.from_dtype(spec.dtype)
        weight = numba.float32
        gather = _jit_user(spec, "gather", spec.gather, (value, weight, value), "a number")
        aux_args = (numba.from_dtype(aux_dtype),) + ((numba.float64,) if spec.uses_constant
                                                     else ())
        apply = _jit_user(spec, "apply", spec.apply, (value, value) + aux_args, "a number")
        activate = _jit_user(spec, "activate", spec.activate, (value, value), "a bool")
        settled = _never_settled if spec.settled is None else \
            _jit_user(spec, "settled", spec.settled, (value,), "a bool")
        priority = _no_priority if spec.priority is None else \
            _jit_user(spec, "priority", spec.priority, (value,), "a number")
        self.spec = spec
        self.identity = spec.identity().item()
        self._warmed = set()  # the kinds of arrays warm_up compiled for
        self._gather_range, self._gather_ranges, self._merge, self._bursts = _build_step(
            gather, COMBINE[spec.reduce], apply, activate, settled, priority, value,
            self.identity, spec.uses_constant, spec.activates_on_change)

    def warm_up(self, edges, values, flags, aux, graph=None, parallel=False):
        """Compile for these array types now (a pass over no vertex), so that the first
        iteration's time is not compile time: :meth:`step` reading ``edges`` (with
        ``parallel``, its parallel ranges too), and with ``graph`` (in memory)
        :meth:`sparse_step` and :meth:`push_step` too. Done once per kind of arrays (45
        us of every small run otherwise)."""
        arrays = (*edges[:3], values, flags, aux) + (() if graph is None else (
            graph.out_indptr, graph.out_indices, graph.in_indptr, graph.in_indices))
        kinds = tuple((a.dtype, a.ndim, a.flags.c_contiguous, a.flags.writeable)
                      for a in arrays) + (parallel,)
        if kinds in self._warmed:
            return
        self.step(edges, np.zeros(1, np.int64), values, values, flags, aux, 0.0,
                  ALL_VERTICES, np.zeros(1, np.int64), 0, 2, True, parallel)  # (a merge)
        if graph is not None:
            self.sparse_step(graph, ALL_VERTICES, values, values, flags, flags, aux, 0.0,
                             True)
        if graph is not None and self.spec.incremental:
            self.push_step(graph, ALL_VERTICES, values, flags, flags, flags, aux, 0.0, True)
        self._warmed.add(kinds)

    @property
    def bursts(self) -> bool:
        """Whether :meth:`burst` can run: a program without an iteration constant or a
        converged test (both are Python), where Numba can read a clock."""
        return _CLOCK_GETTIME is not None and not (self.spec.uses_constant or
                                                   self.spec.has_converged)

    def burst(self, graph, frontier, degree, push, max_degree, max_sparse, rows, seconds,
              values, new_values, flags, marks, seen, aux, sync, constant=0.0,
              delta=0.0, deferred=None):
        """Push (``push``) or sparse notify-pull iterations (see :meth:`push_step`,
        :meth:`sparse_step`) one after the other in one compiled call, with no Python
        between them, from the active ids ``frontier`` whose out-degree sum is
        ``degree``, while the frontier is not empty, its degree at most ``max_degree``
        and its degree plus its size at most ``max_sparse``: ``rows`` iterations and
        about ``seconds`` at most; ``constant``: the program's iteration constant (a
        burst of one iteration only); ``seen``: a push's (see :meth:`push_step`).
        ``delta`` > 0: each iteration runs the active vertices of the lowest bucket of
        the program's priority only, the limits applying to them (delta-stepping;
        ``deferred``: uint8 zeros of length N, scratch). Returns (stats, fronts, the
        next frontier, its degree); stats (int64), a row an iteration: active vertices,
        the out-degree sum of those run, vertices computed, edges read, vertices active
        after it, nanoseconds of the pass, nanoseconds since the pass before ended (the
        first: since the call began); fronts (float64), an iteration's lowest priority
        among the vertices it ran (NaN without buckets: ``delta`` = 0)."""
        stats = np.empty((rows, 7), np.int64)
        fronts = np.empty(rows, np.float64)
        delta = float(delta)
        if delta > 0.0 and (deferred is None or deferred.shape != values.shape):
            raise ValueError("a burst with delta > 0 needs deferred: uint8 zeros, one a "
                             "vertex")
        out_indices, out_weights = self._out_edges(graph) if push else \
            (graph.out_indices, _NO_WEIGHTS)
        count, following, degree = self._bursts[push](
            frontier, degree, max_degree, max_sparse, min(float(seconds), _FOREVER), stats,
            fronts, graph.out_indptr, out_indices, out_weights, graph.in_indptr,
            *self.edges(graph)[1:3], values, new_values, flags, marks, seen, aux,
            float(constant), self.spec.notify_self, sync, delta,
            _NOT_DEFERRED if deferred is None else deferred)
        return stats[:count], fronts[:count], following, int(degree)

    def sparse_step(self, graph, frontier, values, new_values, flags, marks, aux, constant,
                    sync, delta=0.0, deferred=None):
        """Notify-pull from the active ids ``frontier`` in this thread, touching only
        the frontier's neighbourhood (``delta``, ``deferred``: see :meth:`burst`);
        returns (vertices computed, edges read, next frontier, its out-degree sum)."""
        return self._one(graph, frontier, False, values, new_values, flags, marks, marks,
                         aux, constant, sync, delta, deferred)

    def push_step(self, graph, frontier, values, flags, marks, seen, aux, constant, sync,
                  delta=0.0, deferred=None):
        """Push from the active ids ``frontier`` in this thread, writing in place (see
        push_pass); ``seen``: from :meth:`push_scratch`, which every push leaves as it
        found it (``delta``, ``deferred``: see :meth:`burst`). Returns (vertices
        changed, edges read, next frontier, its out-degree sum)."""
        return self._one(graph, frontier, True, values, values, flags, marks, seen, aux,
                         constant, sync, delta, deferred)

    @staticmethod
    def push_scratch(num_vertices):
        """A push's scratch for ``num_vertices`` vertices: one clear bit each."""
        return np.zeros((num_vertices + 7) // 8, np.uint8)

    def _one(self, graph, frontier, push, values, new_values, flags, marks, seen, aux,
             constant, sync, delta, deferred):
        """One push or sparse notify-pull: a burst of one, without limits."""
        stats, _, following, degree = self.burst(
            graph, frontier, 0, push, NO_LIMIT, NO_LIMIT, 1, _FOREVER, values, new_values,
            flags, marks, seen, aux, sync, constant, delta, deferred)
        if not len(stats):  # an empty frontier
            return 0, 0, following, 0
        return int(stats[0, 2]), int(stats[0, 3]), following, degree

    def _out_edges(self, graph):
        """(out_indices, weights) as a push reads them: unsigned ids, and no weights
        unless the program needs them."""
        weights = graph.out_weights() if self.spec.needs_weights and graph.weighted \
            else _NO_WEIGHTS
        return self._unsigned(graph.out_indices), weights

    def edges(self, graph):
        """(in_indptr, in_indices, weights, 0): the in-edges of a graph in memory, as
        :meth:`step` reads them."""
        return graph.in_indptr, *self.page_edges(graph.in_indices, graph.in_weights), 0

    def page_edges(self, indices, weights):
        """(indices, weights) as the kernels read them: unsigned ids (they spare Numba's
        negative-index check on every gathered value), and no weights unless the program
        needs them."""
        weights = weights if (self.spec.needs_weights and weights is not None) \
            else _NO_WEIGHTS
        return self._unsigned(indices), weights

    @staticmethod
    def _unsigned(indices):
        return indices.view(_UNSIGNED[indices.dtype.itemsize])

    def step(self, edges, out_indptr, values, new_values, flags, aux, constant, vertices,
             prefix, v0, parts, sync, parallel=False):
        """Compute the vertices ``vertices`` (ids; empty = the range v0..v0+len(prefix)-2)
        whose in-edges are counted by ``prefix``, reading ``edges`` = (in_indptr, indices,
        weights, base): v's in-edges are indices[in_indptr[v] - base ...] (see
        :meth:`edges`; a page read from disk holds its own edges only). The in-edges are
        cut into ``parts`` equal ranges, run on Numba's threads when ``parallel``, else
        one after the other in this thread. ``sync``: new_values is not values (a sync
        run), where the program's settled vertices are skipped. Writes new_values and
        flags; returns (vertices activated, the sum of their out-degrees by
        ``out_indptr``)."""
        n = len(prefix) - 1
        if parts == 1:  # (the arithmetic below gives these; 5 us of a small graph's pass)
            bounds, owned = np.array([prefix[0], prefix[-1]]), np.array([0, n])
        else:
            bounds = prefix[0] + ((prefix[-1] - prefix[0]) * np.arange(parts + 1)) // parts
            owned = np.searchsorted(prefix[:-1], bounds)
            owned[0], owned[-1] = 0, n
        head = np.empty(parts, values.dtype)
        tail = np.empty(parts, values.dtype)
        has_tail = np.zeros(parts, np.bool_)
        in_indptr, indices, weights, base = edges
        args = (in_indptr, indices, weights, int(base), out_indptr, values, new_values, flags,
                aux, float(constant), vertices, prefix, v0, bounds, owned, head, tail,
                has_tail, bool(sync))
        if parts == 1:  # one range cuts no vertex: nothing to merge
            activated, degree = self._gather_range(0, *args)
            return int(activated), int(degree)
        if parallel:  # Numba's threads wait for work spinning: a pass hands over in
            # microseconds (2-core VM, two ranges of a PageRank pull against one range:
            # 100k edges 69 against 106 us, 950k 740 against 1,430 us; a thread pool's
            # hand-over took 30-100 us, slower than one range up to 250k edges)
            counts = [tuple(c) for c in self._gather_ranges(parts, *args)]
        else:
            counts = [self._gather_range(t, *args) for t in range(parts)]
        counts.append(self._merge(out_indptr, values, new_values, flags, aux, float(constant),
                                  vertices, v0, owned, head, tail, has_tail))
        return int(sum(c[0] for c in counts)), int(sum(c[1] for c in counts))


_NO_WEIGHTS = np.empty(0, np.float32)
_NOT_DEFERRED = np.empty(0, np.uint8)  # a burst's deferred flags when delta is 0
_UNSIGNED = {4: np.uint32, 8: np.uint64}
ALL_VERTICES = np.empty(0, np.int64)  # an empty id list: every vertex of the range
_CACHE: dict = {}


def compile_program(spec: ProgramSpec, aux_dtype=np.float32) -> CpuKernel:
    """The CpuKernel of a checked program, compiled on first use and kept for the process."""
    key = (tuple(_function_key(f) for f in (spec.gather, spec.apply, spec.activate)),
           spec.settled and _function_key(spec.settled),
           spec.priority and _function_key(spec.priority),
           spec.dtype, spec.reduce, spec.uses_constant, spec.activates_on_change,
           np.dtype(aux_dtype))
    kernel = _CACHE.get(key)
    if kernel is None:
        kernel = _CACHE[key] = CpuKernel(spec, np.dtype(aux_dtype))
    return kernel


__all__ = ["ALL_VERTICES", "NO_LIMIT", "CpuKernel", "compile_program", "frontier_size", "notify",
           "compact", "commit", "edge_prefix", "ProgramError"]
