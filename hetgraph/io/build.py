"""Edge arrays -> :class:`~hetgraph.graph.Graph`: relabel, symmetrize, drop self-loops,
de-duplicate, then build CSC (in-edges, weights) and CSR (out-edges) with Numba
counting sorts (O(|V| + |E|), no global comparison sort)."""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from ..errors import GraphError, InputFormatError
from ..graph import Graph

DEDUP_RULES = ("first", "min", "max", "sum")
_RULE_CODES = {"first": 0, "min": 1, "max": 2, "sum": 3}


@numba.njit(cache=True, nogil=True, parallel=True)
def _counts_to_cursors(cursor, ptr):
    """Turn per-chunk key counts into each chunk's first write position per key."""
    for k in numba.prange(cursor.shape[1]):
        acc = ptr[k]
        for t in range(cursor.shape[0]):
            c = cursor[t, k]
            cursor[t, k] = acc
            acc += c


@numba.njit(cache=True, nogil=True, parallel=True)
def _scatter_by_key(keys, vals, wts, ptr, out_vals, out_wts, bounds):
    """Stable counting-sort scatter of ``vals`` (and ``wts`` if non-empty) by ``keys``
    into the segments of ``ptr``. Items are cut into chunks at ``bounds``; each chunk
    counts, gets its own cursors, then scatters in parallel (order within a key is kept)."""
    chunks = bounds.shape[0] - 1
    n = ptr.shape[0] - 1
    cursor = np.zeros((chunks, n), np.int64)
    for t in numba.prange(chunks):
        for i in range(bounds[t], bounds[t + 1]):
            cursor[t, keys[i]] += 1
    _counts_to_cursors(cursor, ptr)
    with_w = wts.shape[0] > 0
    for t in numba.prange(chunks):
        for i in range(bounds[t], bounds[t + 1]):
            k = keys[i]
            p = cursor[t, k]
            out_vals[p] = vals[i]
            if with_w:
                out_wts[p] = wts[i]
            cursor[t, k] = p + 1


SEGMENT_CHUNKS = 8  # segment runs per thread: hubs sort slower per item than the rest


def segment_chunks(ptr, chunks):
    """Bounds of ``chunks`` runs of consecutive segments of ``ptr`` holding about equal
    numbers of items (a parallel loop over vertices cut by count gave the first thread
    the hubs of a degree-ordered graph: sorting the segments of RMAT-22's undirected
    graph, built from its arcs both ways before :func:`symmetrize`, took 4.5 s on 16
    cores)."""
    n = len(ptr) - 1
    bounds = np.searchsorted(ptr, np.linspace(0, ptr[-1], chunks + 1)).astype(np.int64)
    bounds[0], bounds[-1] = 0, n
    return np.maximum.accumulate(bounds)


def thread_runs(ptr):
    """:func:`segment_chunks` for the segment loops: SEGMENT_CHUNKS a thread."""
    return segment_chunks(ptr, SEGMENT_CHUNKS * numba.get_num_threads())


def sort_segments(ptr, vals, wts, dedup):
    """Stably sort each segment of ``vals`` (weights follow) in place, in parallel over
    segment runs of equal size; return the number of distinct values per segment (or its
    length when not ``dedup``)."""
    return _sort_segments(ptr, vals, wts, dedup, thread_runs(ptr))


@numba.njit(cache=True, nogil=True, parallel=True)
def _sort_segments(ptr, vals, wts, dedup, bounds):
    """:func:`sort_segments` over the segment runs ``bounds``."""
    n = ptr.shape[0] - 1
    counts = np.empty(n, np.int64)
    with_w = wts.shape[0] > 0
    for chunk in numba.prange(bounds.shape[0] - 1):
        for seg in range(bounds[chunk], bounds[chunk + 1]):
            a, b = ptr[seg], ptr[seg + 1]
            if b - a <= 32 or not with_w:
                if b - a <= 32:
                    for i in range(a + 1, b):  # stable insertion sort
                        x = vals[i]
                        xw = wts[i] if with_w else 0.0
                        j = i - 1
                        while j >= a and vals[j] > x:
                            vals[j + 1] = vals[j]
                            if with_w:
                                wts[j + 1] = wts[j]
                            j -= 1
                        vals[j + 1] = x
                        if with_w:
                            wts[j + 1] = xw
                else:
                    vals[a:b].sort()
            else:
                perm = np.argsort(vals[a:b], kind="mergesort")
                v = vals[a:b][perm]
                w = wts[a:b][perm]
                vals[a:b] = v
                wts[a:b] = w
            c = b - a
            if dedup:
                for e in range(a + 1, b):
                    if vals[e] == vals[e - 1]:
                        c -= 1
            counts[seg] = c
    return counts


@numba.njit(cache=True, nogil=True, parallel=True)
def _merge_duplicates(ptr, vals, wts, new_ptr, out_vals, out_wts, rule, bounds):
    """Copy each sorted segment keeping one entry per value; weights combined by rule
    (0 first, 1 min, 2 max, 3 sum); in parallel over the segment runs ``bounds``."""
    with_w = wts.shape[0] > 0
    for chunk in numba.prange(bounds.shape[0] - 1):
        for seg in range(bounds[chunk], bounds[chunk + 1]):
            m = new_ptr[seg] - 1
            for e in range(ptr[seg], ptr[seg + 1]):
                if e > ptr[seg] and vals[e] == vals[e - 1]:
                    if with_w:
                        if rule == 1:
                            out_wts[m] = min(out_wts[m], wts[e])
                        elif rule == 2:
                            out_wts[m] = max(out_wts[m], wts[e])
                        elif rule == 3:
                            out_wts[m] += wts[e]
                    continue
                m += 1
                out_vals[m] = vals[e]
                if with_w:
                    out_wts[m] = wts[e]


@numba.njit(cache=True, nogil=True, parallel=True)
def _transpose(in_ptr, in_idx, in_w, out_ptr, out_idx, out_w, col_bounds):
    """Fill the CSR (out-edges, and their weights unless ``in_w`` is empty) from the CSC;
    targets come out sorted per row. Columns are cut into chunks at ``col_bounds`` that
    count and scatter in parallel."""
    chunks = col_bounds.shape[0] - 1
    n = in_ptr.shape[0] - 1
    weighted = in_w.shape[0] > 0
    cursor = np.zeros((chunks, n), np.int64)
    for t in numba.prange(chunks):
        for e in range(in_ptr[col_bounds[t]], in_ptr[col_bounds[t + 1]]):
            cursor[t, in_idx[e]] += 1
    _counts_to_cursors(cursor, out_ptr)
    for t in numba.prange(chunks):
        for v in range(col_bounds[t], col_bounds[t + 1]):
            for e in range(in_ptr[v], in_ptr[v + 1]):
                s = in_idx[e]
                out_idx[cursor[t, s]] = v
                if weighted:
                    out_w[cursor[t, s]] = in_w[e]
                cursor[t, s] += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _union_row(a, a0, a1, a_w, b, b0, b1, b_w, out, out_w, m, write):
    """Merge the sorted runs a[a0:a1] and b[b0:b1] (weights a_w, b_w: empty when none),
    each value once with its least weight, into out[m:] (and out_w) when ``write``;
    returns how many values the merge has."""
    weighted = a_w.shape[0] > 0
    i, j, k, last = a0, b0, 0, -1
    while i < a1 or j < b1:
        if j >= b1 or (i < a1 and a[i] <= b[j]):
            x, w = a[i], a_w[i] if weighted else np.float32(0.0)
            i += 1
        else:
            x, w = b[j], b_w[j] if weighted else np.float32(0.0)
            j += 1
        if k > 0 and x == last:
            if write and weighted and w < out_w[m + k - 1]:
                out_w[m + k - 1] = w
            continue
        if write:
            out[m + k] = x
            if weighted:
                out_w[m + k] = w
        last = x
        k += 1
    return k


@numba.njit(cache=True, nogil=True, parallel=True)
def _union_counts(in_ptr, in_idx, out_ptr, out_idx, bounds):
    """How many distinct in- and out-neighbours each vertex has."""
    counts = np.empty(in_ptr.shape[0] - 1, np.int64)
    none = np.empty(0, np.float32)  # (and in_idx as the output: nothing is written)
    for chunk in numba.prange(bounds.shape[0] - 1):
        for v in range(bounds[chunk], bounds[chunk + 1]):
            counts[v] = _union_row(in_idx, in_ptr[v], in_ptr[v + 1], none, out_idx,
                                   out_ptr[v], out_ptr[v + 1], none, in_idx, none, 0, False)
    return counts


@numba.njit(cache=True, nogil=True, parallel=True)
def _union_fill(in_ptr, in_idx, in_w, out_ptr, out_idx, out_w, new_ptr, new_idx, new_w,
                bounds):
    """Write each vertex's distinct in- and out-neighbours (least weights) at new_ptr."""
    for chunk in numba.prange(bounds.shape[0] - 1):
        for v in range(bounds[chunk], bounds[chunk + 1]):
            _union_row(in_idx, in_ptr[v], in_ptr[v + 1], in_w, out_idx, out_ptr[v],
                       out_ptr[v + 1], out_w, new_idx, new_w, new_ptr[v], True)


def symmetrize(graph) -> Graph:
    """The undirected graph with an edge u-v wherever ``graph`` has u->v or v->u, the
    least weight of those arcs on it: each vertex's neighbours merged from its sorted
    in-edges (CSC) and out-edges (CSR), in parallel over runs of vertices holding equal
    numbers of arcs, with no sort (what build_graph(..., directed=False, dedup="min")
    gives from the arcs; RMAT-22 on 16 cores: 8.5 s that way)."""
    n = graph.num_vertices
    in_ptr = graph.in_indptr.astype(np.int64, copy=False)
    out_ptr = graph.out_indptr.astype(np.int64, copy=False)
    bounds = thread_runs(in_ptr + out_ptr)
    none = np.empty(0, np.float32)
    in_w, out_w = (graph.in_weights, graph.out_weights()) if graph.weighted else (none, none)
    new_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(_union_counts(in_ptr, graph.in_indices, out_ptr, graph.out_indices, bounds),
              out=new_ptr[1:])
    new_idx = np.empty(new_ptr[-1], graph.in_indices.dtype)
    new_w = np.empty(new_ptr[-1] if graph.weighted else 0, np.float32)
    _union_fill(in_ptr, graph.in_indices, in_w, out_ptr, graph.out_indices, out_w, new_ptr,
                new_idx, new_w, bounds)
    # symmetric: the out-edges are the in-edges (targets sorted per source)
    return Graph(new_ptr, new_idx, new_w if graph.weighted else None, new_ptr.copy(),
                 new_idx.copy(), directed=False, labels=graph.labels, name=graph.name)


def transpose(in_ptr, in_idx, in_w, n):
    """(out_ptr, out_idx, out_w): the CSR of the CSC (in_ptr, in_idx, in_w) over ``n``
    vertices, targets sorted per source; out_w is None when in_w is."""
    out_ptr = _pointer(in_idx, n)
    out_idx = np.empty_like(in_idx)
    out_w = np.empty(0 if in_w is None else len(in_w), np.float32)
    _transpose(in_ptr, in_idx, out_w if in_w is None else in_w, out_ptr, out_idx, out_w,
               segment_chunks(in_ptr, _chunk_count(n)))
    return out_ptr, out_idx, None if in_w is None else out_w


CURSOR_BYTES = 256 << 20  # memory the per-chunk cursors of a parallel scatter may use


def _chunk_count(n):
    """How many parallel chunks a scatter over n keys uses (cursors are chunks * n int64)."""
    return int(max(1, min(numba.get_num_threads(), CURSOR_BYTES // (8 * max(n, 1)))))


def index_dtype(num_vertices):
    """int32 while the vertex count is below 2**31, int64 beyond."""
    return np.dtype(np.int32) if num_vertices < 2**31 else np.dtype(np.int64)


def compact_labels(src, dst):
    """Relabel arbitrary non-negative int64 ids to 0..N-1 in increasing id order.

    Returns (src, dst, labels). Uses a presence bitmap when ids are small, else a sort.
    """
    hi = int(max(src.max(initial=0), dst.max(initial=0)))
    if hi < 4 * (len(src) + len(dst)) + 1024:
        present = np.zeros(hi + 1, np.bool_)
        present[src] = True
        present[dst] = True
        labels = np.flatnonzero(present).astype(np.int64)
        dense = np.cumsum(present, dtype=np.int64) - 1
        return dense[src], dense[dst], labels
    labels, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    return inverse[: len(src)], inverse[len(src):], labels.astype(np.int64)


def _check_arrays(src, dst, weight, num_vertices, source):
    if src.shape != dst.shape or src.ndim != 1:
        raise GraphError(f"{source}: source and target arrays must be 1-D of equal length "
                         f"(got {src.shape} and {dst.shape})")
    if weight is not None:
        if weight.shape != src.shape:
            raise GraphError(f"{source}: weight array has shape {weight.shape}, "
                             f"edges have {src.shape}; give one weight per edge")
        bad = ~np.isfinite(weight)
        if bad.any():
            i = int(np.argmax(bad))
            raise GraphError(f"{source}: edge {i} has weight {float(weight[i])}; "
                             "every weight must be finite")
        big = np.abs(weight) > np.finfo(np.float32).max
        if big.any():
            i = int(np.argmax(big))
            raise GraphError(f"{source}: edge {i} has weight {float(weight[i])}, beyond float32")
    for name, arr in (("source", src), ("target", dst)):
        if arr.size and arr.min() < 0:
            i = int(np.argmax(arr < 0))
            raise GraphError(f"{source}: edge {i} has negative {name} id {int(arr[i])}; "
                             "ids must be >= 0 (pass labels through ids='str' or relabel first)")
        if num_vertices is not None and arr.size and arr.max() >= num_vertices:
            i = int(np.argmax(arr >= num_vertices))
            raise GraphError(f"{source}: edge {i} has {name} id {int(arr[i])} but the graph "
                             f"declares {num_vertices} vertices; fix the edge or the count")


def build_graph(src, dst, weight=None, *, directed=True, num_vertices=None, labels=None,
                relabel=True, self_loops=True, dedup="first", source="<arrays>", name=None):
    """Build a Graph from edge arrays (original ids unless ``labels`` is given).

    ``src``, ``dst``: integer ids >= 0. ``weight``: float weights or None.
    ``num_vertices``: declared vertex count (ids must be below it); with it, or with
    ``relabel=False``, ids are used as dense ids. ``labels``: original label of each
    dense id. ``relabel=True`` compacts ids to 0..N-1 and keeps them as labels.
    ``self_loops=False`` drops u->u edges. ``dedup``: None keeps parallel edges, else
    weights of parallel edges are combined by "first", "min", "max" or "sum".
    ``directed=False`` stores each edge in both directions.
    """
    if dedup is not None and dedup not in DEDUP_RULES:
        raise GraphError(f"dedup={dedup!r} is not a rule; use one of {DEDUP_RULES} or None")
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.dtype.kind not in "iu" or dst.dtype.kind not in "iu":
        raise GraphError(f"{source}: vertex ids must be integers (got {src.dtype} and "
                         f"{dst.dtype}); pass labels through ids='str' or from_pandas")
    weight = None if weight is None else np.asarray(weight, dtype=np.float64)
    _check_arrays(src, dst, weight, num_vertices, source)
    if src.dtype != np.int32 or dst.dtype != np.int32:  # int32 ids stay (half the memory)
        src = src.astype(np.int64, copy=False)
        dst = dst.astype(np.int64, copy=False)
    if labels is not None:
        num_vertices = len(labels)
    elif num_vertices is None:
        if relabel:
            src, dst, labels = compact_labels(src, dst)
            num_vertices = len(labels)
        else:
            num_vertices = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    if not self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
        weight = None if weight is None else weight[keep]
    if not directed:
        loop = src == dst
        src, dst = np.concatenate([src, dst[~loop]]), np.concatenate([dst, src[~loop]])
        if weight is not None:
            weight = np.concatenate([weight, weight[~loop]])
    return _assemble(src, dst, weight, num_vertices, directed, labels, dedup, name)


def build_from_columns(src, dst, weight, where, **options):
    """Graph from two label columns (``where`` names them in errors): integer ids are
    built as they are, any other labels factorized in first-seen order; float columns
    raise InputFormatError. ``options`` go to :func:`build_graph`."""
    src, dst = np.asarray(src), np.asarray(dst)
    for col, arr in (("source", src), ("target", dst)):
        if arr.dtype.kind == "f":
            if np.isnan(arr).any():
                i = int(np.argmax(np.isnan(arr)))
                raise InputFormatError(f"{col} column is missing in record {i}", source=where,
                                       fix="Drop or fill rows with missing vertex ids")
            raise InputFormatError(f"{col} column holds floats ({arr.dtype}), not vertex ids",
                                   source=where, fix="Cast the id columns to integers or strings")
    if weight is not None:
        weight = np.asarray(weight, dtype=np.float64)
    if src.dtype.kind in "iu" and dst.dtype.kind in "iu":
        return build_graph(src, dst, weight, source=where, **options)
    options.pop("relabel", None)
    s, d, labels = factorize_labels(src, dst)
    return build_graph(s, d, weight, labels=labels, source=where, **options)


def _pointer(keys, n):
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr


def _assemble(src, dst, weight, n, directed, labels, dedup, name):
    idx_t = index_dtype(n)
    in_ptr = _pointer(dst, n)
    in_idx = np.empty(len(src), idx_t)
    w_in = np.empty(0, np.float32) if weight is None else weight.astype(np.float32)
    w = np.empty(len(w_in), np.float32)
    chunks = _chunk_count(n)
    bounds = np.linspace(0, len(src), chunks + 1).astype(np.int64)
    _scatter_by_key(dst, src, w_in, in_ptr, in_idx, w, bounds)
    del src, dst, w_in
    runs = thread_runs(in_ptr)
    counts = _sort_segments(in_ptr, in_idx, w, dedup is not None, runs)
    if dedup is not None and counts.sum() < len(in_idx):
        new_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=new_ptr[1:])
        out_idx = np.empty(new_ptr[-1], idx_t)
        out_w = np.empty(new_ptr[-1] if len(w) else 0, np.float32)
        _merge_duplicates(in_ptr, in_idx, w, new_ptr, out_idx, out_w, _RULE_CODES[dedup],
                          runs)
        in_ptr, in_idx, w = new_ptr, out_idx, out_w
    out_ptr, out_idx, _ = transpose(in_ptr, in_idx, None, n)
    return Graph(in_ptr, in_idx, None if weight is None else w, out_ptr, out_idx,
                 directed=directed, labels=labels, name=name)


def factorize_arrow(src_labels, dst_labels):
    """Dense ids for Arrow label columns (any type) in first-seen order, computed in Arrow
    (no Python object per edge). Returns (src, dst, labels as a NumPy array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    src_labels, dst_labels = pa.chunked_array(src_labels), pa.chunked_array(dst_labels)
    both = pa.chunked_array(src_labels.chunks + dst_labels.chunks)
    n = len(src_labels)
    if both.null_count:
        i = int(np.argmax(both.is_null().to_numpy(zero_copy_only=False)))
        raise GraphError(f"edge {i % max(n, 1)} has a missing (null) vertex label; "
                         "drop or fill it first")
    labels = both.unique()
    codes = pc.index_in(both, value_set=labels).to_numpy().astype(np.int64)
    return codes[:n], codes[n:], labels.to_numpy(zero_copy_only=False)


def factorize_labels(src_labels, dst_labels):
    """Dense ids for arbitrary (e.g. string) labels in first-seen order.

    Returns (src, dst, labels) with labels a NumPy array (object for strings).
    """
    codes, uniques = pd.factorize(pd.concat([pd.Series(src_labels), pd.Series(dst_labels)],
                                            ignore_index=True), use_na_sentinel=True)
    if (codes < 0).any():
        i = int(np.argmax(codes < 0)) % max(len(src_labels), 1)
        raise GraphError(f"edge {i} has a missing (NA) vertex label; drop or fill it first")
    n = len(src_labels)
    return codes[:n].astype(np.int64), codes[n:].astype(np.int64), np.asarray(uniques)
