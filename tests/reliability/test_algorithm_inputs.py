"""Algorithm inputs that used to give wrong answers silently (issue 50, item 6): integer
and overflowing SSSP distances, negative PageRank weights, undirected inputs whose two
directions disagree, empty fields, fractional vertex counts, weights at float32's
edge. Each is refused with a clear HetGraphError or computed right (hand-checked
oracles)."""

import numpy as np
import pytest

import hetgraph as hg

F32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, bool])
def test_sssp_refuses_integer_distances(dtype):
    g = hg.from_arrays([0, 1], [1, 2], [1.0, 2.0])
    with pytest.raises(hg.GraphError, match=r"sssp computes distances in float64 or float32, "
                                            r"not dtype=.*use dtype=np.float64"):
        hg.sssp(g, 0, dtype=dtype)


def test_sssp_float32_paths_beyond_its_range_are_refused():
    g = hg.from_arrays([0, 1], [1, 2], [2e38, 2e38])
    with pytest.raises(hg.GraphError, match=r"float32.*3.4e\+38.*dtype=np.float64"):
        hg.sssp(g, 0, dtype=np.float32)
    w = float(np.float32(2e38))  # weights are stored as float32
    assert hg.sssp(g, 0).values.tolist() == [0.0, w, w + w]  # in float64: the exact sum


def test_sssp_float32_near_its_maximum_when_paths_fit():
    g = hg.from_arrays([0], [1], [F32_MAX])
    assert hg.sssp(g, 0, dtype=np.float32).values.tolist() == [0.0, F32_MAX]


def test_pagerank_refuses_negative_weights():
    g = hg.from_arrays([0, 1, 2], [1, 2, 0], [1.0, -5.0, 1.0])
    with pytest.raises(hg.GraphError, match=r"pagerank needs non-negative edge weights; "
                                            r"edge 1 -> 2 has weight -5"):
        hg.pagerank(g)
    g = hg.from_arrays([0, 1, 2], [1, 2, 0], [1.0, 5.0, 1.0])  # a cycle: ranks equal
    np.testing.assert_allclose(hg.pagerank(g).values, [1 / 3] * 3)


# undirected inputs whose two directions disagree ------------------------------------
@pytest.mark.parametrize("dedup, weight", [("first", 5.0), ("min", 3.0), ("max", 5.0),
                                           ("sum", 8.0)])
def test_undirected_edge_list_with_two_weights_gets_one(tmp_path, dedup, weight):
    (tmp_path / "g.txt").write_text("1 2 5\n2 1 3\n2 3 1\n")
    g = hg.read_edgelist(tmp_path / "g.txt", directed=False, dedup=dedup)
    src, dst, w = g.edges()
    arcs = {(int(g.labels[s]), int(g.labels[d])): float(x) for s, d, x in zip(src, dst, w)}
    assert arcs[(1, 2)] == arcs[(2, 1)] == weight
    d12, d21 = hg.sssp(g, 1).values[1], hg.sssp(g, 2).values[0]
    assert d12 == d21 == weight


@pytest.mark.parametrize("directed", [None, True])
def test_symmetric_mtx_with_two_weights_gets_one(tmp_path, directed):
    (tmp_path / "a.mtx").write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                                    "3 3 3\n2 1 5\n1 2 3\n3 2 1\n")
    g = hg.read_mtx(tmp_path / "a.mtx", directed=directed)
    dist = [hg.sssp(g, v).values for v in (1, 2)]
    assert dist[0][1] == dist[1][0] == 5.0  # dedup="first": the first entry of the pair


def test_undirected_arrays_with_two_weights_get_one():
    g = hg.from_arrays([0, 1], [1, 0], [5.0, 3.0], directed=False, dedup="min")
    assert sorted(g.edges()[2].tolist()) == [3.0, 3.0]


# text fields and counts --------------------------------------------------------------
@pytest.mark.parametrize("line", ["1,,2", "1,2,", ",1,2", "1,2,,0.5", "1, ,2"])
def test_empty_field_is_an_error(tmp_path, line):
    (tmp_path / "g.csv.txt").write_text("0,1\n" + line + "\n")
    with pytest.raises(hg.InputFormatError, match=r"g.csv.txt, line 2: .*empty field"):
        hg.read(tmp_path / "g.csv.txt")


@pytest.mark.parametrize("line", ["1, 2", "1 ,2", "1,2\r", "1\t2", "1,2,0.5"])
def test_one_separator_between_fields_is_fine(tmp_path, line):
    (tmp_path / "g.txt").write_text(line + "\n")
    assert hg.read(tmp_path / "g.txt").num_edges == 1


@pytest.mark.parametrize("count", [2.7, np.array([3, 4]), "3", True])
def test_npz_fractional_or_odd_vertex_count_is_refused(tmp_path, count):
    np.savez(tmp_path / "e.npz", src=np.array([0]), dst=np.array([1]), num_vertices=count)
    with pytest.raises(hg.InputFormatError, match=r"e.npz: num_vertices is .* not a whole "
                                                  r"number"):
        hg.read(tmp_path / "e.npz")


def test_npz_whole_vertex_count_is_kept(tmp_path):
    np.savez(tmp_path / "e.npz", src=np.array([0]), dst=np.array([1]), num_vertices=5.0)
    assert hg.read(tmp_path / "e.npz").num_vertices == 5


@pytest.mark.parametrize("text", ["3.4028234663852886e38", "3.4028235e38", "340282346638528859811704183484516925440"])
def test_text_weight_of_float32_max_is_accepted(tmp_path, text):
    (tmp_path / "g.txt").write_text(f"1 2 {text}\n")
    assert hg.read(tmp_path / "g.txt").edges()[2].tolist() == [F32_MAX]


def test_text_weight_that_rounds_to_inf_is_refused(tmp_path):
    (tmp_path / "g.txt").write_text("1 2 3.4028236e38\n")
    with pytest.raises(hg.InputFormatError, match=r"line 1.*float32"):
        hg.read(tmp_path / "g.txt")


def test_array_weight_of_float32_max_is_accepted():
    assert hg.from_arrays([0], [1], [F32_MAX]).edges()[2].tolist() == [F32_MAX]
    assert hg.from_arrays([0], [1], [3.4028235e38]).edges()[2].tolist() == [F32_MAX]
    with pytest.raises(hg.GraphError, match="beyond float32"):
        hg.from_arrays([0], [1], [3.4028236e38])
