"""A colored GPU pass (engines/gpu_colored.ColoredLaunches: its launches, the shard
kernel's swept and split variants, the swept first sums) run on the CPU through
tests/cuda_emulation.py, against the CPU engine's answers: BFS and components exactly
the CPU's sync ones, PageRank the CPU's colored sweep to rounding, with hubs' shards
cut into parts and whole. Needs g++ (C++20); no GPU."""

import shutil
import sys
import types

import numpy as np
import pytest

import cuda_emulation as emu
import hetgraph as hg
from conftest import data_path
from hetgraph import coloring as hc
from hetgraph import tuning
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.cc import MinLabel
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.engines.colored import color_shards
from hetgraph.kernels.gpu import source, swept
from hetgraph.kernels.gpu.device import availability
from hetgraph.kernels.gpu.layout import page_layout
from hetgraph.program import ProgramSpec

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture
def emulated(monkeypatch):
    """A call that replaces CuPy by the emulation's stand-in (once the CPU's answers
    are in: a run would look for a GPU), its kernels kept apart from any real GPU's
    (the compiled kernels' caches emptied, and again after the test; the process's
    look for a GPU made before, with the real CuPy or none: it is kept)."""
    def start():
        availability()
        monkeypatch.setitem(sys.modules, "cupy", emu.fake_cupy())
        monkeypatch.setattr(source, "_KERNELS", {})
        monkeypatch.setattr(tuning, "GPU_COLORED_GRAPH", False)
        swept._swept_kernel.cache_clear()

    yield start
    swept._swept_kernel.cache_clear()


class Engine(types.SimpleNamespace):
    """What ColoredLaunches reads of a GpuEngine (engines/gpu.py), built the same way
    on the emulation's arrays: the graph's pages all resident, in source order."""


def engine_for(program, graph, threads=64, ranges=1):
    from hetgraph.engines.gpu_colored import ColoredLaunches

    cp = sys.modules["cupy"]
    spec = ProgramSpec(program)
    coloring = hc.coloring_of(graph)
    values, flags, aux = spec.initial_state(graph, np)
    aux = np.zeros(1, np.float32) if aux is None else aux
    weighted = bool(spec.needs_weights and graph.weighted)
    part = graph.partition(shared_bytes=tuning.GPU_SHARED_BYTES, replication=None,
                           vertex_bytes=spec.dtype.itemsize, cuts=coloring.cuts)
    pages = [page_layout(np, graph, part, p, weighted, ranges=ranges)
             for p in range(part.num_pages)]
    src, offsets = (emu.device(np.concatenate([p[k] for p in pages])) for k in (0, 1))
    weight = emu.device(np.concatenate([p[2] for p in pages])) if weighted else None
    table = emu.device(np.concatenate([p[3] for p in pages]))
    log_r = np.log2(part.replication).astype(np.uint8)
    slots = int((np.diff(part.shard_start) << log_r.astype(np.int64)).max(initial=1))
    degree = graph.out_degree().astype(np.uint32)
    options = dict(aux_dtype=aux.dtype, index_dtype=graph.index_dtype,
                   degree_dtype=np.uint32, weighted=weighted, sync=False,
                   warp_combine=False)
    e = Engine(cupy=cp, spec=spec, graph=graph, coloring=coloring, partition=part,
               values=emu.device(values), flags=emu.device(flags), aux=emu.device(aux),
               constant=cp.zeros(1, np.float64), _no_weight=cp.empty(1, np.float32),
               ranges=ranges, threads_per_block=threads,
               shared_bytes=slots * spec.dtype.itemsize,
               kernel_options=options, kernel=source.compile_kernel(spec, **options),
               pages=types.SimpleNamespace(resident=(src, offsets, weight)),
               plan=types.SimpleNamespace(first_edge=0), counters=cp.zeros(3, np.uint64),
               go=cp.ones(1, np.uint64))
    e._constant_at = e.constant
    # (the source ranges' running sums: GpuEngine's ``partial``)
    e.partial = cp.empty(graph.num_vertices, spec.dtype) if ranges > 1 else e._no_weight
    e._counters_pointer, e._go_pointer = e.counters.data.ptr, e.go.data.ptr
    # (GpuEngine._allocate's shard arguments, in the kernel's order)
    e.shard_arguments = dict(
        src=None, offsets=None, weight=None, shard_start=emu.device(part.shard_start),
        shard_edge=table, shard_log_r=emu.device(log_r), ranges=np.int32(ranges),
        k_begin=np.int32(0), k_end=np.int32(0), first=np.int32(0), last=np.int32(0),
        partial=e.partial, edge_base=np.int64(0), first_shard=np.int32(0),
        values=None, new_values=None, flags=e.flags, aux=e.aux,
        aux_per_vertex=np.int32(e.aux.size > 1), constant_at=None,
        out_degree=emu.device(degree), counters=None, go=None)
    runs = color_shards(part.shard_start, coloring,
                        sparse=spec.incremental and not spec.notify_self)
    e.launches = ColoredLaunches(e, runs)
    return e


def iterate(e, program, graph):
    """One colored iteration as GpuEngine.launch queues it (its constant, the pass);
    returns the vertices it activated."""
    e.counters[...] = 0
    if e.spec.uses_constant:
        e.constant[0] = float(program.iteration_constant(graph, e.values))
    e.launches.run(emu._Stream())
    return int(e.counters[0])


def graphs():
    return {"wiki": hg.read(data_path("wiki-Vote.txt")).reorder("color"),
            "rmat": hg.generate.rmat(11, seed=4).reorder("color")}


@pytest.mark.parametrize("name, cut, ranges", [("wiki", False, 1), ("rmat", True, 1),
                                               ("rmat", True, 2)])
def test_emulated_colored_pagerank_is_the_cpu_colored_sweep(emulated, monkeypatch, name,
                                                            cut, ranges):
    """The launches' ranks after 6 iterations are the CPU colored sweep's to rounding
    (the dangling rank summed again after each color by the next launch's blocks),
    with hubs cut into parts (small shard bounds) or not, in one launch a color or one
    a source range (two: the second applies and sums, the first reads the sums of the
    color before)."""
    if cut:
        monkeypatch.setattr(tuning, "TARGET_SHARDS", 64)
        monkeypatch.setattr(tuning, "MIN_SHARD_EDGES", 16)
    g = graphs()[name]
    want = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=6)
    emulated()
    program = PageRank(rescale=True, tol=None)
    e = engine_for(program, g, ranges=ranges)
    assert e.launches.swept is not None and (e.launches.split_shards > 0) == cut
    for _ in range(6):
        iterate(e, program, g)
    got = program.finalize(g, np.array(e.values))
    np.testing.assert_allclose(got, want.values, rtol=1e-10, atol=0)


def test_emulated_colored_bfs_and_components_equal_sync(emulated, monkeypatch):
    """BFS levels and component labels of the launches (hubs cut into parts), iterated
    until no vertex changes, are the CPU's sync answers exactly."""
    monkeypatch.setattr(tuning, "TARGET_SHARDS", 64)
    monkeypatch.setattr(tuning, "MIN_SHARD_EDGES", 16)
    g = graphs()["rmat"]
    s = int(np.argmax(g.out_degree()))
    wants = (hg.bfs(g, g.label_of(s), devices="cpu").values,
             hg.connected_components(g, algorithm="label-propagation",
                                     devices="cpu").values)
    undirected = g.to_undirected()  # (components' graph, with the graph's coloring)
    undirected.kept(hc.KEPT, lambda: hc.coloring_of(g))
    emulated()
    for program, graph, want in zip((BreadthFirst(s), MinLabel(np.int32)), (g, undirected),
                                    wants):
        e = engine_for(program, graph)
        assert e.launches.split_shards > 0
        for _ in range(100):
            if iterate(e, program, graph) == 0:
                break
        got = program.finalize(graph, np.array(e.values)) \
            if hasattr(program, "finalize") else np.array(e.values)
        np.testing.assert_array_equal(got, want, err_msg=type(program).__name__)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_emulated_normalize_scales_to_a_weighted_sum_of_one(emulated, dtype):
    """The GPU's normalize (a colored PageRank's rescale: two launches) scales the
    values by 1 / sum(values * weights) as NumPy does, to rounding (its sum in blocks),
    and gives the same bits again."""
    from hetgraph.kernels.gpu import reduce

    rng = np.random.default_rng(3)
    x, w = rng.random(70_001).astype(dtype), rng.random(70_001) + 0.5
    emulated()
    reduce._normalize_launches.cache_clear()
    try:
        got, again = emu.device(x), emu.device(x)
        reduce.normalize(got, emu.device(w))
        reduce.normalize(again, emu.device(w))
    finally:
        reduce._normalize_launches.cache_clear()
    want = x * (1.0 / (x.astype(np.float64) @ w))
    np.testing.assert_allclose(got, want.astype(dtype), rtol=1e-12 if dtype == np.float64
                               else 1e-6)
    assert got.dtype == dtype and got.tobytes() == again.tobytes()
    assert float(np.asarray(got, np.float64) @ w) == pytest.approx(1.0, rel=1e-5)
