"""The parallel build passes give what the serial ones gave: the first bad edge that
build_graph's checks name, the weights rmat draws, and every array of the benchmarks'
kind of graph (digests taken from the serial code, with the same NumPy)."""

import contextlib
import functools
import hashlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.csr import (_as_float32, compress, first_outside, first_unfit, sort_by_key,
                          transpose)
from hetgraph.errors import GraphError
from hetgraph.io.build import build_graph, drop_self_loops
from hetgraph.io.generate import _uniform
from hetgraph.order import renumber
from hetgraph.threadcount import numba_threads
from conftest import examples

LIMIT = 2.0**128 - 2.0**103

DIGESTS = {  # sha256 of every array, from the build before its passes ran in parallel
    "rmat16w": "e32dbb5bbde12f81", "rmat16w_auto": "bfc603b74ca37d26",
    "rmat14_undir_sum": "8de9177a16d525cf", "rmat14_nodedup_loops": "42ea23a2aae72459",
    "grid": "f981362ae3adc95b", "grid_degree": "a2a1e25d2c7cefa0",
}
CASES = {
    "rmat16w": lambda: hg.generate.rmat(16, seed=7, weights=(1.0, 9.0)),
    "rmat16w_auto": lambda: hg.generate.rmat(16, seed=7, weights=(1.0, 9.0)).reorder("auto"),
    "rmat14_undir_sum": lambda: hg.generate.rmat(14, seed=3, directed=False, dedup="sum",
                                                 weights=(0.5, 2.0)),
    "rmat14_nodedup_loops": lambda: hg.generate.rmat(14, seed=2, dedup=None, self_loops=True),
    "grid": lambda: hg.generate.grid(200, 300, seed=5),
    "grid_degree": lambda: hg.generate.grid(200, 300, seed=5).reorder("degree"),
}


def digest(graph):
    h = hashlib.sha256()
    for a in (graph.in_indptr, graph.in_indices, graph.in_weights, graph.out_indptr,
              graph.out_indices, graph.labels):
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(str(a.dtype).encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def passes_forced(two):
    """The counting sorts on two threads, in two passes when ``two`` (else one)."""
    before = tuning.CURSOR_BYTES, tuning.TWO_PASS_WORK
    if two:
        tuning.CURSOR_BYTES, tuning.TWO_PASS_WORK = 8, 1
    try:
        with numba_threads(2):
            yield
    finally:
        tuning.CURSOR_BYTES, tuning.TWO_PASS_WORK = before


@pytest.fixture(params=["one pass", "two passes"])
def passes(request, monkeypatch):
    """The counting sorts in one pass, or in two as when the cursors of a chunk per
    thread over every key would not fit (on two threads; reorders parallel too)."""
    if request.param == "two passes":
        monkeypatch.setattr(tuning, "CURSOR_BYTES", 4096)
        monkeypatch.setattr(tuning, "TWO_PASS_WORK", 1)
        monkeypatch.setattr(tuning, "ORDER_SERIAL_ARCS", 0)
    with numba_threads(2):
        yield request.param


@pytest.mark.parametrize("case", sorted(CASES))
def test_graphs_are_those_of_the_serial_build(case, passes):
    assert digest(CASES[case]()) == DIGESTS[case]


@given(st.integers(1, 300), st.lists(st.integers(0, 10**6), max_size=200),
       st.booleans())
@examples(100)
def test_sort_by_key_is_a_stable_sort(n, raw, weighted):
    keys = np.array([k % n for k in raw], np.int32)
    vals = np.arange(len(keys), dtype=np.int64)
    wts = (vals * 0.5).astype(np.float32) if weighted else np.empty(0, np.float32)
    for two in (False, True):
        with passes_forced(two):
            ptr, got, got_w = sort_by_key(keys, n, vals, wts, np.int32)
        order = np.argsort(keys, kind="stable")
        assert got.dtype == np.int32 and np.array_equal(got, order)
        assert np.array_equal(got_w, wts[order] if weighted else wts)
        assert np.array_equal(ptr, np.searchsorted(keys[order], np.arange(n + 1)))


@given(st.integers(1, 60), st.lists(st.tuples(st.integers(0, 59), st.integers(0, 59),
                                              st.floats(-5, 5, width=32)), max_size=150),
       st.sampled_from(["first", "min", "max", "sum", None]))
@examples(100)
def test_compress_is_numpys_lexsort(n, edges, dedup):
    src = np.array([e[0] % n for e in edges], np.int64)
    dst = np.array([e[1] % n for e in edges], np.int64)
    w = np.array([e[2] for e in edges], np.float64)
    order = np.lexsort((src, dst))  # by target, then source, then edge: stable
    keep = np.ones(len(order), bool)
    keep[1:] = (np.diff(src[order]) != 0) | (np.diff(dst[order]) != 0)
    if dedup is None:
        keep[:] = True
    ws = w[order].astype(np.float32)
    groups = np.cumsum(keep) - 1
    combine = {"first": lambda g: g[0], "min": np.min, "max": np.max,  # sum: in order
               "sum": lambda g: functools.reduce(np.add, g)}.get(dedup, None)
    want_w = ws if combine is None else np.array(
        [combine(ws[groups == g]) for g in range(keep.sum())], np.float32)
    want_idx = src[order][keep]
    want_ptr = np.searchsorted(dst[order][keep], np.arange(n + 1))
    for two in (False, True):
        with passes_forced(two):
            in_ptr, in_idx, in_w, out_ptr, out_idx = compress(src, dst, w, n, dedup)
            t_ptr, t_idx, t_w = transpose(in_ptr, in_idx, in_w, n)
        assert np.array_equal(in_ptr, want_ptr) and np.array_equal(in_idx, want_idx)
        assert np.array_equal(in_w.view(np.int32), want_w.view(np.int32))
        pairs = sorted(zip(want_idx.tolist(), np.repeat(np.arange(n), np.diff(want_ptr))))
        assert np.array_equal(out_idx, [t for _, t in pairs]) and np.array_equal(t_idx, out_idx)
        assert np.array_equal(out_ptr, np.searchsorted([s for s, _ in pairs], np.arange(n + 1)))
        assert np.array_equal(t_ptr, out_ptr)


def _first(mask):
    return int(np.argmax(mask)) if mask.any() else None


ids = st.lists(st.integers(-3, 40), max_size=60)


@given(ids, st.one_of(st.none(), st.integers(-2, 45)),
       st.sampled_from(["int8", "int32", "int64", "uint16", "uint64"]))
@examples(150)
def test_first_outside_is_numpys_first(values, n, dtype):
    arr = np.array([v % 200 if dtype.startswith("u") else v for v in values], dtype)
    expect_above = None if n is None else _first(arr >= n)
    assert first_outside(arr, n) == (_first(arr < 0), expect_above)


weights = st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                             st.sampled_from([LIMIT, -LIMIT, np.nextafter(LIMIT, 0)])),
                   max_size=60)


@given(weights)
@examples(150)
def test_first_unfit_is_numpys_first(values):
    w = np.array(values, np.float64)
    assert first_unfit(w, LIMIT) == (_first(~np.isfinite(w)),
                                     _first(np.abs(w) >= LIMIT))


def test_check_errors_name_the_first_bad_edge():
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    w = np.array([1.0, 1e39, np.inf, 2.0])
    with pytest.raises(GraphError, match=r"x: edge 2 has weight inf; every weight must"):
        build_graph(src, dst, w, source="x")
    with pytest.raises(GraphError, match=r"x: edge 1 has weight 1e\+39, beyond float32"):
        build_graph(src, dst, w[:2].tolist() + [1.0, 1.0], source="x")
    with pytest.raises(GraphError, match=r"edge 3 has negative target id -4; ids must"):
        build_graph(src, np.array([1, 2, 3, -4]), num_vertices=9)
    with pytest.raises(GraphError, match=r"edge 2 has source id 7 but the graph declares 4"):
        build_graph(np.array([0, 1, 7, 9]), dst, num_vertices=4)
    with pytest.raises(GraphError, match=r"edge 1 has target id 5 but the graph declares 5"):
        build_graph(src, np.array([1, 5, 3, 0]), num_vertices=5)


@pytest.mark.parametrize("part", [1, 3, 1000, 1 << 22])
@pytest.mark.parametrize("size", [0, 1, 999, 4097])
def test_uniform_draws_the_serial_sequence(part, size, monkeypatch):
    monkeypatch.setattr(tuning, "DRAW_PART", part)
    ours, theirs = np.random.default_rng(size), np.random.default_rng(size)
    ours.permutation(37), theirs.permutation(37)  # a state part-way through its words
    got = _uniform(ours, 1.0, 9.0, size)
    assert np.array_equal(got.view(np.int64), theirs.uniform(1.0, 9.0, size).view(np.int64))


@given(st.lists(st.integers(-2, 12), min_size=1, max_size=12), st.booleans())
@examples(150)
def test_renumber_takes_only_permutations(values, shuffle):
    n = len(values)
    perm = np.random.default_rng(n).permutation(n) if shuffle else np.array(values)
    graph = hg.from_arrays(np.arange(n), (np.arange(n) + 1) % n, num_vertices=n)
    if np.array_equal(np.sort(perm), np.arange(n)):
        renamed = renumber(graph, perm)
        assert np.array_equal(renamed.labels, perm)
        assert np.array_equal(perm[renamed.out_indices], (perm + 1) % n)
    else:
        with pytest.raises(GraphError, match=f"permutation of 0..{n - 1}"):
            renumber(graph, perm)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5),
                          st.floats(allow_nan=False, width=64)), max_size=80),
       st.booleans(), st.sampled_from(["int32", "int64"]))
@examples(100)
def test_drop_self_loops_keeps_the_rest_in_order(edges, weighted, dtype):
    src = np.array([e[0] for e in edges], dtype)
    dst = np.array([e[1] for e in edges], dtype)
    w = np.array([e[2] for e in edges]) if weighted else None
    keep = src != dst
    got_src, got_dst, got_w = drop_self_loops(src, dst, w)
    assert got_src.dtype == src.dtype and np.array_equal(got_src, src[keep])
    assert np.array_equal(got_dst, dst[keep])
    assert got_w is None if w is None else np.array_equal(got_w, w[keep])


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), max_size=80))
@examples(150)
def test_float32_rounding_is_numpys(values):
    w = np.array(values, np.float64)
    w = w[np.abs(w) < LIMIT]
    got = np.empty(len(w), np.float32)
    _as_float32(w, got)
    assert np.array_equal(got.view(np.int32), w.astype(np.float32).view(np.int32))
