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
