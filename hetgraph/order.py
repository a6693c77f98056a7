"""Vertex order: renumber a graph's dense ids so that the vertices read most often sit
together in memory.

A pull pass reads ``x[u]`` for every in-edge u -> v; on a power-law graph most of those
reads go to a few hubs scattered over the whole value array, so nearly every read
misses the caches. Numbering vertices by decreasing out-degree packs the hubs into a
few cache lines. On graphs without hubs (road networks, grids, meshes) the input order
often has locality of its own, and "auto" keeps it; where it has none (ids that say
nothing of where a vertex is), the reverse Cuthill-McKee order (:func:`rcm_order`)
gives neighbours nearby ids, and "auto" takes it when it cuts the median distance
between an arc's two ids (:func:`median_arc_span`) ``tuning.RCM_SPAN_GAIN`` times.
The measurements behind these choices are in docs/tuning.md. The "color" order
(:func:`color_major`) serves another end: Frog's colored execution
(``mode="colored"``), whose passes each take one color's vertices as a range.

This module takes the graph it is given and builds the renumbered one with
``graph.with_arrays``: it imports nothing of :mod:`hetgraph.graph`, whose ``reorder``
calls it.
"""

from __future__ import annotations

import numba
import numpy as np

from . import tuning
from .coloring import KEPT, hybrid_coloring
from .csr import sort_by_key, sort_segments, transpose
from .errors import GraphError
from .threadcount import numba_threads

ORDERS = ("auto", "degree", "rcm", "color", "none")


def degree_order(graph) -> np.ndarray:
    """New id -> old id: vertices by decreasing out-degree; those of equal degree by
    their lowest-numbered out-neighbour in that order, then in their old order.

    The tie-break packs together the sources that a hub's in-edges read: RMAT's many
    vertices of degree 1, 2, 3 (half of RMAT-20's edges come from vertices below the
    top 1%) otherwise sit in random order within their degree, and each read of one
    misses the caches alone. The sorts are stable parallel counting sorts, O(N) each
    (:func:`hetgraph.csr.sort_by_key`)."""
    n = graph.num_vertices
    degree = graph.out_degree()
    fewer = degree.max(initial=0) - degree  # the key of decreasing degree, from 0
    buckets = int(fewer.max(initial=0)) + 1
    vertices, none = np.arange(n, dtype=np.int64), np.empty(0, np.float32)
    by_degree = sort_by_key(fewer, buckets, vertices, none, np.int64)[1]
    rank = np.empty(n, graph.index_dtype)
    _invert(by_degree, rank)
    first = np.empty(n, graph.index_dtype)
    _lowest_neighbour(graph.out_indptr, graph.out_indices, rank, first)
    # least significant key first: by neighbour, then (stably) by degree
    by_first = sort_by_key(first, n + 1, vertices, none, np.int64)[1]
    return sort_by_key(fewer[by_first], buckets, by_first, none, np.int64)[1]


@numba.njit(cache=True, nogil=True)
def _stable_by(keys, items, buckets):
    """``items`` stably sorted by ``keys[item]`` (each in [0, buckets)): a counting
    sort, O(N + buckets)."""
    start = np.zeros(buckets + 1, np.int64)
    for i in range(items.shape[0]):
        start[keys[items[i]] + 1] += 1
    for k in range(buckets):
        start[k + 1] += start[k]
    out = np.empty_like(items)
    for i in range(items.shape[0]):
        k = keys[items[i]]
        out[start[k]] = items[i]
        start[k] += 1
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def _lowest_neighbour(ptr, idx, rank, out):
    """out[v] = the lowest ``rank`` among v's out-neighbours (N when it has none)."""
    n = out.shape[0]
    for v in numba.prange(n):
        lowest = n
        for e in range(ptr[v], ptr[v + 1]):
            lowest = min(lowest, rank[idx[e]])
        out[v] = lowest


def rcm_order(graph) -> np.ndarray:
    """New id -> old id: the reverse Cuthill-McKee order of the graph's arcs taken both
    ways: breadth-first from the unvisited vertex of lowest degree (in each connected
    part; scipy.sparse.csgraph's choice), each vertex's unvisited neighbours appended by
    increasing degree, the whole reversed. It narrows the band of ids that an edge's
    ends span. O(N + E) but for the sorts of each vertex's new neighbours."""
    n = graph.num_vertices
    degree = graph.out_degree() + (graph.in_degree() if graph.directed else 0)
    none = np.empty(0, np.int64)
    by_degree = _stable_by(degree, np.arange(n, dtype=np.int64),
                           int(degree.max(initial=0)) + 1)
    order = _cuthill_mckee(graph.out_indptr, graph.out_indices,
                           graph.in_indptr if graph.directed else none,
                           graph.in_indices if graph.directed else none, degree, by_degree)
    return order[::-1].copy()


@numba.njit(cache=True, nogil=True)
def _cuthill_mckee(ptr, idx, in_ptr, in_idx, degree, by_degree):
    """The Cuthill-McKee order (see :func:`rcm_order`) of the arcs of the CSR (ptr,
    idx) and, unless ``in_ptr`` is empty, of the CSC (in_ptr, in_idx) too; each
    connected part starts at its first vertex in ``by_degree``."""
    n = ptr.shape[0] - 1
    both = in_ptr.shape[0] > 0
    seen = np.zeros(n, np.bool_)
    order = np.empty(n, np.int64)
    head = tail = 0
    for z in range(n):
        if seen[by_degree[z]]:
            continue
        seen[by_degree[z]] = True
        order[tail] = by_degree[z]
        tail += 1
        while head < tail:
            v = order[head]
            head += 1
            first = tail
            tail = _append_unseen(idx, ptr[v], ptr[v + 1], seen, order, tail)
            if both:
                tail = _append_unseen(in_idx, in_ptr[v], in_ptr[v + 1], seen, order, tail)
            _sort_by_degree(order, first, tail, degree)
    return order


@numba.njit(cache=True, nogil=True, inline="always")
def _append_unseen(idx, start, end, seen, order, tail):
    """Append the unseen ids of idx[start:end] to ``order`` at ``tail``, mark them
    seen; returns the new tail."""
    for e in range(start, end):
        u = idx[e]
        if not seen[u]:
            seen[u] = True
            order[tail] = u
            tail += 1
    return tail


@numba.njit(cache=True, nogil=True, inline="always")
def _sort_by_degree(order, first, end, degree):
    """Stably sort order[first:end] by increasing ``degree``: insertion sort for the
    few neighbours most vertices have, a merge sort for a hub's."""
    if end - first > 32:
        part = order[first:end].copy()
        order[first:end] = part[np.argsort(degree[part], kind="mergesort")]
        return
    for i in range(first + 1, end):
        x = order[i]
        j = i - 1
        while j >= first and degree[order[j]] > degree[x]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = x


def median_arc_span(graph, perm=None, samples=None) -> float:
    """The median over the arcs u -> v of |id(u) - id(v)|, with the ids of the order
    ``perm`` (new id -> old id; default: the graph's own), from at most ``samples``
    (default ``tuning.SPAN_SAMPLES``) evenly spaced arcs; 0 without arcs."""
    if graph.num_arcs == 0:
        return 0.0
    samples = samples or tuning.SPAN_SAMPLES
    arcs = np.arange(0, graph.num_arcs, max(1, -(-graph.num_arcs // samples)))
    source = np.searchsorted(graph.out_indptr, arcs, side="right") - 1
    target = graph.out_indices[arcs].astype(np.int64)
    if perm is not None:
        new_id = np.empty(graph.num_vertices, np.int64)
        new_id[perm] = np.arange(graph.num_vertices)
        source, target = new_id[source], new_id[target]
    return float(np.median(np.abs(source - target)))


def degree_skew(degree) -> float:
    """sum(d^2) / sum(d): the degree of the vertex at an average edge's end (at least 1;
    the degree itself on a regular graph, ~1,300 for RMAT-20's in-degrees)."""
    degree = np.asarray(degree, np.float64)
    arcs = degree.sum()
    # (einsum: see scheduler.costmodel.frontier_growth on BLAS's spinning threads)
    return max(1.0, float(np.einsum("i,i->", degree, degree)) / arcs) if arcs else 1.0


def is_skewed(graph) -> bool:
    """Whether a few hubs carry a large share of the arcs: the out-degree skew
    (:func:`degree_skew`) at least ``tuning.SKEW_FOR_DEGREE_ORDER`` times the mean
    degree |E|/N
    (their ratio is 1 on a regular graph such as a grid, ~90 on RMAT)."""
    if graph.num_arcs == 0:
        return False
    mean = graph.num_arcs / graph.num_vertices
    return degree_skew(graph.out_degree()) >= tuning.SKEW_FOR_DEGREE_ORDER * mean


@numba.njit(cache=True, nogil=True, parallel=True)
def _gather_rows(ptr, idx, wts, perm, inv, new_ptr, new_idx, new_wts):
    """Row i of the new CSC/CSR = old row perm[i], its ids renamed by ``inv`` (in the
    old row's order: no longer sorted)."""
    with_w = wts.shape[0] > 0
    for i in numba.prange(perm.shape[0]):
        old = perm[i]
        start, end, to = ptr[old], ptr[old + 1], new_ptr[i]
        for e in range(start, end):
            new_idx[to + e - start] = inv[idx[e]]
            if with_w:
                new_wts[to + e - start] = wts[e]


def _renamed_rows(ptr, idx, wts, perm, inv, sort):
    """(ptr, idx, wts or None) of the rows perm[0], perm[1], ... of (ptr, idx, wts), ids
    renamed by ``inv``, each row sorted again when ``sort``."""
    new_ptr = np.zeros_like(ptr)
    np.cumsum(np.diff(ptr)[perm], out=new_ptr[1:])
    new_idx = np.empty_like(idx)
    given = np.empty(0, np.float32) if wts is None else wts
    new_wts = np.empty_like(given)
    _gather_rows(ptr, idx, given, perm, inv, new_ptr, new_idx, new_wts)
    if sort:
        sort_segments(new_ptr, new_idx, new_wts, False)
    return new_ptr, new_idx, None if wts is None else new_wts


def renumber(graph, perm):
    """The same graph with vertex ``perm[i]`` renamed i (``perm``: a permutation of
    0..N-1); labels, weights, direction and name are kept.

    Each new row is the old row it renames, gathered with its ids renamed, then sorted
    again. On a skewed graph (:func:`is_skewed`) the hubs' long rows would sort slower
    than counting sorts pass over all edges, so there the gathered CSC, unsorted, is
    transposed into the new CSR and that back into the new CSC (rows come out sorted).
    An undirected graph's CSC is its CSR: renamed once."""
    n = graph.num_vertices
    perm = np.asarray(perm, np.int64)
    inv = np.empty(n, graph.index_dtype)
    if perm.shape != (n,) or not _invert(perm, inv):
        raise GraphError(f"the vertex order must be a permutation of 0..{n - 1} "
                         f"(got shape {perm.shape}); build it with np.argsort")
    symmetric, skewed = _csc_is_csr(graph), is_skewed(graph)
    csc = _renamed_rows(graph.in_indptr, graph.in_indices, graph.in_weights, perm, inv,
                        not skewed)
    if skewed:  # the renamed CSC's transpose is the new CSR, its rows sorted
        csr = transpose(*csc, n)
        csc = csr if symmetric else transpose(*csr, n)
    elif symmetric:
        csr = csc
    else:
        csr = _renamed_rows(graph.out_indptr, graph.out_indices, None, perm, inv, True)
    in_ptr, in_idx, weights = csc
    out_ptr, out_idx = (csr[0].copy(), csr[1].copy()) if csr is csc else csr[:2]
    labels = perm if graph.labels is None else graph.labels[perm]
    return graph.with_arrays(in_ptr, in_idx, weights, out_ptr, out_idx, labels=labels)


@numba.njit(cache=True, nogil=True, parallel=True)
def _invert(perm, inv):
    """Whether ``perm`` is a permutation of 0..len(inv) - 1, with ``inv`` its inverse
    when it is: each entry in range is written where it points, in parallel, and n
    entries cover all n places only when no two point at one."""
    n = inv.shape[0]
    for i in numba.prange(n):
        inv[i] = -1
    outside = 0
    for i in numba.prange(n):
        if perm[i] < 0 or perm[i] >= n:
            outside += 1
        else:
            inv[perm[i]] = i
    covered = 0
    for i in numba.prange(n):
        if inv[i] >= 0:
            covered += 1
    return outside == 0 and covered == n


def _csc_is_csr(graph):
    """Whether the graph is undirected with its CSC equal to its CSR, as every graph
    built undirected has (a copy of each edge both ways, one weight)."""
    return (not graph.directed and np.array_equal(graph.in_indptr, graph.out_indptr)
            and np.array_equal(graph.in_indices, graph.out_indices))


def color_major(graph, colors=None):
    """``graph`` renumbered color by color (labels kept): the vertices of its
    :func:`hetgraph.coloring.hybrid_coloring` with ``colors`` colors (default
    ``tuning.FROG_COLORS``) in color order, the hybrid partition last, each color's in
    the order they had. The new graph keeps its coloring (its colors are ranges of ids,
    :func:`hetgraph.coloring.coloring_of`), and its partitions for a colored run cut
    shards and pages at the colors' bounds."""
    coloring = hybrid_coloring(graph, colors)
    renumbered = renumber(graph, coloring.order)
    renumbered.kept(KEPT, lambda: coloring.renamed(coloring.order))
    return renumbered


def reorder(graph, order="degree"):
    """``graph`` with its dense ids in ``order``: "degree" (decreasing out-degree,
    :func:`degree_order`), "rcm" (reverse Cuthill-McKee, :func:`rcm_order`), "color"
    (color-major for ``mode="colored"``, :func:`color_major`), "auto"
    (degree order when :func:`is_skewed`, else RCM's where it cuts the median arc span
    ``tuning.RCM_SPAN_GAIN`` times, else the graph itself) or "none" (the graph
    itself)."""
    if order not in ORDERS:
        raise GraphError(f"order={order!r} is not a vertex order; use one of {ORDERS}")
    if order == "none" or graph.num_vertices == 0:
        return graph
    if order == "auto":
        return auto_reordered(graph)[0]
    with _threads_for(graph):
        if order == "color":
            return color_major(graph)
        return renumber(graph, degree_order(graph) if order == "degree" else rcm_order(graph))


def auto_reordered(graph):
    """(``graph`` in the order "auto" chooses, that order: "degree", "rcm" or "none")."""
    with _threads_for(graph):
        if is_skewed(graph):
            return renumber(graph, degree_order(graph)), "degree"
        perm = rcm_order(graph)
        if median_arc_span(graph, perm) * tuning.RCM_SPAN_GAIN > median_arc_span(graph):
            return graph, "none"
        return renumber(graph, perm), "rcm"


def _threads_for(graph):
    """The Numba threads of a reorder of ``graph`` (:func:`numba_threads`): one when it
    has fewer than ``tuning.ORDER_SERIAL_ARCS`` arcs, all of them otherwise."""
    return numba_threads(1 if graph.num_arcs < tuning.ORDER_SERIAL_ARCS else None)
