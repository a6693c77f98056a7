"""Priority buckets (delta-stepping, Meyer and Sanders 2003) for a burst: the active
vertices wait in a list, and each iteration runs those of the lowest bucket
[i * delta, (i + 1) * delta) of the program's priority."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def defer(v, later, count, deferred):
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
def rejoin(now, later, count, deferred, out_indptr):
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


class Buckets(NamedTuple):
    """A program's compiled bucket steps: ``lowest(later, count, deferred, marks,
    values, out_indptr, delta)`` takes the lowest bucket out of the waiting list,
    ``split(following, end, later, count, deferred, values, out_indptr)`` keeps the
    vertices below a bucket's end and defers the others."""
    lowest: Callable
    split: Callable


def build_buckets(priority) -> Buckets:
    """The Buckets of a program's compiled ``priority``."""
    return Buckets(_build_lowest(priority), _build_split(priority))


def _build_lowest(priority):
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

    return lowest_bucket


def _build_split(priority):
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
                later, count, added = defer(v, later, count, deferred)
                change += added
                change_degree += added * d
        return now[:k], degree, later, count, change, change_degree, lowest

    return split_bucket
