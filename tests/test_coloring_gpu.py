"""mode="colored" on a GPU (marked gpu: skipped without one, run on the GPU machine):
the same answers as the CPU's sync runs, one launch per color, reruns equal to the last
bits of float sums (the shard kernel adds in any order)."""

import logging

import numpy as np
import pytest

import hetgraph as hg
from conftest import data_path
from hetgraph import coloring as hc
from hetgraph import tuning

pytestmark = pytest.mark.gpu


def graphs():
    return {"wiki": hg.read(data_path("wiki-Vote.txt")).reorder("color"),
            "grid": hg.generate.grid(60, 80, seed=2).reorder("color"),
            "rmat": hg.generate.rmat(14, seed=4, weights=(1.0, 9.0)).reorder("color")}


@pytest.mark.parametrize("name", ["wiki", "grid", "rmat"])
def test_gpu_colored_equals_cpu_sync(name, dispatcher_only):  # (sync's iterations)
    g = graphs()[name]
    s = g.label_of(int(np.argmax(g.out_degree())))
    for what, call in (
            ("bfs", lambda **o: hg.bfs(g, s, **o)),
            ("sssp", lambda **o: hg.sssp(g, s, delta=np.inf, **o)),
            ("cc", lambda **o: hg.connected_components(g, algorithm="label-propagation",
                                                       **o))):
        want = call(devices="cpu", mode="sync")
        got = call(devices="gpu", mode="colored")
        np.testing.assert_array_equal(got.values, want.values, err_msg=what)
        assert set(got.history["mode"]) == {"gpu-colored"}, what
        assert got.iterations <= want.iterations, what


@pytest.mark.parametrize("name", ["wiki", "rmat"])
def test_gpu_colored_pagerank_is_the_cpu_colored_sweep(name):
    g = graphs()[name]
    cpu = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=10)
    gpu = hg.pagerank(g, devices="gpu", mode="colored", tol=None, max_iterations=10)
    np.testing.assert_allclose(gpu.values, cpu.values, rtol=1e-9, atol=0)
    again = hg.pagerank(g, devices="gpu", mode="colored", tol=None, max_iterations=10)
    np.testing.assert_allclose(again.values, gpu.values, rtol=1e-12, atol=0)
    tight = hg.pagerank(g, devices="gpu", mode="colored", tol=1e-10, max_iterations=1000)
    sync = hg.pagerank(g, devices="cpu", tol=1e-10, max_iterations=1000)
    assert tight.converged
    assert np.abs(tight.values - sync.values).sum() < g.num_vertices * 1e-8


def test_gpu_engine_launches_each_color():
    from hetgraph.algorithms.bfs import UNREACHED, BreadthFirst
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.program import ProgramSpec

    g = graphs()["grid"]
    coloring = hc.coloring_of(g)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g, np)
    engine = GpuEngine(spec, g, values, flags, np.zeros(1, np.float32), sync=False,
                       coloring=coloring)
    described = engine.describe()
    assert described["mode"] == "gpu-colored" and described["passes_per_iteration"] == 2
    for cut in coloring.cuts:
        assert cut in engine.partition.shard_start
    for _ in range(2):
        mode, computed, edges, _ = engine.iterate(0.0)
    assert (mode, computed, edges) == ("gpu-colored", g.num_vertices, g.num_arcs)
    # the other color (the last), then the source's: two hops an iteration (a sync
    # pass: one), from the first
    levels = engine.result()
    assert levels[levels < UNREACHED].max() == 4


def test_gpu_colored_on_a_graph_not_in_color_order_runs_as_async(caplog):
    g = hg.generate.grid(30, 30, seed=2)
    want = hg.bfs(g, 0, devices="cpu").values
    with caplog.at_level(logging.WARNING):
        got = hg.bfs(g, 0, devices="gpu", mode="colored")
    np.testing.assert_array_equal(got.values, want)
    assert "runs as 'async'" in caplog.text
    assert set(got.history["mode"]) == {"gpu-pull"}


@pytest.mark.parametrize("name", ["wiki", "rmat", "grid"])
def test_gpu_colored_pagerank_sums_the_dangling_rank_after_each_color(name):
    """The GPU's colored launches sum the dangling rank again after each color, as the
    CPU's passes do: the CPU's colored ranks to rounding after 3 and 9 iterations (the
    sums differ in their order only), closer to SciPy's exact ranks than sync's after
    as many; converged, the ranks sum to 1 within N * tol."""
    from test_coloring import exact_pagerank

    g = graphs()[name]
    exact = exact_pagerank(g)
    for k in (3, 9):
        cpu = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=k)
        gpu = hg.pagerank(g, devices="gpu", mode="colored", tol=None, max_iterations=k)
        sync = hg.pagerank(g, devices="cpu", tol=None, max_iterations=k)
        np.testing.assert_allclose(gpu.values, cpu.values, rtol=1e-9, atol=0)
        assert np.abs(gpu.values - exact).sum() < np.abs(sync.values - exact).sum(), k
    tight = hg.pagerank(g, devices="gpu", mode="colored", tol=1e-10, max_iterations=1000)
    assert tight.converged
    assert abs(tight.values.sum() - 1.0) < g.num_vertices * 1e-10


def test_gpu_swept_sums_equal_the_cpu_sums():
    """SweptSums' first sums of an iteration (every color's, then the constant) give the
    CPU's constant (``direct.swept_entry`` of a whole iteration) to rounding, and the
    same bits again; its arguments make a color's kernel sum it again unless the color
    holds none of the constant's vertices or is color 0, and the launch after add
    those sums."""
    import cupy

    from hetgraph.engines.colored import swept_of
    from hetgraph.kernels.cpu import direct
    from hetgraph.kernels.gpu.swept import SweptSums

    class Terms:  # (a constant over the vertices of three colors of many sizes)
        @staticmethod
        def swept_constant(graph):
            ids = np.flatnonzero(np.random.default_rng(1).random(graph.num_vertices) < 0.6)
            return 0.25, 0.5, ids

    g = graphs()["rmat"]
    coloring = hc.coloring_of(g)
    values = np.random.default_rng(2).random(g.num_vertices)
    swept = swept_of(Terms(), g, coloring)
    x = cupy.asarray(values)
    device = SweptSums(swept, x, blocks=8)
    stream = cupy.cuda.get_current_stream()

    def first_sums(sums):
        launch, blocks, threads = sums.launch
        launch(blocks, threads, 0, stream.ptr)
        return sums.constant.get().tobytes()

    want = direct.swept_entry(values, swept, -1, 0.0)
    first = first_sums(device)
    assert np.frombuffer(first)[0] == pytest.approx(want, rel=1e-13)
    again = SweptSums(swept, x, blocks=8)
    assert first_sums(again) == first and first_sums(device) == first
    sizes = np.diff(swept[1])
    summing = [device.sums(c) for c in range(coloring.count)]
    assert summing == [bool(sizes[c]) and c > 0 for c in range(coloring.count)]
    # a summing launch's sums go to the buffer the launch before did not write, and
    # the launch after adds them
    first, after = device.arguments(3, 8, True, None)
    second, last = device.arguments(2, 5, False, after)
    assert after == (0, 8, 3) and last is None
    assert (int(first["swept_color"]), int(first["prior_color"])) == (3, -1)
    assert (int(second["swept_color"]), int(second["prior_color"])) == (-1, 3)
    assert int(second["prior_blocks"]) == 8
    assert second["prior_partial"] is first["swept_partial"]
    assert second["swept_partial"] is not first["swept_partial"]
    assert int(device._mask.sum()) == len(swept[0])


def test_gpu_colored_pass_is_one_graph_captured_once(monkeypatch):
    """A colored PageRank engine captures its pass once: its iterations and a later run
    bound to it (a new aux array, copied into the engine's) replay it; the values are
    those of the same passes queued launch by launch, to the last bits of the shard
    kernel's float sums."""
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.program import ProgramSpec

    g = graphs()["wiki"]
    coloring = hc.coloring_of(g)

    def run(iterations, rebind):
        spec = ProgramSpec(PageRank(rescale=True, tol=None))
        values, flags, aux = spec.initial_state(g, np)
        engine = GpuEngine(spec, g, values, flags, aux, sync=False, coloring=coloring)
        for _ in range(iterations):
            engine.iterate(0.0)
        if rebind:
            engine.bind(spec, g, None, aux.copy())
            engine.load(values, flags, [(0, g.num_vertices)])
            for _ in range(iterations):
                engine.iterate(0.0)
        return engine

    replayed = run(4, rebind=True)
    assert replayed.describe()["graph_captures"] == 1
    monkeypatch.setattr(tuning, "GPU_COLORED_GRAPH", False)
    queued = run(4, rebind=False)
    assert queued.describe()["graph_captures"] == 0
    np.testing.assert_allclose(replayed.result(), queued.result(), rtol=1e-12, atol=0)


def test_gpu_colored_launches_cut_hubs_into_parts(monkeypatch, dispatcher_only):
    """Under small shard bounds (wiki-Vote's hubs then hold more in-edges than their
    colors' bounds) a colored launch runs a hub's shard as parts, a block each: more
    blocks than shards, and the same answers: BFS, SSSP and CC exactly the CPU's sync
    ones; PageRank the launches' without parts to rounding (the parts add in another
    order) and the CPU's colored sweep to 1e-9."""
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.program import ProgramSpec

    monkeypatch.setattr(tuning, "TARGET_SHARDS", 64)
    monkeypatch.setattr(tuning, "MIN_SHARD_EDGES", 16)
    g = hg.read(data_path("wiki-Vote.txt")).reorder("color")  # (partitioned afresh)
    s = g.label_of(int(np.argmax(g.out_degree())))
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g, np)
    engine = GpuEngine(spec, g, values, flags, np.zeros(1, np.float32), sync=False,
                       coloring=hc.coloring_of(g))
    described = engine.describe()
    assert described["split_shards"] >= 10
    assert sum(described["launch_blocks"]) > engine.partition.num_shards
    for what, call in (
            ("bfs", lambda **o: hg.bfs(g, s, **o)),
            ("sssp", lambda **o: hg.sssp(g, s, delta=np.inf, **o)),
            ("cc", lambda **o: hg.connected_components(g, algorithm="label-propagation",
                                                       **o))):
        want = call(devices="cpu", mode="sync")
        np.testing.assert_array_equal(call(devices="gpu", mode="colored").values,
                                      want.values, err_msg=what)

    def pagerank(device):
        return hg.pagerank(g, devices=device, mode="colored", tol=None,
                           max_iterations=10).values

    parts, cpu = pagerank("gpu"), pagerank("cpu")
    monkeypatch.setattr(tuning, "GPU_COLORED_SPLIT", False)
    whole = pagerank("gpu")
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=0)
    np.testing.assert_allclose(parts, cpu, rtol=1e-9, atol=0)


def test_gpu_normalize_scales_to_a_weighted_sum_of_one():
    """normalize (a colored PageRank's rescale on the device) scales the values by
    1 / sum(values * weights) as NumPy does, to rounding, the same bits again."""
    import cupy

    from hetgraph.kernels.arrays import normalize

    rng = np.random.default_rng(3)
    x, w = rng.random(1_000_003), rng.random(1_000_003) + 0.5
    got, again, weights = cupy.asarray(x), cupy.asarray(x), cupy.asarray(w)
    normalize(got, weights)
    normalize(again, weights)
    np.testing.assert_allclose(got.get(), x * (1.0 / (x @ w)), rtol=1e-12, atol=0)
    assert got.get().tobytes() == again.get().tobytes()
