"""The GPU engine (marked gpu: skipped without a GPU, run on the GPU machine).

Every built-in algorithm on the GPU equals the CPU engine (exactly for min programs,
to 1e-5 relative for float sums) on real and RMAT graphs; every fixed replication
factor equals the customized one; streamed pages equal resident ones; sync and async
converge to the reference; running out of device memory degrades instead of failing.
"""

import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from conftest import REAL_GRAPHS, data_path
from hetgraph import tuning
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.engines import gpu as gpu_engine
from hetgraph.kernels import arrays
from hetgraph.kernels.gpu import device as gpu_device
from hetgraph.kernels.gpu import kept as gpu_kept
from hetgraph.kernels.gpu import launch as gpu_launch
from hetgraph.kernels.gpu import layout as gpu_layout
from hetgraph.program import ProgramSpec
from test_user_programs import doc  # noqa: F401  (the guide's programs, a fixture)

pytestmark = pytest.mark.gpu


def real(name):
    return hg.read(data_path(name), **REAL_GRAPHS[name][0])


def graph_of(name):
    if name == "rmat":
        return hg.generate.rmat(14, seed=4, weights=(1.0, 9.0))
    return real(name)


GRAPHS = ["wiki-Vote.txt", "astro-ph.graph", "power.graph", "rmat"]


def source_of(g):
    return g.label_of(int(np.argmax(g.out_degree())))


def edge_bytes(g, weighted):
    return g.num_arcs * (g.index_dtype.itemsize + 2 + (4 if weighted else 0))


def assert_close(gpu_values, cpu_values, dtype):
    rtol = 1e-5 if np.dtype(dtype) == np.float32 else 1e-9
    np.testing.assert_allclose(gpu_values, cpu_values, rtol=rtol, atol=0)


@pytest.mark.parametrize("name", GRAPHS)
def test_every_algorithm_equals_the_cpu(name):
    g = graph_of(name)
    s = source_of(g)
    runs = {
        "pagerank": lambda **o: hg.pagerank(g, tol=None, max_iterations=20, **o),
        "pagerank32": lambda **o: hg.pagerank(g, tol=None, max_iterations=20,
                                              dtype=np.float32, **o),
        "sssp": lambda **o: hg.sssp(g, s, delta=np.inf, **o),  # (CPU: no buckets)
        "sssp-buckets": lambda **o: hg.sssp(g, s, **o),
        "bfs": lambda **o: hg.bfs(g, s, **o),
        "cc": lambda **o: hg.connected_components(g, algorithm="label-propagation",
                                                  mode="sync", **o),
        "nn": lambda **o: hg.nn(g, 5, **o),
        "heat": lambda **o: hg.heat(g, [s], 5, **o),
        "circuit": lambda **o: hg.circuit(g, {s: 1.0}, 5, **o),
    }
    for algorithm, call in runs.items():
        on_gpu = call(devices="gpu")
        on_cpu = call(devices="cpu")
        # (the CPU's priority buckets take iterations of their own; the GPU pulls all)
        assert on_gpu.iterations == on_cpu.iterations or algorithm == "sssp-buckets", \
            algorithm
        assert set(on_gpu.history["mode"]) == {"gpu-pull"}
        if on_cpu.values.dtype.kind == "f" and not algorithm.startswith("sssp"):
            assert_close(on_gpu.values, on_cpu.values, on_cpu.values.dtype)
        else:
            np.testing.assert_array_equal(on_gpu.values, on_cpu.values, err_msg=algorithm)
        if algorithm in ("sssp", "bfs", "cc"):  # the kernel's frontier counts, row by row
            for column in ("activated", "f"):
                assert on_gpu.history[column].tolist() == \
                    on_cpu.history[column].tolist(), (algorithm, column)


def bellman_ford_fronts(g, source):
    """The lowest distance among the vertices each sync Bellman-Ford iteration from
    ``source`` runs (those its iteration before improved), in NumPy."""
    indptr, indices = g.out_indptr, g.out_indices
    weights = g.out_weights().astype(np.float64)
    values = np.full(g.num_vertices, np.inf)
    values[source] = 0.0
    frontier, fronts = np.array([source]), []
    while len(frontier):
        fronts.append(values[frontier].min())
        starts, ends = indptr[frontier], indptr[frontier + 1]
        edges = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])
        sources = np.repeat(frontier, ends - starts)
        new = values.copy()
        np.minimum.at(new, indices[edges], values[sources] + weights[edges])
        frontier = np.flatnonzero(new < values)
        values = new
    return fronts


def test_gpu_rows_carry_the_lowest_priority_they_ran():
    """An SSSP run on the GPU records in each row the lowest distance among the vertices
    it ran (the kernel's warp and block minimum of the keys), but its first: the
    dispatcher's progress measure."""
    g = hg.generate.rmat(12, seed=3, weights=(1.0, 9.0))
    s = source_of(g)
    history = hg.sssp(g, s, devices="gpu").history
    want = bellman_ford_fronts(g, int(g.id_of(s)))
    assert len(history) == len(want) and np.isnan(history["priority"].iloc[0])
    np.testing.assert_array_equal(history["priority"].to_numpy()[1:], want[1:])
    bfs = hg.bfs(g, s, devices="gpu").history  # (no priority)
    assert bfs["priority"].isna().all()


@pytest.mark.parametrize("name", ["wiki-Vote.txt", "rmat"])
def test_sssp_and_bfs_equal_scipy_on_gpu(name):
    g = graph_of(name)
    s = source_of(g)
    sid = int(g.id_of(s))
    want = csgraph.dijkstra(g.to_scipy(), indices=sid)
    np.testing.assert_array_equal(hg.sssp(g, s, devices="gpu").values, want)
    levels = csgraph.shortest_path(g.to_scipy(), unweighted=True, indices=sid)
    got = hg.bfs(g, s, devices="gpu").values
    np.testing.assert_array_equal(np.where(got < 0, np.inf, got), levels)


@pytest.mark.parametrize("replication", [1, 2, 4, 8, 16, 32])
def test_every_fixed_replication_equals_customized(replication):
    g = graph_of("rmat")
    s = source_of(g)
    fixed = {"replication": replication}
    pr = hg.pagerank(g, tol=None, max_iterations=10, devices="gpu")
    pr_fixed = hg.pagerank(g, tol=None, max_iterations=10, devices="gpu", gpu=fixed)
    assert_close(pr_fixed.values, pr.values, np.float64)
    np.testing.assert_array_equal(hg.sssp(g, s, devices="gpu", gpu=fixed).values,
                                  hg.sssp(g, s, devices="gpu").values)
    np.testing.assert_array_equal(
        hg.connected_components(g, devices="gpu", gpu=fixed).values,
        hg.connected_components(g, devices="gpu").values)


@pytest.mark.parametrize("layout", [{"source_ranges": 1}, {"source_ranges": 2},
                                    {"source_ranges": 7}, {"edge_order": "destination"},
                                    {"source_ranges": 3, "memory_budget": 300_000}])
def test_cache_blocking_and_edge_order_give_the_same_answer(layout):
    g = graph_of("rmat")
    s = source_of(g)
    pr = hg.pagerank(g, tol=None, max_iterations=10, devices="gpu", gpu=layout)
    assert_close(pr.values, hg.pagerank(g, tol=None, max_iterations=10).values, np.float64)
    for call in (lambda **o: hg.sssp(g, s, **o), lambda **o: hg.bfs(g, s, **o),
                 lambda **o: hg.connected_components(g, algorithm="label-propagation", mode="sync",
                                                      **o)):
        np.testing.assert_array_equal(call(devices="gpu", gpu=layout).values,
                                      call(devices="cpu").values)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_indexed_sum_on_the_device_equals_the_host(dtype):
    import cupy

    rng = np.random.default_rng(3)
    values = rng.random(100_000).astype(dtype)
    for index in (np.flatnonzero(values < 0.3), np.arange(7), np.zeros(0, np.int64),
                  slice(10, 60_000), slice(0, 0), slice(3, None, 7)):
        want = arrays.indexed_sum(values, index, 0.25, 1.5)
        got = arrays.indexed_sum(cupy.asarray(values), index, 0.25, 1.5)
        empty = len(values[index]) == 0  # (the offset as it is: no launch)
        assert (type(got) is float) if empty else (got.shape == ())
        assert float(got) == pytest.approx(want, rel=1e-12)


def bfs_engine():
    """(graph, initial values, flags, GpuEngine) of a BFS from vertex 5 of an RMAT-14."""
    from hetgraph.algorithms.bfs import BreadthFirst

    g = hg.generate.rmat(14, seed=4)
    spec = ProgramSpec(BreadthFirst(5))
    values, flags, _ = spec.initial_state(g)
    return g, values, flags, gpu_engine.GpuEngine(spec, g, values, flags, np.zeros(1, np.float32))


def test_frontier_counted_on_the_device_equals_the_host():
    from hetgraph.kernels import cpu

    g, values, flags, engine = bfs_engine()
    n = g.num_vertices
    assert engine.frontier() == (1, g.out_degree()[5])  # counted by the constructor
    rng = np.random.default_rng(2)
    for active in (np.zeros(n, bool), np.ones(n, bool), rng.random(n) < 0.5,
                   np.arange(n) % 7 == 0, np.arange(n) == n - 1):
        flags = active.astype(np.uint8)
        want = (int(active.sum()), int(g.out_degree()[active].sum()))
        engine.load(values, flags, [(0, n)])
        assert engine.count_frontier() == cpu.frontier_size(flags, g.out_indptr) == want
        engine.reset_frontier((-1, -1))
        engine.reset_frontier()  # queued: the frontier waits for it
        assert engine.frontier() == want
        engine.reset_frontier((-1, -1))
        engine.reset_frontier()
        assert engine.count_frontier() == want  # (counted again meanwhile)
        assert engine.frontier() == want


def test_an_engine_takes_device_arrays_as_they_are():
    """CuPy arrays given as the initial state are the engine's own (not copied); its
    BFS from them equals the one from host arrays."""
    import cupy as cp

    g, values, flags, host = bfs_engine()
    on_device = cp.asarray(values), cp.asarray(flags)
    engine = gpu_engine.GpuEngine(host.spec, g, *on_device, np.zeros(1, np.float32))
    assert engine.values is on_device[0] and engine.flags is on_device[1]
    for e in (host, engine):
        while e.frontier()[0]:
            e.iterate(0.0)
    np.testing.assert_array_equal(engine.values.get(), host.values.get())
    assert (engine.values.get() >= 0).sum() > 1


def test_state_stored_without_waiting_arrives_once_its_event_is_done():
    g, values, flags, engine = bfs_engine()
    n = g.num_vertices
    engine.iterate(0.0)
    engine.finish()
    want_values, want_flags = engine.values.get(), engine.flags.get()
    host_values = gpu_device.pinned_copy(np.full(n, -7, values.dtype))
    host_flags = gpu_device.pinned_copy(np.full(n, 9, np.uint8))
    ranges = [(0, 100), (1000, n)]
    engine.store(host_values, host_flags, ranges, written=False, wait=False).synchronize()
    kept = np.ones(n, bool)
    kept[:100] = kept[1000:] = False  # the vertices outside the ranges keep their values
    assert np.array_equal(host_values[~kept], want_values[~kept])
    assert np.array_equal(host_flags[~kept], want_flags[~kept])
    assert (host_values[kept] == -7).all() and (host_flags[kept] == 9).all()
    with pytest.raises(TypeError, match="float64"):
        engine.store(np.zeros(n, np.float64), host_flags, ranges)


def test_indexed_sum_from_threads_at_once_keeps_each_its_arguments():
    """The packed launch of indexed_sum is shared per device: a thread switch between
    one call's argument update and its launch must not give it another's arguments."""
    import sys
    import threading

    import cupy

    rng = np.random.default_rng(5)
    inputs = [(rng.random(50_000), np.flatnonzero(rng.random(50_000) < p)) for p in (0.2, 0.7)]
    wrong = []

    def work(values, index):
        try:
            device_values, want = cupy.asarray(values), float(values[index].sum())
            for _ in range(300):
                got = float(arrays.indexed_sum(device_values, index))
                if got != pytest.approx(want, rel=1e-12):
                    wrong.append(got)
        except Exception as exc:  # a thread's exception would not fail the test
            wrong.append(exc)

    threads = [threading.Thread(target=work, args=pair) for pair in inputs]
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert not wrong


def test_packed_launch_passes_every_argument_kind_and_its_updates():
    import cupy

    kernel = cupy.RawKernel(r"""
    extern "C" __global__ void axpb(const double* x, int n, long long shift, double a,
                                    double* out) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = a * x[i] + (double)shift;
    }""", "axpb")
    x = cupy.arange(1000, dtype=cupy.float64)
    out, other = cupy.zeros(1000), cupy.zeros(1000)
    launch = gpu_launch.PackedLaunch(kernel, dict(x=x, n=np.int32(1000), shift=np.int64(2**40),
                                           a=np.float64(0.5), out=None))
    launch.update(out=out)
    launch(4, 256, 0, cupy.cuda.get_current_stream().ptr)
    np.testing.assert_array_equal(out.get(), 0.5 * np.arange(1000) + 2.0**40)
    launch.update(out=other, n=10, a=-1.0, shift=3)
    launch(1, 256, 0, cupy.cuda.get_current_stream().ptr)
    want = np.zeros(1000)
    want[:10] = 3.0 - np.arange(10)
    np.testing.assert_array_equal(other.get(), want)
    np.testing.assert_array_equal(out.get(), 0.5 * np.arange(1000) + 2.0**40)  # untouched


@pytest.mark.parametrize("order", ["source", "destination"])
def test_page_layout_on_the_device_equals_the_host(order):
    """The engine lays pages out with CuPy; NumPy (the tested host path) gives the very
    same arrays: CuPy's sort is stable as NumPy's 'stable' is."""
    import cupy

    g = hg.generate.rmat(14, seed=4, weights=(1.0, 9.0))
    part = g.partition(page_bytes=256 << 10)
    assert part.num_pages > 2
    ranges = 3 if order == "source" else 1
    for p in range(part.num_pages):
        host = gpu_layout.page_layout(np, g, part, p, True, order, ranges)
        device = gpu_layout.page_layout(cupy, g, part, p, True, order, ranges)
        for h, d in zip(host, device):
            np.testing.assert_array_equal(h, d.get())


@pytest.mark.parametrize("name", ["wiki-Vote.txt", "rmat"])
def test_streamed_pages_equal_resident(name):
    g = graph_of(name)
    s = source_of(g)
    quarter = {"memory_budget": edge_bytes(g, g.weighted) // 4}
    spec = ProgramSpec(ShortestPaths(int(g.id_of(s))))
    values, flags, _ = spec.initial_state(g)
    engine = gpu_engine.GpuEngine(spec, g, values, flags, np.zeros(1, np.float32), **quarter)
    placed = engine.describe()
    assert placed["streamed_pages"] > 0 and placed["streamed_edges"] > g.num_arcs // 2
    # streamed passes are not queued ahead (a discarded one would still copy its pages)
    assert engine.queued == 1
    assert gpu_engine.GpuEngine(spec, g, values, flags, np.zeros(1, np.float32)).queued == \
        tuning.QUEUED
    np.testing.assert_array_equal(hg.sssp(g, s, devices="gpu", gpu=quarter).values,
                                  hg.sssp(g, s, devices="cpu").values)
    assert_close(hg.pagerank(g, tol=None, max_iterations=10, devices="gpu", gpu=quarter).values,
                 hg.pagerank(g, tol=None, max_iterations=10, devices="gpu").values, np.float64)
    np.testing.assert_array_equal(
        hg.connected_components(g, devices="gpu", gpu={**quarter, "streams": 1}).values,
        hg.connected_components(g, devices="cpu").values)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sync_and_async_converge_to_the_reference(mode):
    g = graph_of("rmat")
    s = source_of(g)
    sid = int(g.id_of(s))
    dist = hg.sssp(g, s, devices="gpu", mode=mode)
    assert dist.converged
    np.testing.assert_array_equal(dist.values, csgraph.dijkstra(g.to_scipy(), indices=sid))
    cc = hg.connected_components(g, devices="gpu", mode=mode, algorithm="label-propagation")
    np.testing.assert_array_equal(cc.values, hg.connected_components(g, devices="cpu").values)
    pr = hg.pagerank(g, tol=1e-13, max_iterations=400, devices="gpu", mode=mode)
    assert pr.converged
    assert_close(pr.values, hg.pagerank(g, tol=1e-13, max_iterations=400).values, np.float32)


def test_pagerank_tolerance_hooks_run_on_the_device():
    g = real("wiki-Vote.txt")
    on_gpu = hg.pagerank(g, devices="gpu")
    on_cpu = hg.pagerank(g, devices="cpu")
    assert on_gpu.converged and abs(on_gpu.iterations - on_cpu.iterations) <= 1
    np.testing.assert_allclose(on_gpu.values, on_cpu.values, rtol=1e-5)


def _ranks(g, iterations, dtype):
    """PageRank's ranks on the GPU after exactly ``iterations`` iterations (no test)."""
    return hg.pagerank(g, devices="gpu", tol=None, max_iterations=iterations,
                       dtype=dtype).values


@pytest.fixture
def segment_depths(monkeypatch):
    """The iterations each segment made during the test keeps in flight."""
    from hetgraph.scheduler import tasks

    depths, made = [], tasks.Segment.__init__

    def spied(self, *args, **kwargs):
        made(self, *args, **kwargs)
        depths.append(self.depth)

    monkeypatch.setattr(tasks.Segment, "__init__", spied)
    return depths


@pytest.mark.parametrize("tol, dtype", [(1e-8, np.float64), (1e-10, np.float64),
                                        (1e-7, np.float32)])
def test_pagerank_stops_after_the_first_iteration_whose_change_is_below_tol(
        tol, dtype, segment_depths):
    g = real("wiki-Vote.txt")
    result = hg.pagerank(g, devices="gpu", tol=tol, max_iterations=200, dtype=dtype)
    k, limit = result.iterations, g.num_vertices * tol
    assert result.converged and k > 2
    assert max(segment_depths) > 1  # (the test on the device: the next one queued)
    before, last = _ranks(g, k - 2, dtype), _ranks(g, k - 1, dtype)
    # the iteration queued after the last one was undone: its values are the k-th (to
    # the last bits, which the dangling sum's atomics may change between runs)
    np.testing.assert_allclose(result.values, _ranks(g, k, dtype), atol=0,
                               rtol=1e-12 if dtype == np.float64 else 1e-6)
    assert np.abs(result.values - last).sum() < limit <= np.abs(last - before).sum()


def test_colored_pagerank_tests_convergence_on_the_host(segment_depths):
    g = real("wiki-Vote.txt").reorder("color")
    colored = hg.pagerank(g, devices="gpu", mode="colored", tol=1e-9, max_iterations=200)
    assert colored.converged and segment_depths and max(segment_depths) == 1


def test_user_programs_from_the_guide_run_on_the_gpu(doc):
    namespace = doc
    g = graph_of("rmat")
    s = int(source_of(g))
    widest = namespace["WidestPath"](s)
    np.testing.assert_array_equal(hg.run(widest, g, devices="gpu").values,
                                  hg.run(widest, g, devices="cpu").values)
    reach_class = namespace["Reachability"]
    sources = list(range(0, 64, 2))
    reach = reach_class(sources)
    np.testing.assert_array_equal(hg.run(reach, g, devices="gpu").values,
                                  hg.run(reach, g, devices="cpu").values)


def test_out_of_memory_degrades_to_smaller_pages():
    import cupy

    g = graph_of("rmat")
    s = source_of(g)
    want = hg.sssp(g, s, devices="cpu").values
    gpu_kept.release()  # (a layout kept by an earlier test would hold memory)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    limit = pool.total_bytes() + edge_bytes(g, True) // 3
    pool.set_limit(size=limit)
    try:
        # the budget claims the whole graph fits; the allocation fails and it streams
        result = hg.sssp(g, s, devices="gpu", gpu={"memory_budget": 4 * edge_bytes(g, True)})
    finally:
        pool.set_limit(size=0)
    np.testing.assert_array_equal(result.values, want)


def test_pages_whose_sort_does_not_fit_the_device_are_laid_out_on_the_host(monkeypatch):
    """When the device has no room for a page's sort, the page is laid out on the host:
    here every page, resident and streamed, and the answer is the CPU's."""
    import cupy

    g = graph_of("rmat")
    s = source_of(g)
    want = hg.sssp(g, s, devices="cpu").values
    layout = gpu_layout.page_layout
    on_host = []

    def no_device_memory(xp, *args):
        if xp is cupy:
            raise MemoryError("std::bad_alloc: (as a sort's scratch that does not fit)")
        on_host.append(args[2])
        return layout(xp, *args)

    monkeypatch.setattr(gpu_layout, "page_layout", no_device_memory)
    gpu_kept.release()  # (a layout kept by an earlier test would be found, not made)
    result = hg.sssp(g, s, devices="gpu", gpu={"memory_budget": edge_bytes(g, True) // 2})
    assert len(on_host) > 2
    np.testing.assert_array_equal(result.values, want)


@pytest.mark.parametrize("fraction", [1, 4])  # resident; a quarter resident, streamed
def test_a_later_run_of_a_graph_finds_its_pages_kept_on_the_device(monkeypatch, fraction):
    """The pages are laid out once: later runs of the graph with the same layout options
    find them, and answer as the CPU does; other options, or another graph (here the
    same edges), lay out again in their place (one layout kept a device); release()
    drops it."""
    g = graph_of("rmat")
    s = source_of(g)
    options = {"memory_budget": edge_bytes(g, True) // fraction}
    built, real_pages = [], gpu_engine.DevicePages
    monkeypatch.setattr(gpu_engine, "DevicePages", lambda *a, **k: built.append(a[0]) or
                        real_pages(*a, **k))
    for _ in range(2):
        np.testing.assert_array_equal(hg.sssp(g, s, devices="gpu", gpu=options).values,
                                      hg.sssp(g, s, devices="cpu").values)
    answer = hg.sssp(g, s, devices="gpu", gpu=options).values
    assert built == [g]
    hg.sssp(g, s, devices="gpu", gpu=dict(options, edge_order="destination"))
    other = graph_of("rmat")  # the same edges, another graph object
    np.testing.assert_array_equal(hg.sssp(other, s, devices="gpu", gpu=options).values,
                                  answer)
    assert built == [g, g, other] and len(gpu_kept._KEPT) == 1
    gpu_kept.release()
    assert not gpu_kept._KEPT
    hg.sssp(g, s, devices="gpu", gpu=options)
    assert built == [g, g, other, g]
    # a program without weights finds the weighted pages when all of them are resident
    np.testing.assert_array_equal(hg.bfs(g, s, devices="gpu", gpu=options).values,
                                  hg.bfs(g, s, devices="cpu").values)
    assert len(built) == (4 if fraction == 1 else 5)


def test_runs_at_once_on_one_graph_share_its_pages():
    """Two runs of the same graph in two threads share the kept layout (each has its own
    staging buffers for the streamed pages) and both answer as the CPU does."""
    from concurrent.futures import ThreadPoolExecutor

    g = graph_of("rmat")
    s = source_of(g)
    options = {"memory_budget": edge_bytes(g, True) // 4}
    want = hg.sssp(g, s, devices="cpu").values
    hg.sssp(g, s, devices="gpu", gpu=options)  # lays the pages out
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(hg.sssp, g, s, devices="gpu", gpu=options) for _ in range(4)]
        for run in runs:
            np.testing.assert_array_equal(run.result().values, want)


def test_a_page_larger_than_the_budget_is_a_clear_error():
    g = graph_of("rmat")
    with pytest.raises(gpu_device.GpuMemoryError, match="does not fit the GPU budget"):
        hg.sssp(g, source_of(g), devices="gpu", gpu={"memory_budget": 64})


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("limit", [38, 39, 40, 41, 42, 60])
def test_iterations_queued_after_convergence_change_nothing(mode, limit):
    """Sync BFS along a path of 40 vertices activates a vertex an iteration and none at
    the 40th: up to two iterations queued after it are discarded (each undid a swap of
    the value arrays) and the run equals the CPU's, whatever the limit. An async pass
    may see values of the same pass (blocks run in any order): its levels are exact."""
    path = hg.from_arrays(np.arange(39), np.arange(1, 40))
    on_gpu = hg.bfs(path, 0, devices="gpu", mode=mode, max_iterations=limit)
    activated = on_gpu.history["activated"].tolist()
    assert on_gpu.converged == (activated[-1] == 0) and on_gpu.iterations <= limit
    if mode == "sync":
        on_cpu = hg.bfs(path, 0, devices="cpu", max_iterations=limit)
        np.testing.assert_array_equal(on_gpu.values, on_cpu.values)
        assert on_gpu.iterations == on_cpu.iterations == min(limit, 40)
        assert on_gpu.converged == on_cpu.converged == (limit >= 40)
        assert activated == on_cpu.history["activated"].tolist()
    reached = on_gpu.values >= 0
    assert reached[0] and np.all(np.diff(reached.astype(int)) <= 0)  # a prefix
    np.testing.assert_array_equal(on_gpu.values[reached], np.flatnonzero(reached))
    assert reached.all() if on_gpu.converged else limit < 60


class Drift(hg.VertexProgram):
    """x' = x / 2 + c + 1 with c the iteration's constant: the iteration number (a host
    float, a new one for every queued pass) or, with ``mean``, the mean of the values
    (a 0-d float32 device array, copied into the engine's constant)."""

    dtype = np.float32
    reduce = "add"

    def __init__(self, mean):
        self.mean, self.count = mean, 0

    @staticmethod
    def gather(src, weight, dst):
        return src * 0.0

    @staticmethod
    def apply(old, acc, aux, constant):
        return old * 0.5 + acc + constant + 1.0

    @staticmethod
    def activate(new, old):
        return True

    def init(self, graph):
        return np.arange(graph.num_vertices, dtype=np.float32), None

    def iteration_constant(self, graph, values):
        self.count += 1
        return values.mean() if self.mean else float(self.count)


@pytest.mark.parametrize("mean", [False, True])
def test_queued_iterations_read_their_own_constants(mean):
    g = graph_of("rmat")
    on_gpu = hg.run(Drift(mean), g, devices="gpu", max_iterations=12)
    on_cpu = hg.run(Drift(mean), g, devices="cpu", max_iterations=12)
    assert on_gpu.iterations == on_cpu.iterations == 12
    assert_close(on_gpu.values, on_cpu.values, np.float32)
