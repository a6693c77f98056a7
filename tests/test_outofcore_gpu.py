"""Out-of-core runs with the GPU placing pages (hetgraph.engines.store_gpu).

Here without a GPU: the store's blocks are the shard kernel's layout (against
page_layout's), the host-side pieces of a pass (which pages to read, launch runs,
staging), the page cache shared by the engines of a run within one budget, and every
algorithm out of core with 1 and 2 stripes, sync and async, with checkpoints, and that
the async references of the GPU cases do not depend on the pass order. Marked gpu (run
on the GPU machine): the same answers with devices "gpu", "hybrid" and "auto", the
GPU's resident pages read once a run, checkpoints and resume.
"""

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.engines.store import resident_bytes
from hetgraph.engines.store_gpu import (page_blocks, shard_edge_table, shard_runs,
                                        split_pages, stage)
from hetgraph.io.pagecache import shared_cache
from hetgraph.kernels.gpu.layout import page_layout, unsigned_index
from hetgraph.scheduler.state import VertexState

WEIGHTED = hg.generate.rmat(11, edge_factor=8, seed=5, directed=False, weights=(1.0, 9.0))
# (directed, unweighted; edge factor 16: its store is larger than _gpu_budget, which the
# vertex arrays of 2,048 vertices fill for the most part)
PLAIN = hg.generate.rmat(11, edge_factor=16, seed=6)

# every algorithm that runs out of core: (graph, call)
RUNS = {
    "pagerank": (PLAIN, lambda g, **o: hg.pagerank(g, max_iterations=12, tol=None, **o)),
    "bfs": (PLAIN, lambda g, **o: hg.bfs(g, 0, **o)),
    "sssp": (WEIGHTED, lambda g, **o: hg.sssp(g, 0, **o)),
    "cc": (WEIGHTED, lambda g, **o: hg.connected_components(
        g, algorithm="label-propagation", **o)),
    "katz": (PLAIN, lambda g, **o: hg.katz_centrality(g, max_iterations=15, tol=0, **o)),
    "eigenvector": (PLAIN, lambda g, **o: hg.eigenvector_centrality(
        g, max_iterations=15, tol=0, **o)),
    "heat": (WEIGHTED, lambda g, **o: hg.heat(g, [0], iterations=6, **o)),
    "nn": (PLAIN, lambda g, **o: hg.nn(g, iterations=6, **o)),
    "circuit": (WEIGHTED, lambda g, **o: hg.circuit(g, {0: 1.0, 5: 0.0}, iterations=6, **o)),
}

# An async pass reads the values of the same pass as the pages or blocks before it wrote
# them: the CPU's order is fixed, a GPU's blocks run in any order, so the GPU's iterates
# after a fixed count are not the CPU's (PageRank's 12 differ by about 1% between the
# CPU's sync and async orders). Async runs with the GPU are compared where the answer does
# not depend on that order: the fixed point, exact (bfs, sssp, cc) or converged to tol
# (PageRank, eigenvector; katz diverges on PLAIN, heat, nn and circuit stop at a count).
ASYNC_RUNS = {
    "pagerank": (PLAIN, lambda g, **o: hg.pagerank(g, max_iterations=1000, tol=1e-14, **o)),
    "bfs": RUNS["bfs"],
    "sssp": RUNS["sssp"],
    "cc": RUNS["cc"],
    "eigenvector": (PLAIN, lambda g, **o: hg.eigenvector_centrality(
        g, max_iterations=1000, tol=1e-14, **o)),
}
# what a converged run's values may differ by between pass orders: the L1 change below
# N * tol = 2e-11 leaves an error of at most d / (1 - d) times that, here below 1e-10
# on a rank of at least (1 - d) / N = 7e-5
CONVERGED_RTOL = 1e-6


def _budget(store, fraction):
    """The vertex arrays of a float64 sync program and ``fraction`` of the data."""
    g = store.stored_graph()
    n = g.num_vertices
    state = VertexState(np.zeros(n), np.zeros(n, np.uint8), sync=True)
    largest = max(e["bytes"] for p in store.manifest["pages"] for e in p["blocks"].values())
    return resident_bytes(g, state, np.zeros(n)) + max(int(fraction * store.data_bytes),
                                                       8 * largest)


def _gpu_budget(store, fraction=0.25):
    """:func:`_budget` and the GPU engine's pinned staging buffers (one page a stream)."""
    from hetgraph import tuning
    from hetgraph.partition import edge_bytes

    part = store.partition()
    largest = max(int(np.diff(part.page_edges(p))[0]) for p in range(part.num_pages))
    budget = _budget(store, fraction) + tuning.GPU_STREAMS * largest * \
        edge_bytes(store.index_dtype, True)
    assert budget < store.data_bytes, "a run in this budget would load the store into memory"
    return budget


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """{(graph name, stripes): store} of the two graphs on 1 and 2 stripe directories."""
    root = tmp_path_factory.mktemp("gpustores")
    made = {}
    for name, graph in (("weighted", WEIGHTED), ("plain", PLAIN)):
        for stripes in (1, 2):
            dirs = None
            if stripes > 1:
                dirs = [root / f"{name}-disk{i}" for i in range(stripes)]
                for d in dirs:
                    d.mkdir()
            made[name, stripes] = graph.save(root / f"{name}-{stripes}", stripes=dirs,
                                             page_bytes=8 << 10, shared_bytes=4096)
    return made


def _store_of(stores, graph, stripes):
    return stores["weighted" if graph is WEIGHTED else "plain", stripes]


def _check(name, got, expected, rtol=1e-9):
    if np.issubdtype(np.asarray(expected).dtype, np.floating):
        if np.asarray(expected).dtype == np.float32:
            rtol = max(rtol, 1e-5)  # float32 sums taken in another order differ in ulps
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, expected)


def _case(name, mode):
    """(graph, call, rtol) of a GPU case: :data:`RUNS`' in sync mode, :data:`ASYNC_RUNS`'
    (converged where not exact) in async mode."""
    if mode == "sync":
        return (*RUNS[name], 1e-9)
    return (*ASYNC_RUNS[name], CONVERGED_RTOL)


# --- the store's pages are what the shard kernel reads ---------------------------------

def test_the_blocks_of_a_store_are_the_kernels_layout_in_destination_order(stores):
    store = stores["weighted", 2]
    part = store.partition()
    graph_part = WEIGHTED.partition(page_bytes=8 << 10, shared_bytes=4096)
    assert part.num_pages == graph_part.num_pages > 4
    table = shard_edge_table(part)
    dtypes = (unsigned_index(store.index_dtype), np.uint16, np.float32)
    largest = int(np.diff([part.page_edges(p) for p in range(part.num_pages)]).max())
    buffers = tuple(np.zeros(largest, d) for d in dtypes)
    for p in range(part.num_pages):
        src, offsets, weight, expected = page_layout(np, WEIGHTED, graph_part, p, True,
                                                     order="destination")
        s0, s1 = int(part.page_shard[p]), int(part.page_shard[p + 1])
        np.testing.assert_array_equal(table[s0:s1], expected)
        arrays = [store.page_block(p, b) for b in page_blocks(True)]
        count = stage(arrays, buffers)
        assert count == len(src)
        for staged, want in zip(buffers, (src, offsets, weight)):
            assert staged.dtype == want.dtype
            np.testing.assert_array_equal(staged[:count], want)
    assert page_blocks(False) == ("src", "dst_offset")


def test_a_pass_reads_the_pages_not_on_the_device_and_launches_runs(stores):
    part = stores["plain", 1].partition()
    loaded = np.zeros(part.num_pages, bool)
    loaded[[0, 1, 2, 5]] = True
    held, read = split_pages([0, 1, 2, 3, 5, 7], loaded)
    assert held.tolist() == [0, 1, 2, 5] and read.tolist() == [3, 7]
    runs = shard_runs(part, held)
    ps = part.page_shard
    assert runs == [(int(ps[0]), int(ps[3])), (int(ps[5]), int(ps[6]))]
    assert shard_runs(part, []) == []


# --- one page cache for the run's engines ------------------------------------------------

def test_engines_share_one_cache_within_the_budget(stores):
    store = stores["plain", 2]
    src = [p["blocks"]["src"]["bytes"] for p in store.manifest["pages"]]
    budget = sum(src) // 2 + 4 * max(src)
    cpu = shared_cache(store, budget)
    capacity = cpu.capacity
    gpu = shared_cache(store, 10 * budget, beside=max(src))  # joins: the first's budget
    assert gpu is cpu and cpu.budget == budget and cpu.capacity == capacity - max(src)
    capacity = cpu.capacity
    pages = list(range(store.num_pages))
    half = len(pages) // 2
    cpu.plan(pages[:half], ("src",), owner="cpu")
    gpu.plan(pages[half:], ("src",), owner="gpu")
    for p in pages[:half]:
        (array,) = cpu.get(p, ("src",), owner="cpu")
        np.testing.assert_array_equal(array, store.page(p).src)
    for p in pages[half:]:
        gpu.get(p, ("src",), owner="gpu")
    # each page was read once, for the device that took it; the reserve came off the cache
    assert cpu.owner_read_bytes["cpu"] == sum(src[:half])
    assert cpu.owner_read_bytes["gpu"] == sum(src[half:])
    assert cpu.read_bytes == sum(src) and cpu.capacity == capacity
    assert cpu.cached_bytes <= cpu.capacity
    gpu.release(beside=max(src))  # its staging buffers' bytes come back to the cache
    assert cpu.capacity == capacity + max(src)
    assert shared_cache(store, budget) is cpu  # still held by the other engine
    cpu.release()
    cpu.release()
    fresh = shared_cache(store, budget)
    assert fresh is not cpu and fresh.read_bytes == 0
    fresh.release()


def test_a_reserve_larger_than_the_cache_is_refused(stores):
    store = stores["plain", 1]
    cache = shared_cache(store, _budget(store, 0.2))
    with pytest.raises(hg.OutOfCoreError, match="staging buffers"):
        cache.reserve(cache.capacity)
    cache.release()


def test_a_gpu_out_of_core_pushes_no_active_subgraph(stores, monkeypatch):
    """The GPU engine out of core pulls the pages it streams: it asks GpuEngine for no
    active subgraph (Subway's push reads the out-edges from memory, and a stored
    graph's are in the store) and refuses one asked for."""
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.engines.store_gpu import StoreGpuEngine

    given = {}
    monkeypatch.setattr(GpuEngine, "__init__", lambda self, *a, **options: given.update(
        options))
    graph = stores["plain", 1].stored_graph()
    assert graph.out_indices is None
    StoreGpuEngine(None, graph, None, None, None, budget=1, streams=2)
    assert given["subgraph"] is False and given["streams"] == 2
    for asked in (True, "async"):
        with pytest.raises(hg.GraphError, match=f"subgraph={asked!r}"):
            StoreGpuEngine(None, graph, None, None, None, budget=1, subgraph=asked)


def test_devices_gpu_out_of_core_asks_for_a_gpu_not_for_memory(stores):
    from hetgraph.kernels.gpu.device import GpuUnavailableError, availability

    if availability()[0]:
        pytest.skip("a GPU is here: the GPU tests below run it")
    store = stores["plain", 1]
    with pytest.raises(GpuUnavailableError, match="devices='gpu' but the cluster has no GPU"):
        hg.pagerank(store, devices="gpu", host_budget=_budget(store, 0.2))


# --- every algorithm out of core, on the CPU -----------------------------------------------

@pytest.mark.parametrize("stripes", [1, 2])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", list(RUNS))
def test_every_algorithm_out_of_core_equals_in_memory(stores, name, mode, stripes):
    graph, call = RUNS[name]
    store = _store_of(stores, graph, stripes)
    budget = _budget(store, 0.25)
    assert budget < store.data_bytes
    got = call(store, mode=mode, devices="cpu", host_budget=budget)
    assert got.history["read_bytes"].sum() > 0
    _check(name, got.values, call(graph, mode=mode, devices="cpu").values)


@pytest.mark.parametrize("devices", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_checkpoints_and_resume_out_of_core(stores, tmp_path, devices):
    graph, call = RUNS["pagerank"]
    store = _store_of(stores, graph, 2)
    budget = _gpu_budget(store)
    first = hg.pagerank(store, max_iterations=5, tol=None, devices=devices,
                        host_budget=budget, checkpoint=tmp_path, checkpoint_every=2)
    assert first.iterations == 5
    resumed = hg.pagerank(store, max_iterations=12, tol=None, devices=devices,
                          host_budget=budget, checkpoint=tmp_path, resume=True)
    assert resumed.iterations == 12
    _check("pagerank", resumed.values, call(graph, devices="cpu").values)


# --- with the GPU (marked gpu) ---------------------------------------------------------

# every algorithm on each device kind, sync on one stripe and (those whose async answer
# does not depend on the pass order, ASYNC_RUNS) async on two (the stripes change the
# reads, not what a device computes); "auto" for two of them
GPU_CASES = [(name, devices, mode, stripes) for devices in ("gpu", "hybrid")
             for mode, stripes, names in (("sync", 1, RUNS), ("async", 2, ASYNC_RUNS))
             for name in names] + [
    (name, "auto", mode, stripes) for name in ("pagerank", "cc")
    for mode, stripes in (("sync", 2), ("async", 1))]


@pytest.mark.parametrize("name", list(ASYNC_RUNS))
def test_the_async_references_do_not_depend_on_the_pass_order(name):
    """What an async run with the GPU is compared with (:data:`ASYNC_RUNS`) is the same
    for two pass orders, every page reading the last pass's values (sync) and the CPU's
    in-place pass (async): a fixed point, which the GPU's blocks reach in whatever
    order they run, not one order's iterates."""
    graph, call, rtol = _case(name, "async")
    in_place = call(graph, mode="async", devices="cpu")
    _check(name, in_place.values, call(graph, devices="cpu").values, rtol)
    assert in_place.converged


@pytest.mark.gpu
@pytest.mark.parametrize("name, devices, mode, stripes", GPU_CASES)
def test_every_algorithm_with_the_gpu_equals_the_cpu_in_memory(stores, name, mode, stripes,
                                                               devices, monkeypatch):
    from hetgraph import tuning

    monkeypatch.setattr(tuning, "SMALL_ARCS", 0)  # "auto" places this small graph too
    graph, call, rtol = _case(name, mode)
    store = _store_of(stores, graph, stripes)
    got = call(store, mode=mode, devices=devices, host_budget=_gpu_budget(store))
    _check(name, got.values, call(graph, mode=mode, devices="cpu").values, rtol)
    h = got.history
    assert h["read_bytes"].sum() > 0  # (out of core: a store in the budget is loaded)
    if devices == "gpu":
        assert (h["placement"] == "gpu").all()
    if devices == "hybrid":
        assert (h["placement"] == "hybrid").all() and (h["gpu_pages"] > 0).any()


@pytest.mark.gpu
@pytest.mark.parametrize("resident", ["all", "some"])
def test_the_gpu_keeps_the_pages_its_budget_holds(stores, resident):
    """Pages the GPU's budget holds are read from the disk once a run; the others every
    pass (through a host cache too small to keep them)."""
    from hetgraph.partition import edge_bytes

    graph, call = RUNS["pagerank"]
    store = _store_of(stores, graph, 1)
    part = store.partition()
    per_edge = edge_bytes(store.index_dtype, False)
    sizes = np.array([np.diff(part.page_edges(p))[0] for p in range(part.num_pages)]) * \
        per_edge
    gpu = {"streams": 2} if resident == "all" else {"memory_budget": int(sizes.sum() // 2),
                                                    "streams": 2}
    staging = 2 * int(sizes.max())  # the engine's pinned buffers, one page a stream
    got = call(store, devices="gpu", gpu=gpu, host_budget=_budget(store, 0.0) + staging)
    _check("pagerank", got.values, call(graph, devices="cpu").values)
    reads = got.history["read_bytes"].to_numpy()
    gpu_blocks = sum(p["blocks"][b]["bytes"] for p in store.manifest["pages"]
                     for b in ("src", "dst_offset"))
    # (a GPU run is not calibrated: its first pass reads every page's blocks)
    assert reads[0] == gpu_blocks
    if resident == "all":
        assert (reads[1:] == 0).all()
    else:
        assert (reads[1:] > 0).all() and (reads[1:] < gpu_blocks).all()


@pytest.mark.gpu
@pytest.mark.parametrize("devices", ["hybrid", "auto"])
def test_the_gpu_is_calibrated_on_a_sample_of_the_pages(stores, monkeypatch, devices):
    """A run out of core on both devices calibrates the GPU on the CPU's sample of the
    pages: the GPU engine reads their blocks at most, and runs no pass over the store,
    before the calibration ends, which comes before the run's first iteration (an
    "auto" run lays no pages out in a thread while the CPU starts alone, as in memory:
    a first pass on the CPU is one the GPU must read again)."""
    from hetgraph import tuning
    from hetgraph.engines.store_gpu import StoreGpuEngine
    from hetgraph.scheduler import tasks
    from hetgraph.scheduler.tasks import calibration_pages

    laid_out = []
    monkeypatch.setattr(tasks, "lay_out_gpu_pages", lambda *a: laid_out.append(a))
    monkeypatch.setattr(tuning, "SMALL_ARCS", 0)  # (else "auto" leaves the GPU out)

    store = _store_of(stores, PLAIN, 1)
    events = []
    sample, run_pages = StoreGpuEngine.pull_sample, StoreGpuEngine.run_pages

    def pull_sample(self, pages):
        sample(self, pages)
        events.append(("sample", list(pages), self.read_bytes))

    def whole(self, pages=None, stream=None):
        if pages is None:
            events.append(("pass",))
        return run_pages(self, pages, stream)

    monkeypatch.setattr(StoreGpuEngine, "pull_sample", pull_sample)
    monkeypatch.setattr(StoreGpuEngine, "run_pages", whole)
    # (streams 3 and 5: no other test's calibration, which the cluster keeps, is taken)
    got = hg.pagerank(store, max_iterations=12, tol=None, devices=devices,
                      gpu={"streams": 3 if devices == "hybrid" else 5},
                      host_budget=_gpu_budget(store))
    assert laid_out == []
    _check("pagerank", got.values, hg.pagerank(PLAIN, max_iterations=12, tol=None,
                                               devices="cpu").values)
    samples = [e for e in events if e[0] == "sample"]
    assert len(samples) == tuning.CALIBRATION_PULLS
    last = events.index(samples[-1])
    assert ("pass",) not in events[:last]
    pages = calibration_pages(store.num_pages)
    assert all(e[1] == pages for e in samples)
    blocks = sum(store.page_blocks(p)[b]["bytes"] for p in pages for b in page_blocks(False))
    assert 0 < samples[-1][2] <= blocks


# --- a pass of the GPU engine on a stand-in device (its host side, here) --------------------

class _DeviceArray(np.ndarray):
    """A host array standing for a device one: ``set`` copies in at once."""

    def set(self, array, stream=None):
        self[...] = array


class _Event:
    def synchronize(self):
        pass


class _Stream:
    ptr = 0

    def __init__(self, non_blocking=False):
        pass

    def record(self):
        return _Event()

    def wait_event(self, event):
        assert isinstance(event, _Event)


def _stand_in_cupy():
    """The few CuPy calls StorePages and StoreGpuEngine's pass make, on the host."""
    from types import SimpleNamespace

    def wrap(array):
        return np.asarray(array).view(_DeviceArray)

    main = _Stream()
    return SimpleNamespace(
        asarray=wrap, empty=lambda n, d: wrap(np.empty(n, d)), int64=np.int64,
        zeros=lambda n, d: wrap(np.zeros(n, d)),
        cuda=SimpleNamespace(get_current_stream=lambda: main, Stream=_Stream,
                             runtime=SimpleNamespace(getDevice=lambda: 0),
                             memory=SimpleNamespace(OutOfMemoryError=MemoryError)))


def _stand_in_engine(store, memory, monkeypatch):
    """A StoreGpuEngine of ``store`` on a stand-in device whose kernel sums each
    vertex's in-neighbours' values times the edge weights into ``out``, its GPU budget
    holding every page (``memory`` "all") or about half of them; returns (engine, out,
    the sums every pass gives, each page's blocks' bytes)."""
    import sys
    from types import SimpleNamespace

    from hetgraph.engines.store_gpu import StoreGpuEngine
    from hetgraph.partition import edge_bytes

    fake = _stand_in_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupyx", SimpleNamespace(empty_pinned=np.empty))
    graph = store.stored_graph()
    part = store.partition()
    per_edge = edge_bytes(store.index_dtype, True)
    sizes = np.diff([part.page_edges(p) for p in range(part.num_pages)])[:, 0] * per_edge
    engine = StoreGpuEngine.__new__(StoreGpuEngine)
    n = graph.num_vertices
    values = np.random.default_rng(1).random(n)
    out = np.zeros(n)
    engine.__dict__.update(cupy=fake, graph=graph, weighted=True, per_edge=per_edge,
                           spec=SimpleNamespace(dtype=np.dtype(np.float64)), sync=True,
                           aux=np.zeros(1), host_budget=_gpu_budget(store, 0.05))

    def allocate():
        engine.partition, engine.plan = engine.pages.partition, engine.pages.plan
        engine.streams = [_Stream() for _ in range(engine.plan.streams)]
        engine.stages = [tuple(fake.zeros(engine.plan.stage_edges, d) for d in
                               engine.pages.dtypes) for _ in engine.streams]

    def launch(grid, first_shard, edge_base, edges, stream):
        src, offsets, weight = edges
        table, starts = engine.pages.shard_edge, engine.pages.shard_start
        for s in range(first_shard, first_shard + grid):
            e = np.arange(table[s, 0], table[s, 1]) - edge_base
            np.add.at(out, starts[s] + offsets[e].astype(np.int64),
                      values[src[e].astype(np.int64)] * weight[e])

    monkeypatch.setattr(engine, "_allocate", allocate, raising=False)
    monkeypatch.setattr(engine, "_launch", launch, raising=False)
    budget = None if memory == "all" else int(sizes.sum() // 2)
    fake.cuda.runtime.memGetInfo = lambda: (4 * int(sizes.sum()), 0)
    engine._place_pages(budget, None, 0, 2, np.uint32)
    g = WEIGHTED
    src = np.repeat(np.arange(n), np.diff(g.in_indptr))  # (each in-edge's destination)
    expected = np.bincount(src, values[g.in_indices] * g.in_weights, minlength=n)
    blocks = {p: sum(store.page_blocks(p)[b]["bytes"] for b in page_blocks(True))
              for p in range(part.num_pages)}
    return engine, out, expected, blocks


@pytest.mark.parametrize("memory", ["all", "some"])
def test_a_pass_over_resident_and_streamed_pages_reads_each_page_once(stores, memory,
                                                                      monkeypatch):
    """StoreGpuEngine's pages on a stand-in device (:func:`_stand_in_engine`): every
    pass gives the CSC's sums; the first reads every page, the later ones only the
    pages the budget streams."""
    store = stores["weighted", 2]
    part = store.partition()
    engine, out, expected, blocks = _stand_in_engine(store, memory, monkeypatch)
    plan = engine.plan
    streamed = list(plan.streamed_pages)
    assert (not streamed) == (memory == "all") and plan.resident > 0
    reads = []
    for _ in range(3):
        out[:] = 0
        before = engine.read_bytes
        engine.run_pages()
        reads.append(engine.read_bytes - before)
        np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert engine.pages.loaded[:plan.resident_end].all()
    assert not engine.pages.loaded[plan.resident_end:].any()
    assert reads[0] == sum(blocks.values())
    # the host cache keeps streamed pages only (the resident ones are on the device)
    resident = range(plan.resident_end)
    assert engine.cache.cached_of(resident, page_blocks(True)).sum() == 0
    cached = engine.cache.cached_of(streamed, page_blocks(True)).sum()
    assert reads[1] == reads[2] == sum(blocks[p] for p in streamed) - cached
    assert (cached > 0) == (memory == "some")
    assert (reads[1] > 0) == (memory == "some")
    # the next pass's streamed pages that the host lacks are being read, the resident
    # ones not (they stay on the device)
    lacking = [p for p in streamed if not engine.cache.cached_of([p], page_blocks(True))[0]]
    assert bool(lacking) == (memory == "some")
    assert (engine.cache.missing_bytes(lacking[:1], page_blocks(True)) == 0).all()
    assert (engine.cache.missing_bytes(resident, page_blocks(True)) > 0).all()
    # a hybrid iteration's batch: those pages' vertices alone
    out[:] = 0
    batch = [0, part.num_pages - 1]
    engine.run_pages(batch)
    for p in batch:
        v0, v1 = part.page_vertices(p)
        np.testing.assert_allclose(out[v0:v1], expected[v0:v1], rtol=1e-12)
    assert out.sum() == pytest.approx(sum(expected[slice(*part.page_vertices(p))].sum()
                                          for p in batch))
    engine.cache.release(beside=engine.staging_bytes)


def test_a_calibration_pulls_a_sample_of_the_pages_not_a_pass(stores, monkeypatch):
    """What a GPU's calibration times out of core (StoreGpuEngine.pull_sample of the
    CPU's sample pages, each pull waited for) reads those pages once, not the store."""
    from hetgraph import tuning
    from hetgraph.scheduler.tasks import calibration_pages

    store = stores["weighted", 2]
    part = store.partition()
    engine, out, expected, blocks = _stand_in_engine(store, "all", monkeypatch)
    steps = []
    for step in ("begin", "counts", "finish"):  # (the device's counters: not here)
        monkeypatch.setattr(engine, step, lambda *a, step=step: steps.append(step),
                            raising=False)
    pages = calibration_pages(part.num_pages)
    assert 1 < len(pages) < part.num_pages
    for _ in range(tuning.CALIBRATION_PULLS):
        out[:] = 0
        engine.pull_sample(pages)
        for p in pages:
            v0, v1 = part.page_vertices(p)
            np.testing.assert_allclose(out[v0:v1], expected[v0:v1], rtol=1e-12)
    assert steps == ["begin", "counts", "finish"] * tuning.CALIBRATION_PULLS
    assert engine.read_bytes == sum(blocks[p] for p in pages) < sum(blocks.values()) / 2
    engine.cache.release(beside=engine.staging_bytes)
