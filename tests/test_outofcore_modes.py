"""Out of core, notify-pull is chosen by the pages each mode reads, not by f alone: a
small frontier spread over every page reads every page's out-edges and about every
page's in-edges, more than a pull (bench/results/outofcore.json's CC iteration)."""

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.engines.store import StoreEngine, pages_hit, resident_bytes, store_mode
from hetgraph.program import ProgramSpec
from hetgraph.scheduler.state import VertexState


@pytest.fixture(scope="module")
def road(tmp_path_factory):
    g = hg.generate.grid(60, 60, seed=3)
    return g, g.save(tmp_path_factory.mktemp("modes") / "s", page_bytes=4 << 10,
                     shared_bytes=2048)


def _engine(store, values, flags, cpu_mode="auto", cache_fraction=0.05):
    """A StoreEngine of BFS on ``store`` from this state, with rho = 1 (Garaph's rule
    alone would take notify-pull for any f below a half) and a cache of about
    ``cache_fraction`` of the data."""
    g = store.stored_graph()
    spec = ProgramSpec(BreadthFirst(0))
    state = VertexState(values, flags, sync=True)
    aux = np.zeros(1, np.float32)
    largest = max(e["bytes"] for p in store.manifest["pages"] for e in p["blocks"].values())
    budget = resident_bytes(g, state, aux) + max(int(cache_fraction * store.data_bytes),
                                                 8 * largest)
    return StoreEngine(spec, g, state, aux, budget=budget, threads=1, cpu_mode=cpu_mode,
                       rho=1.0)


def _spread_state(store, levels):
    """BFS levels ``levels`` (of the graph in memory) with one active vertex in every
    page, reached: a frontier of a few edges over every page."""
    values = levels.astype(np.int32).copy()
    flags = np.zeros(store.num_vertices, np.uint8)
    flags[store.page_vertices()[:, 0]] = 1
    return values, flags


def _read_per_iteration(engine, iterations=1):
    rows = []
    for _ in range(iterations):
        before = engine.read_bytes
        mode = engine.iterate(0.0, engine.frontier())[0]
        rows.append((mode, engine.read_bytes - before))
    return rows


def test_a_small_frontier_over_every_page_pulls_and_reads_less(road):
    g, store = road
    levels = hg.bfs(g, 0).values
    assert store.num_pages > 10
    got = {}
    for cpu_mode in ("auto", "notify-pull"):
        values, flags = _spread_state(store, levels)
        values[store.page_vertices()[:, 0]] = 0  # they change their neighbours
        engine = _engine(store, values, flags, cpu_mode)
        active, degree = engine.frontier()
        f = degree / g.num_arcs
        assert active == store.num_pages and f < 0.05  # Garaph: notify-pull (rho = 1)
        got[cpu_mode] = (_read_per_iteration(engine)[0], engine.state.values.copy())
        engine.close()
    (mode, read), values = got["auto"]
    (forced, forced_read), forced_values = got["notify-pull"]
    blocks = [p["blocks"] for p in store.manifest["pages"]]
    src = sum(b["src"]["bytes"] for b in blocks)
    out = sum(b["out_dst"]["bytes"] for b in blocks)
    assert mode == "pull" and forced == "notify-pull"
    # the pull read every page's in-edges once; the notify-pull every page's out-edges,
    # then the in-edges of the pages its notifications reached (most of them)
    assert read == src
    assert forced_read > out + src // 2 > read
    np.testing.assert_array_equal(values, forced_values)  # the same iteration's answer


def test_a_local_frontier_notifies_and_reads_a_few_pages(road):
    g, store = road
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    engine = _engine(store, values, flags)
    rows = _read_per_iteration(engine, 3)
    engine.close()
    blocks = store.manifest["pages"][0]["blocks"]
    # vertex 0's level 1 and 2 neighbours are in its page or the next one or two
    assert [m for m, _ in rows] == ["notify-pull"] * 3
    assert rows[0][1] == blocks["out_dst"]["bytes"] + blocks["src"]["bytes"]
    assert sum(r for _, r in rows) < 0.1 * store.data_bytes
    np.testing.assert_array_equal(engine.state.values[:3], hg.bfs(g, 0).values[:3])


def test_cached_pages_make_a_pull_free_of_reads(road):
    """With the in-edges cached by a first pull, the pull reads nothing and wins over a
    notify-pull that must read out-edges across every page."""
    g, store = road
    levels = hg.bfs(g, 0).values
    values, flags = _spread_state(store, levels)
    engine = _engine(store, values, flags, cache_fraction=2.0)
    engine.state.flags[:] = 1
    first = _read_per_iteration(engine)[0]
    values, flags = _spread_state(store, levels)
    engine.state.values[:], engine.state.flags[:] = values, flags
    engine.reset_frontier()
    second = _read_per_iteration(engine)[0]
    engine.close()
    assert first[0] == "pull" and first[1] > 0
    assert second == ("pull", 0)


def test_store_mode_weighs_reads_against_compute():
    # before any measurement the bytes decide
    assert store_mode("notify-pull", 0.01, 1.0, (100, 101), None, None, 1000) == "pull"
    assert store_mode("notify-pull", 0.01, 1.0, (100, 99), None, None, 1000) == \
        "notify-pull"
    assert store_mode("pull", 0.0, 1.0, (100, 0), None, None, 1000) == "pull"
    # measured: each mode takes the longer of its reads and its compute; a pull of
    # cached pages (0 bytes) still computes every edge
    assert store_mode("notify-pull", 0.01, 1.0, (0, 50), 1e-9, 1e-6, 1000) == "notify-pull"
    assert store_mode("notify-pull", 0.01, 1.0, (0, 5e6), 1e-9, 1e-6, 1000) == "pull"


def test_pages_hit_grows_with_notifications_and_page_size():
    edges = np.array([10, 100, 1000])
    few, many = pages_hit(1, edges, 1110), pages_hit(10_000, edges, 1110)
    assert np.all(np.diff(few) > 0) and np.all(few < 0.6)
    assert np.all(many > 0.99)
    assert np.all(pages_hit(0, edges, 1110) == 0)
