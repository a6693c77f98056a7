"""GraphCage's cache blocking of the GPU pull on the GPU (marked gpu).

The device's L2 is made small (the engine's ``l2_bytes`` patched) so that a graph of
2^14 vertices needs many source ranges: SSSP, BFS and CC by TOCAB equal the shard
kernel bit for bit, activated counts included, sync and async; PageRank's error
against the float64 CPU is no worse; the automatic choice times both kernels, then
keeps the faster, and says so in the history and the description; values that fit
the L2 keep the shard kernel, as do streamed pages.
"""

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.engines import gpu as gpu_engine
from hetgraph.errors import GraphError
from hetgraph.program import ProgramSpec

pytestmark = pytest.mark.gpu

SMALL_L2 = 8192  # bytes: 2^14 float32 values in 16 ranges at a share of 0.5


@pytest.fixture
def small_l2(monkeypatch):
    monkeypatch.setattr(gpu_engine, "l2_bytes", lambda: SMALL_L2)
    monkeypatch.setattr(tuning, "TOCAB_L2_SHARE", 0.5)


def rmat():
    return hg.generate.rmat(14, seed=4, weights=(1.0, 9.0))


def source_of(g):
    return g.label_of(int(np.argmax(g.out_degree())))


RUNS = {
    "sssp": lambda g, **o: hg.sssp(g, source_of(g), delta=np.inf, **o),
    "bfs": lambda g, **o: hg.bfs(g, source_of(g), **o),
    "cc": lambda g, **o: hg.connected_components(g, algorithm="label-propagation", **o),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("algorithm", sorted(RUNS))
def test_min_programs_equal_the_shard_kernel_bit_for_bit(algorithm, mode, small_l2):
    g = rmat()
    call = RUNS[algorithm]
    blocked = call(g, devices="gpu", mode=mode, gpu={"tocab": True})
    shard = call(g, devices="gpu", mode=mode, gpu={"tocab": False})
    assert set(blocked.history["mode"]) == {"gpu-tocab"}
    assert set(shard.history["mode"]) == {"gpu-pull"}
    np.testing.assert_array_equal(blocked.values, shard.values)
    if mode == "sync":
        assert blocked.history["activated"].tolist() == shard.history["activated"].tolist()
    cpu = call(g, devices="cpu", mode=mode)
    np.testing.assert_array_equal(blocked.values, cpu.values)


@pytest.mark.parametrize("share", [0.01, 0.5, 4.0])
def test_every_range_size_gives_the_same_distances(share, small_l2):
    g = rmat()
    want = RUNS["sssp"](g, devices="cpu").values
    got = RUNS["sssp"](g, devices="gpu", gpu={"tocab": share})
    assert set(got.history["mode"]) == {"gpu-tocab"}
    np.testing.assert_array_equal(got.values, want)


def test_pagerank_error_no_worse_than_the_shard_kernel(small_l2):
    g = rmat()
    reference = hg.pagerank(g, tol=None, max_iterations=20, devices="cpu").values
    errors = {}
    for tocab in (False, True, True):  # (the second TOCAB run binds the kept engine)
        ranks = hg.pagerank(g, tol=None, max_iterations=20, dtype=np.float32,
                            devices="gpu", gpu={"tocab": tocab}).values
        errors.setdefault(tocab, []).append(
            float(np.max(np.abs(ranks - reference) / reference)))
    assert max(errors[True]) <= max(2 * errors[False][0], 1e-6), errors
    double = hg.pagerank(g, tol=None, max_iterations=20, devices="gpu",
                         gpu={"tocab": True}).values
    np.testing.assert_allclose(double, reference, rtol=1e-9)


def _engine(g, **options):
    spec = ProgramSpec(PageRank(dtype=np.float32, tol=None))
    values, flags, aux = spec.initial_state(g)
    return gpu_engine.GpuEngine(spec, g, values, flags, aux, **options)


def test_the_automatic_choice_times_both_kernels_then_keeps_the_faster(small_l2):
    engine = _engine(rmat())
    passes = tuning.TOCAB_CALIBRATION_PASSES
    modes = [engine.iterate(1e-9)[0] for _ in range(2 * passes + 4)]
    assert modes[:2 * passes] == ["gpu-pull", "gpu-tocab"] * passes
    described = engine.describe()["tocab"]
    assert described["ranges"] == 16 and described["l2_bytes"] == SMALL_L2
    assert described["range_vertices"] == 1024 and described["segments"] > 0
    seconds = described["seconds"]
    assert len(seconds["shard"]) == len(seconds["tocab"]) == passes
    chosen = min(seconds["tocab"]) < min(seconds["shard"])
    assert described["chosen"] is chosen
    assert set(modes[2 * passes:]) == {"gpu-tocab" if chosen else "gpu-pull"}


def test_values_that_fit_the_l2_keep_the_shard_kernel():
    assert gpu_engine.l2_bytes() >= 1 << 20  # (the device's own, queried)
    engine = _engine(rmat())
    assert engine.describe()["tocab"] is None
    assert engine.iterate(1e-9)[0] == "gpu-pull"


def test_streamed_pages_keep_the_shard_kernel(small_l2):
    g = rmat()
    engine = _engine(g, tocab=True, memory_budget=g.num_arcs * 3)
    assert engine.describe()["streamed_pages"] > 0 and engine.describe()["tocab"] is None
    with pytest.raises(GraphError, match="tocab"):
        _engine(g, tocab="yes")
