"""Shards and pages (Garaph section 2.1 and eq. 2).

A shard is a contiguous range of destination vertices with all their in-edges (sorted by
destination); its destinations are 16-bit offsets from its first vertex, so it holds at
most 65,536 vertices. Its size is what fits one GPU block's shared memory:
``shared_bytes / (vertex_bytes * R_i)`` vertices. A page is a run of consecutive shards
whose edge data fits a byte budget: the unit of transfer, I/O and scheduling.

This module takes the graph it is given (its in-edge pointers, index type and
weights) and imports nothing of :mod:`hetgraph.graph`, whose ``partition`` calls it.
The default sizes are in :mod:`hetgraph.tuning`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np

from . import tuning
from .errors import GraphError

MAX_SHARD_VERTICES = 1 << 16  # destinations are uint16 offsets from the shard's first
MAX_REPLICATION = 32  # Garaph eq. 2: R = 2^min(..., 5)


def shard_edge_bound(num_edges):
    """The default in-edge bound of a shard for a graph of ``num_edges`` in-edges:
    |E| / ``tuning.TARGET_SHARDS`` within ``tuning.MIN_SHARD_EDGES`` ..
    ``tuning.MAX_SHARD_EDGES``, so that a small graph still has about as many shards
    as a GPU runs blocks at once."""
    return int(min(tuning.MAX_SHARD_EDGES,
                   max(tuning.MIN_SHARD_EDGES, num_edges // tuning.TARGET_SHARDS)))


def _replication(num_vertices, num_edges):
    """R of one shard: the exponent ceil(log2(E/V) - 0.5) is the least k with E^2 <= 2^(2k+1)
    V^2, in integers (never at equality: 2^(2k+1) is no square)."""
    v, e = max(int(num_vertices), 1), int(num_edges)
    r = 1
    while r < MAX_REPLICATION and e * e > 2 * r * r * v * v:
        r *= 2
    return r


def replication_factor(num_vertices, num_edges):
    """Garaph eq. 2: R = 2^min(ceil(log2(|E|/|V|) - 0.5), 5), never below 1 (vectorized)."""
    return np.vectorize(_replication, otypes=[np.int64])(num_vertices, num_edges)


def edge_bytes(index_dtype, weighted):
    """Bytes one in-edge occupies in a page: source index, 16-bit offset, weight."""
    return np.dtype(index_dtype).itemsize + 2 + (4 if weighted else 0)


def shard_starts(in_indptr, *, vertex_bytes=4, shared_bytes=None, replication=None,
                 shard_vertices=None, max_shard_edges="auto"):
    """First vertex of every shard (plus N at the end) and each shard's R_i.

    Default: the largest shard from each start whose V * R(V, E) slots of
    ``vertex_bytes`` fit ``shared_bytes`` (default ``tuning.SHARED_BYTES``) and whose
    in-edges number at most
    ``max_shard_edges`` (a single vertex with more is a shard of its own; None: no
    bound; "auto": :func:`shard_edge_bound` of these in-edges, ``in_indptr`` being
    a run of a graph's). ``replication``: a fixed R for every
    shard instead of eq. 2.
    ``shard_vertices``: a fixed shard size (R_i still from eq. 2).
    """
    n = len(in_indptr) - 1
    shared_bytes = tuning.SHARED_BYTES if shared_bytes is None else shared_bytes
    slots = shared_bytes // vertex_bytes
    if shard_vertices is not None:
        if not 1 <= shard_vertices <= MAX_SHARD_VERTICES:
            raise GraphError(f"shard_vertices={shard_vertices} must be in 1..{MAX_SHARD_VERTICES}")
        starts = np.append(np.arange(0, n, shard_vertices, dtype=np.int64), n)
        r = _replication_of(in_indptr, starts, replication)
        return starts, r
    if replication is not None and replication not in (1, 2, 4, 8, 16, 32):
        raise GraphError(f"replication={replication} must be one of 1, 2, 4, 8, 16, 32")
    if slots < MAX_REPLICATION:
        raise GraphError(f"shared_bytes={shared_bytes} holds fewer than {MAX_REPLICATION} "
                         f"vertices of {vertex_bytes} bytes; give at least "
                         f"{MAX_REPLICATION * vertex_bytes}")
    cap = min(slots, MAX_SHARD_VERTICES)
    if max_shard_edges == "auto":
        max_shard_edges = shard_edge_bound(int(in_indptr[-1] - in_indptr[0]))
    bound = -1 if max_shard_edges is None else int(max_shard_edges)
    starts, reps = _greedy_shards(np.asarray(in_indptr, dtype=np.int64), cap, slots, bound,
                                  replication or 0)
    return starts, reps


@numba.njit(cache=True, nogil=True)
def _replication_of_shard(num_vertices, num_edges):
    """:func:`_replication` in compiled code: E^2 > 2 R^2 V^2 is E > floor(R V sqrt 2)
    (never equal: sqrt 2 is irrational), which stays within int64 for any E."""
    v = max(num_vertices, 1)
    r = 1
    while r < MAX_REPLICATION:
        m2 = 2 * (r * v) * (r * v)
        t = int(np.sqrt(np.float64(m2)))
        while t * t > m2:
            t -= 1
        while (t + 1) * (t + 1) <= m2:
            t += 1
        if num_edges <= t:
            break
        r *= 2
    return r


@numba.njit(cache=True, nogil=True)
def _greedy_shards(in_indptr, cap, slots, max_shard_edges, replication):
    """The greedy cut of :func:`shard_starts`: from each start the largest shard of at
    most ``cap`` vertices and ``max_shard_edges`` in-edges (-1: no bound; a vertex with
    more is a shard alone) whose vertices times R fit ``slots``; ``replication`` 0:
    R from eq. 2, else fixed. Returns (starts plus N, R per shard)."""
    n = len(in_indptr) - 1
    starts = np.empty(n + 1, np.int64)
    reps = np.empty(max(n, 1), np.int64)
    starts[0] = 0
    s = 0
    k = 0
    while s < n:
        size = min(cap, n - s)
        if max_shard_edges >= 0:  # a GPU block's work: hub vertices get few per shard
            last = np.searchsorted(in_indptr, in_indptr[s] + max_shard_edges, side="right")
            size = max(1, min(size, last - 1 - s))
        while True:  # shrink until V * R(V) fits; terminates because size decreases
            r = replication if replication else \
                _replication_of_shard(size, in_indptr[s + size] - in_indptr[s])
            fit = min(slots // r, size)
            if fit == size:
                break
            size = fit
        s += size
        k += 1
        starts[k] = s
        reps[k - 1] = r
    return starts[:k + 1].copy(), reps[:k].copy()


def _replication_of(in_indptr, starts, replication):
    if replication is not None:
        return np.full(len(starts) - 1, replication, dtype=np.int64)
    return replication_factor(np.diff(starts), np.diff(in_indptr[starts]))


def page_starts(in_indptr, shard_start, *, page_bytes=None, bytes_per_edge=4):
    """First shard of every page (plus the shard count): greedy runs of consecutive
    shards whose edges fit ``page_bytes`` (default ``tuning.PAGE_BYTES``; a page always
    holds at least one shard)."""
    page_bytes = tuning.PAGE_BYTES if page_bytes is None else page_bytes
    if page_bytes <= 0:
        raise GraphError(f"page_bytes={page_bytes} must be positive")
    shard_edge_end = in_indptr[shard_start[1:]]
    pages = [0]
    k = 0
    n_shards = len(shard_start) - 1
    while k < n_shards:
        first_edge = in_indptr[shard_start[k]]
        limit = first_edge + page_bytes // bytes_per_edge
        nxt = int(np.searchsorted(shard_edge_end, limit, side="right"))
        k = max(nxt, k + 1)
        pages.append(k)
    return np.asarray(pages, dtype=np.int64)


@dataclass
class Page:
    """One page: vertex range [vertex_start, vertex_stop), its shards and in-edges.

    ``src``: source id of every in-edge; ``dst_offset``: uint16 destination offset from
    its shard's first vertex; ``weight``: float32 or None. ``shard_start``: first vertex
    of each shard of the page (absolute ids, plus the page's end); ``shard_edge``: first
    edge of each shard relative to the page (plus the page's edge count);
    ``replication``: R_i per shard.
    """

    index: int
    vertex_start: int
    vertex_stop: int
    edge_start: int
    edge_stop: int
    shard_start: np.ndarray
    shard_edge: np.ndarray
    replication: np.ndarray
    src: np.ndarray
    dst_offset: np.ndarray
    weight: np.ndarray | None

    @property
    def num_edges(self) -> int:
        return self.edge_stop - self.edge_start

    @property
    def num_vertices(self) -> int:
        return self.vertex_stop - self.vertex_start

    @property
    def nbytes(self) -> int:
        arrays = (self.src, self.dst_offset, self.weight)
        return sum(a.nbytes for a in arrays if a is not None)

    def destinations(self) -> np.ndarray:
        """Absolute destination id of every edge (int64)."""
        shard_of_edge = np.repeat(np.arange(len(self.replication)), np.diff(self.shard_edge))
        return self.shard_start[shard_of_edge] + self.dst_offset


def destination_offsets(in_indptr, shard_start, v0, v1):
    """uint16 offset of each in-edge of vertices [v0, v1) from its shard's first vertex;
    ``shard_start``: the first vertex of each shard of [v0, v1), then v1."""
    out = np.empty(int(in_indptr[v1] - in_indptr[v0]), np.uint16)
    _fill_offsets(in_indptr, np.asarray(shard_start, np.int64), out)
    return out


def offsets_mismatch(in_indptr, shard_start, offsets):
    """The first index of ``offsets`` (a page's stored destination offsets) that is not
    :func:`destination_offsets` of its vertices, -1 if none: the check without the
    expected array (one pass, no allocation)."""
    starts = np.asarray(shard_start, np.int64)
    edges = int(in_indptr[starts[-1]] - in_indptr[starts[0]])
    if len(offsets) != edges:  # (the pass reads exactly ``edges`` of them)
        return min(len(offsets), edges)
    return _first_wrong_offset(in_indptr, starts, offsets)


@numba.njit(cache=True, nogil=True)
def _fill_offsets(in_indptr, starts, out):
    """Each in-edge's vertex less its shard's first one into ``out`` (shards from
    ``starts``; ``out`` begins at the first shard's first edge)."""
    base = in_indptr[starts[0]]
    for s in range(len(starts) - 1):
        for v in range(starts[s], starts[s + 1]):
            out[in_indptr[v] - base:in_indptr[v + 1] - base] = v - starts[s]


@numba.njit(cache=True, nogil=True)
def _first_wrong_offset(in_indptr, starts, offsets):
    """The first index where ``offsets`` is not what :func:`_fill_offsets` writes, -1."""
    base = in_indptr[starts[0]]
    for s in range(len(starts) - 1):
        for v in range(starts[s], starts[s + 1]):
            offset = np.uint16(v - starts[s])
            for e in range(in_indptr[v] - base, in_indptr[v + 1] - base):
                if offsets[e] != offset:
                    return e
    return -1


class Partition:
    """Shard and page tables of a graph (see the module docstring).

    ``shard_start``: first vertex of each shard plus N; ``replication``: R_i per shard;
    ``page_shard``: first shard of each page plus the shard count.
    """

    def __init__(self, in_indptr, shard_start, replication, page_shard, *, weighted,
                 index_dtype, options=None):
        self.in_indptr = in_indptr
        self.shard_start = shard_start
        self.replication = replication
        self.page_shard = page_shard
        self.weighted = weighted
        self.index_dtype = np.dtype(index_dtype)
        self.options = dict(options or {})

    @property
    def num_shards(self) -> int:
        return len(self.shard_start) - 1

    @property
    def num_pages(self) -> int:
        return len(self.page_shard) - 1

    @functools.cached_property
    def page_ranges(self):
        """(first vertex, end vertex) of every page, an int64 array of shape (pages, 2),
        made once (read-only: every run of a kept partition reads it)."""
        bounds = self.shard_start[self.page_shard].astype(np.int64)
        ranges = np.stack((bounds[:-1], bounds[1:]), axis=1)
        ranges.flags.writeable = False
        return ranges

    @functools.cached_property
    def page_arcs(self):
        """The in-edges of every page, an int64 array, made once (read-only)."""
        arcs = np.diff(self.in_indptr[self.page_ranges], axis=1)[:, 0].astype(np.int64)
        arcs.flags.writeable = False
        return arcs

    def page_vertices(self, p):
        """(first vertex, end vertex) of page ``p``."""
        return (int(self.shard_start[self.page_shard[p]]),
                int(self.shard_start[self.page_shard[p + 1]]))

    def page_edges(self, p):
        """(first edge, end edge) of page ``p`` in the CSC order."""
        v0, v1 = self.page_vertices(p)
        return int(self.in_indptr[v0]), int(self.in_indptr[v1])

    def page_table(self):
        """One row per page: vertex and edge ranges, shards, bytes (a pandas DataFrame)."""
        import pandas as pd

        rows = []
        per_edge = edge_bytes(self.index_dtype, self.weighted)
        for p in range(self.num_pages):
            v0, v1 = self.page_vertices(p)
            e0, e1 = self.page_edges(p)
            s0, s1 = int(self.page_shard[p]), int(self.page_shard[p + 1])
            rows.append({"page": p, "vertex_start": v0, "vertex_stop": v1, "edge_start": e0,
                         "edge_stop": e1, "shards": s1 - s0,
                         "mean_R": float(self.replication[s0:s1].mean()),
                         "bytes": (e1 - e0) * per_edge})
        return pd.DataFrame(rows)

    def page_from_arrays(self, p, src, dst_offset, weight):
        """Page ``p`` around its own edge arrays (as stored: ``src``, ``dst_offset``,
        ``weight`` or None, each holding only this page's edges)."""
        if not 0 <= p < self.num_pages:
            raise GraphError(f"page {p} does not exist (the graph has {self.num_pages} pages)")
        s0, s1 = int(self.page_shard[p]), int(self.page_shard[p + 1])
        v0, v1 = self.page_vertices(p)
        e0, e1 = self.page_edges(p)
        starts = self.shard_start[s0:s1 + 1]
        return Page(p, v0, v1, e0, e1, starts, self.in_indptr[starts] - e0,
                    self.replication[s0:s1], src, dst_offset, weight)

    def page(self, p, src, weight):
        """Build Page ``p`` from the whole CSC arrays ``src`` (in_indices) and ``weight``."""
        if not 0 <= p < self.num_pages:
            raise GraphError(f"page {p} does not exist (the graph has {self.num_pages} pages)")
        v0, v1 = self.page_vertices(p)
        e0, e1 = self.page_edges(p)
        starts = self.shard_start[self.page_shard[p]:self.page_shard[p + 1] + 1]
        return self.page_from_arrays(p, src[e0:e1],
                                     destination_offsets(self.in_indptr, starts, v0, v1),
                                     None if weight is None else weight[e0:e1])

    def pages(self, src, weight):
        """Iterate over every Page."""
        for p in range(self.num_pages):
            yield self.page(p, src, weight)


def _runs(cuts, n):
    """The nonempty vertex ranges [(v0, v1), ...] between ``cuts`` (None: [(0, n)])."""
    bounds = [0, n] if cuts is None else sorted({0, n, *(int(c) for c in cuts)})
    if bounds[0] < 0 or bounds[-1] > n:
        raise GraphError(f"cuts={cuts!r} must be vertex ids in 0..{n}")
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def partition(graph, *, page_bytes=None, vertex_bytes=4, shared_bytes=None,
              replication=None, shard_vertices=None, max_shard_edges="auto", cuts=None):
    """Shards and pages of ``graph`` (what :meth:`hetgraph.Graph.partition` returns).

    Parameters
    ----------
    graph : Graph
    page_bytes : int, optional
        Bytes of edge data per page; default ``tuning.PAGE_BYTES`` (32 MiB).
    vertex_bytes : int
        Bytes of one vertex value in a GPU block's shared memory. Default 4.
    shared_bytes : int, optional
        Shared memory one GPU block may use, in bytes; default ``tuning.SHARED_BYTES``
        (48 KiB).
    replication : {1, 2, 4, 8, 16, 32}, optional
        One R for every shard; default: Garaph's eq. 2 per shard.
    shard_vertices : int, optional
        A fixed shard size (1 .. 65,536) instead of the shared-memory rule.
    max_shard_edges : int, "auto" or None
        In-edges per shard (a vertex with more is a shard of its own); "auto"
        (default): :func:`shard_edge_bound` of the in-edges of each run between
        ``cuts`` (of the graph's without); None: no bound.
    cuts : tuple of int, optional
        Vertex ids where a shard and a page must begin (a color-major order's colors,
        :mod:`hetgraph.coloring`); each run between them is cut as a graph alone (a
        GPU runs a color's shards in one launch: a small color's get fewer edges).

    Returns
    -------
    Partition

    Raises
    ------
    GraphError
        When a size is out of range.

    Examples
    --------
    >>> import hetgraph as hg
    >>> from hetgraph.partition import partition
    >>> part = partition(hg.datasets.load("wiki-vote"), page_bytes=128 << 10)
    >>> part.num_pages > 1, int(part.shard_start[-1])
    (True, 7115)
    """
    page_bytes = tuning.PAGE_BYTES if page_bytes is None else page_bytes
    shared_bytes = tuning.SHARED_BYTES if shared_bytes is None else shared_bytes
    per_edge = edge_bytes(graph.index_dtype, graph.weighted)
    starts, reps, pages = [np.zeros(1, np.int64)], [], [np.zeros(1, np.int64)]
    for v0, v1 in _runs(cuts, graph.num_vertices):  # the shards and pages of each run
        ptr = graph.in_indptr[v0:v1 + 1]
        # ("auto": the run's own bound, so that a small color's launch still fills a GPU)
        first, rep = shard_starts(ptr, vertex_bytes=vertex_bytes, shared_bytes=shared_bytes,
                                  replication=replication, shard_vertices=shard_vertices,
                                  max_shard_edges=max_shard_edges)
        pages.append(page_starts(ptr, first, page_bytes=page_bytes,
                                 bytes_per_edge=per_edge)[1:] + sum(map(len, reps)))
        starts.append(first[1:] + v0)
        reps.append(rep)
    starts, pages = np.concatenate(starts), np.concatenate(pages)
    reps = np.concatenate(reps) if reps else np.zeros(0, np.int64)
    options = dict(page_bytes=page_bytes, vertex_bytes=vertex_bytes, shared_bytes=shared_bytes,
                   replication=replication, shard_vertices=shard_vertices,
                   max_shard_edges=max_shard_edges)
    if cuts is not None:
        options["cuts"] = cuts
    return Partition(graph.in_indptr, starts, reps, pages, weighted=graph.weighted,
                     index_dtype=graph.index_dtype, options=options)
