"""Graph: CSC/CSR against SciPy, degrees, labels, bytes, dtypes."""

import numpy as np
import pytest
import scipy.sparse as sp

import hetgraph as hg
from conftest import assert_csr_matches_csc


def test_csc_csr_degrees_match_scipy():
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 500, 4000), rng.integers(0, 500, 4000)
    w = rng.uniform(1, 5, 4000)
    g = hg.from_arrays(src, dst, w, num_vertices=500, dedup="sum")
    A = sp.coo_matrix((w, (src, dst)), shape=(500, 500)).tocsr()   # sums duplicates
    A.eliminate_zeros()
    assert np.allclose(g.to_scipy().toarray(), A.toarray(), rtol=1e-6)
    assert np.array_equal(g.out_degree(), np.diff(A.indptr))
    assert np.array_equal(g.in_degree(), np.diff(A.tocsc().indptr))
    assert g.in_indices.dtype == np.int32 and g.in_indptr.dtype == np.int64
    assert g.in_weights.dtype == np.float32
    assert_csr_matches_csc(g)
    for v in range(0, 500, 37):   # in-edges sorted by source
        seg = g.in_indices[g.in_indptr[v]:g.in_indptr[v + 1]]
        assert np.all(np.diff(seg) > 0)


def test_out_weight_sums_are_kept_by_the_graph(tmp_path):
    # 0 -> 1 (2.5), 0 -> 2 (1.0), 2 -> 1 (4.0); vertex 1 has no out-edge
    g = hg.from_arrays([0, 0, 2], [1, 2, 1], [2.5, 1.0, 4.0], num_vertices=3)
    sums = g.out_weight_sums()
    assert sums.tolist() == [3.5, 0.0, 4.0] and sums.dtype == np.float64
    assert g.out_weight_sums() is sums and not sums.flags.writeable  # computed once
    unweighted = hg.from_arrays([0, 0, 2], [1, 2, 1], num_vertices=3)
    assert unweighted.out_weight_sums().tolist() == [2.0, 0.0, 1.0]
    rmat = hg.generate.rmat(10, seed=4, weights=(1.0, 9.0))
    stored = rmat.save(tmp_path / "s", page_bytes=4096).stored_graph()  # page by page
    A = rmat.to_scipy()
    np.testing.assert_allclose(stored.out_weight_sums(), np.asarray(A.sum(axis=1)).ravel(),
                               rtol=1e-6)


def test_a_graph_keeps_its_token_through_pickling_and_a_new_graph_gets_another():
    """The token names a graph for what runs keep of it (its GPU pages, calibrations): a
    worker process's copy has the same one; another graph, even with the same edges or
    renumbered from it, has its own."""
    import pickle

    g = hg.from_arrays([0, 0, 2], [1, 2, 1], num_vertices=3)
    assert pickle.loads(pickle.dumps(g)).token == g.token
    same_edges = hg.from_arrays([0, 0, 2], [1, 2, 1], num_vertices=3)
    assert len({g.token, same_edges.token, g.reorder("degree").token}) == 3


def test_a_graph_finds_its_first_negative_weight_once(monkeypatch):
    g = hg.from_arrays([0, 1, 2, 0], [1, 2, 0, 2], [1.0, -2.0, -4.0, 3.0], num_vertices=3)
    # CSC order: the in-edges of 0 (2 -> 0, -4), of 1 (0 -> 1), of 2 (0 -> 2, 1 -> 2)
    assert g.first_negative_weight() == (0, 2, -4.0)
    monkeypatch.setattr(g, "in_edge_blocks", None)  # (called again, it would fail)
    assert g.first_negative_weight()[:2] == (0, 2)
    assert hg.from_arrays([0], [1], [0.0]).first_negative_weight() is None
    assert hg.from_arrays([0], [1]).first_negative_weight() is None


def test_a_graph_keeps_what_runs_derive_from_it():
    g = hg.from_arrays([0], [1])
    calls = []
    for _ in range(2):
        assert g.kept("answer", lambda: calls.append(1) or 42) == 42
    assert calls == [1] and g.kept("other", lambda: None) is None


def test_unweighted_bytes_per_edge(data):
    g = hg.read(data("wiki-Vote.txt"))
    # 8 bytes/edge (CSC + CSR int32) + 16 bytes/vertex (two int64 pointers) + 8 label bytes
    assert g.nbytes == 8 * g.num_arcs + 16 * (g.num_vertices + 1) + 8 * g.num_vertices
    rm = hg.generate.rmat(16)
    assert rm.labels is None
    assert rm.nbytes == 8 * rm.num_arcs + 16 * (rm.num_vertices + 1)


def test_labels_and_lookup():
    g = hg.from_pandas(__import__("pandas").DataFrame({"src": ["a", "b"], "dst": ["b", "c"]}))
    assert list(g.label_of([0, 1, 2])) == ["a", "b", "c"]
    assert g.id_of("c") == 2
    with pytest.raises(hg.GraphError, match="'zz' is not in the graph"):
        g.id_of("zz")
    h = hg.from_arrays([0, 1], [1, 5])
    assert h.num_vertices == 6 and h.id_of(5) == 5
    with pytest.raises(hg.GraphError, match="6 is not in the graph"):
        h.id_of(6)


def test_summary_mentions_sizes():
    g = hg.generate.grid(3, 3)
    text = g.summary()
    assert "undirected weighted" in text and "9 vertices" in text and "12 edges" in text
