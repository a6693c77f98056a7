"""The registry of algorithms and readers: what it declares is what the command line,
``hetgraph``'s names, ``hetgraph.read`` and the NetworkX backend offer."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import hetgraph as hg
from hetgraph import nx_backend, registry
from hetgraph.cli import build_parser, main


@pytest.fixture
def scratch_registry():
    """Registrations made by a test are dropped after it."""
    kept = {name: dict(table) for name, table in
            (("ALGORITHMS", registry.ALGORITHMS), ("READERS", registry.READERS),
             ("EXTENSIONS", registry.EXTENSIONS))}
    yield
    for name, table in kept.items():
        getattr(registry, name).clear()
        getattr(registry, name).update(table)


def _cli_runs(name):
    try:
        build_parser().parse_args(["run", name, "graph.txt"])
    except SystemExit:
        return False
    return True


def test_every_registered_algorithm_is_in_hg_and_the_cli():
    algorithms = registry.algorithms()
    assert {a.name for a in algorithms} >= {"pagerank", "sssp", "bfs", "cc", "nn", "heat",
                                            "circuit"}
    for a in algorithms:
        assert getattr(hg, a.function.__name__) is a.function
        assert a.function.__name__ in hg.__all__
        assert getattr(hg.algorithms, a.program.__name__) is a.program
        assert _cli_runs(a.name) == a.cli, a.name
    assert [a.name for a in algorithms if not a.cli] == ["circuit"]  # (voltages: a mapping)
    assert not _cli_runs("no-such-algorithm")


def test_the_networkx_backend_answers_what_the_registry_declares():
    declared = [n for a in registry.algorithms() for n in a.networkx]
    assert sorted(nx_backend.FUNCTIONS) == sorted(declared) == sorted(
        ["pagerank", "single_source_dijkstra_path_length",
         "single_source_shortest_path_length", "bfs_layers", "connected_components",
         "weakly_connected_components", "hits", "eigenvector_centrality", "katz_centrality",
         "multi_source_dijkstra_path_length", "single_source_bellman_ford_path_length",
         "shortest_path_length", "number_connected_components", "is_connected",
         "is_weakly_connected", "node_connected_component"])
    for name in declared:  # an adapter of its own, not the fallback to NetworkX
        assert callable(vars(nx_backend).get(name)), name


def test_a_registered_algorithm_runs_from_the_cli(scratch_registry, tmp_path, capsys):
    @registry.algorithm("toy-rank", program=hg.algorithms.PageRank)
    def toy_rank(graph, **options):
        return hg.pagerank(graph, **options)

    (tmp_path / "g.txt").write_text("1 2\n2 3\n3 1\n")
    assert main(["run", "toy-rank", str(tmp_path / "g.txt"), "--iterations", "3",
                 "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("toy-rank: ")
    with pytest.raises(hg.RegistrationError, match="already registered"):
        registry.algorithm("toy-rank")(lambda graph: None)


def test_the_iterations_option_follows_the_signature():
    assert registry.ALGORITHMS["nn"].iterations_option == "iterations"
    assert registry.ALGORITHMS["pagerank"].iterations_option == "max_iterations"
    assert registry.ALGORITHMS["cc"].iterations_option == "max_iterations"


TOY = '''"""A toy algorithm: one file, nothing else changed."""

from ..registry import algorithm
from .pagerank import pagerank


@algorithm("toy", needs_source=False)
def toy(graph, **options):
    return pagerank(graph, **options)
'''


def test_an_algorithm_is_one_new_file(tmp_path):
    """A copy of the package with one more module in algorithms/ offers it everywhere."""
    root = pathlib.Path(hg.__file__).parent
    shutil.copytree(root, tmp_path / "hetgraph",
                    ignore=shutil.ignore_patterns("__pycache__", "*.gz", "*.graph"))
    (tmp_path / "hetgraph" / "algorithms" / "toy.py").write_text(TOY)
    check = ("import hetgraph as hg; from hetgraph.cli import build_parser; "
             "assert hg.toy.__module__ == 'hetgraph.algorithms.toy'; "
             "assert 'toy' in hg.__all__ and 'toy' in hg.algorithms.__all__; "
             "build_parser().parse_args(['run', 'toy', 'g.txt']); "
             "assert hg.__file__.startswith(%r)" % str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", check], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_registered_reader_is_read_and_exported():
    assert set(registry.READERS) == {"snap", "edgelist", "tsv", "mtx", "dimacs", "metis",
                                     "npz", "npy", "parquet", "csv"}
    for ext, fmt in registry.EXTENSIONS.items():
        assert hg.io.detect_format(f"graph{ext}.gz") == fmt
    for function in registry.reader_functions():
        assert getattr(hg, function.__name__) is function
        assert function.__name__ in hg.__all__ and function.__name__ in hg.io.__all__
    assert registry.READERS["parquet"].preset == (("format", "parquet"),)


def test_a_registered_reader_is_read_by_extension(scratch_registry, tmp_path):
    @registry.reader("pairs", ".pairs")
    def read_pairs(path, *, name=None):
        pairs = [line.split("-") for line in open(path).read().split()]
        return hg.from_arrays([int(a) for a, _ in pairs], [int(b) for _, b in pairs],
                              name=name)

    (tmp_path / "g.pairs").write_text("0-1 1-2\n")
    g = hg.read(tmp_path / "g.pairs", name="p")
    assert (g.num_edges, g.name) == (2, "p")
    assert hg.read(tmp_path / "g.pairs", format="pairs").num_edges == 2
    with pytest.raises(hg.RegistrationError, match="already the format"):
        registry.reader("other", ".pairs")(read_pairs)
    with pytest.raises(hg.UnsupportedFormatError):
        hg.read(tmp_path / "g.pairs", format="nope")
