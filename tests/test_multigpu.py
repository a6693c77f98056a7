"""Several GPUs sharing a run (issue 51): how the pages are shared (here), and on a GPU
machine that an engine over several GPUs (two engines on one GPU where there is only
one) gives the one-GPU engine's answers: exactly for the min programs, PageRank to
1e-6 in L1."""

import collections

import numpy as np
import pytest
from hypothesis import given, strategies as st

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.cc import MinLabel
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.engines.multigpu import MultiGpuEngine, _read_end, page_ranges, pass_work
from hetgraph.errors import GraphError
from hetgraph.program import ProgramSpec
from conftest import examples


@examples(200)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=60),
       st.lists(st.floats(0.1, 10.0), min_size=1, max_size=8))
def test_page_ranges_cover_every_page_once_and_follow_the_shares(edges, shares):
    if len(edges) < len(shares):
        with pytest.raises(GraphError, match="pages cannot be shared"):
            page_ranges(edges, shares)
        return
    ranges = page_ranges(edges, shares)
    assert len(ranges) == len(shares)
    assert ranges[0].start == 0 and ranges[-1].stop == len(edges)
    for a, b in zip(ranges[:-1], ranges[1:]):
        assert a.stop == b.start
    assert all(len(r) >= 1 for r in ranges)
    total = sum(edges)
    if total and len(edges) >= 4 * len(shares):
        # each range ends within a page of where its share of the edges ends
        cumulative = np.cumsum(edges)
        wanted = np.cumsum(shares)[:-1] / sum(shares) * total
        for r, target in zip(ranges[:-1], wanted):
            before = cumulative[r.stop - 2] if r.stop >= 2 else 0
            assert before <= target + max(edges) or r.stop - r.start == 1


@examples(60)
@given(st.integers(2, 300), st.integers(0, 3000), st.integers(0, 2**32 - 1),
       st.integers(0, 2**16))
def test_a_gpus_read_end_is_one_past_the_highest_source_its_pages_read(n, m, seed, cut):
    """Checked against the out-edges (the other CSR): every source of an edge into the
    pages' vertices lies below the end, and one lies just below it."""
    graph = hg.generate.erdos_renyi(n, m=min(m, n * (n - 1)), seed=seed).reorder("degree")
    partition = graph.partition(page_bytes=4096, shard_vertices=16)
    first = cut % partition.num_pages
    pages = range(first, first + 1 + cut % (partition.num_pages - first))
    v0, v1 = partition.page_vertices(pages.start)[0], partition.page_vertices(pages.stop - 1)[1]
    src = np.repeat(np.arange(n), np.diff(graph.out_indptr))
    into = (graph.out_indices >= v0) & (graph.out_indices < v1)
    assert _read_end(graph, partition, pages) == (int(src[into].max()) + 1 if into.any() else 0)


def test_in_degree_order_no_gpu_but_the_first_reads_the_vertices_of_no_out_edge():
    """The values of vertices no edge leaves (the tail of degree order) go to the first
    GPU only: every later GPU's read end is at most the count of vertices with out-edges."""
    graph = hg.generate.rmat(12, seed=3).reorder("degree")
    partition = graph.partition(page_bytes=8192)
    with_out_edges = int(np.count_nonzero(graph.out_degree()))
    assert with_out_edges < graph.num_vertices * 0.8
    for pages in page_ranges(np.ones(partition.num_pages), [1.0] * 4):
        assert _read_end(graph, partition, pages) <= with_out_edges


@examples(60)
@given(st.integers(2, 400), st.integers(0, 4000), st.integers(0, 2**32 - 1),
       st.integers(1, 6), st.integers(1, 8))
def test_resident_runs_cover_the_pages_in_order_with_about_equal_edges(n, m, seed, parts,
                                                                      count):
    """A GPU's resident pages in runs (a sync multi-GPU pass sends each run's values as
    it ends): consecutive whole pages covering the engine's range, at most ``count``,
    none holding more than its share of the edges plus one page."""
    from types import SimpleNamespace

    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.kernels.gpu.layout import PagePlan

    rng = np.random.default_rng(seed)
    g = hg.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m), num_vertices=n)
    part = g.partition(page_bytes=1 << 10)
    owned = page_ranges([1] * part.num_pages, [1.0] * min(parts, part.num_pages))[-1]
    plan = PagePlan(part, 6, 1 << 40, 4, owned)
    runs = GpuEngine.resident_runs(SimpleNamespace(partition=part, plan=plan), count)
    assert 1 <= len(runs) <= count
    shards = [part.page_shard[owned.start]] + [b for _, b in runs]
    assert [a for a, _ in runs] == shards[:-1] and shards[-1] == part.page_shard[owned.stop]
    page_of_shard = {int(part.page_shard[p]): p for p in range(part.num_pages + 1)}
    assert all(a in page_of_shard and b in page_of_shard for a, b in runs)  # whole pages
    edges = [int(g.in_indptr[part.shard_start[b]] - g.in_indptr[part.shard_start[a]])
             for a, b in runs]
    largest_page = max(e1 - e0 for e0, e1 in (part.page_edges(p) for p in owned))
    assert max(edges) <= sum(edges) / count + largest_page


def test_equal_pages_are_shared_equally():
    assert page_ranges([10] * 8, [1, 1]) == [range(0, 4), range(4, 8)]
    assert page_ranges([10] * 9, [2, 1]) == [range(0, 6), range(6, 9)]


def test_a_range_of_hubs_and_one_of_small_vertices_share_by_edges_and_vertices():
    """A vertex costs a pass tuning.GPU_VERTEX_EDGES edges: two GPUs share four pages,
    two of few hubs and two of many small vertices, two pages each."""
    from hetgraph import tuning

    small = 1000
    work = pass_work([3000, 3000, 1000, 1000], [10, 10, small, small])
    assert work.tolist() == [3000 + 10 * tuning.GPU_VERTEX_EDGES] * 2 + \
        [1000 + small * tuning.GPU_VERTEX_EDGES] * 2
    assert page_ranges(work, [1, 1]) == [range(0, 2), range(2, 4)]


def test_a_trace_summary_sums_each_stream_and_each_gpus_busy_time():
    """bench/gputrace.py's summary of a hand-made trace of two iterations: GPU 0's two
    kernels overlap (busy 15 us, not 20), GPU 1's one copy is summed on its stream."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "bench"))
    from gputrace import summarize

    def event(category, name, device, stream, ts, dur):
        return {"cat": category, "name": name, "ts": ts, "dur": dur,
                "args": {"device": device, "stream": stream}}

    events = [event("kernel", "shard_pass", 0, 7, 0.0, 10.0),
              event("kernel", "shard_pass", 0, 7, 5.0, 10.0),
              event("kernel", "shard_pass", 1, 15, 0.0, 8.0),
              event("gpu_memcpy", "Memcpy PtoP", None, 29, 15.0, 6.0)]
    got = summarize(events, iterations=2)
    assert got["span_us"] == 21.0
    assert got["kernel_busy_us"] == {"0": 7.5, "1": 4.0}
    first = got["per_iteration_us"][0]
    assert (first["device"], first["stream"], first["count"], first["us"]) == (0, 7, 2, 10.0)
    assert {"device": None, "stream": 29, "category": "gpu_memcpy", "name": "Memcpy PtoP",
            "count": 1, "us": 3.0} in got["per_iteration_us"]


def test_the_runs_of_most_vertices_launch_first():
    """The copy of a run's values overlaps the runs launched after it: the run of most
    vertices goes first, the one the next iteration waits for holds the fewest."""
    from types import SimpleNamespace

    engine = SimpleNamespace(partition=SimpleNamespace(
        shard_start=np.array([0, 10, 12, 100, 101])))
    runs = [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert MultiGpuEngine._launch_order(engine, runs) == [(2, 3), (0, 1), (1, 2), (3, 4)]


# on a GPU ------------------------------------------------------------------------------

def _devices():
    import cupy as cp

    count = cp.cuda.runtime.getDeviceCount()
    return list(range(count)) if count > 1 else [0, 0]


def _run(engine, program, spec, graph, iterations):
    """The engine's values after up to ``iterations`` iterations (finalized)."""
    engine.reset_frontier()
    for _ in range(iterations):
        if engine.frontier()[0] == 0:
            break
        constant = program.iteration_constant(graph, engine.values) if spec.uses_constant \
            else 0.0
        engine.iterate(constant)
    return program.finalize(graph, engine.result())


def _run_queued(engine, program, spec, graph, iterations):
    """As :func:`_run`, with up to ``engine.queued`` chained iterations in flight (as a
    segment keeps them): those launched after one that activated nothing are discarded."""
    engine.reset_frontier()
    if engine.frontier()[0] == 0:
        return program.finalize(graph, engine.result())
    inflight, launched = collections.deque(), 0
    while inflight or launched < iterations:
        while len(inflight) < engine.queued and launched < iterations:
            constant = program.iteration_constant(graph, engine.values) \
                if spec.uses_constant else 0.0
            inflight.append(engine.launch(constant))
            launched += 1
        if engine.wait(inflight.popleft())[3] == 0:
            engine.discard(list(inflight))
            break
    return program.finalize(graph, engine.result())


def _both(program, graph, iterations=200, queued=False, **options):
    """(values on one GPU, values on several) of ``program`` on ``graph``; ``queued``:
    several iterations in flight (chained launches) instead of one at a time."""
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.engines.multigpu import MultiGpuEngine

    spec = ProgramSpec(program)
    partition = graph.partition(page_bytes=max(4096, graph.num_arcs * 6 // 7))
    answers = []
    for make in (lambda v, f, a: GpuEngine(spec, graph, v, f, a, partition=partition, **options),
                 lambda v, f, a: MultiGpuEngine(spec, graph, v, f, a, _devices(),
                                                partition=partition, **options)):
        values, flags, aux = spec.initial_state(graph)
        engine = make(values, flags, np.zeros(1, np.float32) if aux is None else aux)
        answers.append((_run_queued if queued else _run)(engine, program, spec, graph,
                                                         iterations))
        engine.close()
    return answers


GRAPHS = {"rmat": lambda: hg.generate.rmat(13, seed=5, weights=(1.0, 9.0)),
          # (its tail of vertices with no out-edge goes to the first GPU only)
          "rmat-degree": lambda: hg.generate.rmat(13, seed=5, weights=(1.0, 9.0)
                                                  ).reorder("degree"),
          "grid": lambda: hg.generate.grid(60, 60, weights=(1.0, 5.0))}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("sync", [True, False])
def test_several_gpus_answer_as_one_for_the_min_programs(name, sync):
    g = GRAPHS[name]()
    source = int(np.argmax(g.out_degree()))
    for program in (BreadthFirst(source), ShortestPaths(source), MinLabel()):
        one, several = _both(program, g, sync=sync)
        np.testing.assert_array_equal(several, one, err_msg=type(program).__name__)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_several_gpus_keep_iterations_in_flight_and_stop_together(name):
    """Chained launches on several GPUs read the activated count summed over the GPUs:
    a run ends on the same iteration with the same answer as one GPU."""
    g = GRAPHS[name]()
    source = int(np.argmax(g.out_degree()))
    for program in (BreadthFirst(source), ShortestPaths(source), MinLabel()):
        one, several = _both(program, g, queued=True)
        np.testing.assert_array_equal(several, one, err_msg=type(program).__name__)
        np.testing.assert_array_equal(several, _both(program, g)[0])
    one, several = _both(PageRank(tol=None, dtype=np.float64), g, iterations=30, queued=True)
    assert np.abs(several - one).sum() < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_several_gpus_answer_as_one_for_pagerank(name):
    g = GRAPHS[name]()
    one, several = _both(PageRank(tol=None, dtype=np.float64), g, iterations=30)
    assert np.abs(several - one).sum() < 1e-6
    reference = hg.pagerank(g, tol=None, max_iterations=30, dtype=np.float64,
                            devices="cpu").values
    assert np.abs(several - reference).sum() < 1e-6


@pytest.mark.gpu
def test_each_gpu_lays_out_only_its_pages():
    from hetgraph.engines.multigpu import MultiGpuEngine

    g = GRAPHS["rmat"]()
    spec = ProgramSpec(BreadthFirst(0))
    partition = g.partition(page_bytes=g.num_arcs * 6 // 5)
    values, flags, _ = spec.initial_state(g)
    engine = MultiGpuEngine(spec, g, values, flags, np.zeros(1, np.float32), _devices(),
                            partition=partition)
    placed = engine.describe()["gpus"]
    assert sum(p["resident_edges"] for p in placed) == g.num_arcs
    assert all(0 < p["resident_edges"] < g.num_arcs for p in placed)
    assert placed[0]["vertices"][0] == 0 and placed[-1]["vertices"][1] == g.num_vertices
    engine.close()


@pytest.mark.gpu
def test_several_gpus_stream_their_pages_and_count_the_bytes():
    """With a budget of a quarter of the edges a GPU, each streams the rest of its
    pages every pass: the engine's h2d_bytes sum every GPU's, the answer is one GPU's."""
    from hetgraph.engines.gpu import GpuEngine

    g = GRAPHS["rmat"]()
    source = int(np.argmax(g.out_degree()))
    budget = g.num_arcs * (g.index_dtype.itemsize + 2 + 4) // 4
    one, several = _both(ShortestPaths(source), g, memory_budget=budget)
    np.testing.assert_array_equal(several, one)
    spec = ProgramSpec(ShortestPaths(source))
    values, flags, _ = spec.initial_state(g)
    engine = MultiGpuEngine(spec, g, values, flags, np.zeros(1, np.float32), _devices(),
                            partition=g.partition(page_bytes=max(4096, g.num_arcs)),
                            memory_budget=budget)
    placed = engine.describe()["gpus"]
    streamed = sum(p["streamed_edges"] for p in placed)
    assert streamed > 0 and engine.h2d_bytes == 0
    engine.iterate(0.0)
    assert engine.h2d_bytes == sum(e.h2d_bytes for e in engine.engines) \
        == streamed * engine.engines[0].per_edge
    assert engine.d2h_bytes == 0 and isinstance(engine.engines[0], GpuEngine)
    assert engine.transfer_seconds == sum(e.transfer_seconds for e in engine.engines) > 0
    assert engine.generation_seconds == 0
    engine.close()


@pytest.mark.gpu
def test_a_gpu_run_on_a_cluster_of_several_gpus_shares_its_pages(monkeypatch):
    import cupy as cp

    from hetgraph.engines import multigpu

    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    made = []
    original = multigpu.MultiGpuEngine.__init__

    def spy(self, *args, **kwargs):
        made.append(args[5])
        original(self, *args, **kwargs)

    monkeypatch.setattr(multigpu.MultiGpuEngine, "__init__", spy)
    from hetgraph.scheduler import state as state_module

    states, made_state = [], state_module.VertexState.__init__

    def state_spy(self, values, flags, *, sync):
        made_state(self, values, flags, sync=sync)
        states.append(self)

    monkeypatch.setattr(state_module.VertexState, "__init__", state_spy)
    g = hg.generate.rmat(14, seed=6, weights=(1.0, 9.0))
    source = int(np.argmax(g.out_degree()))
    small = {"page_bytes": g.num_arcs * 10 // 8}
    calls = {"bfs": lambda **o: hg.bfs(g, source, **o),
             "sssp": lambda **o: hg.sssp(g, source, **o),
             "pagerank": lambda **o: hg.pagerank(g, tol=None, max_iterations=25,
                                                 dtype=np.float64, **o)}
    with hg.Cluster(gpus=1):
        one = {name: call(devices="gpu").values for name, call in calls.items()}
    with hg.Cluster(gpus=2):
        for name, call in calls.items():
            made.clear()
            states.clear()
            result = call(devices="gpu", gpu=small)
            assert made and len(made[0]) == 2, name
            assert states and not states[0].on_host, name  # kept on the first GPU
            assert set(result.history["placement"]) == {"gpu"}
            if name == "pagerank":
                assert np.abs(result.values - one[name]).sum() < 1e-6
            else:
                np.testing.assert_array_equal(result.values, one[name])
