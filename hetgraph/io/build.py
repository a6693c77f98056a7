"""Edge arrays -> :class:`~hetgraph.graph.Graph`: relabel, symmetrize, drop self-loops,
de-duplicate, then build CSC (in-edges, weights) and CSR (out-edges) with Numba
counting sorts (O(|V| + |E|), no global comparison sort)."""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from ..errors import GraphError
from ..graph import Graph

DEDUP_RULES = ("first", "min", "max", "sum")
_RULE_CODES = {"first": 0, "min": 1, "max": 2, "sum": 3}


@numba.njit(cache=True, nogil=True)
def _counting_order(keys, n):
    """Stable order of ``keys`` (values in 0..n-1) and the segment pointer."""
    ptr = np.zeros(n + 1, np.int64)
    for k in keys:
        ptr[k + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    pos = ptr[:-1].copy()
    order = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        order[pos[k]] = i
        pos[k] += 1
    return ptr, order


@numba.njit(cache=True, nogil=True, parallel=True)
def _sort_segments(ptr, order, src):
    """Stably sort each segment of ``order`` by ``src[order]`` (in place)."""
    for seg in numba.prange(ptr.shape[0] - 1):
        a, b = ptr[seg], ptr[seg + 1]
        if b - a < 2:
            continue
        if b - a <= 32:
            for i in range(a + 1, b):  # stable insertion sort
                x = order[i]
                key = src[x]
                j = i - 1
                while j >= a and src[order[j]] > key:
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = x
        else:
            seg_order = order[a:b].copy()
            keys = src[seg_order]
            perm = np.argsort(keys, kind="mergesort")
            for i in range(b - a):
                order[a + i] = seg_order[perm[i]]


@numba.njit(cache=True, nogil=True)
def _dedup_sorted(ptr, idx, w, rule):
    """Merge equal neighbours inside each sorted segment. Returns new ptr, idx, w."""
    n = ptr.shape[0] - 1
    new_ptr = np.zeros(n + 1, np.int64)
    out_i = np.empty_like(idx)
    out_w = np.empty_like(w)
    m = 0
    for seg in range(n):
        a, b = ptr[seg], ptr[seg + 1]
        for e in range(a, b):
            if e > a and idx[e] == idx[e - 1]:
                if rule == 1:
                    out_w[m - 1] = min(out_w[m - 1], w[e])
                elif rule == 2:
                    out_w[m - 1] = max(out_w[m - 1], w[e])
                elif rule == 3:
                    out_w[m - 1] += w[e]
                continue
            out_i[m] = idx[e]
            out_w[m] = w[e]
            m += 1
        new_ptr[seg + 1] = m
    return new_ptr, out_i[:m].copy(), out_w[:m].copy()


@numba.njit(cache=True, nogil=True)
def _transpose(in_ptr, in_idx, n):
    """CSR (out-edges) from CSC (in-edges); targets come out sorted per row."""
    out_ptr = np.zeros(n + 1, np.int64)
    for s in in_idx:
        out_ptr[s + 1] += 1
    for i in range(n):
        out_ptr[i + 1] += out_ptr[i]
    pos = out_ptr[:-1].copy()
    out_idx = np.empty_like(in_idx)
    for v in range(n):
        for e in range(in_ptr[v], in_ptr[v + 1]):
            s = in_idx[e]
            out_idx[pos[s]] = v
            pos[s] += 1
    return out_ptr, out_idx


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
            raise GraphError(f"{source}: edge {i} has weight {weight[i]!r}; "
                             "every weight must be finite")
        big = np.abs(weight) > np.finfo(np.float32).max
        if big.any():
            i = int(np.argmax(big))
            raise GraphError(f"{source}: edge {i} has weight {weight[i]!r}, beyond float32")
    for name, arr in (("source", src), ("target", dst)):
        if arr.size and arr.min() < 0:
            i = int(np.argmax(arr < 0))
            raise GraphError(f"{source}: edge {i} has negative {name} id {arr[i]}; "
                             "ids must be >= 0 (pass labels through ids='str' or relabel first)")
        if num_vertices is not None and arr.size and arr.max() >= num_vertices:
            i = int(np.argmax(arr >= num_vertices))
            raise GraphError(f"{source}: edge {i} has {name} id {arr[i]} but the graph "
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


def _assemble(src, dst, weight, n, directed, labels, dedup, name):
    idx_t = index_dtype(n)
    in_ptr, order = _counting_order(dst, n)
    _sort_segments(in_ptr, order, src)
    in_idx = src[order].astype(idx_t)
    w = np.ones(0, np.float32) if weight is None else weight[order].astype(np.float32)
    del order
    if dedup is not None and len(in_idx):
        w_full = w if weight is not None else np.zeros(len(in_idx), np.float32)
        in_ptr, in_idx, w_full = _dedup_sorted(in_ptr, in_idx, w_full, _RULE_CODES[dedup])
        w = w_full if weight is not None else w
    out_ptr, out_idx = _transpose(in_ptr, in_idx, n)
    return Graph(in_ptr, in_idx, None if weight is None else w, out_ptr, out_idx,
                 directed=directed, labels=labels, name=name)


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
