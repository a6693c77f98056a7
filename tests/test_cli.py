"""The command line: demo, info, run, convert; errors are one line with exit 1, bad usage
exits 2."""

import numpy as np
import pytest

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


def test_run_prints_the_top_vertices_and_writes_the_values(tmp_path, capsys, data):
    import networkx as nx
    import pandas as pd

    path = data("wiki-Vote.txt")
    out = tmp_path / "hops.parquet"
    assert main(["run", "bfs", path, "--source", "30", "--top", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    G = nx.read_edgelist(path, create_using=nx.DiGraph, nodetype=int)
    hops = nx.single_source_shortest_path_length(G, 30)
    assert text.startswith("bfs: ") and "converged" in text and str(out) in text
    assert text.splitlines()[1].split() == ["30", "0"]
    frame = pd.read_parquet(out)
    reached = frame[frame.value >= 0]
    assert dict(zip(reached.vertex, reached.value)) == hops


def test_the_vertex_order_changes_no_value_of_any_label(tmp_path, capsys):
    import pandas as pd

    g = hg.generate.rmat(9, seed=4)
    src, dst, _ = g.edges()
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{u + 100} {v + 100}\n" for u, v in zip(src, dst)))
    values = {}
    for order in ("none", "degree", "auto"):
        out = tmp_path / f"{order}.csv"
        assert main(["run", "pagerank", str(path), "--order", order, "--out", str(out),
                     "--top", "0", "--quiet", "--devices", "cpu"]) == 0
        values[order] = pd.read_csv(out).set_index("vertex")["value"].sort_index()
    np.testing.assert_allclose(values["degree"], values["none"], rtol=1e-9)
    np.testing.assert_allclose(values["auto"], values["none"], rtol=1e-9)
    assert main(["convert", str(path), str(tmp_path / "s"), "--order", "degree"]) == 0
    stored = hg.open_store(tmp_path / "s")
    assert stored.out_degree()[0] == g.out_degree().max()
    assert stored.labels[0] == int(np.argmax(g.out_degree())) + 100
    capsys.readouterr()


def test_convert_then_run_from_the_store_with_a_checkpoint(tmp_path, capsys):
    (tmp_path / "g.txt").write_text("a b\nb c\nc a\nc d\n")
    with pytest.raises(hg.InputFormatError):
        hg.read(tmp_path / "g.txt")  # string ids need ids="str": convert reports it
    assert main(["convert", str(tmp_path / "g.txt"), str(tmp_path / "s")]) == 1
    assert "line 1" in capsys.readouterr().err
    (tmp_path / "n.txt").write_text("1 2\n2 3\n3 1\n3 4\n")
    assert main(["convert", str(tmp_path / "n.txt"), str(tmp_path / "s")]) == 0
    assert "4 vertices" in capsys.readouterr().out
    args = ["run", "pagerank", str(tmp_path / "s"), "--iterations", "30", "--checkpoint",
            str(tmp_path / "ck"), "--out", str(tmp_path / "r.npy"), "--devices", "cpu"]
    assert main(args) == 0
    first = np.load(tmp_path / "r.npy")
    assert main(args + ["--resume"]) == 0
    runs = [line.split(",")[0] for line in capsys.readouterr().out.splitlines()
            if line.startswith("pagerank: ")]
    assert len(runs) == 2 and runs[0] == runs[1]  # the resumed run had converged
    second = np.load(tmp_path / "r.npy")
    assert first.dtype.names == ("vertex", "value") and list(first["vertex"]) == [1, 2, 3, 4]
    np.testing.assert_array_equal(first, second)


def test_usage_errors_exit_2(capsys):
    for argv in (["run", "bogus", "x"], ["run"], ["convert", "only-input"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    assert main(["run", "sssp", "x.txt"]) == 1
    assert "sssp needs --source" in capsys.readouterr().err


def test_cluster_serves_runs_and_its_dashboard(tmp_path):
    """`hetgraph cluster` in a subprocess: `hetgraph run --scheduler` runs on it, its
    hetgraph page and gauges show that run, Ctrl-C stops it with exit 0, even when it
    was started with SIGINT ignored (as a script's background job is)."""
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    pytest.importorskip("bokeh")
    process = subprocess.Popen([sys.executable, "-m", "hetgraph", "cluster", "--dashboard",
                                "127.0.0.1:0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        lines = [process.stdout.readline() for _ in range(3)]
        scheduler = re.search(r"scheduler (tcp://\S+)", lines[0]).group(1)
        page = re.search(r"hetgraph page (http://127\.0\.0\.1:\d+/hetgraph)", lines[1]).group(1)
        assert "workers: 1 CPU" in lines[2]
        (tmp_path / "g.txt").write_text("1 2\n2 3\n3 1\n3 4\n")
        assert main(["run", "bfs", str(tmp_path / "g.txt"), "--source", "1", "--scheduler",
                     scheduler, "--out", str(tmp_path / "levels.csv")]) == 0
        assert (tmp_path / "levels.csv").read_text().splitlines() == \
            ["vertex,value", "1,0", "2,1", "3,2", "4,3"]
        assert urllib.request.urlopen(page, timeout=30).status == 200
        metrics = urllib.request.urlopen(page.replace("/hetgraph", "/metrics"),
                                         timeout=30).read().decode()
        assert "\ndask_hetgraph_iteration 4.0\n" in metrics
        assert '\ndask_hetgraph_pages{device="cpu"} 1.0\n' in metrics
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0 and "cluster stopped" in out, err


def test_progress_bar_on_a_terminal_unless_quiet(tmp_path, monkeypatch, dispatcher_only):
    import io

    from hetgraph.scheduler import dispatcher, progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(dispatcher, "ProgressBar",
                        lambda name, total: progress.ProgressBar(name, total, delay=0,
                                                                 interval=0))
    hg.generate.grid(8, 8).save(tmp_path / "s")
    for quiet, shown in (([], True), (["--quiet"], False)):
        terminal = Terminal()
        monkeypatch.setattr("sys.stderr", terminal)
        assert main(["run", "pagerank", str(tmp_path / "s"), "--iterations", "4"] + quiet) == 0
        assert ("\rPageRank 4/4 [####################]" in terminal.getvalue()) is shown


def test_a_fresh_process_offers_every_algorithm(tmp_path):
    """`hetgraph run` in a new process, where nothing has imported the algorithms yet
    (the package imports lazily): its choices are the registry's, and a BFS runs."""
    import subprocess
    import sys

    import networkx as nx

    path = tmp_path / "path.txt"
    path.write_text("1 2\n2 3\n3 4\n")
    done = subprocess.run([sys.executable, "-m", "hetgraph", "run", "bfs", str(path),
                           "--source", "1", "--out", str(tmp_path / "levels.csv")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import pandas as pd
    levels = pd.read_csv(tmp_path / "levels.csv")
    expected = nx.single_source_shortest_path_length(nx.path_graph([1, 2, 3, 4],
                                                                   nx.DiGraph), 1)
    assert dict(zip(levels["vertex"], levels["value"])) == expected
    usage = subprocess.run([sys.executable, "-m", "hetgraph", "run", "--help"],
                           capture_output=True, text=True, timeout=300)
    assert all(name in usage.stdout for name in ("pagerank", "sssp", "bfs", "cc"))
