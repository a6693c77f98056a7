"""Edge arrays -> :class:`~hetgraph.graph.Graph`: validate, relabel, symmetrize, drop
self-loops, then de-duplicate and compress them (:func:`hetgraph.csr.compress`); the
label columns of tables and DataFrames are factorized into ids first."""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from ..csr import DEDUP_RULES, compress, first_outside, first_unfit
from ..errors import GraphError, InputFormatError
from ..graph import Graph
from .limits import require_memory
from .text import FLOAT32_INF_FROM


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
        nonfinite, big = first_unfit(weight, FLOAT32_INF_FROM)
        if nonfinite is not None:
            raise GraphError(f"{source}: edge {nonfinite} has weight "
                             f"{float(weight[nonfinite])}; every weight must be finite")
        if big is not None:
            raise GraphError(f"{source}: edge {big} has weight {float(weight[big])}, "
                             "beyond float32")
    for name, arr in (("source", src), ("target", dst)):
        negative, beyond = first_outside(arr, num_vertices)
        if negative is not None:
            raise GraphError(f"{source}: edge {negative} has negative {name} id "
                             f"{int(arr[negative])}; ids must be >= 0 (pass labels "
                             "through ids='str' or relabel first)")
        if beyond is not None:
            raise GraphError(f"{source}: edge {beyond} has {name} id {int(arr[beyond])} "
                             f"but the graph declares {num_vertices} vertices; fix the "
                             "edge or the count")


def build_graph(src, dst, weight=None, *, directed=True, num_vertices=None, labels=None,
                relabel=True, self_loops=True, dedup="first", source="<arrays>", name=None):
    """Build a Graph from edge arrays (original ids unless ``labels`` is given).

    ``src``, ``dst``: integer ids >= 0. ``weight``: float weights or None.
    ``num_vertices``: declared vertex count (ids must be below it); with it, or with
    ``relabel=False``, ids are used as dense ids. ``labels``: original label of each
    dense id. ``relabel=True`` compacts ids to 0..N-1 and keeps them as labels.
    ``self_loops=False`` drops u->u edges. ``dedup``: None keeps parallel edges, else
    weights of parallel edges are combined by "first", "min", "max" or "sum".
    ``directed=False`` stores each edge in both directions, with one weight: an edge
    listed both ways is combined by ``dedup`` (see :func:`symmetrize`).
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
    require_memory(num_vertices, len(src) * (1 if directed else 2), source, "building")
    if not self_loops:
        src, dst, weight = drop_self_loops(src, dst, weight)
    if not directed:
        src, dst, weight = symmetrize(src, dst, weight)
    return Graph(*compress(src, dst, weight, num_vertices, dedup), directed=directed,
                 labels=labels, name=name)


@numba.njit(cache=True, nogil=True, parallel=True)
def _loops_per_chunk(src, dst, bounds):
    """How many self-loops each chunk of ``bounds`` holds."""
    loops = np.zeros(bounds.shape[0] - 1, np.int64)
    for t in numba.prange(bounds.shape[0] - 1):
        for i in range(bounds[t], bounds[t + 1]):
            if src[i] == dst[i]:
                loops[t] += 1
    return loops


@numba.njit(cache=True, nogil=True, parallel=True)
def _copy_non_loops(src, dst, weight, bounds, starts, out_src, out_dst, out_w):
    """Copy each chunk's edges but its self-loops, in order, to its place ``starts``."""
    with_w = weight.shape[0] > 0
    for t in numba.prange(bounds.shape[0] - 1):
        to = starts[t]
        for i in range(bounds[t], bounds[t + 1]):
            if src[i] != dst[i]:
                out_src[to], out_dst[to] = src[i], dst[i]
                if with_w:
                    out_w[to] = weight[i]
                to += 1


def drop_self_loops(src, dst, weight):
    """(src, dst, weight) without the u -> u edges, in order (weight None when it is),
    in parallel over chunks of edges (4 a Numba thread)."""
    bounds = np.linspace(0, len(src), 4 * numba.get_num_threads() + 1).astype(np.int64)
    kept = np.diff(bounds) - _loops_per_chunk(src, dst, bounds)
    starts = np.concatenate([[0], np.cumsum(kept)])
    w = np.empty(0) if weight is None else weight
    out_src, out_dst = np.empty(starts[-1], src.dtype), np.empty(starts[-1], dst.dtype)
    out_w = np.empty(starts[-1] if len(w) else 0, w.dtype)
    _copy_non_loops(src, dst, w, bounds, starts, out_src, out_dst, out_w)
    return out_src, out_dst, None if weight is None else out_w


def symmetrize(src, dst, weight):
    """Both directions of every edge (a self-loop once). Each edge is first turned to
    (smaller id, larger id), so an edge listed both ways becomes parallel edges, whose
    weights the ``dedup`` rule combines alike in both directions (one weight per edge)."""
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    off = lo != hi
    weight = None if weight is None else np.concatenate([weight, weight[off]])
    return np.concatenate([lo, hi[off]]), np.concatenate([hi, lo[off]]), weight


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
