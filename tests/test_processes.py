"""Worker processes (issue 51): a graph is sent to the workers once and kept there, so a
warm call sends no edges (bytes counted at Dask's TCP comms, bench/commcount.py) and
finds the engine its worker kept; a worker killed in the middle of a run is replaced
and the run gives the answer of an undisturbed one, or, when the workers keep dying,
fails with a WorkerLostError that names them. No test here times anything."""

import concurrent.futures
import gc
import os
import signal
import sys
import time

import cloudpickle
import numpy as np
import pytest

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.cluster import WorkerLostError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "bench"))
from commcount import CommBytes, ops_written  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
# the worker processes run this module's program and functions: send them by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CALL_SECONDS = 300  # a call that has not returned by then hangs: the test fails
CLIENT_PID = os.getpid()


@pytest.fixture(scope="module")
def graph():
    # 200 edges a vertex: the edges dwarf the vertex state
    return hg.generate.erdos_renyi(1000, 0.2, seed=7)


def _pagerank(graph, cluster, program=None, iterations=12):
    program = program or PageRank(0.85, None)
    return hg.run(program, graph, cluster=cluster, devices="cpu", partitions=1,
                  max_iterations=iterations)


@pytest.fixture(scope="module")
def expected(graph):
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        return {"pagerank": _pagerank(graph, cluster),
                "long": _pagerank(graph, cluster, iterations=60),
                "bfs": hg.bfs(graph, graph.label_of(0), cluster=cluster, devices="cpu")}


def _bounded(call):
    """``call()``, failing the test (not hanging it) after CALL_SECONDS."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            return pool.submit(call).result(timeout=CALL_SECONDS)
        except concurrent.futures.TimeoutError:
            pytest.fail(f"the call did not return within {CALL_SECONDS} s: it hangs")


def _in_call_thread(function):
    """``function()`` in this worker's call thread: after the work that followed its
    last call's answer (the run's contexts dropped, :func:`.callsocket.after_answer`)."""
    from hetgraph.scheduler import callsocket

    return callsocket.call_thread().submit(function).result(timeout=60)


def _idle_engines():
    """The ids of the idle engines this worker keeps."""
    from hetgraph.scheduler import tasks

    return _in_call_thread(lambda: sorted(
        id(e) for kept in tasks._IDLE.values() for e in kept.values()))


def test_a_warm_call_sends_no_edges_and_finds_its_engine(graph, expected):
    edge_bytes = graph.in_indices.nbytes + graph.out_indices.nbytes
    state_bytes = graph.num_vertices * 9  # float64 values and uint8 flags
    assert state_bytes * 100 < edge_bytes  # (the graph is one where the two differ)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        counter = CommBytes(cluster.client)
        sent, engines = [], []
        for _ in range(3):
            before = counter.total()
            result = _bounded(lambda: _pagerank(graph, cluster))
            sent.append(counter.total() - before)
            engines.append(cluster.client.run(_idle_engines))
            np.testing.assert_array_equal(result.values, expected["pagerank"].values)
        bfs = [_bounded(lambda: hg.bfs(graph, graph.label_of(0), cluster=cluster,
                                       devices="cpu")) for _ in range(2)]
    assert sent[0] > edge_bytes  # the first call placed the graph
    # later calls: the state, the program and its O(V) arrays, each a few times (client,
    # scheduler, worker), never the edges
    assert max(sent[1:]) < edge_bytes / 4, sent
    assert engines[0] == engines[1] == engines[2] and len(engines[0]) == 1  # kept, reused
    for result in bfs:
        np.testing.assert_array_equal(result.values, expected["bfs"].values)


def _noop():
    return None


def _run_contexts():
    """The runs whose contexts (or unpacked RunSpec) this worker still keeps."""
    from hetgraph.scheduler import tasks

    return _in_call_thread(lambda: sorted({key[0] for key in tasks._CONTEXTS}
                                          | set(tasks._UNPACKED)))


def warm_call_messages(cluster, call):
    """({op: messages} the client's process wrote for a warm ``call()`` on ``cluster``
    (those sent on a timer aside: PERIODIC), then a client.run's: a broadcast to the scheduler and its run on
    each worker; {worker: the runs whose contexts it keeps} after; the call's result)."""
    CommBytes(cluster.client)  # (counts the messages of every process)
    for _ in range(2):  # placed, then called directly
        _bounded(call)
    # a client.run goes out after whatever the calls left queued on the client's loop
    cluster.client.run(_noop)
    before = ops_written()
    result = _bounded(call)
    cluster.client.run(_noop)
    after = ops_written()
    left = cluster.client.run(_run_contexts)
    sent = {op: n - before.get(op, 0) for op, n in after.items() if n > before.get(op, 0)}
    return {op: n for op, n in sent.items() if not any(
        periodic in op for periodic in PERIODIC)}, left, result


# ops the client's process sends on a timer, whatever the calls: heartbeats, the local
# cluster manager's sync of its info with the scheduler (every second), and the client's
# refresh of the scheduler's info (Client._update_scheduler_info, every 2 s)
PERIODIC = ("heartbeat", "set_metadata", "identity")


def test_a_warm_call_is_one_call_to_its_worker(graph, expected):
    """A warm call on one worker process is one direct call: nothing else goes to the
    worker (the run's contexts are dropped with its last report, not by a message of
    the client's at the run's end), and nothing through the scheduler."""
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        sent, left, result = warm_call_messages(cluster, lambda: _pagerank(graph, cluster))
    # the call, then our client.run's broadcast to the scheduler and its run on the worker
    assert sent == {"hetgraph_call": 1, "broadcast": 1, "run": 1}, sent
    assert list(left.values()) == [[]]  # the worker dropped the run's contexts
    np.testing.assert_array_equal(result.values, expected["pagerank"].values)


SLOW = 1.0  # seconds a worker's segment spends around its iterations (a test's delay)


def _slow_hand_over():
    """Make this worker's segments spend SLOW seconds around their iterations: in the
    hand-over of the state, after the last iteration."""
    from hetgraph.scheduler import spread

    if getattr(spread._whole, "slowed", False):
        return
    original = spread._whole

    def slowed(*args):
        time.sleep(SLOW)
        return original(*args)

    slowed.slowed = True
    spread._whole = slowed


def test_a_calls_round_trip_is_no_iterations(graph, expected):
    """The time a call to a worker process spends beyond its iterations (here SLOW
    seconds of a slowed hand-over) is counted in ``round_trip_seconds``, not in the
    seconds of the segment's last row."""
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        cluster.client.run(_slow_hand_over)
        results = [_bounded(lambda: _pagerank(graph, cluster)) for _ in range(2)]
    for result in results:  # (through a Dask task, then called directly)
        assert result.history["seconds"].max() < SLOW
        assert result.round_trip_seconds >= SLOW
        np.testing.assert_array_equal(result.values, expected["pagerank"].values)


@pytest.mark.parametrize("inline", [True, False])
def test_an_in_process_segments_round_trip_is_no_iterations(graph, expected, monkeypatch,
                                                            inline):
    """In process too (a segment run in the calling thread, or as a task of the
    process's cluster after tuning.INLINE_SECONDS): what a segment spends beyond its
    iterations (SLOW seconds of a slowed hand-over of its report) is counted in
    ``round_trip_seconds``, not in its last row."""
    from hetgraph.scheduler import tasks

    segment = tasks.cpu_segment

    def slowed(*args, **kwargs):
        report = segment(*args, **kwargs)
        time.sleep(SLOW)
        return report

    monkeypatch.setattr(tasks, "cpu_segment", slowed)
    if not inline:
        monkeypatch.setattr(tuning, "INLINE_SECONDS", 0.0)
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        result = _bounded(lambda: _pagerank(graph, cluster))
    assert result.history["seconds"].max() < SLOW
    assert result.round_trip_seconds >= SLOW
    np.testing.assert_array_equal(result.values, expected["pagerank"].values)


class KillsItsWorker(PageRank):
    """PageRank whose iteration hook kills the worker process running it (SIGKILL) at
    its third iteration there: every time, or once (``marker``: a file made then)."""

    def __init__(self, marker=None):
        super().__init__(0.85, None)
        self.marker = marker
        self.calls = 0

    def iteration_constant(self, graph, values):
        self.calls += 1
        if os.getpid() != CLIENT_PID and self.calls == 3 and self._first_time():
            os.kill(os.getpid(), signal.SIGKILL)
        return super().iteration_constant(graph, values)

    def _first_time(self):
        if self.marker is None:
            return True
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True


def test_a_worker_killed_mid_run_is_replaced(graph, expected, tmp_path):
    marker = tmp_path / "killed"
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        _bounded(lambda: _pagerank(graph, cluster))  # placed and warm before the kill
        first = cluster.cpu_workers[0]
        result = _bounded(lambda: _pagerank(graph, cluster, KillsItsWorker(str(marker)),
                                            iterations=60))
        assert marker.exists(), "no worker was killed: the test did not test"
        assert cluster.cpu_workers and first not in cluster.cpu_workers  # replaced
        # the graph went to the new worker; later calls run there
        again = _bounded(lambda: _pagerank(graph, cluster))
    np.testing.assert_array_equal(result.values, expected["long"].values)
    assert result.history["iteration"].tolist() == list(range(1, 61))
    np.testing.assert_array_equal(again.values, expected["pagerank"].values)


def test_workers_that_keep_dying_fail_the_run_naming_them(graph, tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "LOST_TASK_RETRIES", 1)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        first = cluster.cpu_workers[0]
        with pytest.raises(WorkerLostError, match="was lost 2 times") as error:
            _bounded(lambda: _pagerank(graph, cluster, KillsItsWorker(), iterations=60))
        assert first in str(error.value)
        # the cluster's new worker still serves later runs
        result = _bounded(lambda: _pagerank(graph, cluster))
    assert isinstance(error.value, hg.HetGraphError)
    assert result.iterations == 12


def _malloc_trim():
    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


@pytest.mark.skipif("MALLOC_TRIM_THRESHOLD_" in os.environ,
                    reason="this process's environment sets it for every worker")
def test_worker_processes_keep_glibcs_own_mmap_threshold():
    """Dask sets MALLOC_TRIM_THRESHOLD_ for the processes its nannies start, which fixes
    glibc's mmap threshold: every vertex-sized temporary of an iteration would be
    mapped and faulted anew. A local hetgraph cluster leaves it unset."""
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        assert set(cluster.client.run(_malloc_trim).values()) == {None}


# --- the initial state made on the workers alone (issue 51) ----------------------------------

class Reach(hg.VertexProgram):
    """1 where ``source`` reaches (a user's program); ``init`` only returns its arrays."""

    dtype = np.int32
    reduce = "or"
    incremental = True
    init_side_effects = False

    def __init__(self, source):
        self.source = source

    @staticmethod
    def gather(src, weight, dst):
        return src

    @staticmethod
    def apply(old, acc, aux):
        return old | acc

    @staticmethod
    def activate(new, old):
        return new != old

    def init(self, graph):
        values = np.zeros(graph.num_vertices, np.int32)
        values[self.source] = 1
        return values, values == 1


class HalfReach(Reach):
    """Reach's values halved by ``finalize`` with what ``init`` set: a program whose init
    has side effects (the default), which the calling process must run."""

    init_side_effects = True

    def init(self, graph):
        self.halve = 2.0
        return super().init(graph)

    def finalize(self, graph, values):
        return values / self.halve


@pytest.fixture(scope="module")
def directed():
    # weighted and directed, with dangling vertices: every algorithm's oracle differs
    rng = np.random.default_rng(11)
    pairs = np.unique(rng.integers(0, 400, (3000, 2)), axis=0)  # (no parallel edges)
    return hg.from_arrays(pairs[:, 0], pairs[:, 1], weight=rng.integers(1, 9, len(pairs)),
                          num_vertices=400)


@pytest.fixture(scope="module")
def two_cpu_processes():
    with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as c:
        yield c


def _initial_states_made_here(monkeypatch):
    """[program name] of every initial state this process makes from now on (the
    program's ``init`` called by :meth:`ProgramSpec.initial_state`)."""
    from hetgraph.program import ProgramSpec

    made, make = [], ProgramSpec.initial_state
    monkeypatch.setattr(ProgramSpec, "initial_state",
                        lambda spec, *a, **k: made.append(spec.name) or make(spec, *a, **k))
    return made


@pytest.mark.parametrize("owners", [1, 2])
def test_workers_that_make_the_initial_state_leave_it_unmade_here(
        directed, two_cpu_processes, monkeypatch, owners):
    """A run on worker processes that make its initial state themselves does not make it
    in the calling process too (V-sized arrays built and dropped a call), on one owner
    and on two (the spread pulls' owners count its frontier themselves); the answers of
    every built-in program and of a user's against SciPy and NetworkX. A user's program
    whose init may set what finalize reads (the default) still has it run here."""
    import networkx as nx
    import scipy.sparse.csgraph as csgraph

    if owners == 2:  # (every worker of the host an owner, whatever the graph's size)
        monkeypatch.setattr(tuning, "OWNERS_PER_HOST", 0)
        monkeypatch.setattr(tuning, "SPREAD_ARCS", 0)
    cluster, graph = two_cpu_processes, directed
    options = dict(cluster=cluster, devices="cpu")
    hub = int(np.argmax(graph.out_degree()))
    source = graph.label_of(hub)
    reference = nx.DiGraph()
    reference.add_nodes_from(graph.label_of(v) for v in range(graph.num_vertices))
    matrix = graph.to_scipy().astype(np.float64)
    edges = matrix.tocoo()
    reference.add_weighted_edges_from(
        (graph.label_of(u), graph.label_of(v), w) for u, v, w in
        zip(edges.row, edges.col, edges.data))
    nodes = list(reference)
    personal = {nodes[0]: 1.0, nodes[7]: 3.0, nodes[-1]: 0.5}
    dangling = {nodes[3]: 1.0, nodes[9]: 2.0}
    made = _initial_states_made_here(monkeypatch)
    runs = [_bounded(lambda: hg.pagerank(graph, tol=1e-10, personalization=personal,
                                         dangling=dangling, **options)),
            _bounded(lambda: hg.pagerank(graph, tol=1e-10, **options)),
            _bounded(lambda: hg.bfs(graph, source, **options)),
            _bounded(lambda: hg.sssp(graph, source, **options)),
            _bounded(lambda: hg.connected_components(graph, algorithm="label-propagation",
                                                     **options)),
            _bounded(lambda: hg.run(Reach(hub), graph, **options))]
    assert made == [], made
    half = _bounded(lambda: hg.run(HalfReach(hub), graph, **options))
    assert made == ["HalfReach"], made
    personalized, plain, bfs, sssp, cc, reach = runs
    for ours, theirs in ((personalized, nx.pagerank(reference, tol=1e-12,
                                                    personalization=personal,
                                                    dangling=dangling)),
                         (plain, nx.pagerank(reference, tol=1e-12))):
        assert ours.converged
        got = np.array([ours[label] for label in nodes])
        np.testing.assert_allclose(got, [theirs[label] for label in nodes], rtol=1e-6,
                                   atol=1e-9)
    levels = csgraph.shortest_path(matrix, unweighted=True, indices=hub)
    reached = np.isfinite(levels)
    np.testing.assert_array_equal(bfs.values[reached], levels[reached])
    assert (bfs.values[~reached] == -1).all()
    np.testing.assert_allclose(sssp.values, csgraph.dijkstra(matrix, indices=hub),
                               rtol=1e-12)
    np.testing.assert_array_equal(reach.values, reached.astype(np.int32))
    np.testing.assert_array_equal(half.values, reached / 2.0)
    components = list(nx.weakly_connected_components(reference))
    assert all(len({cc[label] for label in c}) == 1 for c in components)
    assert len(set(cc.values.tolist())) == len(components)
    for result in runs + [half]:
        assert set(result.history["placement"]) == {"cpu"}


# --- what a warm call does besides its iterations (issue 51, h38) ----------------------------

def _spy_hand_backs():
    """Record, in this worker, whether each state handed back through a client's file
    carried its flags (emptied by each call; returns what was recorded)."""
    from hetgraph.scheduler import hostshare

    if not hasattr(hostshare, "_spied_hand_back"):
        hand_back = hostshare.hand_back
        hostshare._spied = []

        def spy(back, values, flags):
            hostshare._spied.append(back.flags)
            return hand_back(back, values, flags)
        hostshare._spied_hand_back = hostshare.hand_back = spy
    got = list(hostshare._spied)
    hostshare._spied.clear()
    return got


def _spy_initial_states():
    """Count, in this worker, the initial states its programs' ``init`` made (emptied by
    each call; returns the names counted)."""
    from hetgraph.program import ProgramSpec

    if not hasattr(ProgramSpec, "_made"):
        make = ProgramSpec.initial_state
        ProgramSpec._made = []
        ProgramSpec.initial_state = \
            lambda spec, *a, **k: ProgramSpec._made.append(spec.name) or make(spec, *a, **k)
    got = list(ProgramSpec._made)
    ProgramSpec._made.clear()
    return got


def test_a_warm_calls_result_is_the_file_it_came_back_in_without_flags(
        graph, expected, monkeypatch):
    """The run's last segment hands back its values alone (nothing reads the flags
    after it), and the result's values are the client's file they came back in, not a
    copy out of it (whose new memory faulted page by page); a result kept while later
    calls run keeps its values (its file lent to it, written by no later call)."""
    from hetgraph.scheduler import hostshare

    monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", 0)  # (the state through the file)
    gc.collect()  # (an earlier test's uncollected result would hold a file of this size)
    taken = []
    take = hostshare.take
    monkeypatch.setattr(hostshare, "take", lambda *a: taken.append(a[0]) or take(*a))
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        source = graph.label_of(0)
        kept = _bounded(lambda: hg.bfs(graph, source, cluster=cluster, devices="cpu"))
        cluster.client.run(_spy_hand_backs)
        for _ in range(4):  # (two files in turn: a result let go frees its file)
            result = _bounded(lambda: _pagerank(graph, cluster))
            np.testing.assert_allclose(result.values, expected["pagerank"].values,
                                       rtol=1e-12)
        others = _bounded(lambda: hg.bfs(graph, graph.label_of(5), cluster=cluster,
                                         devices="cpu"))
        handed = cluster.client.run(_spy_hand_backs)[cluster.cpu_workers[0]]
    assert taken == [] and handed == [False] * 5, (taken, handed)
    assert not result.values.flags.owndata and result.values.flags.writeable
    np.testing.assert_array_equal(kept.values, expected["bfs"].values)
    assert (others.values >= 0).all() and others.values[5] == 0


def test_a_small_state_comes_back_in_the_answer_not_a_file(graph, expected, monkeypatch):
    """A state of at most ``tuning.ANSWER_STATE_BYTES`` comes back in the call's
    answer: no file made or handed back into, each result its own writable arrays,
    the same answers, and a run of several segments goes on from the state that came
    back (each segment one iteration here)."""
    from hetgraph.scheduler import hostshare

    made = []
    back_file = hostshare.back_file
    monkeypatch.setattr(hostshare, "back_file",
                        lambda *a: made.append(a) or back_file(*a))
    monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", graph.num_vertices * 9)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        cluster.client.run(_spy_hand_backs)
        results = [_bounded(lambda: _pagerank(graph, cluster)) for _ in range(2)]
        bfs = _bounded(lambda: hg.bfs(graph, graph.label_of(0), cluster=cluster,
                                      devices="cpu"))
        cluster.client.run(_segments_of, 0.0)
        long = _bounded(lambda: _pagerank(graph, cluster, iterations=60))
        handed = cluster.client.run(_spy_hand_backs)[cluster.cpu_workers[0]]
    assert made == [] and handed == []
    for result in results:
        np.testing.assert_allclose(result.values, expected["pagerank"].values, rtol=1e-12)
        assert result.values.flags.writeable
    assert not np.shares_memory(results[0].values, results[1].values)
    np.testing.assert_array_equal(bfs.values, expected["bfs"].values)
    assert len(long.history) == 60
    np.testing.assert_allclose(long.values, expected["long"].values, rtol=1e-12)


def test_a_checkpointed_run_still_hands_back_its_flags(graph, expected, tmp_path,
                                                        monkeypatch):
    """A run that checkpoints gets the flags with the state (a checkpoint saves them):
    resumed from its checkpoint after two BFS levels, it ends as an undisturbed one."""
    from hetgraph.scheduler import hostshare

    monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", 0)  # (the state through the file)
    taken = []
    take = hostshare.take
    monkeypatch.setattr(hostshare, "take", lambda *a: taken.append(a[0].flags) or take(*a))
    source = graph.label_of(0)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        options = dict(cluster=cluster, devices="cpu", checkpoint=str(tmp_path),
                       checkpoint_every=1)
        _bounded(lambda: hg.bfs(graph, source, max_iterations=1, **options))
        assert taken and all(taken), taken
        resumed = _bounded(lambda: hg.bfs(graph, source, resume=True, **options))
    np.testing.assert_array_equal(resumed.values, expected["bfs"].values)


@pytest.mark.parametrize("owners", [1, 2])
def test_the_workers_refill_the_last_runs_initial_state(directed, two_cpu_processes,
                                                        monkeypatch, owners):
    """A worker keeps the initial state it made for a program on a graph and fills the
    last run's state from it (no program init, no V-sized allocation) while the
    program and its parameters stay the same; other parameters make it again. Answers
    against SciPy and NetworkX, calls with each set of parameters in turn, on one worker
    and spread over two."""
    import networkx as nx

    if owners == 2:  # (every worker of the host an owner, whatever the graph's size)
        monkeypatch.setattr(tuning, "OWNERS_PER_HOST", 0)
        monkeypatch.setattr(tuning, "SPREAD_ARCS", 0)
    cluster, graph = two_cpu_processes, directed
    options = dict(cluster=cluster, devices="cpu")
    matrix = graph.to_scipy().astype(np.float64)
    reference = nx.from_scipy_sparse_array(matrix, create_using=nx.DiGraph)
    hubs = [int(v) for v in np.argsort(graph.out_degree())[-2:]]
    rng = np.random.default_rng(5)
    weights = [rng.random(graph.num_vertices) for _ in range(2)]
    calls = {("bfs", h): (lambda h=h: hg.bfs(graph, graph.label_of(h), **options))
             for h in hubs}
    calls.update({("sssp", d): (lambda d=d: hg.sssp(graph, graph.label_of(hubs[0]),
                                                     dtype=d, **options))
                  for d in (np.float64, np.float32)})
    calls.update({("pagerank", d): (lambda d=d: hg.pagerank(graph, damping=d, tol=1e-10,
                                                            **options))
                  for d in (0.85, 0.6)})
    calls.update({("personalized", k): (lambda k=k: hg.pagerank(
        graph, tol=1e-10, personalization={graph.label_of(v): w for v, w in enumerate(
            weights[k])}, **options))
        for k in (0, 1)})
    calls.update({("reach", h): (lambda h=h: hg.run(Reach(h), graph, **options))
                  for h in hubs})
    cluster.client.run(_spy_initial_states)
    for round_ in range(2):
        for (name, parameter), call in calls.items():
            result = _bounded(call)
            _check_against_oracles(name, parameter, result, graph, matrix, reference,
                                   weights, hubs)
        made = sum(cluster.client.run(_spy_initial_states).values(), [])
        if round_:  # (each call's parameters differ from the last call's of its program)
            assert len(made) >= len(calls), made
    # a program's parameters unchanged from one call to the next: refilled, not made
    for _ in range(2):
        for call in (calls[("pagerank", 0.85)], calls[("bfs", hubs[0])]):
            _bounded(call)
            _bounded(call)
    made = sum(cluster.client.run(_spy_initial_states).values(), [])
    assert len(made) <= 2 * owners, made  # (each program's first call, at most)


def _check_against_oracles(name, parameter, result, graph, matrix, reference, weights,
                           hubs):
    import networkx as nx
    import scipy.sparse.csgraph as csgraph

    if name in ("bfs", "reach"):
        levels = csgraph.shortest_path(matrix, unweighted=True, indices=parameter)
        reached = np.isfinite(levels)
        if name == "reach":
            np.testing.assert_array_equal(result.values, reached.astype(np.int32))
        else:
            np.testing.assert_array_equal(result.values[reached], levels[reached])
            assert (result.values[~reached] == -1).all()
    elif name == "sssp":
        np.testing.assert_allclose(result.values, csgraph.dijkstra(matrix, indices=hubs[0]),
                                   rtol=1e-12 if parameter == np.float64 else 1e-6)
        assert result.values.dtype == parameter
    else:
        theirs = nx.pagerank(reference, tol=1e-12, **(
            {"alpha": parameter} if name == "pagerank" else
            {"personalization": dict(enumerate(weights[parameter]))}))
        np.testing.assert_allclose(result.values, [theirs[v] for v in range(
            graph.num_vertices)], rtol=1e-6, atol=1e-9)


def _segments_of(seconds):
    tuning.SEGMENT_SECONDS = seconds  # (in the worker: its segments' time slice)


def test_a_run_of_several_segments_hands_its_flags_back_until_its_last(graph, expected,
                                                                      monkeypatch):
    """A CPU worker hands the state back after each segment (it may die before the
    next): with its flags while the run goes on, its values alone after the last, which
    the result keeps (each segment one iteration here)."""
    from hetgraph.scheduler import hostshare

    monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", 0)  # (the state through the file)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as cluster:
        seconds = tuning.SEGMENT_SECONDS
        _bounded(lambda: _pagerank(graph, cluster))
        cluster.client.run(_spy_hand_backs)
        cluster.client.run(_segments_of, 0.0)
        try:
            result = _bounded(lambda: _pagerank(graph, cluster))
        finally:
            cluster.client.run(_segments_of, seconds)
        handed = cluster.client.run(_spy_hand_backs)[cluster.cpu_workers[0]]
    assert handed == [True] * (len(handed) - 1) + [False] and len(handed) > 2, handed
    np.testing.assert_allclose(result.values, expected["pagerank"].values, rtol=1e-12)
    assert not result.values.flags.owndata and hostshare._LENT


def test_a_packed_run_is_the_standard_pickle_unless_its_program_goes_by_value(
        graph, monkeypatch):
    """A library program's run is packed by the standard pickle's writer; a program of
    a module sent by value (this one) by cloudpickle's; either unpacks over the worker's
    graph and kept arrays, which the packed run only names."""
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import tasks

    by_value = []
    written = tasks._written
    monkeypatch.setattr(tasks, "_written", lambda pickler, *a: by_value.append(
        pickler is cloudpickle.Pickler) or written(pickler, *a))
    kept = {}

    class Future:
        def __init__(self, array):
            self.key = f"array-{len(kept)}"
            kept[self.key] = array.copy()

    for program, sent_by_value in ((PageRank(0.85, None), False), (Reach(0), True)):
        spec = ProgramSpec(program)
        aux = np.arange(4 * graph.num_vertices, dtype=np.float64)  # (kept: 32 kB)
        assert aux.nbytes >= tuning.KEPT_ARRAY_BYTES
        run = tasks.RunSpec(f"pack-{sent_by_value}", spec, graph, aux, True, False,
                            np.array([[0, graph.num_vertices]]), None, None, None,
                            "auto", 1.0, {})
        packed, arrays = tasks.pack(run, Future)
        assert sum(by_value) == sent_by_value
        by_value.clear()
        assert list(arrays) == list(kept) and graph.in_indices.tobytes() not in packed.data
        other = hg.generate.erdos_renyi(1000, 0.2, seed=7)  # (the worker's copy)
        got = tasks._unpacked(packed, other, kept)
        tasks._UNPACKED.pop(packed.run_id)
        assert got.graph is other and got.aux is kept[next(iter(arrays))]
        assert type(got.spec.program).__name__ == type(program).__name__
        assert vars(got.spec.program).keys() == vars(program).keys()
        kept.clear()


class _Kept:
    """A cluster's ``kept_array`` as a test's ``keep``: a future of the copy kept, found
    again for an array of the same contents (compared), a new one for new contents."""

    def __init__(self):
        self.arrays = {}

    def __call__(self, array):
        for key, held in self.arrays.items():
            if held.dtype == array.dtype and np.array_equal(held, array):
                return _Future(key)
        key = f"array-{len(self.arrays)}"
        self.arrays[key] = array.copy()
        return _Future(key)


class _Future:
    def __init__(self, key):
        self.key = key


def _run_spec(spec, graph, run_id, aux=None):
    from hetgraph.scheduler import tasks

    aux = spec.initial_aux(graph) if aux is None else aux
    return tasks.RunSpec(run_id, spec, graph, aux, True, False,
                         np.array([[0, graph.num_vertices]]), None, None, None, "auto",
                         1.0, {})


def test_a_run_packed_again_is_its_plan_while_nothing_it_holds_changed(graph):
    """The client packs a run once for later runs of equal program, parameters and
    options (the packed bytes hold no run id); other parameters, an aux whose
    contents changed, or a program's array that the pack carries changed in place,
    pack anew."""
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import tasks

    kept, plans = _Kept(), []

    def packed(program, run_id, aux=None):
        return tasks.pack(_run_spec(ProgramSpec(program), graph, run_id, aux), kept, (),
                          plans)

    first, arrays = packed(PageRank(0.85, None), "run-one")
    again, arrays_again = packed(PageRank(0.85, None), "run-two")
    assert b"run-one" not in first.data and again.run_id == "run-two"
    assert again.data is first.data and list(arrays_again) == list(arrays)
    other, _ = packed(PageRank(0.6, None), "run-three")
    assert other.data != first.data and len(plans) == 2
    aux = np.arange(4 * graph.num_vertices, dtype=np.float64)  # (kept: 32 kB)
    before, arrays_before = packed(Reach(0), "run-four", aux)
    aux[0] = -1.0  # (the same array, new contents: kept again under a new key)
    after, arrays_after = packed(Reach(0), "run-five", aux)
    assert after.data != before.data and len(arrays_after) == 1
    assert not set(arrays_after) & set(arrays_before)
    got = tasks._unpacked(after, graph, kept.arrays)
    tasks.drop_contexts("run-five")
    assert got.aux[0] == -1.0 and got.spec.program.source == 0
    carried = Reach(0)
    carried.table = np.full(6000, 0.5)[::2]  # (strided, 24 kB: carried, not kept)
    assert carried.table.nbytes >= tuning.KEPT_ARRAY_BYTES
    before, _ = packed(carried, "run-six")
    carried.table[0] = 0.25  # (in place: the plan's key sees it; no kept copy compares)
    after, _ = packed(carried, "run-seven")
    assert after.data != before.data


def test_a_worker_gives_an_ended_runs_spec_to_the_next_run_of_its_bytes(graph):
    """A worker takes the RunSpec an ended run unpacked from the same bytes (no unpickling;
    its program given the run's graph again), not while another run has it, and not
    when the run changed its program's attributes; idle, it holds no graph."""
    import weakref

    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import tasks

    own = hg.generate.erdos_renyi(300, 0.05, seed=3)
    kept, plans = _Kept(), []
    program = PageRank(0.85, None)
    program.graph = own  # (as hg.pagerank's program holds its graph)
    spec = ProgramSpec(program)

    def unpacked(run_id):
        packed, _ = tasks.pack(_run_spec(spec, own, run_id), kept, (), plans)
        return tasks._unpacked(packed, own, kept.arrays)

    first = unpacked("plan-1")
    second = unpacked("plan-2")  # (the first still runs: its own copy)
    assert second.spec is not first.spec
    tasks.drop_contexts("plan-1")
    tasks.drop_contexts("plan-2")
    idle = tasks._PLANS[own][next(iter(tasks._PLANS[own]))][0]
    assert idle.graph is None and idle.spec.program.graph is None
    third = unpacked("plan-3")
    assert third.spec in (first.spec, second.spec) and third.run_id == "plan-3"
    assert third.graph is own and third.spec.program.graph is own
    third.spec.program.damping = 0.5  # (a run that changed its program)
    tasks.drop_contexts("plan-3")
    fourth = unpacked("plan-4")
    assert fourth.spec is not third.spec and fourth.spec.program.damping == 0.85
    tasks.drop_contexts("plan-4")
    gone = weakref.ref(own)
    del own, first, second, third, fourth, program, spec, idle, plans
    gc.collect()
    assert gone() is None  # (the idle plans let their graph go)


def _power_iterations(graph, damping, iterations, start):
    """PageRank of an unweighted ``graph`` after ``iterations`` power iterations from
    ``start``, dangling rank spread evenly (the oracle)."""
    n = graph.num_vertices
    matrix = graph.to_scipy().astype(np.float64)
    matrix.data[:] = 1.0
    out = np.asarray(matrix.sum(axis=1)).ravel()
    share = np.where(out > 0, 1.0 / np.maximum(out, 1.0), 0.0)
    ranks = start
    for _ in range(iterations):
        ranks = (1 - damping) / n + damping * (matrix.T @ (ranks * share) +
                                               ranks[out == 0].sum() / n)
    return ranks


def test_a_program_changed_between_calls_runs_as_it_is_now(two_cpu_processes):
    """One program object, changed between calls on worker processes: its start ranks
    written in place (an array the workers keep, and a run's plan holds by identity),
    its damping set, a BFS's source set. Each call runs the program as it is then,
    not the plan or kept array of the call before."""
    from hetgraph.algorithms.bfs import BreadthFirst
    import scipy.sparse.csgraph as csgraph

    graph = hg.generate.erdos_renyi(3000, 0.002, seed=5)  # (start: 24 kB, kept)
    n, rng = graph.num_vertices, np.random.default_rng(3)
    options = dict(cluster=two_cpu_processes, devices="cpu", max_iterations=8)
    start = rng.random(n)
    start /= start.sum()  # (the program's start ranks sum to 1)
    program = PageRank(0.85, None, weighted=False, start=start)
    for change in range(4):
        got = _bounded(lambda: hg.run(program, graph, **options)).values
        np.testing.assert_allclose(got, _power_iterations(graph, program.damping, 8, start),
                                   rtol=1e-12)
        if change % 2:
            program.damping = 0.5 if program.damping == 0.85 else 0.85
        else:
            start[rng.integers(n)] += 1.0
            start /= start.sum()
    program = BreadthFirst(0)
    for source in (0, 7, 0):
        program.source = source
        got = _bounded(lambda: hg.run(program, graph, **dict(options, max_iterations=n)))
        levels = csgraph.shortest_path(graph.to_scipy(), unweighted=True, indices=source)
        np.testing.assert_array_equal(got.values, np.where(np.isinf(levels), -1, levels))
