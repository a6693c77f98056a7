"""Out-of-core runs from a page store: the answers of the in-memory engine (and of
scipy / NetworkX), within a host memory budget, reading only the pages a pass needs."""

import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
from hypothesis import given, strategies as st

import hetgraph as hg
from hetgraph.io.pagecache import PageCache
from hetgraph.io.store import StoredGraph, measure_read_ratio
from hetgraph.engines.store import resident_bytes
from hetgraph.scheduler.state import VertexState
from conftest import examples


def _store(tmp_path, graph, name="s", page_bytes=16 << 10, **options):
    return graph.save(tmp_path / name, page_bytes=page_bytes, **options)


def _budget(store, fraction):
    """A host budget that caches ``fraction`` of the store's data beyond the vertex
    arrays and the reads in flight (a quarter of the cache, at least one block)."""
    largest = max(e["bytes"] for p in store.manifest["pages"] for e in p["blocks"].values())
    return resident_budget(store) + max(int(fraction * store.data_bytes), 4 * largest)


@pytest.fixture(scope="module")
def road(tmp_path_factory):
    g = hg.generate.grid(100, 100, seed=2)
    return g, g.save(tmp_path_factory.mktemp("road") / "s", page_bytes=8 << 10,
                     shared_bytes=4096)


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    g = hg.generate.rmat(13, edge_factor=8, seed=5, weights=(1.0, 9.0))
    return g, g.save(tmp_path_factory.mktemp("web") / "s", page_bytes=16 << 10,
                     shared_bytes=4096)


def test_a_store_larger_than_the_budget_runs_out_of_core(web):
    g, store = web
    budget = _budget(store, 0.3)
    assert store.data_bytes > budget
    assert isinstance(hg.io.store.as_graph(store, budget), StoredGraph)
    assert not isinstance(hg.io.store.as_graph(store, store.data_bytes), StoredGraph)
    ranks = hg.pagerank(store, max_iterations=8, tol=None, host_budget=budget)
    expected = hg.pagerank(g, max_iterations=8, tol=None)
    np.testing.assert_allclose(ranks.values, expected.values, rtol=1e-12)
    assert list(ranks.labels) == list(expected.labels)
    # the first pass read every in-edge block (sources and weights), later ones what
    # the cache did not keep
    per_pass = ranks.history["read_bytes"].to_numpy()
    edge_bytes = sum(p["blocks"][b]["bytes"] for p in store.manifest["pages"]
                     for b in ("src", "weight"))
    assert per_pass[0] == edge_bytes
    assert 0 < per_pass[1] < edge_bytes and len(set(per_pass[1:])) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cpu_mode", ["auto", "pull", "notify-pull"])
def test_sssp_out_of_core_equals_dijkstra(web, mode, cpu_mode):
    g, store = web
    got = hg.sssp(store, 0, mode=mode, cpu_mode=cpu_mode, host_budget=_budget(store, 0.25))
    expected = csgraph.dijkstra(g.to_scipy(), indices=0)
    np.testing.assert_array_equal(got.values, expected.astype(got.values.dtype))
    assert set(got.history["mode"]) == ({"pull", "notify-pull"} if cpu_mode == "auto"
                                        else {cpu_mode})


def test_push_needs_the_graph_in_memory(road):
    g, store = road
    with pytest.raises(hg.GraphError, match="cpu_mode='push' cannot run: the graph is read"):
        hg.bfs(store, 0, cpu_mode="push", host_budget=_budget(store, 0.3))
    levels = hg.bfs(store, 0, cpu_mode="push").values  # it fits the default budget
    np.testing.assert_array_equal(levels, hg.bfs(g, 0).values)


def test_bfs_and_cc_out_of_core_on_a_road_graph(road):
    g, store = road
    budget = _budget(store, 0.3)
    levels = hg.bfs(store, 0, host_budget=budget).values
    order, _ = csgraph.breadth_first_order(g.to_scipy(), 0)
    expected = csgraph.shortest_path(g.to_scipy(), unweighted=True, indices=0)
    np.testing.assert_array_equal(levels, expected.astype(np.int32))
    assert (levels >= 0).sum() == len(order)
    labels = hg.connected_components(store, host_budget=budget).values
    np.testing.assert_array_equal(labels, hg.connected_components(g).values)


def test_notify_pull_reads_only_the_pages_it_needs(road):
    g, store = road
    rows = hg.bfs(store, 0, cpu_mode="notify-pull", max_iterations=3,
                  host_budget=_budget(store, 0.01)).history
    pages = store.manifest["pages"]
    page_of = lambda v: next(i for i, p in enumerate(pages)  # noqa: E731
                             if p["vertex_start"] <= v < p["vertex_stop"])
    # iteration 1: vertex 0 notifies through its page's out-edges, and its neighbours
    # (vertices 1 and 100, in the same page) pull through that page's in-edges
    assert store.num_pages > 20 and page_of(0) == page_of(1) == page_of(100)
    blocks = pages[page_of(0)]["blocks"]
    assert rows["read_bytes"][0] == blocks["out_dst"]["bytes"] + blocks["src"]["bytes"]
    assert rows["read_bytes"].sum() < 0.2 * store.data_bytes


def test_the_budget_bounds_the_cache_and_a_repeated_scan_keeps_hitting(web):
    _, store = web
    src = [p["blocks"]["src"]["bytes"] for p in store.manifest["pages"]]
    largest = max(e["bytes"] for p in store.manifest["pages"] for e in p["blocks"].values())
    cache = PageCache(store, budget=sum(src) // 2 + largest, prefetch_bytes=largest)
    pages = list(range(store.num_pages))
    for _ in range(3):
        cache.plan(pages, ("src",))
        for p in pages:
            (array,) = cache.get(p, ("src",))
            assert np.array_equal(array, store.page(p).src)
            assert cache.cached_bytes <= cache.capacity
    # the pages cached in the first scan stay: each later scan reads only the others
    first = sum(src)
    later = (cache.read_bytes - first) / 2
    assert later == first - cache.cached_bytes
    assert cache.hits > 0
    cache.close()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    g = hg.generate.rmat(10, edge_factor=8, seed=1)
    return g.save(tmp_path_factory.mktemp("small") / "s", page_bytes=2 << 10)


@examples(25)
@given(order=st.lists(st.integers(0, 24), min_size=1, max_size=60),
       fraction=st.floats(0.3, 1.5))
def test_cache_property_any_access_order(small_store, order, fraction):
    """Any sequence of gets returns the stored arrays and never caches more than the
    budget allows."""
    store = small_store
    pages = [p % store.num_pages for p in order]
    src = [p["blocks"]["src"]["bytes"] for p in store.manifest["pages"]]
    budget = max(int(fraction * sum(src)), 8 * max(src))
    cache = PageCache(store, budget)
    cache.plan(pages[:10], ("src",))
    for i, p in enumerate(pages):
        if i % 10 == 0:
            cache.plan(pages[i:i + 10], ("src",))
        (array,) = cache.get(p, ("src",))
        assert np.array_equal(array, store.page(p).src)
        assert cache.cached_bytes <= cache.capacity
    assert cache.hits + cache.misses == len(pages)
    cache.close()


def test_blocks_on_several_stripes_are_read_by_their_threads(tmp_path):
    g = hg.generate.rmat(11, edge_factor=8, seed=4)
    stripes = [tmp_path / f"disk{i}" for i in range(3)]
    for s in stripes:
        s.mkdir()
    store = _store(tmp_path, g, stripes=stripes, page_bytes=4 << 10)
    used = {e["stripe"] for p in store.manifest["pages"] for e in p["blocks"].values()}
    assert used == {0, 1, 2}
    ranks = hg.pagerank(store, max_iterations=5, tol=None, host_budget=_budget(store, 0.2))
    np.testing.assert_allclose(ranks.values, hg.pagerank(g, max_iterations=5, tol=None).values,
                               rtol=1e-12)


def test_read_ratio_is_measured_and_drives_the_mode_switch(web):
    g, store = web
    paths = [store.block_path(p["blocks"]["src"]) for p in store.manifest["pages"]]
    assert measure_read_ratio(paths, seconds=0.1) >= 1.0
    assert store.read_ratio() >= 1.0
    rows = hg.sssp(store, 0, host_budget=_budget(store, 0.3)).history
    assert (rows["rho"] == store.read_ratio()).all()
    # a larger rho makes notify-pull rarer: rho (f + min(f skew, 1)) <= 1
    forced = hg.sssp(store, 0, rho=1e6, host_budget=_budget(store, 0.3)).history
    assert set(forced["mode"]) == {"pull"}


def test_out_of_core_runs_on_two_cpu_workers(web):
    g, store = web
    with hg.Cluster(cpu_workers=2, gpus=0, dashboard_address=None) as cluster:
        ranks = hg.pagerank(store, max_iterations=4, tol=None, cluster=cluster,
                            host_budget=_budget(store, 0.3))
    np.testing.assert_allclose(ranks.values, hg.pagerank(g, max_iterations=4, tol=None).values,
                               rtol=1e-12)
    assert ranks.history["read_bytes"].sum() > 0


def test_a_page_task_of_adjacent_pages_pulls_them_all(web, monkeypatch):
    from hetgraph.scheduler import placement

    def take_three(queue):  # a batch of adjacent pages: one merged vertex range
        return [queue.pages.pop() for _ in range(min(3, len(queue.pages)))]

    monkeypatch.setattr(placement.PageQueue, "take_cpu", take_three)
    g, store = web
    with hg.Cluster(cpu_workers=2, gpus=0, dashboard_address=None) as cluster:
        ranks = hg.pagerank(store, max_iterations=3, tol=None, cluster=cluster,
                            host_budget=_budget(store, 0.3))
    assert ranks.history["cpu_pages"].max() > 3
    np.testing.assert_allclose(ranks.values, hg.pagerank(g, max_iterations=3, tol=None).values,
                               rtol=1e-12)


def test_what_needs_every_edge_in_memory_is_refused(tmp_path):
    g = hg.generate.rmat(12, edge_factor=4, seed=2)  # directed
    store = _store(tmp_path, g, page_bytes=4 << 10, shared_bytes=4096)
    budget = _budget(store, 0.2)
    assert budget < store.data_bytes
    with pytest.raises(hg.OutOfCoreError, match="undirected version.*open_store"):
        hg.connected_components(store, host_budget=budget, algorithm="label-propagation")
    with pytest.raises(hg.OutOfCoreError, match="hits needs the graph in memory.*open_store"):
        hg.hits(store, host_budget=budget)
    with pytest.raises(hg.OutOfCoreError, match="too small for this store's blocks"):
        hg.pagerank(store, host_budget=resident_budget(store) + 1000)
    with pytest.raises(hg.OutOfCoreError, match="does not even hold the run's vertex arrays"):
        hg.pagerank(store, host_budget=1000)


def resident_budget(store):
    """The bytes of the vertex arrays of a float64 program with an aux array."""
    g = store.stored_graph()
    n = g.num_vertices
    state = VertexState(np.zeros(n), np.zeros(n, np.uint8), sync=True)
    return resident_bytes(g, state, np.zeros(n))
