"""Bundled real graphs load with their documented sizes and match the shared originals."""

import pytest

import hetgraph as hg
from conftest import edge_set


def test_bundled_names():
    assert hg.datasets.names() == ["power", "wiki-vote"]
    with pytest.raises(hg.GraphError, match="no bundled graph named 'nope'"):
        hg.datasets.load("nope")


def test_wiki_vote_bundled_equals_shared(data):
    g = hg.datasets.load("wiki-vote")
    assert (g.num_vertices, g.num_edges, g.directed) == (7115, 103689, True)
    assert g.name == "wiki-vote"
    assert edge_set(g) == edge_set(hg.read(data("wiki-Vote.txt")))


def test_power_bundled():
    g = hg.datasets.load("power")
    assert (g.num_vertices, g.num_edges, g.directed) == (4941, 6594, False)


def test_a_graph_from_the_cache_saves_in_a_new_process(tmp_path):
    """A bundled graph loaded from the datasets' cache is made without ``hetgraph.io``,
    whose import registers the store's writer: ``save`` in a new process still writes
    the store (it raised KeyError: 'pagestore')."""
    import os
    import subprocess
    import sys

    code = ("import hetgraph as hg, sys; g = hg.datasets.load('power'); "
            "s = g.save(sys.argv[1]); print(s.load().num_edges == g.num_edges)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for i in range(2):  # (the first process fills the cache, the second loads from it)
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"power-{i}")],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().splitlines()[-1] == "True"
