"""Readers against NetworkX/SciPy oracles on real and generated graphs, every format."""

import bz2
import gzip

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

import hetgraph as hg
from conftest import REAL_GRAPHS, assert_csr_matches_csc, data_path, edge_set


@pytest.mark.parametrize("name", sorted(REAL_GRAPHS))
def test_real_graphs_have_documented_sizes(name):
    options, n, m, directed = REAL_GRAPHS[name]
    g = hg.read(data_path(name), **options)
    assert g.num_vertices == n
    assert g.num_edges == m
    assert g.directed == directed
    assert g.num_arcs == (m if directed else 2 * m - g.num_self_loops)
    assert_csr_matches_csc(g)


def test_wiki_vote_equals_networkx():
    path = data_path("wiki-Vote.txt")
    g = hg.read(path)
    G = nx.read_edgelist(path, create_using=nx.DiGraph, nodetype=int)
    assert edge_set(g) == {(u, v, None) for u, v in G.edges()}
    assert sorted(g.labels.tolist()) == sorted(G.nodes())
    deg = dict(G.in_degree())
    assert all(g.in_degree()[i] == deg[lab] for i, lab in enumerate(g.labels))


def test_power_metis_equals_networkx():
    g = hg.read(data_path("power.graph"))
    G = nx.Graph()
    with open(data_path("power.graph")) as f:
        f.readline()
        for u, line in enumerate(f, start=1):
            G.add_node(u)
            G.add_edges_from((u, int(v)) for v in line.split())
    arcs = {(u, v) for u, v in G.edges()} | {(v, u) for u, v in G.edges()}
    assert {(u, v) for u, v, _ in edge_set(g)} == arcs
    assert g.labels[0] == 1 and g.labels[-1] == 4941


def _random_edges(seed, n=300, m=2000, weighted=True):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    w = np.round(rng.uniform(0.5, 10, m), 3) if weighted else None
    return src, dst, w


def _write_text(path, src, dst, w, sep="\t", header="# a comment\n% another\n"):
    lines = [header]
    for i in range(len(src)):
        cols = [str(src[i]), str(dst[i])] + ([repr(float(w[i]))] if w is not None else [])
        lines.append(sep.join(cols) + "\n")
    text = "".join(lines)
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    elif str(path).endswith(".bz2"):
        with bz2.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


@pytest.mark.parametrize("suffix,sep", [(".txt", "\t"), (".txt.gz", " "), (".tsv.bz2", "\t"),
                                        (".el", ", "), (".edges", "  \t ")])
def test_edgelist_formats_match_arrays(tmp_path, suffix, sep):
    src, dst, w = _random_edges(1)
    path = tmp_path / f"g{suffix}"
    _write_text(path, src, dst, w, sep=sep)
    g = hg.read(path)
    ref = hg.from_arrays(src, dst, w, relabel=True)
    assert g.weighted
    assert edge_set(g) == edge_set(ref)


def test_edgelist_small_blocks_keep_line_numbers(tmp_path, monkeypatch):
    from hetgraph import tuning

    src, dst, w = _random_edges(2, m=500)
    path = tmp_path / "g.txt"
    _write_text(path, src, dst, w)
    monkeypatch.setattr(tuning, "BLOCK_BYTES", 64)
    g = hg.read(path)
    assert edge_set(g) == edge_set(hg.from_arrays(src, dst, w, relabel=True))
    with open(path, "a") as f:
        f.write("1 2 x\n")
    with pytest.raises(hg.InputFormatError, match=r"line 503"):
        hg.read(path)


def test_dedup_rules_and_self_loops(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("1 2 5\n1 2 3\n1 2 4\n2 2 1\n3 1 2\n")
    def weights(**kw):
        g = hg.read(path, **kw)
        return {(u, v): w for u, v, w in edge_set(g)}
    assert weights()[(1, 2)] == 5
    assert weights(dedup="min")[(1, 2)] == 3
    assert weights(dedup="max")[(1, 2)] == 5
    assert weights(dedup="sum")[(1, 2)] == 12
    assert hg.read(path, dedup=None).num_arcs == 5
    assert (2, 2) not in weights(self_loops=False)
    assert hg.read(path, weighted=False).weighted is False


def test_undirected_symmetrizes_once(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("1 2\n2 1\n2 3\n4 4\n")
    g = hg.read(path, directed=False)
    assert {(u, v) for u, v, _ in edge_set(g)} == {(1, 2), (2, 1), (2, 3), (3, 2), (4, 4)}
    assert g.num_edges == 3 and g.num_arcs == 5
    G = nx.read_edgelist(path, nodetype=int)
    assert g.num_edges == G.number_of_edges()


def test_string_ids(tmp_path):
    path = tmp_path / "names.txt"
    path.write_text("# people\nalice\tbob\t1.5\nbob\tcarol\t2\ncarol\talice\t0.25\n")
    g = hg.read(path, ids="str")
    assert g.num_vertices == 3
    assert edge_set(g) == {("alice", "bob", 1.5), ("bob", "carol", 2.0), ("carol", "alice", 0.25)}
    assert g.id_of("carol") == list(g.labels).index("carol")


def test_relabel_keeps_large_ids(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("9000000000000000000 5\n5 77\n")
    g = hg.read(path)
    assert g.num_vertices == 3
    assert set(g.labels.tolist()) == {9000000000000000000, 5, 77}
    assert g.id_of(77) == list(g.labels).index(77)
    assert list(g.id_of([5, 77])) == [list(g.labels).index(5), list(g.labels).index(77)]


def test_matrix_market_general_and_symmetric(tmp_path):
    rng = np.random.default_rng(3)
    A = sp.random(60, 60, density=0.05, random_state=rng, format="coo")
    A.data = np.round(A.data * 10 + 1, 4)
    path = tmp_path / "a.mtx"
    scipy.io.mmwrite(path, A)
    g = hg.read(path)
    assert g.directed and g.num_vertices == 60
    assert g.labels[0] == 1
    assert np.allclose(g.to_scipy().toarray(), A.toarray(), rtol=1e-6)
    assert g.num_arcs == A.nnz
    S = sp.triu(A + A.T).tocoo()
    sym = tmp_path / "s.mtx"
    scipy.io.mmwrite(sym, sp.coo_matrix(S.toarray() + S.toarray().T - np.diag(S.diagonal())),
                     symmetry="symmetric")
    gs = hg.read(sym)
    assert not gs.directed
    dense = gs.to_scipy().toarray()
    assert np.allclose(dense, dense.T)
    assert np.allclose(dense, (S + S.T - sp.diags(S.diagonal())).toarray(), rtol=1e-6)


def test_matrix_market_pattern(tmp_path):
    path = tmp_path / "p.mtx"
    path.write_text("%%MatrixMarket matrix coordinate pattern general\n% c\n4 4 3\n1 2\n2 3\n4 1\n")
    g = hg.read(path)
    assert not g.weighted
    assert {(u, v) for u, v, _ in edge_set(g)} == {(1, 2), (2, 3), (4, 1)}
    assert g.num_vertices == 4


def test_dimacs(tmp_path):
    path = tmp_path / "r.gr"
    path.write_text("c road\np sp 4 5\na 1 2 7\na 2 3 1\nc mid\na 3 4 2\na 1 4 20\na 1 2 3\n")
    g = hg.read(path)
    assert g.num_vertices == 4
    assert edge_set(g) == {(1, 2, 3.0), (2, 3, 1.0), (3, 4, 2.0), (1, 4, 20.0)}


def test_npz_and_npy(tmp_path):
    src, dst, w = _random_edges(4)
    np.savez(tmp_path / "e.npz", src=src, dst=dst, weight=w, num_vertices=400)
    g = hg.read(tmp_path / "e.npz")
    assert g.num_vertices == 400
    assert edge_set(g) == edge_set(hg.from_arrays(src, dst, w, num_vertices=400))
    np.save(tmp_path / "e.npy", np.stack([src, dst], axis=1))
    g2 = hg.read(tmp_path / "e.npy")
    assert edge_set(g2) == edge_set(hg.from_arrays(src, dst))


def test_parquet_and_csv_tables(tmp_path):
    src, dst, w = _random_edges(5)
    df = pd.DataFrame({"a": src, "b": dst, "w": w})
    df.to_parquet(tmp_path / "e.parquet")
    df.to_csv(tmp_path / "e.csv", index=False)
    ref = hg.from_arrays(src, dst, w, relabel=True)
    for name in ("e.parquet", "e.csv"):
        g = hg.read(tmp_path / name, source="a", target="b", weight="w")
        assert g.num_arcs == ref.num_arcs
        assert np.array_equal(g.labels, ref.labels)
        assert np.allclose(g.to_scipy().toarray(), ref.to_scipy().toarray())
    names = pd.DataFrame({"s": ["x", "y", "z"], "t": ["y", "z", "x"]})
    names.to_parquet(tmp_path / "n.parquet")
    g = hg.read(tmp_path / "n.parquet")
    assert {(u, v) for u, v, _ in edge_set(g)} == {("x", "y"), ("y", "z"), ("z", "x")}


def test_from_pandas_scipy_networkx_agree():
    G = nx.gnp_random_graph(80, 0.08, seed=7, directed=True)
    for i, (u, v) in enumerate(G.edges()):
        G[u][v]["weight"] = float(i % 13 + 1)
    g_nx = hg.from_networkx(G)
    df = nx.to_pandas_edgelist(G)
    g_pd = hg.from_pandas(df, source="source", target="target", weight="weight")
    g_sp = hg.from_scipy(nx.to_scipy_sparse_array(G, nodelist=range(80)))
    expected = {(u, v, d["weight"]) for u, v, d in G.edges(data=True)}
    assert edge_set(g_nx) == expected
    assert edge_set(g_pd) == expected
    assert edge_set(g_sp) == expected
    U = nx.les_miserables_graph()
    g_u = hg.from_networkx(U)
    assert not g_u.directed and g_u.num_edges == U.number_of_edges()
    assert g_u.num_vertices == U.number_of_nodes()


def test_read_detects_compressed_extensions(tmp_path):
    assert hg.io.detect_format("x.txt.gz") == "snap"
    assert hg.io.detect_format("x.mtx.bz2") == "mtx"
    assert hg.io.detect_format("X.GR") == "dimacs"
