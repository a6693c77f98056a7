"""GPU worker processes that hold a run's vertex state (issue 51): one runs a whole
segment with the state kept on its device (made there, handed back once), so a warm
call is one call to it and sends neither edges nor state; several own ranges of the
pages and exchange their ranges worker to worker; a GPU worker lost mid-run leaves the
segment to the survivors. The plumbing runs here with the CPU engine standing in for
the GPU engine (tests/gpu_standin.py); the tests marked gpu run the real GpuEngine on
the device (``CUDA_VISIBLE_DEVICES`` two GPUs for the two-worker ones). Answers against
SciPy; no test here times anything."""

import gc
import os
import sys
import types

import cloudpickle
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.cluster import WorkerLostError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "bench"))
from commcount import CommBytes, ops_written  # noqa: E402
from conftest import power_pagerank  # noqa: E402
from gpu_standin import built, spied, stand_in_cluster  # noqa: E402
from test_processes import KillsItsWorker, _bounded, warm_call_messages  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
cloudpickle.register_pickle_by_value(sys.modules[__name__])
CLIENT_PID = os.getpid()
ITERATIONS = 20


@pytest.fixture(scope="module")
def graph():
    # 2**15 vertices, 8 edges a vertex, weighted (SSSP): a state of about 300 kB
    return hg.generate.rmat(15, edge_factor=8, seed=3, weights=(1.0, 10.0))


def _hub(graph):
    return int(np.argmax(graph.out_degree()))


@pytest.fixture(scope="module")
def oracle(graph):
    """SciPy's answers: PageRank by power iteration (ITERATIONS), BFS levels and
    Dijkstra's distances from the hub."""
    matrix = graph.to_scipy().astype(np.float64)  # A[u, v] = w for u -> v
    ranks = power_pagerank(graph, ITERATIONS)
    levels = csgraph.shortest_path(matrix, unweighted=True, indices=_hub(graph))
    return {"pagerank": ranks, "bfs": levels,
            "sssp": csgraph.dijkstra(matrix, indices=_hub(graph))}


def _pagerank(graph, cluster, program=None, iterations=ITERATIONS):
    return _bounded(lambda: hg.run(program or PageRank(0.85, None), graph, cluster=cluster,
                                   devices="gpu", max_iterations=iterations))


def _check(graph, oracle, cluster):
    """Every algorithm on ``cluster``'s GPU workers against SciPy; the results."""
    source = graph.label_of(_hub(graph))
    pagerank = _pagerank(graph, cluster)
    bfs = _bounded(lambda: hg.bfs(graph, source, cluster=cluster, devices="gpu"))
    sssp = _bounded(lambda: hg.sssp(graph, source, cluster=cluster, devices="gpu"))
    np.testing.assert_allclose(pagerank.values, oracle["pagerank"], rtol=1e-10)
    reached = np.isfinite(oracle["bfs"])
    np.testing.assert_array_equal(bfs.values[reached], oracle["bfs"][reached])
    assert np.isinf(sssp.values[~reached]).all()
    np.testing.assert_allclose(sssp.values[reached], oracle["sssp"][reached], rtol=1e-12)
    for result in (pagerank, bfs, sssp):
        assert set(result.history["placement"]) == {"gpu"}
    return pagerank, bfs, sssp


def test_gpu_owners_share_the_pages_in_contiguous_ranges():
    from hetgraph.scheduler.spread import Spread

    spread = object.__new__(Spread)
    spread.kind, spread.holds = "gpu", {"tcp://h:2": 3}
    spread.cluster = types.SimpleNamespace(gpu_speeds={}, gpu_shares={})
    spread.addresses = ["tcp://h:1", "tcp://h:2", "tcp://h:3"]
    spread.in_indptr = np.array([0, 10, 10, 40, 45, 90, 100])  # 6 vertices
    spread.pages = np.array([[0, 2], [2, 3], [3, 5], [5, 6]])  # 4 pages
    ranges, pages = spread._shares(spread.addresses[:2])
    assert pages[0][0] == 0 and pages[0][1] == pages[1][0] and pages[1][1] == 4
    assert ranges == tuple((int(spread.pages[a][0]), int(spread.pages[b - 1][1]))
                           for a, b in pages)
    assert spread.owners(3) == spread.addresses  # every GPU worker, in order
    spread.pages = spread.pages[:2]  # (two pages: two owners, the holder first)
    assert spread.owners(3) == ["tcp://h:1", "tcp://h:2"]
    spread.holds = {"tcp://h:3": 3}
    assert spread.owners(3) == ["tcp://h:1", "tcp://h:3"]


def test_gpu_owners_share_by_their_speeds_once_they_differ_enough(monkeypatch):
    """Equal shares until every owner was timed; then kept while the slowest's time
    with them is within GPU_SHARE_SLACK of the fastest's, else the speeds."""
    from hetgraph.scheduler.spread import gpu_shares

    monkeypatch.setattr(tuning, "GPU_SHARE_SLACK", 0.2)
    cluster = types.SimpleNamespace(gpu_speeds={"a": 100.0}, gpu_shares={})
    assert gpu_shares(cluster, ("a", "b")) == [1.0, 1.0]  # (b not timed)
    cluster.gpu_speeds["b"] = 90.0  # (11% slower: the layout stays)
    assert gpu_shares(cluster, ("a", "b")) == [1.0, 1.0]
    cluster.gpu_speeds["b"] = 50.0
    assert gpu_shares(cluster, ("a", "b")) == [1.0, 0.5]
    cluster.gpu_speeds["b"] = 45.0  # (with the new shares: within the slack)
    assert gpu_shares(cluster, ("a", "b")) == [1.0, 0.5]
    assert cluster.gpu_shares[("a", "b")] == [1.0, 0.5]


def _sparse_parts(share):
    tuning.SPARSE_PART_SHARE = share


def test_gpu_owners_between_hosts_send_only_their_changes(graph, oracle, gpu2,
                                                          monkeypatch):
    """GPU owners that share no memory (as on two hosts) send a wave's few changed
    values, not their whole ranges: fewer bytes, SciPy's answers (BFS levels, SSSP
    distances, PageRank, whose ranges change whole)."""
    monkeypatch.setattr(tuning, "SHARED_MEMORY_DIR", "")
    source = graph.label_of(_hub(graph))
    options = dict(cluster=gpu2, devices="gpu", page_bytes=PAGE_BYTES)
    written = {}
    _bounded(lambda: hg.bfs(graph, source, **options))  # (placed and warm)
    try:
        for share in (0.0, tuning.SPARSE_PART_SHARE):
            gpu2.client.run(_sparse_parts, share)
            counter = CommBytes(gpu2.client)
            before = counter.total()
            bfs = _bounded(lambda: hg.bfs(graph, source, **options))
            written[share] = counter.total() - before
            reached = np.isfinite(oracle["bfs"])
            np.testing.assert_array_equal(bfs.values[reached], oracle["bfs"][reached])
        sssp = _bounded(lambda: hg.sssp(graph, source, **options))
        np.testing.assert_allclose(sssp.values[reached], oracle["sssp"][reached],
                                   rtol=1e-12)
        np.testing.assert_allclose(_spread_call(graph, gpu2).values, oracle["pagerank"],
                                   rtol=1e-10)
    finally:
        gpu2.client.run(_sparse_parts, tuning.SPARSE_PART_SHARE)
    assert written[tuning.SPARSE_PART_SHARE] < 0.7 * written[0.0], written


def _slow_stand_in(factor):
    """Make this worker's stand-in GPU report its pulls ``factor`` times slower."""
    from hetgraph.scheduler import gpuowner

    gpuowner.__dict__["stand_in_slowdown"] = factor


def test_a_slower_gpu_owner_gets_fewer_pages(graph, oracle, gpu2):
    """Two GPU owners, the second reporting its pulls 3x slower: after a call has timed
    both, the second owns fewer of the pages, and the answers stay SciPy's."""
    slow = gpu2.gpu_workers[1]
    gpu2.gpu_speeds.clear()  # (the speeds other tests' calls measured: equal)
    gpu2.client.run(_slow_stand_in, 3.0, workers=[slow])
    try:
        _spread_call(graph, gpu2)  # (times both owners)
        result = _spread_call(graph, gpu2)
        shares = gpu2.gpu_shares[tuple(gpu2.gpu_workers)]
    finally:
        gpu2.client.run(_slow_stand_in, 1.0, workers=[slow])
        gpu2.gpu_speeds.clear()  # (the other tests' owners share equally)
        gpu2.gpu_shares.clear()
    assert shares[1] < 0.6 * shares[0], shares
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-10)
    pages = {address: [b - a for a, b in filter(None, ranges)][-1] for address, ranges in
             gpu2.client.run(built, workers=gpu2.gpu_workers).items()}
    assert pages[slow] < pages[gpu2.gpu_workers[0]], pages


# --- one GPU worker process ---------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu1():
    with stand_in_cluster(gpus=1) as cluster:
        yield cluster


def test_one_gpu_worker_answers_equal_scipy(graph, oracle, gpu1):
    _check(graph, oracle, gpu1)


def test_a_warm_gpu_call_is_one_call_sending_no_edges_nor_state(graph, oracle, gpu1):
    """A warm call on one GPU worker process is one direct call to it (the run's
    contexts dropped with its report), sends neither edges nor the state (made on the
    worker, kept on its device, back through the client's file) and finds the engine
    the worker kept for the graph."""
    state_bytes = graph.num_vertices * 9  # float64 values and uint8 flags
    engines = len(gpu1.client.run(built)[gpu1.gpu_workers[0]])
    sent, left, result = warm_call_messages(gpu1, lambda: _pagerank(graph, gpu1))
    # the call, then our client.run's broadcast to the scheduler and its runs
    assert sent == {"hetgraph_call": 1, "broadcast": 1, "run": 2}, sent
    assert all(runs == [] for runs in left.values()), left  # contexts dropped
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-10)
    counter = CommBytes(gpu1.client)
    before = counter.total()
    _pagerank(graph, gpu1)
    assert counter.total() - before < state_bytes / 4
    # the first call of the program built the engine; the warm ones took it again
    assert len(gpu1.client.run(built)[gpu1.gpu_workers[0]]) <= max(engines, 1)


def test_a_warm_gpu_call_copies_no_vertex_array_to_the_device_nor_locks_memory(
        graph, oracle, gpu1, monkeypatch):
    """The engine of a warm call binds the copy of the run's aux that its worker keeps on
    the device (a GpuEngine bound to the host array would copy it every call), and the
    state goes back into the client's file through the worker's map of it, page-locked
    once a file: the result keeps the file its values came back in (no copy out of
    it), so calls that each let the last result go take two files in turn."""
    monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", 0)  # (the state through the file)
    n, workers = graph.num_vertices, gpu1.gpu_workers
    program = PageRank(0.85, None, dtype=np.float32)  # (state files of their own)
    gc.collect()  # (an earlier test's uncollected result would hold a file of this size)
    gpu1.client.run(spied, workers=workers)  # (emptied)
    result = _pagerank(graph, gpu1, program)
    cold = gpu1.client.run(spied, workers=workers)[workers[0]]
    assert [size for _, size in cold["pinned"]] == [n * 5], cold  # the whole file
    assert cold["uploads"].count(n * 4) == 1, cold  # the aux, kept on the device
    result = _pagerank(graph, gpu1, program)  # (a second file, the first one lent)
    second = gpu1.client.run(spied, workers=workers)[workers[0]]
    assert [size for _, size in second["pinned"]] in ([], [n * 5]), second
    for _ in range(3):
        np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-4)
        result = _pagerank(graph, gpu1, program)
    got = gpu1.client.run(spied, workers=workers)[workers[0]]
    assert [size for size in got["uploads"] if size >= n] == [], got
    assert got["pinned"] == [] and got["unpinned"] == [], got
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-4)


def test_a_warm_call_compares_each_kept_array_once(graph, oracle, gpu1, monkeypatch):
    """A call finds the arrays its workers keep (:meth:`Cluster.kept_array`: a byte
    compare of a writeable one) once each, though PageRank's aux is also one of the
    program's arrays (twice before: a compare of V values more a call)."""
    met, keep = [], gpu1.kept_array
    monkeypatch.setattr(gpu1, "kept_array",
                        lambda g, a, *more: met.append(id(a)) or keep(g, a, *more))
    result = _pagerank(graph, gpu1)
    assert met and len(met) == len(set(met)), met
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-10)


def _finalized_in():
    """The ids of the processes where a :class:`_FinalizedWhere` finalized, kept on a
    module of the package (this module's globals are a copy in every function sent by
    value)."""
    from hetgraph.scheduler import gpuowner

    return gpuowner.__dict__.setdefault("test_finalized_in", [])


def _taken_finalized():
    taken = list(_finalized_in())
    _finalized_in().clear()
    return taken


class _FinalizedWhere(PageRank):
    """PageRank noting the process of each finalize; ``to``: the dtype it finalizes to
    (None: the state's, in place)."""

    def __init__(self, to=None, side_effects=False):
        super().__init__(0.85, None)
        self.to, self.init_side_effects = to, side_effects

    def finalize(self, graph, values, xp=np):
        _finalized_in().append(os.getpid())
        values = super().finalize(graph, values, xp)
        return values if self.to is None else values.astype(self.to)


@pytest.mark.parametrize("to, side_effects, where", [
    (None, False, "worker"), (np.float32, False, "worker"), (None, True, "client")])
def test_a_warm_gpu_calls_result_is_finalized_on_its_worker(graph, oracle, gpu1,
                                                            monkeypatch, to,
                                                            side_effects, where):
    """A warm call's result is finalized on the GPU worker's device before it comes back
    (as an in-process run finalizes a state it keeps on the GPU), so that the client
    makes no pass over it (nor zeroes marks for passes that run elsewhere): in place
    into the client's file, or, finalized to another dtype, in the report. A program
    whose init may set what finalize reads (``init_side_effects``) is finalized by the
    client."""
    from hetgraph.scheduler import dispatcher
    from hetgraph.scheduler.state import VertexState

    made = []
    monkeypatch.setattr(dispatcher, "VertexState", lambda *args, **options: made.append(
        VertexState(*args, **options)) or made[-1])
    program = _FinalizedWhere(to, side_effects)
    _pagerank(graph, gpu1, program)  # (cold: builds the engine of this program)
    _taken_finalized(), gpu1.client.run(_taken_finalized)
    made.clear()
    result = _pagerank(graph, gpu1, program)
    on_workers = gpu1.client.run(_taken_finalized, workers=gpu1.gpu_workers)
    worker_pid = gpu1.client.run(os.getpid, workers=gpu1.gpu_workers)
    expected = {"worker": ([], worker_pid[gpu1.gpu_workers[0]]),
                "client": ([CLIENT_PID], None)}[where]
    assert _taken_finalized() == expected[0]
    assert list(on_workers.values()) == [[] if expected[1] is None else [expected[1]]]
    assert result.values.dtype == (to or np.float64)
    np.testing.assert_allclose(result.values, oracle["pagerank"],
                               rtol=1e-10 if to is None else 1e-6)
    assert [state._marks for state in made] == [None]


def _short_segments():
    tuning.SEGMENT_SECONDS = 0.0  # (every segment one iteration: in this worker)


def _default_segments(seconds):
    tuning.SEGMENT_SECONDS = seconds


def test_the_state_stays_on_the_device_between_segments(graph, gpu1):
    """With segments of one iteration each, the state stays on the worker's device
    between them: a segment's call carries no state (the client gets it once, at the
    end, through its file)."""
    state_bytes = graph.num_vertices * 9
    counter = CommBytes(gpu1.client)
    gpu1.client.run(_short_segments, workers=gpu1.gpu_workers)
    sent, results, calls = {}, {}, {}
    try:
        _pagerank(graph, gpu1, iterations=5)  # (warm)
        for iterations in (5, 25):
            before, called = counter.total(), ops_written().get("hetgraph_call", 0)
            results[iterations] = _pagerank(graph, gpu1, iterations=iterations)
            sent[iterations] = counter.total() - before
            calls[iterations] = ops_written().get("hetgraph_call", 0) - called
    finally:
        gpu1.client.run(_default_segments, tuning.SEGMENT_SECONDS)
    assert calls[25] - calls[5] == 20  # (a segment an iteration)
    per_segment = (sent[25] - sent[5]) / 20
    assert per_segment < state_bytes / 4, (per_segment, state_bytes)
    expected = hg.pagerank(graph, tol=None, max_iterations=25)  # (the direct path)
    np.testing.assert_allclose(results[25].values, expected.values, rtol=1e-10)
    assert results[25].iterations == 25


# --- several GPU worker processes -----------------------------------------------------------

PAGE_BYTES = 64 << 10  # pages small enough for this graph to have tens of them


def _spread_call(graph, cluster, program=None, iterations=ITERATIONS):
    return _bounded(lambda: hg.run(program or PageRank(0.85, None), graph, cluster=cluster,
                                   devices="gpu", max_iterations=iterations,
                                   page_bytes=PAGE_BYTES))


@pytest.fixture(scope="module")
def gpu2():
    with stand_in_cluster(gpus=2) as cluster:
        yield cluster


def test_gpu_owners_answer_equal_scipy(graph, oracle, gpu2):
    source = graph.label_of(_hub(graph))
    pagerank = _spread_call(graph, gpu2)
    options = dict(cluster=gpu2, devices="gpu", page_bytes=PAGE_BYTES)
    bfs = _bounded(lambda: hg.bfs(graph, source, **options))
    sssp = _bounded(lambda: hg.sssp(graph, source, **options))
    np.testing.assert_allclose(pagerank.values, oracle["pagerank"], rtol=1e-10)
    reached = np.isfinite(oracle["bfs"])
    np.testing.assert_array_equal(bfs.values[reached], oracle["bfs"][reached])
    np.testing.assert_allclose(sssp.values[reached], oracle["sssp"][reached], rtol=1e-12)
    for result in (pagerank, bfs, sssp):  # (pulls of both owners' pages, exchanged)
        assert set(result.history["mode"]) == {"gpu-pull"}
        assert (result.history["gpu_edges"] == graph.num_arcs).all()
    # each owner built one engine over its own half of the pages, kept for later calls
    owned = [gpu2.client.run(built)[a] for a in gpu2.gpu_workers]
    assert all(pages is not None for kept in owned for pages in kept)
    (a0, b0), (a1, b1) = owned[0][0], owned[1][0]
    assert a0 == 0 and b0 == a1 < b1


def test_a_warm_spread_gpu_call_is_one_call_to_each_owner(graph, oracle, gpu2, socket_dir,
                                                         monkeypatch):
    """A warm call on two GPU owners is one direct call to each: their ranges go worker
    to worker (through shared memory), the state never through the client per
    iteration, and no shared file of the run is left behind."""
    monkeypatch.setattr(tuning, "SHARED_MEMORY_DIR", str(socket_dir))
    state_bytes = graph.num_vertices * 9
    sent, left, result = warm_call_messages(gpu2, lambda: _spread_call(graph, gpu2))
    # the calls, then our client.run's broadcast to the scheduler and its runs
    assert sent == {"hetgraph_call": 2, "broadcast": 1, "run": 3}, sent
    assert all(runs == [] for runs in left.values()), left
    assert [p for p in os.listdir(socket_dir) if "-back-" not in p] == []
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-10)
    counter = CommBytes(gpu2.client)
    through = {}
    for iterations in (5, 25):
        before = counter.total()
        _spread_call(graph, gpu2, iterations=iterations)
        through[iterations] = counter.total() - before
    assert (through[25] - through[5]) / 20 < state_bytes / 20, through


def test_a_gpu_owner_backs_up_only_the_state_it_held():
    """The copy a segment keeps of the state it begins from, should it run again after
    a peer left, is made only where the worker held that state: the client sends its
    own state, or the initial one, again (a copy of V values a warm call before)."""
    from hetgraph.scheduler import spread, tasks
    from hetgraph.scheduler.state import VertexState

    n = 4

    class Engine:
        values, flags = np.zeros(n), np.zeros(n, np.uint8)

        def load(self, values, flags, ranges):
            self.values[:], self.flags[:] = values, flags

    ctx = tasks._Context()
    ctx.engine = Engine()
    spec = types.SimpleNamespace(any_device=False, initial_state=lambda graph, xp: (
        np.ones(n), np.ones(n, np.uint8), None))
    run = types.SimpleNamespace(graph=types.SimpleNamespace(num_vertices=n), spec=spec)
    spread._own_gpu_state(run, ctx, spread.Initial(), 0, backup=True)
    spread._own_gpu_state(run, ctx, VertexState(np.full(n, 2.0), np.ones(n, np.uint8),
                                                sync=True), 1, backup=True)
    assert ctx.backup is None
    ctx.version = 1  # (the segment ended: it holds version 1)
    spread._own_gpu_state(run, ctx, None, 1, backup=True)
    assert ctx.backup[0] == 1 and (ctx.backup[1] == 2.0).all()
    ctx.engine.values[:] = 7.0  # (the segment ran, then a peer left: it runs again)
    spread._own_gpu_state(run, ctx, None, 1, backup=True)
    assert (ctx.engine.values == 2.0).all() and ctx.backup[0] == 1


def _host_counts():
    """How many whole states' frontiers this worker counted on the host since it was
    last asked (``spread._frontier_of``, wrapped the first time)."""
    from hetgraph.scheduler import spread

    counts = spread.__dict__.setdefault("test_host_counts", [0])
    if not getattr(spread._frontier_of, "spied", False):
        def spy(run, flags, original=spread._frontier_of):
            counts[0] += 1
            return original(run, flags)
        spy.spied = True
        spread._frontier_of = spy
    taken, counts[0] = counts[0], 0
    return taken


def test_a_warm_spread_gpu_call_counts_no_frontier_on_the_host(graph, oracle, gpu2):
    """GPU owners count the frontier of the program's initial state that they made on
    the host (an owner's engine counts its own pages only): each once for a graph and
    program, not each warm call (a copy of V flags and a pass over them)."""
    program = PageRank(0.85, None, dtype=np.float32)  # (an initial state of its own)
    gpu2.client.run(_host_counts, workers=gpu2.gpu_workers)
    _spread_call(graph, gpu2, program)
    assert sum(gpu2.client.run(_host_counts, workers=gpu2.gpu_workers).values()) == 2
    for _ in range(2):
        result = _spread_call(graph, gpu2, program)
        np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-4)
    assert sum(gpu2.client.run(_host_counts, workers=gpu2.gpu_workers).values()) == 0
    assert result.history["active"].iloc[0] == graph.num_vertices  # (the kept count)


def test_gpu_workers_checkpoint_and_run_async(graph, oracle, gpu1, gpu2, tmp_path):
    """A checkpointed run hands the state back at every checkpoint and goes on from the
    one its workers hold; an async run's owners exchange the values they wrote in
    place. On one GPU worker and on two."""
    source = graph.label_of(_hub(graph))
    reached = np.isfinite(oracle["bfs"])
    for name, cluster in (("one", gpu1), ("two", gpu2)):
        saved = _bounded(lambda: hg.run(
            PageRank(0.85, None), graph, cluster=cluster, devices="gpu",
            max_iterations=ITERATIONS, page_bytes=PAGE_BYTES,
            checkpoint=str(tmp_path / name), checkpoint_every=7))
        np.testing.assert_allclose(saved.values, oracle["pagerank"], rtol=1e-10)
        assert saved.iterations == ITERATIONS
        resumed = _bounded(lambda: hg.run(
            PageRank(0.85, None), graph, cluster=cluster, devices="gpu",
            max_iterations=ITERATIONS, page_bytes=PAGE_BYTES,
            checkpoint=str(tmp_path / name), resume=True))
        np.testing.assert_allclose(resumed.values, saved.values, rtol=1e-12)
        levels = _bounded(lambda: hg.bfs(graph, source, cluster=cluster, devices="gpu",
                                         mode="async", page_bytes=PAGE_BYTES))
        np.testing.assert_array_equal(levels.values[reached], oracle["bfs"][reached])


# --- faults -------------------------------------------------------------------------------

def test_a_gpu_owner_killed_mid_run_leaves_its_range_to_the_survivor(graph, oracle, tmp_path):
    marker = tmp_path / "killed"
    with stand_in_cluster(gpus=2) as cluster:
        _spread_call(graph, cluster)  # (placed and warm)
        result = _spread_call(graph, cluster, KillsItsWorker(str(marker)))
        assert marker.exists(), "no worker was killed: the test did not test"
        again = _spread_call(graph, cluster)
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-10)
    assert result.history["iteration"].tolist() == list(range(1, ITERATIONS + 1))
    np.testing.assert_allclose(again.values, oracle["pagerank"], rtol=1e-10)


def test_a_lone_gpu_worker_killed_mid_run_is_replaced(graph, oracle, tmp_path):
    marker = tmp_path / "killed"
    with stand_in_cluster(gpus=1) as cluster:
        _pagerank(graph, cluster)  # (placed and warm)
        first = cluster.gpu_workers[0]
        result = _pagerank(graph, cluster, KillsItsWorker(str(marker)))
        assert marker.exists(), "no worker was killed: the test did not test"
        assert cluster.gpu_workers and first not in cluster.gpu_workers  # replaced
    np.testing.assert_allclose(result.values, oracle["pagerank"], rtol=1e-10)


def test_gpu_workers_that_keep_dying_fail_the_run_naming_them(graph, monkeypatch):
    monkeypatch.setattr(tuning, "LOST_TASK_RETRIES", 1)
    with stand_in_cluster(gpus=1) as cluster:
        first = cluster.gpu_workers[0]
        with pytest.raises(WorkerLostError, match="was lost 2 times") as error:
            _pagerank(graph, cluster, KillsItsWorker())
        assert first in str(error.value)


# --- on the device (marked gpu): the real GpuEngine in GPU worker processes ---------------

DEVICE_PAGE_BYTES = 1 << 20  # RMAT-16's pages: a few for each of two GPUs


@pytest.fixture(scope="module")
def device_graph():
    return hg.generate.rmat(16, edge_factor=16, seed=5, weights=(1.0, 10.0))


def _device_calls(graph, cluster, **options):
    """PageRank (20 iterations), BFS and SSSP from the hub with ``devices="gpu"``."""
    source = graph.label_of(_hub(graph))
    options = dict(cluster=cluster, devices="gpu", **options)
    return {"pagerank": _bounded(lambda: hg.run(PageRank(0.85, None), graph,
                                                max_iterations=ITERATIONS, **options)),
            "bfs": _bounded(lambda: hg.bfs(graph, source, **options)),
            "sssp": _bounded(lambda: hg.sssp(graph, source, **options))}


@pytest.fixture(scope="module")
def one_gpu_in_process(device_graph):
    with hg.Cluster(gpus=1, dashboard_address=None) as cluster:
        return _device_calls(device_graph, cluster)


def _equal_to_one_gpu(results, expected):
    assert np.abs(results["pagerank"].values - expected["pagerank"].values).sum() < 1e-6
    for name in ("bfs", "sssp"):
        np.testing.assert_array_equal(results[name].values, expected[name].values,
                                      err_msg=name)
    for result in results.values():
        assert set(result.history["placement"]) == {"gpu"}


def _page_locked_files():
    """Whether each state file this worker handed a state back through is page-locked."""
    from hetgraph.scheduler import gpuowner

    return [kept[1] is not None for kept in gpuowner._LOCKED.values()]


@pytest.mark.gpu
def test_one_gpu_worker_process_on_the_device(device_graph, one_gpu_in_process):
    with hg.Cluster(gpus=1, processes=True, dashboard_address=None) as cluster:
        _equal_to_one_gpu(_device_calls(device_graph, cluster), one_gpu_in_process)
        sent, left, result = warm_call_messages(cluster, lambda: hg.run(
            PageRank(0.85, None), device_graph, cluster=cluster, devices="gpu",
            max_iterations=ITERATIONS))
        locked = cluster.client.run(_page_locked_files, workers=cluster.gpu_workers)
    assert sent == {"hetgraph_call": 1, "broadcast": 1, "run": 2}, sent
    assert all(runs == [] for runs in left.values()), left
    assert np.abs(result.values - one_gpu_in_process["pagerank"].values).sum() < 1e-6
    # the worker's maps of the client's state files: page-locked (cudaHostRegister)
    assert all(files and all(files) for files in locked.values()), locked


@pytest.mark.gpu
@pytest.mark.skipif(hg.cluster.gpu_count() < 2, reason="needs two GPUs")
def test_two_gpu_worker_processes_on_the_device(device_graph, one_gpu_in_process):
    with hg.Cluster(gpus=2, processes=True, dashboard_address=None) as cluster:
        results = _device_calls(device_graph, cluster, page_bytes=DEVICE_PAGE_BYTES)
        _equal_to_one_gpu(results, one_gpu_in_process)
        for result in results.values():  # (spread: both owners' pages pulled)
            assert set(result.history["mode"]) == {"gpu-pull"}
        sent, left, result = warm_call_messages(cluster, lambda: hg.run(
            PageRank(0.85, None), device_graph, cluster=cluster, devices="gpu",
            max_iterations=ITERATIONS, page_bytes=DEVICE_PAGE_BYTES))
    assert sent == {"hetgraph_call": 2, "broadcast": 1, "run": 3}, sent
    assert all(runs == [] for runs in left.values()), left
    assert np.abs(result.values - one_gpu_in_process["pagerank"].values).sum() < 1e-6


def _peer_copies(on):
    """Turn this worker's GPU-to-GPU exchange on or off; returns the range sizes it
    staged for its peers so far and the peers' buffers it mapped."""
    from hetgraph.scheduler import gpupeers

    tuning.GPU_PEER_COPIES = on
    return len(gpupeers._STAGES), len(gpupeers._OPENED)


@pytest.mark.gpu
@pytest.mark.skipif(hg.cluster.gpu_count() < 2, reason="needs two GPUs")
def test_two_gpu_worker_processes_exchange_gpu_to_gpu(device_graph, one_gpu_in_process):
    """Two GPU owners on one host send their ranges GPU to GPU (each staged a range and
    mapped the other's); through host memory instead, the same answers."""
    with hg.Cluster(gpus=2, processes=True, dashboard_address=None) as cluster:
        workers = cluster.gpu_workers
        before = cluster.client.run(_peer_copies, True, workers=workers)
        peer = _device_calls(device_graph, cluster, page_bytes=DEVICE_PAGE_BYTES)
        used = cluster.client.run(_peer_copies, False, workers=workers)
        host = _device_calls(device_graph, cluster, page_bytes=DEVICE_PAGE_BYTES)
    assert all(tuple(counts) == (0, 0) for counts in before.values()), before
    assert all(staged >= 1 and mapped >= 2 for staged, mapped in used.values()), used
    _equal_to_one_gpu(peer, one_gpu_in_process)
    for name in ("bfs", "sssp"):
        np.testing.assert_array_equal(peer[name].values, host[name].values, err_msg=name)
    np.testing.assert_allclose(peer["pagerank"].values, host["pagerank"].values, rtol=1e-9)


@pytest.mark.gpu
@pytest.mark.skipif(hg.cluster.gpu_count() < 2, reason="needs two GPUs")
def test_a_gpu_owner_killed_mid_run_on_the_device(device_graph, one_gpu_in_process,
                                                  tmp_path):
    """A real GPU worker process killed at its third iteration of a spread run: the
    survivor takes its range (its peer's staged buffers and socket gone with it) and
    ends the run with the one-GPU answer; the next call too, on the replaced worker."""
    marker = tmp_path / "killed"
    want = one_gpu_in_process["pagerank"].values
    with hg.Cluster(gpus=2, processes=True, dashboard_address=None) as cluster:
        def call(program):
            return _bounded(lambda: hg.run(program, device_graph, cluster=cluster,
                                           devices="gpu", max_iterations=ITERATIONS,
                                           page_bytes=DEVICE_PAGE_BYTES))
        call(PageRank(0.85, None))  # (placed and warm)
        result = call(KillsItsWorker(str(marker)))
        assert marker.exists(), "no worker was killed: the test did not test"
        again = call(PageRank(0.85, None))
    assert result.history["iteration"].tolist() == list(range(1, ITERATIONS + 1))
    for got in (result, again):
        assert np.abs(got.values - want).sum() < 1e-6


def test_the_state_survives_its_first_gpu_owner_lost_at_the_runs_end(graph, oracle,
                                                                     tmp_path):
    """Should the first GPU owner, which hands the state back, die after the run's last
    exchange, the other owner (which dropped its contexts) still gives the client the
    state after it, kept from its device."""
    from test_spread import _kill_first_owner_at_hand_back

    marker = tmp_path / "killed"
    with stand_in_cluster(gpus=2) as cluster:
        _spread_call(graph, cluster)  # (placed and warm)
        cluster.client.run(_kill_first_owner_at_hand_back, str(marker),
                           workers=cluster.gpu_workers)
        cluster.client.run(_short_segments, workers=cluster.gpu_workers)
        result = _spread_call(graph, cluster)
        assert marker.exists(), "no worker was killed: the test did not test"
        again = _spread_call(graph, cluster)
    for got in (result, again):
        np.testing.assert_allclose(got.values, oracle["pagerank"], rtol=1e-10)
    assert result.history["iteration"].tolist() == list(range(1, ITERATIONS + 1))


@pytest.mark.parametrize("gpus", ["gpu1", "gpu2"])
def test_a_warm_gpu_call_makes_no_initial_state_here_nor_compares_derived_arrays(
        graph, oracle, gpus, request, monkeypatch):
    """A warm call on GPU worker processes, which make the initial state on their
    devices, makes none in the calling process (V-sized arrays a call, before), nor
    compares PageRank's derived arrays (kept by the graph, never written) byte for
    byte with the copies its workers keep; on one worker and on two owners (which
    count the first frontier themselves). Answers against SciPy."""
    from test_processes import _initial_states_made_here

    cluster = request.getfixturevalue(gpus)
    call = _pagerank if gpus == "gpu1" else _spread_call
    call(graph, cluster)  # (the arrays kept on the workers)
    made = _initial_states_made_here(monkeypatch)
    compared, equal = [], np.array_equal
    monkeypatch.setattr(np, "array_equal", lambda a, b, *more: compared.append(
        np.size(a)) or equal(a, b, *more))
    source = graph.label_of(_hub(graph))
    options = dict(cluster=cluster, devices="gpu", page_bytes=PAGE_BYTES)
    pagerank = call(graph, cluster)
    bfs = _bounded(lambda: hg.bfs(graph, source, **options))
    sssp = _bounded(lambda: hg.sssp(graph, source, **options))
    assert made == [], made
    assert [size for size in compared if size >= graph.num_vertices] == [], compared
    np.testing.assert_allclose(pagerank.values, oracle["pagerank"], rtol=1e-10)
    reached = np.isfinite(oracle["bfs"])
    np.testing.assert_array_equal(bfs.values[reached], oracle["bfs"][reached])
    np.testing.assert_allclose(sssp.values[reached], oracle["sssp"][reached], rtol=1e-12)
