"""The active subgraph of a streamed GPU iteration (Subway, EuroSys'20, section 3.1):
which out-edges of the active vertices cross PCIe, cut into chunks that fit the staging
buffers, gathered on the host, and the bytes that move.

The out-edges a streamed iteration needs are those whose target lies in the streamed
pages' vertices [``first``, N): the resident pages pull every vertex of theirs on the
device. The CSR keeps each source's targets sorted, so these form a suffix of every
source's out-edges (:func:`tail_starts`). Per iteration:

1. on the GPU, the active vertices with such edges (:func:`active_vertices`, an exclusive
   scan of their flags; the list is copied to the host: the d2h bytes);
2. on the host, the offsets of their edges in the compact edge array (an exclusive scan
   of their degrees, :func:`subgraph_offsets`), and the chunks that fit the device's
   staging buffers (:func:`chunk_bounds`; a hub's edges may span several);
3. on the host, in parallel, each chunk's edges and offsets gathered into pinned memory
   (:func:`gather_chunk`), then copied in (the h2d bytes, :func:`chunk_bytes`).

In async-subgraph mode the list also takes the vertices the listed ones push to
(:func:`with_targets`): they are the likeliest to change, and their edges loaded with
the others let a chunk's inner passes carry a change further than one hop.

:func:`active_vertices` and :func:`subgraph_offsets` take the array module ``xp``: NumPy
here and in the tests, CuPy on the device. Nothing here imports CuPy.
"""

from __future__ import annotations

import numba
import numpy as np

OFFSET_DTYPE = np.dtype(np.uint32)  # a chunk's offsets, from its own first edge


def active_vertices(xp, flags, tail_degree):
    """The ids (int64, increasing) of the vertices whose flag is set and that have out-edges
    into the streamed vertices (``tail_degree`` > 0), with the array module ``xp``: the
    positions an exclusive scan of those flags gives them (``flatnonzero``)."""
    return xp.flatnonzero((flags != 0) & (tail_degree != 0))


def subgraph_offsets(xp, degrees):
    """The exclusive scan of ``degrees`` (the active vertices' edges, in order) with
    their total at the end: int64, one more entry than ``degrees``; vertex i's edges
    are [offsets[i], offsets[i + 1]) of the compact edge array."""
    offsets = xp.zeros(len(degrees) + 1, np.int64)
    xp.cumsum(degrees, out=offsets[1:])
    return offsets


def chunk_bounds(offsets, max_edges, max_vertices):
    """The chunks [(a0, a1, e0, e1), ...] of the compact edge array [0, offsets[-1]) of
    at most ``max_edges`` edges each, in order: the chunk holds edges [e0, e1), which
    belong to the active vertices [a0, a1) (the first and last may have edges in the
    chunks beside: a hub's edges span several), at most ``max_vertices`` of them.
    ``offsets``: from :func:`subgraph_offsets`, of vertices with at least one edge
    (strictly increasing)."""
    if max_edges < 1 or max_vertices < 1:
        raise ValueError(f"chunks of {max_edges} edges and {max_vertices} vertices")
    total = int(offsets[-1])
    chunks = []
    e0 = a0 = 0
    while e0 < total:
        e1 = min(e0 + max_edges, total)
        a1 = int(np.searchsorted(offsets, e1, side="left"))  # vertices starting before e1
        if a1 - a0 > max_vertices:
            a1 = a0 + max_vertices
            e1 = int(offsets[a1])
        chunks.append((a0, a1, e0, e1))
        e0 = e1
        a0 = int(np.searchsorted(offsets, e0, side="right")) - 1  # the vertex holding e0
    return chunks


def chunk_bytes(chunks, edge_bytes):
    """Bytes the chunks copy to the device: their edges at ``edge_bytes`` each (target
    index and weight) and their offsets (one more than their vertices, uint32)."""
    return sum((e1 - e0) * edge_bytes + (a1 - a0 + 1) * OFFSET_DTYPE.itemsize
               for a0, a1, e0, e1 in chunks)


@numba.njit(parallel=True, nogil=True, cache=True)
def tail_starts(out_indptr, out_indices, first):
    """For every vertex, the position in ``out_indices`` of its first out-edge whose
    target is at least ``first`` (its targets are sorted): its edges from there to
    ``out_indptr[u + 1]`` lead into the streamed vertices."""
    n = out_indptr.shape[0] - 1
    starts = np.empty(n, np.int64)
    for u in numba.prange(n):
        lo, hi = out_indptr[u], out_indptr[u + 1]
        while lo < hi:  # the first target >= first
            mid = (lo + hi) >> 1
            if out_indices[mid] < first:
                lo = mid + 1
            else:
                hi = mid
        starts[u] = lo
    return starts


@numba.njit(parallel=True, nogil=True, cache=True)
def gather_chunk(starts, out_indices, out_weights, active, offsets, a0, a1, e0, e1,
                 targets, weights, chunk_offsets, parts):
    """Gather chunk (a0, a1, e0, e1) of :func:`chunk_bounds`: the targets of its edges
    into ``targets[:e1 - e0]`` (and their weights into ``weights`` when ``out_weights``
    is not empty), and its offsets, from the chunk's first edge, into
    ``chunk_offsets[:a1 - a0 + 1]``. ``starts``: each vertex's first streamed out-edge
    (:func:`tail_starts`); ``active``, ``offsets``: the active vertices and
    :func:`subgraph_offsets` of their degrees. ``parts`` ranges of equal edges run in
    parallel, so that a hub's edges are shared among the threads."""
    weighted = out_weights.shape[0] > 0
    for i in numba.prange(a1 - a0 + 1):
        chunk_offsets[i] = min(max(offsets[a0 + i], e0), e1) - e0
    span = e1 - e0
    for p in numba.prange(parts):
        s = e0 + span * p // parts
        t = e0 + span * (p + 1) // parts
        if s >= t:
            continue
        i = a0 + np.searchsorted(offsets[a0:a1 + 1], s, side="right") - 1
        while s < t:
            end = min(offsets[i + 1], t)
            source = starts[active[i]] + (s - offsets[i])
            count = end - s
            targets[s - e0:end - e0] = out_indices[source:source + count]
            if weighted:
                weights[s - e0:end - e0] = out_weights[source:source + count]
            s = end
            i += 1


@numba.njit(parallel=True, nogil=True, cache=True)
def _mark_targets(starts, out_indptr, out_indices, tail_degree, active, marks):
    for i in numba.prange(active.shape[0]):
        u = active[i]
        marks[u] = 1
        for e in range(starts[u], out_indptr[u + 1]):
            v = out_indices[e]
            if tail_degree[v]:
                marks[v] = 1


@numba.njit(parallel=True, nogil=True, cache=True)
def _listed_targets(starts, out_indptr, out_indices, tail_degree, active, offsets, out):
    for i in numba.prange(active.shape[0]):
        u = active[i]
        k = offsets[i]
        for e in range(starts[u], out_indptr[u + 1]):
            v = out_indices[e]
            out[k] = v if tail_degree[v] else u  # (u is listed anyway)
            k += 1


def with_targets(starts, out_indptr, out_indices, tail_degree, active, marks):
    """The vertices ``active`` (increasing ids with streamed out-edges, int64) and
    their streamed out-neighbours that have streamed out-edges themselves
    (``tail_degree`` > 0): increasing int64 ids. ``starts``: :func:`tail_starts`;
    ``marks``: a zeroed uint8 array of one element a vertex, used and zeroed again
    when the edges are many (a pass over every vertex then costs less than sorting
    them)."""
    offsets = subgraph_offsets(np, tail_degree[active])
    edges = int(offsets[-1])
    if edges * 16 < marks.shape[0]:
        targets = np.empty(edges, np.int64)
        _listed_targets(starts, out_indptr, out_indices, tail_degree, active, offsets,
                        targets)
        return np.union1d(active, targets)
    _mark_targets(starts, out_indptr, out_indices, tail_degree, active, marks)
    listed = np.flatnonzero(marks)
    marks[listed] = 0
    return listed
