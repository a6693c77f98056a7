"""ActiveSubgraphs (engines/subway.py) driven without a GPU: CuPy stood in for by NumPy
(pointers are host addresses, a copy is a memmove done at once, streams do nothing,
events read the host's clock) and the kernels by Python that runs their threads one
after another (the push and flag kernels of kernels/gpu/push.py, the engine's pull of
the resident pages), so that the orchestration of sync and async-subgraph iterations
runs here: SciPy's shortest paths, the CPU's BFS and a bottleneck Dijkstra's widest
paths (a max relaxation) exactly, each run to its fixed point, fewer iterations in
async mode, the flags it leaves (the vertices whose value differs from the one they
last pushed along their streamed out-edges), and each iteration's generation and
transfer seconds. The kernels themselves are checked on the CPU in
test_gpu_subgraph.py (g++) and on the device there (marked gpu)."""

import ctypes
import time
import types

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.engines import subway
from hetgraph.kernels.gpu.spans import IterationTimes
from hetgraph.program import ProgramSpec
from test_gpu_subgraph import Widest, widest_widths
from test_subgraph import _distances


class DeviceArray(np.ndarray):
    """A NumPy array with CuPy's ``data.ptr``, ``get`` and ``set``."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self, out=None, stream=None):
        if out is None:
            return np.array(self)
        out[...] = self
        return out

    def set(self, array, stream=None):
        self[...] = array


def _device(array):
    return np.asarray(array).view(DeviceArray)


class _Stream:
    ptr = 0

    def record(self):
        event = _Event()
        event.record(self)
        return event

    def wait_event(self, event):
        pass

    def synchronize(self):
        pass


class _Event:
    def record(self, stream=None):
        self.at = time.perf_counter()  # (the work queued before it is done: done at once)

    def synchronize(self):
        pass


def _runtime():
    def memcpy(dst, src, count, kind, stream):
        ctypes.memmove(dst, src, count)

    def memset(dst, value, count, stream):
        ctypes.memset(dst, value, count)

    return types.SimpleNamespace(memcpyAsync=memcpy, memsetAsync=memset,
                                 memcpyDeviceToDevice=3, memcpyDeviceToHost=2)


def _cupy():
    """The part of CuPy ActiveSubgraphs calls."""
    module = types.SimpleNamespace(ndarray=DeviceArray, uint8=np.uint8, uint32=np.uint32,
                                   uint64=np.uint64)
    module.asarray = _device
    module.empty = lambda shape, dtype=float: _device(np.empty(shape, dtype))
    module.zeros = lambda shape, dtype=float: _device(np.zeros(shape, dtype))
    module.flatnonzero = lambda a: _device(np.flatnonzero(a))
    module.copyto = lambda dst, src, where=True: np.copyto(dst, src, where=where)
    module.cuda = types.SimpleNamespace(runtime=_runtime(), Event=_Event, Stream=_Stream,
                                        get_elapsed_time=lambda start, end:
                                        (end.at - start.at) * 1e3)
    return module


class _Launch:
    """PackedLaunch's calls for a kernel emulated in Python (``function(**arguments)``)."""

    def __init__(self, function, arguments):
        self.function, self.arguments = function, dict(arguments)

    def update(self, **changes):
        self.arguments.update(changes)

    def __call__(self, blocks, threads, shared_bytes, stream_pointer):
        self.function(**self.arguments)


def _kernels(program, weighted):
    """Python forms of compile_push's three kernels for ``program`` (a min relaxation:
    a thread a vertex; no hub goes to the hub kernel)."""

    def send(s, v, w, target, next_marks, changed):
        now = program.apply(target[v], target.dtype.type(program.gather(s, w, target[v])), 0)
        if now != target[v]:
            target[v] = now
            if next_marks is not None:
                next_marks[v] = 1
                changed[0] = 1

    def push(active, offsets, targets, weight, n, src_values, target, marks, next_marks,
             changed, pushed, hubs, hub_count, go, **_):
        if not go[0]:
            return
        for i in range(int(n)):
            u = int(active[i])
            if marks is not None and not marks[u]:
                continue
            s = src_values[u]
            if pushed is not None:
                pushed[u] = s
            for e in range(int(offsets[i]), int(offsets[i + 1])):
                send(s, int(targets[e]), weight[e] if weighted else 1.0, target, next_marks,
                     changed)

    def hubs_push(**_):
        pass

    def flags(target, before, flags, out_degree, v0, v1, counters, go):
        if not go[0]:
            return
        for v in range(int(v0), int(v1)):
            on = bool(program.activate(target[v], before[v]))
            flags[v] = on
            if on:
                counters[0] += 1
                counters[1] += int(out_degree[v])

    return push, hubs_push, flags


class StandInEngine:
    """The GpuEngine's part that ActiveSubgraphs uses, over NumPy: resident vertices
    [0, first) pulled from their in-edges, the rest reached by the subgraph's pushes."""

    def __init__(self, spec, graph, first, stage_edges, sync):
        self.cupy, self.spec, self.graph, self.sync = _cupy(), spec, graph, sync
        n = graph.num_vertices
        values, flags, aux = spec.initial_state(graph)
        self.values = _device(values.copy())
        self.new_values = _device(np.empty_like(values)) if sync else self.values
        self.flags = _device(flags.astype(np.uint8))
        self.aux = _device(np.zeros(1, np.float32))
        self.weighted = bool(spec.needs_weights and graph.weighted)
        self.first, self.vertices, self.owned = first, (0, n), None
        self.plan = types.SimpleNamespace(resident_end=1, streamed_pages=range(1, 2),
                                          stage_edges=stage_edges, first_edge=0,
                                          resident_edges=int(graph.in_indptr[first]))
        self.partition = types.SimpleNamespace(page_vertices=lambda p: (first, n))
        self.pages = types.SimpleNamespace(
            out_degree=_device(np.diff(graph.out_indptr).astype(np.uint32)))
        self.stages = [(_device(np.empty(stage_edges, np.uint32)),
                        _device(np.empty(stage_edges, np.uint16)),
                        _device(np.empty(stage_edges, np.float32))) for _ in range(2)]
        self.streams = [_Stream(), _Stream()]
        self.per_edge, self._no_weight = 10, _device(np.empty(1, np.float32))
        self._go = _device(np.ones(1, np.uint64))
        self.counters = _device(np.zeros(3, np.uint64))
        self.times = IterationTimes(self.cupy)
        self.pulls = 0
        self.moved = self.seconds = None  # the last iteration's (h2d, d2h) bytes and
        # (generation, transfer) seconds

    def describe(self):
        return {"streamed_edges": self.graph.num_arcs - self.plan.resident_edges}

    def run_pages(self, stream=None, resident_only=False):
        self._pull(self.values, self.new_values, self.counters)

    def pull_resident(self, stream, source, target, counters):
        self._pull(source, target, counters)

    def _pull(self, source, target, counters):
        """The shard kernel over the resident vertices: each from all its in-edges."""
        g, program = self.graph, self.spec.program
        self.pulls += 1
        weights = g.in_weights if self.weighted else np.ones(g.num_arcs, np.float32)
        for v in range(self.first):
            now = old = source[v]
            for e in range(g.in_indptr[v], g.in_indptr[v + 1]):
                now = program.apply(now, source.dtype.type(
                    program.gather(source[g.in_indices[e]], weights[e], old)), 0)
            target[v] = now
            self.flags[v] = on = bool(program.activate(now, old))
            counters[0] += on

    def iterate(self, subgraphs):
        """One iteration as GpuEngine.launch runs it over the active subgraph (and wait
        reads its times); returns what it activated."""
        self.counters[:] = 0
        self.times.clear()
        self.moved = subgraphs.run(_Stream())[2:]
        self.seconds = self.times.seconds()
        if self.sync:
            self.values, self.new_values = self.new_values, self.values
        return int(self.counters[0])


@pytest.fixture
def standin(monkeypatch):
    """ActiveSubgraphs building its kernels and buffers on the stand-in."""
    monkeypatch.setattr(subway, "pinned_empty", lambda size, dtype: np.empty(size, dtype))
    monkeypatch.setattr(subway, "PackedLaunch", _Launch)
    monkeypatch.setattr(subway, "compile_push", lambda spec, aux_dtype, index_dtype,
                        degree_dtype, weighted: _kernels(spec.program, weighted))

    def make(program, graph, first, stage_edges, asynchronous, sync=True):
        spec = ProgramSpec(program)
        engine = StandInEngine(spec, graph, first, stage_edges, sync)
        subgraphs = subway.ActiveSubgraphs(engine, asynchronous=asynchronous)
        assert subgraphs.wanted(1)
        return engine, subgraphs

    return make


def _run(engine, subgraphs):
    """Iterations until none activates anything: (values, iterations)."""
    n = engine.graph.num_vertices
    for iterations in range(1, n + 2):
        activated = engine.iterate(subgraphs)
        if not activated:
            return np.array(engine.values), iterations
        assert activated == int(engine.flags.sum())
    raise AssertionError("no fixed point")


def _graphs():
    return {"rmat": hg.generate.rmat(8, seed=3, weights=(0.5, 4.0)),
            "grid": hg.generate.grid(12, 16, weights=(0.5, 4.0))}


@pytest.mark.parametrize("kind, most", [("rmat", 1.0), ("grid", 0.69)])
@pytest.mark.parametrize("stage_edges", [10**5, 12])
@pytest.mark.parametrize("sync", [True, False])
def test_async_subgraph_iterations_reach_the_answer_in_fewer(standin, kind, most,
                                                             stage_edges, sync):
    """SSSP and BFS from the hub and widest paths from vertex 0 (a max relaxation),
    the last two thirds of the vertices streamed, in one chunk or in chunks of 12 edges
    (hubs cut): the answer of SciPy, the CPU or a bottleneck Dijkstra in both modes
    (the engine's), async in no more iterations than sync, on the grid in at most
    0.69x (Subway's Fig. 10; the RMAT takes 3 or 4), with the resident pages pulled
    again and chunks pushed again."""
    g = _graphs()[kind]
    source, first = int(np.argmax(g.out_degree())), g.num_vertices // 3
    for program, expected in (
            (ShortestPaths(source), _distances(g, source)),
            (BreadthFirst(source), hg.bfs(g, g.label_of(source), devices="cpu").values),
            (Widest(), widest_widths(g, 0))):
        done = {}
        for asynchronous in (False, True):
            engine, subgraphs = standin(program, g, first, stage_edges, asynchronous, sync)
            values, done[asynchronous] = _run(engine, subgraphs)
            values = program.finalize(g, values)
            np.testing.assert_allclose(values, expected, rtol=1e-6)
        assert done[True] <= most * done[False], (type(program).__name__, done)
        described = subgraphs.describe()
        assert described["mode"] == "async" and described["resident_passes"] > 2 * done[True]
        assert described["inner_passes"] > 0


@pytest.mark.parametrize("kind", ["rmat", "grid"])
@pytest.mark.parametrize("stage_edges", [10**5, 12, 5])
def test_an_async_iteration_flags_what_was_not_pushed(standin, kind, stage_edges):
    """After each async iteration a vertex is flagged exactly when its value is not the
    one it pushed along its streamed out-edges (those without any: never, the resident
    pulls having settled): every edge into a resident vertex is relaxed, and every edge
    into a streamed one too unless its source is flagged."""
    g = _graphs()[kind]
    source, first = int(np.argmax(g.out_degree())), g.num_vertices // 3
    engine, subgraphs = standin(ShortestPaths(source), g, first, stage_edges, True)
    src = np.repeat(np.arange(g.num_vertices), np.diff(g.out_indptr))
    resident = g.out_indices < first
    for _ in range(g.num_vertices):
        if not engine.iterate(subgraphs):
            break
        values, flags = np.array(engine.values), np.array(engine.flags, bool)
        np.testing.assert_array_equal(flags, values < np.array(subgraphs.pushed))
        assert not flags[subgraphs.tail_degree == 0].any()
        relaxed = values[g.out_indices] <= values[src] + g.out_weights()
        assert relaxed[resident].all() and (relaxed | flags[src]).all()
    assert not engine.flags.any()


def test_a_vertex_cut_by_chunks_stays_flagged_when_it_changed_between_its_parts(standin):
    """Streamed vertex 3's seven out-edges span two chunks of six edges: it pushes 50
    (from 0) along its first three, then vertex 10, in the second chunk, lowers it to
    2 and it pushes 2 along its last four only: it must stay flagged (its first part
    took 50), and the next iteration relaxes the rest."""
    src = [0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 10]
    dst = [2, 3, 10, 4, 5, 6, 7, 8, 9, 11, 3]
    weight = [1.0, 50.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    g = hg.from_arrays(src, dst, weight, num_vertices=12)
    engine, subgraphs = standin(ShortestPaths(0), g, 2, 6, True)
    assert engine.iterate(subgraphs) == 1 and engine.flags[3]
    values = np.array(engine.values)
    assert values[3] == 2.0 and values[4] == 51.0 and values[7] == 3.0
    assert engine.iterate(subgraphs) == 0
    np.testing.assert_array_equal(np.array(engine.values), _distances(g, 0))


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("stage_edges", [10**5, 12])
def test_an_iteration_times_its_generation_and_its_copies(standin, asynchronous,
                                                          stage_edges):
    """SSSP on the RMAT graph to its fixed point: every iteration's generation and
    transfer seconds are non-negative, the generation's above 0 (the scan runs even
    when it lists nothing), the transfer's above 0 exactly when bytes were copied in."""
    g = _graphs()["rmat"]
    source, first = int(np.argmax(g.out_degree())), g.num_vertices // 3
    engine, subgraphs = standin(ShortestPaths(source), g, first, stage_edges, asynchronous)
    copied = []
    for _ in range(g.num_vertices):
        activated = engine.iterate(subgraphs)
        (generation, transfer), (h2d, _) = engine.seconds, engine.moved
        assert generation > 0 and transfer >= 0 and (transfer > 0) == (h2d > 0)
        copied.append(h2d > 0)
        if not activated:
            break
    assert any(copied)


def test_an_iteration_that_lists_no_vertex_copies_nothing_in_no_time(standin):
    """Vertex 0's out-edges stay among the resident vertices 0 and 1, vertex 1's go to
    the streamed ones: the first sync iteration's scan lists nothing (its generation
    takes time, its transfer none), the second copies vertex 1's edges in."""
    g = hg.from_arrays([0, 1, 1, 1], [1, 2, 3, 4], [1.0, 1.0, 2.0, 3.0], num_vertices=5)
    engine, subgraphs = standin(ShortestPaths(0), g, 2, 10**5, False)
    assert engine.iterate(subgraphs) == 1
    assert engine.moved == (0, 0) and engine.seconds[0] > 0 and engine.seconds[1] == 0.0
    engine.iterate(subgraphs)
    assert engine.moved[0] > 0 and engine.seconds[1] > 0
    np.testing.assert_array_equal(np.array(engine.values)[2:], [2.0, 3.0, 4.0])
