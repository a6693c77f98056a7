"""The GPU push over active subgraphs (kernels/gpu/push.py, engines/subway.py).

Without a GPU: the push kernels of every incremental built-in program (and a max
relaxation) compile with nvcc for sm_90 when it is installed. On the GPU (marked gpu):
runs whose last pages stream give the CPU's converged answers exactly (SSSP also
SciPy's) with subgraphs on, in async-subgraph mode and off, on RMAT and a grid; the
bytes each iteration moves are those of the formula; async-subgraph needs no more
iterations, on the grid at most 0.69x. The CPU's answers they are held to are checked
to have converged without a GPU. Runs through ``hg`` use one GPU (a cluster of one):
the active subgraph is a one-GPU engine's.
"""

import shutil
import subprocess

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.cc import MinLabel
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.errors import HetGraphError
from hetgraph.kernels.gpu.push import can_push, push_source
from hetgraph.program import ProgramSpec
from conftest import widest_paths
from test_subgraph import _distances

NVCC = shutil.which("nvcc")


class Widest(hg.VertexProgram):
    """Widest paths from vertex 0 in float32 (not built in): a max relaxation, the
    bottleneck of a path its smallest weight."""

    dtype, reduce, needs_weights = np.float32, "max", True
    incremental = activates_on_change = True

    @staticmethod
    def gather(src, weight, dst):
        return src if src < weight else weight

    @staticmethod
    def apply(old, acc, aux):
        return max(acc, old)

    @staticmethod
    def activate(new, old):
        return old < new

    def init(self, graph):
        width = np.where(np.arange(graph.num_vertices) == 0, np.inf, 0.0)
        return width.astype(np.float32), width > 0


PUSHING = [ShortestPaths(0), ShortestPaths(0, np.float32), BreadthFirst(0), MinLabel(),
           MinLabel(np.int32), Widest()]


def test_only_incremental_programs_push():
    assert all(can_push(ProgramSpec(p)) for p in PUSHING)
    spec = ProgramSpec(PageRank())
    assert not can_push(spec)
    with pytest.raises(HetGraphError, match="not incremental"):
        push_source(spec, np.float32, np.int32, np.uint32, weighted=False)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize("index, weighted", [(np.int32, True), (np.int64, False)])
def test_push_kernels_compile(index, weighted, tmp_path):
    for program in PUSHING:
        source = push_source(ProgramSpec(program), np.float32, index, np.uint32,
                             weighted=weighted)
        for name in ("subgraph_push", "subgraph_push_hubs", "subgraph_flags"):
            assert f"void {name}(" in source
        path = tmp_path / "push.cu"
        path.write_text(source)
        done = subprocess.run([NVCC, "-arch=sm_90", "-std=c++17", "--ptx", "-o",
                               str(tmp_path / "push.ptx"), str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 0, (type(program).__name__, done.stderr)


# --- on the GPU ------------------------------------------------------------------------------

def _graphs():
    return {"rmat": hg.generate.rmat(13, seed=4, weights=(1.0, 9.0)),
            "grid": hg.generate.grid(120, 100, seed=2)}


def _quarter(g):
    """A GPU budget of a quarter of the graph's weighted page bytes (most pages stream)."""
    return g.num_arcs * (g.index_dtype.itemsize + 2 + 4) // 4


def _streamed_calls(g, s):
    """(name, call) of the programs a streamed run is compared on, from vertex label
    ``s`` (Widest from vertex 0), each allowed as many iterations as vertices: a
    run's answer is the converged one (hg.run stops at 100 by default, short of
    Widest's on the grid, where async-subgraph mode gets further in fewer)."""
    limit = g.num_vertices
    return (("sssp", lambda **o: hg.sssp(g, s, **o)), ("bfs", lambda **o: hg.bfs(g, s, **o)),
            ("cc", lambda **o: hg.connected_components(g, algorithm="label-propagation",
                                                       **o)),
            ("widest", lambda **o: hg.run(Widest(), g, max_iterations=limit, **o)))


def widest_widths(g, source):
    """The widest-path widths from ``source`` as a float32 run gives them
    (:func:`conftest.widest_paths`)."""
    return widest_paths(g, source).astype(np.float32)


@pytest.mark.parametrize("kind", ["rmat", "grid"])
def test_the_cpu_answers_streamed_runs_are_held_to_converged(kind):
    """Each CPU answer test_streamed_runs_equal_the_cpu compares with has converged
    (Widest's is also the bottleneck Dijkstra's): a run cut short is no answer to
    hold a faster-converging mode to."""
    g = _graphs()[kind]
    s = g.label_of(int(np.argmax(g.out_degree())))
    for name, call in _streamed_calls(g, s):
        result = call(devices="cpu")
        assert result.converged, (name, result.iterations)
        if name == "widest":
            np.testing.assert_array_equal(result.values, widest_widths(g, 0))


@pytest.fixture
def one_gpu():
    """Calls through ``hg`` on a cluster of one GPU, on a machine of several too."""
    with hg.Cluster(gpus=1):
        yield


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["rmat", "grid"])
@pytest.mark.parametrize("subgraph", [True, "async", False])
def test_streamed_runs_equal_the_cpu(kind, subgraph, one_gpu):
    g = _graphs()[kind]
    s = g.label_of(int(np.argmax(g.out_degree())))
    options = {"memory_budget": _quarter(g), "subgraph": subgraph}
    for name, call in _streamed_calls(g, s):
        on_gpu, on_cpu = call(devices="gpu", gpu=options), call(devices="cpu")
        assert on_gpu.converged, (name, on_gpu.iterations)
        wrong = np.flatnonzero(on_gpu.values != on_cpu.values)
        assert wrong.size == 0, (name, wrong.size, wrong[:8].tolist(),
                                 on_gpu.values[wrong[:8]].tolist(),
                                 on_cpu.values[wrong[:8]].tolist())
        history = on_gpu.history
        pushed = history["mode"] == "gpu-push"
        assert (history.loc[~pushed, "h2d_bytes"] > 0).all()  # (every streamed page)
        assert history["h2d_bytes"].sum() > 0
        assert pushed.any() == (subgraph is not False)
        assert (history.loc[pushed, "f"] < hg.tuning.SUBGRAPH_ACTIVE_EDGES).all()
        assert (history.loc[~pushed, "d2h_bytes"] == 0).all()
        # timed: copies wherever bytes came in, a generation in every push, within the
        # iteration's device time
        copied = history["transfer_seconds"] > 0
        assert (copied == (history["h2d_bytes"] > 0)).all()
        assert (history.loc[pushed, "generation_seconds"] > 0).all()
        assert (history.loc[~pushed, "generation_seconds"] == 0).all()
        assert (history["transfer_seconds"] <= history["gpu_seconds"]).all()
    distances = _distances(g, int(g.id_of(s)))
    for mode in ("sync", "async"):  # (async: the values change in place)
        result = hg.sssp(g, s, devices="gpu", gpu=options, mode=mode)
        np.testing.assert_allclose(result.values, distances, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("program", [ShortestPaths, BreadthFirst])
def test_each_iteration_moves_the_formula_bytes(program):
    """h2d = sum over the active vertices of their streamed out-degree times (index +
    weight bytes), plus their offsets (one more, uint32); d2h = the active list."""
    from hetgraph.engines.gpu import GpuEngine

    g = _graphs()["grid"]
    spec = ProgramSpec(program(int(np.argmax(g.out_degree()))))
    values, flags, _ = spec.initial_state(g)
    engine = GpuEngine(spec, g, values, flags, np.zeros(1, np.float32),
                       memory_budget=_quarter(g))
    subgraphs = engine.describe()["subgraph"]
    assert subgraphs is not None
    first = g.num_vertices - subgraphs["streamed_vertices"]
    src = np.repeat(np.arange(g.num_vertices), np.diff(g.out_indptr))
    streamed = np.bincount(src[g.out_indices >= first], minlength=g.num_vertices)
    edge_bytes = g.index_dtype.itemsize + (4 if spec.needs_weights else 0)
    compared = 0
    for _ in range(g.num_vertices):
        if not engine.frontier()[0]:
            break
        active = np.flatnonzero(engine.flags.get() & (streamed > 0))
        h2d, d2h = engine.h2d_bytes, engine.d2h_bytes
        generation, transfer = engine.generation_seconds, engine.transfer_seconds
        mode = engine.wait(engine.launch(0.0, engine.frontier()))[0]
        assert (engine.transfer_seconds > transfer) == (engine.h2d_bytes > h2d)
        assert (engine.generation_seconds > generation) == (mode == "gpu-push")
        if mode != "gpu-push":
            continue
        edges = int(streamed[active].sum())
        if edges <= subgraphs["chunk_edges"] and len(active) < subgraphs["chunk_edges"] // 2:
            formula = edges * edge_bytes + (len(active) + 1) * 4 if len(active) else 0
            assert engine.h2d_bytes - h2d == formula
            compared += 1
        assert engine.d2h_bytes - d2h == len(active) * g.index_dtype.itemsize
    assert compared > 10
    source = spec.program.source
    np.testing.assert_array_equal(spec.program.finalize(g, engine.result()), hg.run(
        program(source), g, devices="cpu", max_iterations=g.num_vertices).values)


@pytest.mark.gpu
def test_a_pull_moves_the_streamed_pages_bytes():
    """Without a frontier (or with subgraphs off) a pass copies every streamed page:
    their edges at the page layout's bytes each, nothing out."""
    from hetgraph.engines.gpu import GpuEngine

    g = _graphs()["rmat"]
    spec = ProgramSpec(PageRank())
    values, flags, _ = spec.initial_state(g)
    engine = GpuEngine(spec, g, values, flags, np.zeros(1, np.float32),
                       memory_budget=_quarter(g))
    placed = engine.describe()
    assert placed["subgraph"] is None and placed["streamed_edges"] > g.num_arcs // 2
    for _ in range(3):
        transfer = engine.transfer_seconds
        seconds = engine.wait(engine.launch(0.0, engine.frontier()))[4]
        assert 0 < engine.transfer_seconds - transfer <= seconds
    per_edge = g.index_dtype.itemsize + 2 + (4 if spec.needs_weights else 0)
    assert engine.h2d_bytes == 3 * placed["streamed_edges"] * per_edge
    assert engine.d2h_bytes == 0 and engine.generation_seconds == 0.0


@pytest.mark.gpu
@pytest.mark.parametrize("kind, most", [("rmat", 1.0), ("grid", 0.69)])
def test_async_subgraphs_take_fewer_iterations(kind, most, one_gpu):
    """The same answers in async-subgraph mode as in sync, in no more iterations; on the
    grid in at most 0.69x (Subway's Fig. 10; a model of the iterations,
    tests/test_subgraph.py's, gives 0.24x for SSSP, 0.19x for BFS, 0.32x for CC), for
    a max relaxation (Widest) too."""
    g = _graphs()[kind]
    s = g.label_of(int(np.argmax(g.out_degree())))
    budget = _quarter(g)
    for name, call in _streamed_calls(g, s):
        sync = call(devices="gpu", gpu={"memory_budget": budget})
        inner = call(devices="gpu", gpu={"memory_budget": budget, "subgraph": "async"})
        assert sync.converged and inner.converged, name
        np.testing.assert_array_equal(inner.values, sync.values, err_msg=name)
        assert (inner.history["mode"] == "gpu-push").any(), name
        assert inner.iterations <= most * sync.iterations, \
            (name, inner.iterations, sync.iterations)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_async_subgraph_engine_settles_what_is_loaded(mode):
    """Driven directly on the grid: the resident pages are pulled again (more pulls
    than iterations) and chunks pushed again; the answer is SciPy's, and the flags left
    after each iteration are the vertices whose value differs from the one they pushed
    (none once it ends)."""
    from hetgraph.engines.gpu import GpuEngine

    g = _graphs()["grid"]
    source = int(np.argmax(g.out_degree()))
    spec = ProgramSpec(ShortestPaths(source))
    values, flags, aux = spec.initial_state(g)
    engine = GpuEngine(spec, g, values, flags, np.zeros(1, np.float32) if aux is None
                       else aux, memory_budget=_quarter(g),
                       subgraph="async", sync=mode == "sync")
    iterations = 0
    while engine.frontier()[0]:
        ran = engine.wait(engine.launch(0.0, engine.frontier()))
        iterations += 1
        assert ran[0] == "gpu-push" and iterations < g.num_vertices
        assert ran[3] == int(engine.flags.get().sum())
    subgraphs = engine.describe()["subgraph"]
    assert subgraphs["mode"] == "async" and subgraphs["inner_passes"] > 0
    assert subgraphs["resident_passes"] > 2 * iterations
    np.testing.assert_allclose(spec.program.finalize(g, engine.result()),
                               _distances(g, source), rtol=1e-6)
    engine.close()


# --- the push kernels run on the CPU (g++, one thread after another) ------------------------

GXX = shutil.which("g++")

# CUDA's names for a host build: the kernels have no barrier, so running their threads
# one after another is one of the orders a GPU may run them in (the shuffles of the
# flags kernel's counts are not emulated: its flags are)
EMULATION = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
struct hg_dim { unsigned x; };
static hg_dim blockIdx, threadIdx, blockDim, gridDim;
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
static inline int __float_as_int(float f) { int x; memcpy(&x, &f, 4); return x; }
template <class T> static T atomicCAS(T* p, T expected, T desired)
{ T old = *p; if (old == expected) *p = desired; return old; }
template <class T> static T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <class T> static T atomicMax(T* p, T v) { T old = *p; *p = std::max(old, v); return old; }
template <class T> static T atomicMin(T* p, T v) { T old = *p; *p = std::min(old, v); return old; }
template <class T> static T __shfl_down_sync(unsigned, T v, int) { return T(0) * v; }
using std::max;
template <class F> static void hg_grid(unsigned blocks, unsigned threads, F kernel) {
  gridDim.x = blocks; blockDim.x = threads;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t) { blockIdx.x = b; threadIdx.x = t; kernel(); }
}
"""


def _array(name, ctype, values):
    return f"static {ctype} {name}[] = {{{', '.join(values) or '0'}}};\n"


def _emulated_push(spec, g, values, active, first, chunks_of, blocks, threads, tmp_path,
                   inner=False):
    """The chunks of ``active``'s streamed out-edges pushed by the emulated kernels from
    ``values`` (sync: into a copy), marks on; with ``inner``, each chunk pushed from
    the copy (the latest values), then again from the vertices it changed until none
    changes, the values sent written to ``pushed`` (as async-subgraph mode runs it);
    then the flags of [first, N): (target, next marks, changed, flags, pushed)."""
    from hetgraph.kernels.transpile import c_type, literal

    weighted = spec.needs_weights and g.weighted
    n = g.num_vertices
    value = c_type(spec.dtype)
    shown = [literal(v, spec.dtype) for v in values]
    body = [_array("values", value, shown), _array("target", value, shown),
            _array("pushed", value, shown),
            f"static unsigned char next_marks[{n}], marks[{n}], flags[{n}];\n",
            "static unsigned long long changed[1], counters[3], go[1] = {1};\n",
            "static float aux[1];\n", f"static unsigned int out_degree[{n}];\n",
            "static unsigned int hubs[4096], hub_count[1];\n", "int main() {\n"]
    for k, ((a0, a1, e0, e1), targets, weights, offsets) in enumerate(chunks_of):
        body.append(_array(f"active{k}", "unsigned int", [str(int(u)) for u in active[a0:a1]]))
        body.append(_array(f"offsets{k}", "unsigned int", [str(int(x)) for x in offsets]))
        body.append(_array(f"targets{k}", "unsigned int", [str(int(x)) for x in targets]))
        body.append(_array(f"weights{k}", "float", [repr(float(x)) + "f" for x in weights]))
        source, pushed = ("target", "pushed") if inner else ("values", "nullptr")
        arguments = (f"active{k}, offsets{k}, targets{k}, weights{k}, {source}, target, "
                     f"next_marks, changed, {pushed}, aux, 0, hubs, hub_count, go")
        clear = f"  memset(next_marks, 0, {n}); changed[0] = 0;\n" if inner else ""
        body.append(f"{clear}  hub_count[0] = 0;\n  hg_grid({blocks}, {threads}, [] {{\n"
                    f"    subgraph_push(active{k}, offsets{k}, targets{k}, weights{k}, "
                    f"{a1 - a0}LL, {source}, target, nullptr, next_marks, changed, {pushed}, "
                    f"aux, 0, hubs, hub_count, go); }});\n"
                    f"  hg_grid({blocks}, {threads}, [] {{ subgraph_push_hubs({arguments}); }});\n")
        if inner:
            body.append(f"  while (changed[0]) {{\n    memcpy(marks, next_marks, {n});\n"
                        f"    memset(next_marks, 0, {n}); changed[0] = 0; hub_count[0] = 0;\n"
                        f"    hg_grid({blocks}, {threads}, [] {{\n"
                        f"      subgraph_push(active{k}, offsets{k}, targets{k}, weights{k}, "
                        f"{a1 - a0}LL, target, target, marks, next_marks, changed, pushed, "
                        f"aux, 0, hubs, hub_count, go); }});\n"
                        f"    hg_grid({blocks}, {threads}, [] {{ "
                        f"subgraph_push_hubs({arguments}); }});\n  }}\n")
    fmt = "%.17g" if spec.dtype.kind == "f" else "%lld"
    cast = "(double)" if spec.dtype.kind == "f" else "(long long)"
    body.append(f"  hg_grid({blocks}, {threads}, [] {{ subgraph_flags(target, values, flags, "
                f"out_degree, {first}LL, {n}LL, counters, go); }});\n"
                f'  for (int v = 0; v < {n}; ++v) printf("{fmt} %d %d {fmt}\\n", {cast}target[v], '
                f'next_marks[v], flags[v], {cast}pushed[v]);\n'
                f'  printf("%llu\\n", changed[0]);\n  return 0;\n}}\n')
    source = EMULATION + push_source(spec, np.float32, g.index_dtype, np.uint32,
                                     weighted=weighted) + "".join(body)
    path = tmp_path / "push.cpp"
    path.write_text(source)
    exe = tmp_path / "push"
    done = subprocess.run([GXX, "-std=c++17", "-O1", "-w", "-o", str(exe), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:3000]
    lines = subprocess.run([str(exe)], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    rows = [line.split() for line in lines[:n]]
    target = np.array([float(r[0]) for r in rows]).astype(spec.dtype)
    return (target, np.array([int(r[1]) for r in rows]), int(lines[n]),
            np.array([int(r[2]) for r in rows]),
            np.array([float(r[3]) for r in rows]).astype(spec.dtype))


def _relax(program, spec, g, starts, weights, u, sent_from, values):
    """Relax u's streamed out-edges in ``values`` with u's value ``sent_from``; returns
    the targets changed."""
    changed = set()
    e0, e1 = starts[u], g.out_indptr[u + 1]
    for v, w in zip(g.out_indices[e0:e1], weights[e0:e1] if len(weights) else
                    np.ones(e1 - e0, np.float32)):
        now = program.apply(values[v], spec.dtype.type(program.gather(sent_from, w, values[v])),
                            0)
        if now != values[v]:
            values[v] = now
            changed.add(int(v))
    return changed


def _problem(program, seed=4):
    """(spec, graph, values, flags, first) of an emulated push."""
    g = hg.generate.rmat(7, seed=2, weights=(0.5, 3.0))
    n, first = g.num_vertices, g.num_vertices // 3
    rng = np.random.default_rng(seed)
    program = {"sssp": ShortestPaths(0), "bfs": BreadthFirst(0), "widest": Widest()}[program]
    spec = ProgramSpec(program)
    if spec.reduce == "min":
        values = rng.integers(0, 6, n).astype(spec.dtype)
        values[rng.random(n) < 0.3] = spec.identity()
    else:
        values = rng.uniform(0, 3, n).astype(spec.dtype)
    flags = (rng.random(n) < 0.4).astype(np.uint8)
    flags[np.argmax(np.diff(g.out_indptr))] = 1
    return program, spec, g, values, flags, first


def _chunks(spec, g, flags, first, limits):
    """(starts, weights, active, gathered chunks) as ActiveSubgraphs makes them."""
    from hetgraph.kernels.gpu.subgraph import (OFFSET_DTYPE, active_vertices, chunk_bounds,
                                               gather_chunk, subgraph_offsets, tail_starts)

    starts = tail_starts(g.out_indptr, g.out_indices, first)
    active = active_vertices(np, flags, g.out_indptr[1:] - starts)
    offsets = subgraph_offsets(np, (g.out_indptr[1:] - starts)[active])
    chunks = []
    weights_in = g.out_weights() if spec.needs_weights else np.empty(0, np.float32)
    for a0, a1, e0, e1 in chunk_bounds(offsets, *limits):
        targets, weights = np.zeros(e1 - e0, np.uint32), np.ones(e1 - e0, np.float32)
        chunk_offsets = np.zeros(a1 - a0 + 1, OFFSET_DTYPE)
        gather_chunk(starts, g.out_indices.view(np.uint32), weights_in,
                     active.astype(np.uint32), offsets, a0, a1, e0, e1, targets,
                     weights if spec.needs_weights else weights_in, chunk_offsets, 3)
        chunks.append(((a0, a1, e0, e1), targets, weights, chunk_offsets))
    return starts, weights_in, active, chunks


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.parametrize("program", ["sssp", "bfs", "widest"])
@pytest.mark.parametrize("limits", [(10**6, 10**6), (40, 6)])
def test_emulated_push_kernels_relax_every_active_streamed_edge(program, limits, tmp_path,
                                                                 monkeypatch):
    """A thread, a warp and the grid a vertex (the degree bounds lowered so that each
    path runs), in one chunk and in several: the targets take the combination of what
    every active vertex sends, the changed ones are marked, and the flags of the
    streamed vertices say which changed."""
    from hetgraph import tuning

    monkeypatch.setattr(tuning, "PUSH_THREAD_DEGREE", 2)
    monkeypatch.setattr(tuning, "PUSH_WARP_DEGREE", 8)
    program, spec, g, values, flags, first = _problem(program)
    starts, weights_in, active, chunks = _chunks(spec, g, flags, first, limits)
    target, marks, changed, flags_out, _ = _emulated_push(spec, g, values, active, first,
                                                          chunks, 3, 64, tmp_path)
    expected = values.copy()
    for u in active:  # the relaxations one at a time, as the CPU's push does
        _relax(program, spec, g, starts, weights_in, u, values[u], expected)
    np.testing.assert_array_equal(target, expected)
    moved = expected != values
    assert moved[first:].any() and not moved[:first].any()
    np.testing.assert_array_equal(marks.astype(bool), moved)
    assert changed == 1
    np.testing.assert_array_equal(flags_out[first:].astype(bool), moved[first:])


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.parametrize("program", ["sssp", "widest"])
@pytest.mark.parametrize("limits", [(10**6, 10**6), (40, 6)])
def test_emulated_async_subgraph_pushes_settle_each_chunk(program, limits, tmp_path,
                                                          monkeypatch):
    """Async-subgraph mode: each chunk pushed from the latest values, then again from
    the vertices it changed until none changes, before the next chunk; each source's
    value as it last sent it is in ``pushed`` (the others keep the start's)."""
    from hetgraph import tuning

    monkeypatch.setattr(tuning, "PUSH_THREAD_DEGREE", 2)
    monkeypatch.setattr(tuning, "PUSH_WARP_DEGREE", 8)
    program, spec, g, values, flags, first = _problem(program, seed=6)
    starts, weights_in, active, chunks = _chunks(spec, g, flags, first, limits)
    target, *_, pushed = _emulated_push(spec, g, values, active, first, chunks, 2, 64,
                                        tmp_path, inner=True)
    expected, single, sent = values.copy(), values.copy(), values.copy()

    def relax(u, s, t, sent_from, into):  # u's edges [s, t) of the chunk
        changed = set()
        for v, w in zip(targets[s:t], weights[s:t]):
            now = program.apply(into[v], spec.dtype.type(program.gather(sent_from, w, into[v])),
                                0)
            if now != into[v]:
                into[v] = now
                changed.add(int(v))
        return changed

    for (a0, a1, _, _), targets, weights, offsets in chunks:
        ranges = [(int(active[i]), offsets[i - a0], offsets[i - a0 + 1]) for i in range(a0, a1)]
        changed = set()
        for u, s, t in ranges:
            changed |= relax(u, s, t, expected[u], expected)
            relax(u, s, t, values[u], single)
        while changed:
            marked, changed = changed, set()
            for u, s, t in ranges:
                if u in marked:
                    changed |= relax(u, s, t, expected[u], expected)
        sent[active[a0:a1]] = expected[active[a0:a1]]  # (settled: the last sent)
    np.testing.assert_array_equal(target, expected)
    np.testing.assert_array_equal(pushed, sent)
    assert (expected != single).any()  # (the inner pushes reached further)
