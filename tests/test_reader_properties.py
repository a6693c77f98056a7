"""Property tests (hypothesis) for the readers: any edge list written in any supported
format reads back to the same graph; arbitrary bytes give a graph or a HetGraphError."""

import gzip

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import hetgraph as hg
from conftest import edge_set, examples

SETTINGS = examples(40,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

edges = st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40),
                           st.floats(-1e6, 1e6, allow_nan=False, width=32)),
                 min_size=1, max_size=60)


def _expected(rows, weighted, one_based=False):
    src = np.array([r[0] for r in rows], np.int64)
    dst = np.array([r[1] for r in rows], np.int64)
    w = np.array([r[2] for r in rows], np.float64) if weighted else None
    return edge_set(hg.from_arrays(src, dst, w, relabel=True))


@SETTINGS
@given(rows=edges, weighted=st.booleans(), sep=st.sampled_from([" ", "\t", ",", " \t ", ", "]),
       newline=st.sampled_from(["\n", "\r\n"]), comments=st.lists(st.sampled_from(
           ["# c", "% c", "", "   "]), max_size=3), compress=st.booleans())
def test_edgelist_round_trip(tmp_path_factory, rows, weighted, sep, newline, comments, compress):
    lines = list(comments)
    for u, v, w in rows:
        cols = [str(u), str(v)] + ([repr(float(w))] if weighted else [])
        lines.append(sep.join(cols))
        if comments:
            lines.append(comments[0])
    text = newline.join(lines) + newline
    path = tmp_path_factory.mktemp("el") / ("g.txt.gz" if compress else "g.txt")
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    g = hg.read(path)
    assert g.weighted == weighted
    assert edge_set(g) == _expected(rows, weighted)


@SETTINGS
@given(rows=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50),
                               st.integers(1, 1000)), min_size=1, max_size=80))
def test_mtx_and_dimacs_round_trip(tmp_path_factory, rows):
    d = tmp_path_factory.mktemp("fmt")
    body = "".join(f"{u} {v} {w}\n" for u, v, w in rows)
    (d / "a.mtx").write_text(f"%%MatrixMarket matrix coordinate integer general\n% x\n"
                             f"50 50 {len(rows)}\n" + body)
    (d / "a.gr").write_text(f"c x\np sp 50 {len(rows)}\n" + "".join(f"a {r}" for r in
                            body.splitlines(keepends=True)))
    src = np.array([r[0] for r in rows]) - 1
    dst = np.array([r[1] for r in rows]) - 1
    w = np.array([r[2] for r in rows], np.float64)
    for name, rule in (("a.mtx", "first"), ("a.gr", "min")):
        g = hg.read(d / name)
        ref = hg.from_arrays(src, dst, w, num_vertices=50, labels=np.arange(1, 51), dedup=rule)
        assert g.num_vertices == 50
        assert edge_set(g) == edge_set(ref)


@SETTINGS
@given(rows=edges, weighted=st.booleans(), fmt=st.sampled_from(["npz", "parquet", "csv"]))
def test_table_formats_round_trip(tmp_path_factory, rows, weighted, fmt):
    d = tmp_path_factory.mktemp("tab")
    df = pd.DataFrame({"src": [r[0] for r in rows], "dst": [r[1] for r in rows],
                       "w": np.array([r[2] for r in rows], np.float32)})
    if fmt == "npz":
        arrays = {"src": df["src"].to_numpy(), "dst": df["dst"].to_numpy()}
        if weighted:
            arrays["weight"] = df["w"].to_numpy()
        np.savez(d / "e.npz", **arrays)
        g = hg.read(d / "e.npz", relabel=True)
    else:
        getattr(df, "to_parquet" if fmt == "parquet" else "to_csv")(d / f"e.{fmt}", index=False)
        g = hg.read(d / f"e.{fmt}", weight="w" if weighted else None)
    assert edge_set(g) == _expected(rows, weighted)


@examples(150,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), ext=st.sampled_from(["txt", "mtx", "gr", "graph"]))
def test_arbitrary_bytes_never_crash(tmp_path_factory, data, ext):
    path = tmp_path_factory.mktemp("fuzz") / f"x.{ext}"
    path.write_bytes(data)
    try:
        g = hg.read(path)
    except hg.HetGraphError:
        return
    assert g.num_vertices >= 1
    assert len(g.in_indptr) == g.num_vertices + 1 and g.in_indptr[-1] == g.num_arcs


@examples(100,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.text(alphabet="0123456789 \t,.-+eE#%naif\n", max_size=20),
                      min_size=1, max_size=20))
def test_numeric_looking_noise_never_crashes(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("noise") / "x.txt"
    path.write_text("\n".join(lines))
    try:
        hg.read(path)
    except hg.HetGraphError as exc:
        assert "x.txt" in str(exc)


@examples(60)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=60), st.integers(1, 40),
       st.integers(0, 2**31), st.booleans())
def test_segment_runs_hold_equal_shares_and_sort_as_one_loop(sizes, chunks, seed, weighted):
    """The parallel segment loops of graph building (sort, de-duplicate) run over
    runs of consecutive segments of about equal item counts, so that a degree-ordered
    graph's hubs are not all one thread's; the sort gives what a stable sort of each
    segment gives, whatever the runs."""
    from hetgraph.csr import _sort_segments, segment_chunks

    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n, total = len(sizes), int(ptr[-1])
    bounds = segment_chunks(ptr, chunks)
    assert len(bounds) == chunks + 1 and bounds[0] == 0 and bounds[-1] == n
    assert np.all(np.diff(bounds) >= 0)
    items = ptr[bounds[1:]] - ptr[bounds[:-1]]
    assert items.max() <= -(-total // chunks) + max(sizes)  # a share, and one segment more
    rng = np.random.default_rng(seed)
    vals = rng.integers(0, 20, total).astype(np.int32)
    wts = rng.random(total).astype(np.float32) if weighted else np.empty(0, np.float32)
    want_vals, want_wts, want_counts = vals.copy(), wts.copy(), []
    for a, b in zip(ptr[:-1], ptr[1:]):
        order = np.argsort(vals[a:b], kind="stable")
        want_vals[a:b] = vals[a:b][order]
        if weighted:
            want_wts[a:b] = wts[a:b][order]
        want_counts.append(len(np.unique(vals[a:b])))
    counts = _sort_segments(ptr, vals, wts, True, bounds)
    assert np.array_equal(vals, want_vals) and np.array_equal(wts, want_wts)
    assert counts.tolist() == want_counts


@examples(80)
@given(st.integers(1, 30), st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29),
                                              st.integers(1, 9)), max_size=150),
       st.booleans(), st.booleans())
def test_to_undirected_equals_building_from_both_directions(n, arcs, weighted, parallel):
    """A directed graph's undirected one (merged from its CSC and CSR) equals the graph
    built from its arcs both ways with the least weight per edge: parallel arcs, self
    loops and vertices without edges included."""
    from hetgraph.io.build import build_graph

    arcs = [(u % n, v % n, w) for u, v, w in arcs]
    src = np.array([a[0] for a in arcs], np.int64)
    dst = np.array([a[1] for a in arcs], np.int64)
    weight = np.array([a[2] for a in arcs], np.float64) if weighted else None
    g = hg.from_arrays(src, dst, weight=weight, num_vertices=n,
                       dedup=None if parallel else "first")
    got = g.to_undirected()
    s, d, w = g.edges()
    want = build_graph(s, d, w, directed=False, num_vertices=n, labels=g.labels,
                       dedup="min")
    assert not got.directed and got.weighted == g.weighted
    for name in ("in_indptr", "in_indices", "in_weights", "out_indptr", "out_indices"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None) and (a is None or np.array_equal(a, b)), name
    assert np.array_equal(got.labels, want.labels)
