"""Connected components by ECL-CC on a GPU (marked gpu: skipped without one) against
scipy.sparse.csgraph.connected_components (connection="weak") and the CPU's Afforest:
random graphs, the bundled graphs, RMAT, a shuffled grid, every thread group (thread,
warp, block per vertex), a page store read page by page, and devices="auto"."""

import numpy as np
import pytest
from hypothesis import given

import hetgraph as hg
from hetgraph import tuning
from hetgraph.io.store import StoredGraph
from test_cc import check, edge_lists, shuffled_grid
from conftest import examples

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("dispatcher_only")]  # (union-find)


def graphs():
    return [hg.datasets.load("wiki-vote"), hg.datasets.load("power"),
            hg.generate.rmat(14, seed=4), hg.generate.rmat(13, seed=2, directed=False),
            shuffled_grid(150), hg.generate.erdos_renyi(20000, m=12000, seed=9)]


def test_ecl_cc_equals_scipy_and_the_cpu():
    for g in graphs():
        result = hg.connected_components(g, devices="gpu")
        check(g, result.values)
        np.testing.assert_array_equal(result.values,
                                      hg.connected_components(g, devices="cpu").values)
        assert result.program == "ECL-CC" and result.mode == "union-find"
        assert list(result.history["placement"]) == ["gpu", "gpu"]
        assert result.history["edges"].iloc[0] == g.num_arcs


@pytest.mark.parametrize("thread_degree, warp_degree",
                         [(0, 0), (0, 4), (2, 40), (1 << 30, 1 << 30)])
def test_every_thread_group(thread_degree, warp_degree, monkeypatch):
    """All vertices a thread's, a warp's or a block's; few blocks (grid-stride loops)."""
    monkeypatch.setattr(tuning, "CC_GPU_THREAD_DEGREE", thread_degree)
    monkeypatch.setattr(tuning, "CC_GPU_WARP_DEGREE", warp_degree)
    monkeypatch.setattr(tuning, "CC_GPU_MAX_BLOCKS", 3)
    for g in graphs()[:4]:
        check(g, hg.connected_components(g, devices="gpu").values)


@examples(40)
@given(edge_lists())
def test_random_graphs(edges):
    src, dst, n, directed = edges
    g = hg.from_arrays(src, dst, num_vertices=n, directed=directed, dedup=None)
    check(g, hg.connected_components(g, devices="gpu").values)


@pytest.mark.parametrize("directed", [True, False])
def test_page_store_page_by_page(tmp_path, directed):
    g = hg.generate.rmat(12, edge_factor=4, seed=2, directed=directed)
    store = g.save(tmp_path / "s", page_bytes=4 << 10, shared_bytes=4096)
    result = hg.connected_components(store, host_budget=1, devices="gpu")
    assert isinstance(result.graph, StoredGraph)
    check(g, result.values)


def test_auto_takes_the_gpu_for_a_large_graph(monkeypatch):
    g = hg.generate.rmat(12, seed=1)
    assert hg.connected_components(g).program == "Afforest"  # below CC_GPU_MIN_ARCS
    monkeypatch.setattr(tuning, "CC_GPU_MIN_ARCS", 0)
    result = hg.connected_components(g)
    assert result.program == "ECL-CC"
    check(g, result.values)
    monkeypatch.setattr(tuning, "CC_GPU_MEMORY_FRACTION", 0.0)  # "does not fit"
    assert hg.connected_components(g).program == "Afforest"
