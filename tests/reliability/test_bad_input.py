"""Catalogue of malformed inputs: each raises a HetGraphError subclass that names the
file and (where there is one) the line, and leaves no page store behind."""

import bz2
import gzip
import os

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import hetgraph as hg

# (case id, file name, content, expected error class, regex the message must match)
TEXT_CASES = [
    ("non-numeric id", "g.txt", "1 2\n3 x\n", hg.InputFormatError, r"line 2.*'x'.*ids='str'"),
    ("non-numeric weight", "g.txt", "1 2 1.5\n3 4 abc\n", hg.InputFormatError, r"line 2.*'abc'"),
    ("one column", "g.txt", "# c\n1 2\n3\n", hg.InputFormatError, r"line 3.*fewer columns"),
    ("four columns", "g.txt", "1 2 3 4\n", hg.InputFormatError, r"line 1.*more columns"),
    ("negative id", "g.txt", "1 2\n-3 4\n", hg.InputFormatError, r"line 2.*'-3'.*negative"),
    ("overflowing id", "g.txt", "1 2\n99999999999999999999 4\n", hg.InputFormatError,
     r"line 2.*64-bit"),
    ("NaN weight", "g.txt", "1 2 0.5\n2 3 nan\n", hg.InputFormatError, r"line 2.*NaN"),
    ("inf weight", "g.txt", "1 2 0.5\n2 3 -inf\n", hg.InputFormatError, r"line 2.*infinite"),
    ("weight beyond float32", "g.txt", "1 2 1e39\n", hg.InputFormatError, r"line 1.*float32"),
    ("weight on some lines only", "g.txt", "1 2 0.5\n2 3\n", hg.InputFormatError,
     r"line 2.*on every line or on none"),
    ("float id", "g.txt", "1.5 2\n", hg.InputFormatError, r"line 1.*'1.5'"),
    ("empty file", "g.txt", "", hg.InputFormatError, r"no edges"),
    ("only comments", "g.txt", "# a\n% b\n\n", hg.InputFormatError, r"no edges"),
    ("weighted=True without weights", "w.txt", "1 2\n", hg.InputFormatError,
     r"line 1.*3 columns.*weighted=True"),
    ("mtx bad banner", "a.mtx", "%%MatrixMarket tensor\n1 1 1\n1 1\n", hg.InputFormatError,
     r"line 1.*banner"),
    ("mtx dense array", "a.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
     hg.InputFormatError, r"dense"),
    ("mtx complex field", "a.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n",
     hg.InputFormatError, r"complex"),
    ("mtx fewer entries than declared", "a.mtx",
     "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 2 1\n2 3 1\n", hg.InputFormatError,
     r"declares 3 entries but the file has 2"),
    ("mtx more entries than declared", "a.mtx",
     "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 1\n2 3 1\n", hg.InputFormatError,
     r"declares 1 entries but the file has 2"),
    ("mtx index beyond size", "a.mtx",
     "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 4\n", hg.InputFormatError,
     r"vertex 4, outside the declared 1..3"),
    ("mtx zero index", "a.mtx",
     "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n0 2\n", hg.InputFormatError,
     r"vertex 0, outside"),
    ("mtx non-square", "a.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 2\n",
     hg.InputFormatError, r"3 x 4"),
    ("mtx bad size line", "a.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 x\n",
     hg.InputFormatError, r"line 2.*header"),
    ("dimacs arc count mismatch", "r.gr", "p sp 3 3\na 1 2 1\na 2 3 1\n", hg.InputFormatError,
     r"declares 3 arcs but the file has 2"),
    ("dimacs id beyond vertex count", "r.gr", "p sp 3 2\na 1 2 1\na 2 9 1\n",
     hg.InputFormatError, r"vertex 9, outside the declared 1..3"),
    ("dimacs missing problem line", "r.gr", "c x\na 1 2 1\n", hg.InputFormatError,
     r"problem line"),
    ("dimacs wrong line tag", "r.gr", "p sp 3 2\na 1 2 1\ne 2 3 1\n", hg.InputFormatError,
     r"line 3.*tag 'a'"),
    ("dimacs missing weight", "r.gr", "p sp 3 1\na 1 2\n", hg.InputFormatError, r"line 2"),
    ("metis vertex count mismatch", "m.graph", "3 1\n2\n1\n", hg.InputFormatError,
     r"declares 3 vertices but the file has 2"),
    ("metis edge count mismatch", "m.graph", "3 2\n2\n1\n\n", hg.InputFormatError,
     r"declares 2 edges"),
    ("metis neighbour out of range", "m.graph", "2 1\n5\n1\n", hg.InputFormatError,
     r"vertex 5, outside"),
    ("metis unsupported fmt", "m.graph", "2 1 7\n2\n1\n", hg.InputFormatError, r"fmt"),
    ("unsupported extension", "g.xyz", "1 2\n", hg.UnsupportedFormatError, r"\.xyz.*format="),
]


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_bad_text_input(tmp_path, case):
    _, name, content, error, pattern = case
    path = tmp_path / name
    path.write_text(content)
    options = {"weighted": True} if name == "w.txt" else {}
    store = tmp_path / "store"
    with pytest.raises(error, match=pattern) as info:
        hg.convert(path, store, **options)
    assert isinstance(info.value, hg.HetGraphError)
    if error is hg.InputFormatError:
        assert str(path) in str(info.value)
    assert os.listdir(tmp_path) == [name]  # nothing half-written


def test_truncated_gzip(tmp_path):
    path = tmp_path / "g.txt.gz"
    data = gzip.compress(b"".join(b"%d %d\n" % (i, i + 1) for i in range(20000)))
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(hg.InputFormatError, match=r"g.txt.gz.*truncated or corrupt"):
        hg.convert(path, tmp_path / "store")
    assert sorted(os.listdir(tmp_path)) == ["g.txt.gz"]


def test_truncated_bz2(tmp_path):
    path = tmp_path / "g.txt.bz2"
    data = bz2.compress(b"".join(b"%d %d\n" % (i, i + 1) for i in range(20000)))
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(hg.InputFormatError, match=r"truncated or corrupt"):
        hg.read(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(hg.InputFormatError, match=r"nope.txt: file not found"):
        hg.read(tmp_path / "nope.txt")
    with pytest.raises(hg.InputFormatError, match=r"is a directory"):
        hg.read(tmp_path, format="snap")
    # a missing file without a known extension: "not found", not "cannot tell the format"
    with pytest.raises(hg.InputFormatError, match=r"nope: file not found"):
        hg.read(tmp_path / "nope")
    with pytest.raises(hg.InputFormatError, match=r"is a directory"):
        hg.read(tmp_path)
    (tmp_path / "g.unknown").write_text("1 2\n")  # an existing file: its extension judged
    with pytest.raises(hg.UnsupportedFormatError, match=r"cannot tell the format"):
        hg.read(tmp_path / "g.unknown")


def test_unknown_format_name(tmp_path):
    (tmp_path / "g.txt").write_text("1 2\n")
    with pytest.raises(hg.UnsupportedFormatError, match=r"'graphml' is not supported"):
        hg.read(tmp_path / "g.txt", format="graphml")


def test_bad_options():
    with pytest.raises(hg.GraphError, match=r"dedup='avg'"):
        hg.from_arrays([0], [1], dedup="avg")


def test_npz_without_edge_arrays(tmp_path):
    np.savez(tmp_path / "e.npz", a=np.arange(3))
    with pytest.raises(hg.InputFormatError, match=r"e.npz.*no edge arrays"):
        hg.read(tmp_path / "e.npz")


def test_npy_wrong_shape(tmp_path):
    np.save(tmp_path / "e.npy", np.arange(12).reshape(3, 4))
    with pytest.raises(hg.InputFormatError, match=r"shape \(3, 4\)"):
        hg.read(tmp_path / "e.npy")


def test_npz_ids_beyond_declared_count(tmp_path):
    np.savez(tmp_path / "e.npz", src=np.array([0, 1]), dst=np.array([1, 7]), num_vertices=5)
    with pytest.raises(hg.GraphError, match=r"edge 1 has target id 7.*declares 5 vertices"):
        hg.read(tmp_path / "e.npz")


def test_pandas_missing_column_and_na():
    df = pd.DataFrame({"s": [1, 2], "t": [2, None]})
    with pytest.raises(hg.InputFormatError, match=r"no column 'dst'"):
        hg.from_pandas(df, source="s")
    with pytest.raises(hg.InputFormatError, match=r"column 't' is missing in record 1"):
        hg.from_pandas(df, source="s", target="t")


def test_array_weights_not_finite():
    with pytest.raises(hg.GraphError, match=r"edge 1 has weight nan"):
        hg.from_arrays([0, 1], [1, 2], [1.0, np.nan])


def test_negative_array_ids():
    with pytest.raises(hg.GraphError, match=r"negative source id -1"):
        hg.from_arrays(np.array([0, -1]), np.array([1, 2]))


def test_scipy_not_square():
    with pytest.raises(hg.GraphError, match=r"3 x 4"):
        hg.from_scipy(sp.csr_matrix((3, 4)))


def test_parquet_null_ids(tmp_path):
    pd.DataFrame({"s": [1, None, 3], "t": [2, 3, 4]}).astype("Int64").to_parquet(tmp_path / "e.parquet")
    with pytest.raises(hg.InputFormatError, match=r"e.parquet.*'s' is empty in record 2"):
        hg.read(tmp_path / "e.parquet")


def test_parquet_corrupt(tmp_path):
    (tmp_path / "e.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(hg.InputFormatError, match=r"e.parquet.*cannot read the parquet"):
        hg.read(tmp_path / "e.parquet")
