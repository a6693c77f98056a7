"""The command line: demo and info print the layout; errors are one line with exit 1."""

import hetgraph as hg
from hetgraph.cli import main


def test_demo_prints_bundled_graph(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "wiki-vote: directed unweighted graph, 7,115 vertices, 103,689 edges" in out
    assert "pages" in out and "mean_R" in out
    import networkx as nx
    from conftest import data_path
    G = nx.read_edgelist(data_path("wiki-Vote.txt"), create_using=nx.DiGraph, nodetype=int)
    ranks = nx.pagerank(G)
    top = max(ranks, key=ranks.get)
    assert f"\n  {top:>8}  {ranks[top]:.6f}" in out
    hops = nx.single_source_shortest_path_length(G, top)
    assert f"SSSP from {top} " in out
    assert f"{len(hops):,} vertices reached, farthest {max(hops.values())} hops" in out


def test_info_file_and_store(tmp_path, capsys):
    g = hg.generate.grid(4, 5)
    g.save(tmp_path / "s")
    assert main(["info", str(tmp_path / "s")]) == 0
    assert "20 vertices" in capsys.readouterr().out
    (tmp_path / "g.txt").write_text("1 2\n2 3\n")
    assert main(["info", str(tmp_path / "g.txt")]) == 0
    assert "3 vertices" in capsys.readouterr().out


def test_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "g.txt").write_text("1 x\n")
    assert main(["info", str(tmp_path / "g.txt")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1" in err and "Traceback" not in err
