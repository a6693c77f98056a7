"""Compressed sparse arrays (CSC and CSR): the parallel Numba kernels that build, sort,
de-duplicate, transpose and symmetrize them.

Everything here takes and returns arrays, never a graph: :mod:`hetgraph.graph` (its
out-edge weights, its undirected version) and the builders of :mod:`hetgraph.io` both
use it, so it sits below both.
"""

from __future__ import annotations

import numba
import numpy as np

from . import tuning

DEDUP_RULES = ("first", "min", "max", "sum")
_RULE_CODES = {"first": 0, "min": 1, "max": 2, "sum": 3}


@numba.njit(cache=True, nogil=True, parallel=True)
def _counts_to_cursors(cursor, ptr):
    """Turn per-chunk key counts into ``ptr`` (each key's first position: the counts'
    column sums, scanned) and each chunk's first write position per key."""
    keys = cursor.shape[1]
    for k in numba.prange(keys):
        total = 0
        for t in range(cursor.shape[0]):
            total += cursor[t, k]
        ptr[k + 1] = total
    ptr[0] = 0
    for k in range(keys):
        ptr[k + 1] += ptr[k]
    for k in numba.prange(keys):
        acc = ptr[k]
        for t in range(cursor.shape[0]):
            c = cursor[t, k]
            cursor[t, k] = acc
            acc += c


@numba.njit(cache=True, nogil=True, parallel=True)
def _scatter_by_digit(keys, shift, mask, vals, wts, ptr, out_keys, out_vals, out_wts,
                      bounds):
    """Stable counting-sort scatter of ``vals`` (and ``keys``, ``wts`` where their
    outputs are non-empty) by the digit (key >> shift) & mask, one of len(ptr) - 1;
    fills ``ptr`` with each digit's first position. Items are cut into chunks at
    ``bounds``; each chunk counts, gets its own cursors, then scatters in parallel
    (order within a digit is kept)."""
    chunks = bounds.shape[0] - 1
    cursor = np.zeros((chunks, ptr.shape[0] - 1), np.int64)
    for t in numba.prange(chunks):
        for i in range(bounds[t], bounds[t + 1]):
            cursor[t, (keys[i] >> shift) & mask] += 1
    _counts_to_cursors(cursor, ptr)
    with_k, with_w = out_keys.shape[0] > 0, out_wts.shape[0] > 0
    for t in numba.prange(chunks):
        for i in range(bounds[t], bounds[t + 1]):
            d = (keys[i] >> shift) & mask
            p = cursor[t, d]
            out_vals[p] = vals[i]
            if with_k:
                out_keys[p] = keys[i]
            if with_w:
                out_wts[p] = wts[i]
            cursor[t, d] = p + 1


@numba.njit(cache=True, nogil=True, parallel=True)
def _pointer_of_sorted(keys, ptr):
    """Fill ``ptr`` (n + 1 entries) with each key's first position in the sorted
    ``keys`` (all in [0, n)): position i starts the keys above keys[i - 1] up to keys[i]."""
    m, n = keys.shape[0], ptr.shape[0] - 1
    for i in numba.prange(m + 1):
        lo = keys[i - 1] + 1 if i > 0 else 0
        hi = keys[i] if i < m else n
        for k in range(lo, hi + 1):
            ptr[k] = i


@numba.njit(cache=True, nogil=True, parallel=True)
def _column_ids(ptr, ids, bounds):
    """ids[e] = the segment of ``ptr`` that item e is in, over the segment runs ``bounds``."""
    for chunk in numba.prange(bounds.shape[0] - 1):
        for v in range(bounds[chunk], bounds[chunk + 1]):
            ids[ptr[v]:ptr[v + 1]] = v


def _digit_pass(keys, shift, mask, digits, vals, wts, with_keys, val_dtype):
    """(the digits' pointer, keys or an empty array, vals as ``val_dtype``, wts) stably
    scattered by the digit (key >> shift) & mask, one of ``digits``."""
    out_keys = np.empty(len(keys) if with_keys else 0, keys.dtype)
    out_vals, out_wts = np.empty(len(vals), val_dtype), np.empty_like(wts)
    ptr = np.empty(digits + 1, np.int64)
    _scatter_by_digit(keys, shift, mask, vals, wts, ptr, out_keys, out_vals, out_wts,
                      np.linspace(0, len(keys), _chunk_count(digits) + 1).astype(np.int64))
    return ptr, out_keys, out_vals, out_wts


def sort_by_key(keys, n, vals, wts, val_dtype):
    """(ptr, vals as ``val_dtype``, wts) of ``vals`` (and ``wts`` unless empty) stably
    sorted by ``keys`` (each in [0, n)), ptr each key's first position. One counting-sort
    pass over the whole key while ``tuning.CURSOR_BYTES`` holds the cursors of enough
    chunks (:func:`_one_pass`); else two, each over half of the key's bits with a chunk
    per thread (the low half first: the second pass, stable, keeps its order)."""
    if _one_pass(n):
        ptr, _, out_vals, out_wts = _digit_pass(keys, 0, -1, n, vals, wts, False, val_dtype)
        return ptr, out_vals, out_wts
    low = max(1, int(n - 1).bit_length() // 2)
    for shift, mask, digits in ((0, (1 << low) - 1, 1 << low),
                                (low, -1, ((n - 1) >> low) + 1)):
        _, keys, vals, wts = _digit_pass(keys, shift, mask, digits, vals, wts, True,
                                         val_dtype)
    ptr = np.empty(n + 1, np.int64)
    _pointer_of_sorted(keys, ptr)
    return ptr, vals, wts


def segment_chunks(ptr, chunks):
    """Bounds of ``chunks`` runs of consecutive segments of ``ptr`` holding about equal
    numbers of items (a loop over vertices cut by count would give the first thread all
    the hubs of a degree-ordered graph)."""
    n = len(ptr) - 1
    bounds = np.searchsorted(ptr, np.linspace(0, ptr[-1], chunks + 1)).astype(np.int64)
    bounds[0], bounds[-1] = 0, n
    return np.maximum.accumulate(bounds)


def thread_runs(ptr):
    """:func:`segment_chunks` for the segment loops: ``tuning.SEGMENT_CHUNKS`` a thread."""
    return segment_chunks(ptr, tuning.SEGMENT_CHUNKS * numba.get_num_threads())


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
    """Fill the CSR (out-edges, and their weights unless ``in_w`` is empty, and out_ptr)
    from the CSC; targets come out sorted per row. Columns are cut into chunks at ``col_bounds`` that
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


def symmetric_union(in_ptr, in_idx, in_w, out_ptr, out_idx, out_w):
    """(ptr, idx, w) of the undirected graph with an edge u-v wherever the CSC (in_ptr,
    in_idx, in_w) and its CSR (out_ptr, out_idx, out_w) have u->v or v->u, the least
    weight of those arcs on it (w None when in_w is): each vertex's neighbours merged
    from its sorted in- and out-edges, in parallel over runs of vertices holding equal
    numbers of arcs, with no sort (what build_graph(..., directed=False, dedup="min")
    gives from the arcs, in less time). The result is its own CSC and CSR."""
    in_ptr = in_ptr.astype(np.int64, copy=False)
    out_ptr = out_ptr.astype(np.int64, copy=False)
    bounds = thread_runs(in_ptr + out_ptr)
    none = np.empty(0, np.float32)
    weighted = in_w is not None
    new_ptr = np.zeros(len(in_ptr), np.int64)
    np.cumsum(_union_counts(in_ptr, in_idx, out_ptr, out_idx, bounds), out=new_ptr[1:])
    new_idx = np.empty(new_ptr[-1], in_idx.dtype)
    new_w = np.empty(new_ptr[-1] if weighted else 0, np.float32)
    _union_fill(in_ptr, in_idx, in_w if weighted else none, out_ptr, out_idx,
                out_w if weighted else none, new_ptr, new_idx, new_w, bounds)
    return new_ptr, new_idx, new_w if weighted else None


def transpose(in_ptr, in_idx, in_w, n):
    """(out_ptr, out_idx, out_w): the CSR of the CSC (in_ptr, in_idx, in_w) over ``n``
    vertices, targets sorted per source; out_w is None when in_w is. Columns scatter
    from where they are while one pass does (see :func:`sort_by_key`), else each
    edge's column is written out and sorted by source."""
    w = np.empty(0, np.float32) if in_w is None else in_w
    if _one_pass(n):
        out_ptr, out_idx, out_w = np.empty(n + 1, np.int64), np.empty_like(in_idx), \
            np.empty_like(w)
        _transpose(in_ptr, in_idx, w, out_ptr, out_idx, out_w,
                   segment_chunks(in_ptr, _chunk_count(n)))
    else:
        columns = np.empty_like(in_idx)
        _column_ids(in_ptr, columns, thread_runs(in_ptr))
        out_ptr, out_idx, out_w = sort_by_key(in_idx, n, columns, w, in_idx.dtype)
    return out_ptr, out_idx, None if in_w is None else out_w


def _one_pass(n):
    """Whether a counting sort over ``n`` keys runs in one pass: unless the chunks its
    cursors allow, times ``tuning.TWO_PASS_WORK``, are fewer than the threads (two
    passes, each item moved twice, keys too, run a chunk per thread)."""
    return _chunk_count(n) * tuning.TWO_PASS_WORK >= numba.get_num_threads()


def _chunk_count(n):
    """How many parallel chunks a scatter over n keys uses (cursors are chunks * n int64)."""
    return int(max(1, min(numba.get_num_threads(), tuning.CURSOR_BYTES // (8 * max(n, 1)))))


def index_dtype(num_vertices):
    """int32 while the vertex count is below 2**31, int64 beyond."""
    return np.dtype(np.int32) if num_vertices < 2**31 else np.dtype(np.int64)


@numba.njit(cache=True, nogil=True, parallel=True)
def _as_float32(values, out):
    """out[:] = values rounded to float32 as NumPy's astype does, in parallel."""
    for i in numba.prange(values.shape[0]):
        out[i] = values[i]


def compress(src, dst, weight, n, dedup):
    """(in_ptr, in_idx, in_w, out_ptr, out_idx): the CSC of the edges ``src`` -> ``dst``
    over ``n`` vertices (sources sorted per destination; parallel edges merged by rule
    ``dedup``, "first", "min", "max" or "sum", or kept when None; in_w float32, None
    when ``weight`` is) and its CSR (targets sorted per source), by parallel counting
    sorts: O(|V| + |E|), no comparison sort over all edges."""
    idx_t = index_dtype(n)
    w_in = np.empty(0 if weight is None else len(weight), np.float32)
    if weight is not None:
        _as_float32(weight, w_in)
    in_ptr, in_idx, w = sort_by_key(dst, n, src, w_in, idx_t)
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
    return in_ptr, in_idx, None if weight is None else w, out_ptr, out_idx


@numba.njit(cache=True, nogil=True)
def count_decreases(ptr):
    """Entries of ``ptr`` below the one before them (0 when monotone): one pass that
    the compiler vectorises (a parallel loop's start costs more on a page)."""
    count = 0
    for i in range(1, ptr.shape[0]):
        if ptr[i] < ptr[i - 1]:
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def count_outside(ids, n):
    """Ids outside [0, n): one vectorised pass."""
    count = 0
    for i in range(ids.shape[0]):
        if ids[i] < 0 or ids[i] >= n:
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def count_nonfinite(values):
    """NaN or infinite values: one vectorised pass."""
    count = 0
    for i in range(values.shape[0]):
        if not np.isfinite(values[i]):
            count += 1
    return count


@numba.njit(cache=True, nogil=True, parallel=True)
def _first_two(values, weights, bound, check_bound, bounds):
    """(first i failing test a, first i failing test b; len(values) where none), each
    chunk of ``bounds`` scanning in parallel from its start until it has found both.
    Ids (not ``weights``): a is values[i] >= 0, b is values[i] < bound (when
    ``check_bound``). Weights: a is isfinite(values[i]), b is |values[i]| < bound."""
    n = values.shape[0]
    first_a = np.full(bounds.shape[0] - 1, n, np.int64)
    first_b = np.full(bounds.shape[0] - 1, n, np.int64)
    for t in numba.prange(bounds.shape[0] - 1):
        for i in range(bounds[t], bounds[t + 1]):
            v = values[i]
            fails_a = not np.isfinite(v) if weights else v < 0
            fails_b = check_bound and (abs(v) >= bound if weights else v >= bound)
            if fails_a and first_a[t] == n:
                first_a[t] = i
            if fails_b and first_b[t] == n:
                first_b[t] = i
            if first_a[t] < n and (first_b[t] < n or not check_bound):
                break
    return first_a.min(), first_b.min()


def _first_failures(values, weights, bound, check_bound):
    """:func:`_first_two` over chunks of ``values`` (4 a Numba thread), None for none."""
    values = np.asarray(values)
    if len(values) == 0:
        return None, None
    bounds = np.linspace(0, len(values), 4 * numba.get_num_threads() + 1).astype(np.int64)
    found = _first_two(values, weights, values.dtype.type(bound), check_bound, bounds)
    return tuple(None if i == len(values) else int(i) for i in found)


def first_outside(ids, n):
    """(index of the first id below 0, index of the first id at least ``n``: None where
    there is none, and for the second when ``n`` is None), in one parallel pass."""
    ids = np.asarray(ids)
    check = n is not None and n <= np.iinfo(ids.dtype).max  # else no id reaches n
    return _first_failures(ids, False, max(n, np.iinfo(ids.dtype).min) if check else 0,
                           check)


def first_unfit(weights, limit):
    """(index of the first non-finite weight, index of the first with magnitude at least
    ``limit``, infinities included; None where there is none), in one parallel pass over
    float ``weights``."""
    return _first_failures(weights, True, limit, True)


def pointer_error(ptr, num_items):
    """What is wrong with the pointer array ``ptr`` of a compressed array of
    ``num_items`` items (it must start at 0, never decrease and end at ``num_items``),
    None when nothing is."""
    ptr = np.asarray(ptr)
    if len(ptr) == 0 or ptr[0] != 0 or ptr[-1] != num_items:
        ends = (ptr[0], ptr[-1]) if len(ptr) else ("nothing", "nothing")
        return f"starts at {ends[0]} and ends at {ends[1]}, not 0 and {num_items}"
    if count_decreases(ptr) == 0:
        return None
    i = int(np.argmax(ptr[1:] < ptr[:-1])) + 1  # the error path only: allocates
    return f"decreases at entry {i} ({ptr[i - 1]} then {ptr[i]})"


def ids_error(ids, n):
    """What is wrong with the vertex ids ``ids`` (each must be in [0, n)), None when
    nothing is."""
    ids = np.asarray(ids)
    if len(ids) == 0 or count_outside(ids, n) == 0:
        return None
    i = int(np.argmax((ids < 0) | (ids >= n)))
    return f"entry {i} is vertex {ids[i]}, outside [0, {n})"


def weights_error(weights):
    """What is wrong with ``weights`` (each must be finite), None when nothing is."""
    weights = np.asarray(weights)
    if len(weights) == 0 or count_nonfinite(weights) == 0:
        return None
    i = int(np.argmax(~np.isfinite(weights)))
    return f"entry {i} is {weights[i]}, not finite"
