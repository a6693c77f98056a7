"""Program-independent frontier helpers (compiled once, cached on disk): count a
frontier, notify (or mark) the out-neighbours of the active vertices, gather the ids of
marked or active vertices, copy values back, and the edge prefix of a pull's vertices."""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

ALL_SET = np.uint64(0x0101010101010101)  # eight flags of 1, read as one 8-byte word


def frontier_size(flags, out_indptr):
    """(active vertices, sum of their out-degrees) of the nonzero ``flags`` (uint8), in
    this thread, 8 flags at a time: a stretch of words of eight 1 flags adds its
    vertices' degrees as one difference of ``out_indptr``. The dispatcher counts a
    frontier at a run's start (mostly one vertex or all of them) and after an iteration
    of pages spread over devices; one thread, since a parallel region must wake its
    threads first (docs/tuning.md, "CPU kernels")."""
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


def _mark_changed(flags, out_indptr, out_indices, vertices, v0, v1, marks, chunks):
    n = vertices.shape[0] if vertices.shape[0] else v1 - v0
    for c in prange(chunks):
        for i in range(n * c // chunks, n * (c + 1) // chunks):
            u = vertices[i] if vertices.shape[0] else v0 + i
            if flags[u]:
                for e in range(out_indptr[u], out_indptr[u + 1]):
                    if not marks[out_indices[e]]:  # (no write: the line stays shared)
                        marks[out_indices[e]] = 1


# (in this thread for a small wave: a parallel region first wakes its threads)
_MARK = {True: numba.njit(parallel=True, nogil=True, cache=True)(_mark_changed),
         False: numba.njit(nogil=True, cache=True)(_mark_changed)}


def mark_changed(flags, out_indptr, out_indices, vertices, v0, v1, marks, chunks, parallel):
    """Mark in ``marks`` the out-neighbours of the vertices whose ``flags`` are set among
    ``vertices`` (ids), or among v0..v1-1 when ``vertices`` is empty, over ``chunks``
    ranges on Numba's threads when ``parallel``, else in this thread; unlike
    :func:`notify`, the flags stay (they are the iteration's frontier)."""
    _MARK[bool(parallel)](flags, out_indptr, out_indices, vertices, v0, v1, marks,
                          chunks if parallel else 1)


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
    flags at a time: for a small frontier's ids, where :func:`compact`'s parallel region
    would wait for its threads (docs/tuning.md, "CPU kernels")."""
    words = flags[:len(flags) // 8 * 8].view(np.uint64)
    ids = np.empty(_set_flags(flags, words, np.empty(0, np.int64)), np.int64)
    _set_flags(flags, words, ids)
    return ids


@numba.njit(nogil=True, cache=True)
def replace_value(values, old, new):
    """Set the elements of ``values`` equal to ``old`` to ``new``, in place, in this
    thread: a loop the compiler vectorizes, faster than NumPy's masked copies
    (docs/tuning.md, "CPU kernels")."""
    for i in range(values.size):
        if values[i] == old:
            values[i] = new


@numba.njit(nogil=True, cache=True)
def weighted_change(values, previous, weights):
    """sum |values - previous| * weights in float64, in this thread and in one pass
    (NumPy makes two temporary arrays: twice the time, docs/tuning.md "CPU kernels")."""
    total = 0.0
    for i in range(values.shape[0]):
        total += abs(np.float64(values[i]) - np.float64(previous[i])) * weights[i]
    return total


@numba.njit(parallel=True, nogil=True, cache=True)
def commit(values, new_values, vertices):
    """values[v] = new_values[v] for v in vertices (sync notify-pull)."""
    for i in prange(vertices.shape[0]):
        v = vertices[i]
        values[v] = new_values[v]


def edge_prefix(in_indptr, vertices):
    """Running total of the in-degrees of ``vertices`` (length len(vertices) + 1), in
    one compiled loop: NumPy's gathers and sum make four temporary arrays a call, each
    as long as ``vertices``, on a notify-pull's every iteration."""
    prefix = np.empty(len(vertices) + 1, np.int64)
    _edge_prefix(in_indptr, vertices, prefix)
    return prefix


@numba.njit(nogil=True, cache=True)
def _edge_prefix(in_indptr, vertices, prefix):
    total = 0
    prefix[0] = 0
    for i in range(vertices.shape[0]):
        v = vertices[i]
        total += in_indptr[v + 1] - in_indptr[v]
        prefix[i + 1] = total
