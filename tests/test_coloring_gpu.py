"""mode="colored" on a GPU (marked gpu: skipped without one, run on the GPU machine):
the same answers as the CPU's sync runs, one launch per color, reruns equal to the last
bits of float sums (the shard kernel adds in any order)."""

import logging

import numpy as np
import pytest

import hetgraph as hg
from conftest import data_path
from hetgraph import coloring as hc

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
