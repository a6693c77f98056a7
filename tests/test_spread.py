"""Pull iterations spread over CPU worker processes (issue 51): every worker owns a range
of the vertices and the state goes from worker to worker, never through the client.
Answers against SciPy and NetworkX and the one-worker run; the bytes through the
client's process per iteration (bench/commcount.py) against the state's size; a worker
killed in the middle of a spread segment. No test here times anything."""

import asyncio
import itertools
import os
import signal
import sys
import time
import weakref

import cloudpickle
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.cluster import WorkerLostError
from hetgraph.scheduler.placement import owned_ranges
from hetgraph.scheduler import calls, callsocket, datagrams
from hetgraph.scheduler import spread
from hetgraph.scheduler.spread import Spread

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "bench"))
from commcount import CommBytes  # noqa: E402
from test_processes import KillsItsWorker, _bounded, warm_call_messages  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
cloudpickle.register_pickle_by_value(sys.modules[__name__])
CLIENT_PID = os.getpid()
SHARED_MEMORY_DIR = tuning.SHARED_MEMORY_DIR  # (the default, which tests change)


@pytest.fixture(scope="module")
def graph():
    # 2**15 vertices, 8 edges a vertex, weighted (SSSP): a state of about 300 kB
    return hg.generate.rmat(15, edge_factor=8, seed=3, weights=(1.0, 10.0))


@pytest.fixture(autouse=True)
def _spread_small_graphs(monkeypatch):
    """This graph is smaller than the spread runs' least (tuning.SPREAD_ARCS), and the
    workers share one host (tuning.OWNERS_PER_HOST): spread it over all the same (the
    client decides)."""
    monkeypatch.setattr(tuning, "SPREAD_ARCS", 0)
    monkeypatch.setattr(tuning, "OWNERS_PER_HOST", 0)


def test_a_segment_spreads_over_one_worker_a_host_unless_told(monkeypatch):
    spread = object.__new__(Spread)
    spread.kind = "cpu"
    spread.addresses = ["tcp://10.0.0.1:1", "tcp://10.0.0.1:2", "tcp://10.0.0.2:1",
                        "tcp://10.0.0.2:2", "tcp://10.0.0.3:1"]
    spread.holds = {"tcp://10.0.0.1:2": 4, "tcp://10.0.0.2:1": 3}  # (version 3: stale)
    spread.in_indptr = np.array([0, 100])
    monkeypatch.setattr(tuning, "OWNERS_PER_HOST", 1)
    # the holder of version 4 first on its host, the cluster's order kept
    assert spread.owners(4) == ["tcp://10.0.0.1:2", "tcp://10.0.0.2:1", "tcp://10.0.0.3:1"]
    monkeypatch.setattr(tuning, "OWNERS_PER_HOST", 2)
    assert spread.owners(4) == spread.addresses
    monkeypatch.setattr(tuning, "OWNERS_PER_HOST", 0)
    assert spread.owners(4) == spread.addresses
    monkeypatch.setattr(tuning, "SPREAD_ARCS", 101)  # (a small graph: one in all)
    assert spread.owners(4) == ["tcp://10.0.0.1:2"]


@pytest.fixture(scope="module")
def spread2():
    with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as c:
        yield c


def _pagerank(graph, cluster, iterations=20, program=None):
    return _bounded(lambda: hg.run(program or PageRank(0.85, None), graph, cluster=cluster,
                                   devices="cpu", max_iterations=iterations))


@pytest.fixture(scope="module")
def alone(graph):
    """The one-worker, in-process answers."""
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        source = graph.label_of(_hub(graph))
        return {"pagerank": _pagerank(graph, cluster),
                "long": _pagerank(graph, cluster, iterations=40),
                "bfs": hg.bfs(graph, source, cluster=cluster, devices="cpu"),
                "sssp": hg.sssp(graph, source, cluster=cluster, devices="cpu"),
                "cc": hg.connected_components(graph, algorithm="label-propagation",
                                              cluster=cluster, devices="cpu")}


def test_owned_ranges_cover_the_vertices_with_about_equal_work():
    indptr = np.concatenate([[0], np.cumsum(np.random.default_rng(1).integers(0, 50, 999))])
    for owners in (1, 2, 3, 7):
        ranges = owned_ranges(indptr, owners)
        assert ranges[0][0] == 0 and ranges[-1][1] == 999
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous
        work = [indptr[b] - indptr[a] + b - a for a, b in ranges]
        assert max(work) - min(work) <= 2 * (50 + 1)  # a vertex's work at most each side
    assert owned_ranges(np.zeros(4, np.int64), 2) == [(0, 2), (2, 3)]  # no edges: vertices


def _hub(graph):
    """The vertex of most out-edges (a source that reaches far)."""
    return int(np.argmax(graph.out_degree()))


def test_spread_answers_equal_the_oracles_and_one_worker(graph, alone, spread2):
    source = graph.label_of(_hub(graph))
    pagerank = _pagerank(graph, spread2)
    assert np.abs(pagerank.values - alone["pagerank"].values).sum() < 1e-6
    bfs = _bounded(lambda: hg.bfs(graph, source, cluster=spread2, devices="cpu"))
    sssp = _bounded(lambda: hg.sssp(graph, source, cluster=spread2, devices="cpu"))
    cc = _bounded(lambda: hg.connected_components(graph, algorithm="label-propagation",
                                                  cluster=spread2, devices="cpu"))
    for name, result in (("bfs", bfs), ("sssp", sssp), ("cc", cc)):
        np.testing.assert_array_equal(result.values, alone[name].values, err_msg=name)
    for result in (bfs, sssp, cc):  # (some of their iterations were spread)
        assert "pull" in set(result.history["mode"])
    matrix = graph.to_scipy()
    levels = csgraph.shortest_path(matrix, unweighted=True, indices=_hub(graph))
    reached = np.isfinite(levels)
    np.testing.assert_array_equal(bfs.values[reached], levels[reached])
    distances = csgraph.dijkstra(matrix, indices=_hub(graph))
    np.testing.assert_allclose(sssp.values[reached], distances[reached], rtol=1e-12)
    _, labels = csgraph.connected_components(matrix, directed=True, connection="weak")
    _, first = np.unique(labels, return_index=True)  # same components, same partition
    assert len(np.unique(cc.values)) == len(first)
    assert len(set(zip(labels.tolist(), cc.values.tolist()))) == len(first)


def test_a_colored_run_sweeps_its_colors_on_one_owner(graph, spread2):
    """mode="colored" on two CPU owners that would spread a pull: its passes go color by
    color, which a split by vertex ranges would not do, so one worker runs them; the
    in-process colored answers, bit for bit."""
    g = graph.reorder("color")
    source = g.label_of(_hub(g))
    for call in (lambda **o: hg.pagerank(g, tol=None, max_iterations=8, mode="colored",
                                         devices="cpu", **o),
                 lambda **o: hg.bfs(g, source, mode="colored", devices="cpu", **o)):
        here = call()
        there = _bounded(lambda: call(cluster=spread2))
        assert set(there.history["mode"]) == set(here.history["mode"]) == {"colored"}
        np.testing.assert_array_equal(there.values, here.values)


def test_the_state_does_not_cross_the_client_per_iteration(graph, alone, spread2):
    state_bytes = graph.num_vertices * 9  # float64 values and uint8 flags
    counter = CommBytes(spread2.client)
    _pagerank(graph, spread2, iterations=5)  # warm
    through = {}
    for iterations in (5, 25):
        before = counter.through_client()
        result = _pagerank(graph, spread2, iterations=iterations)
        through[iterations] = counter.through_client() - before
        assert result.iterations == iterations
    per_iteration = (through[25] - through[5]) / 20
    # the history rows and the task messages, not the state (the page tasks sent it
    # three times an iteration: to both workers and back)
    assert per_iteration < state_bytes / 20, (per_iteration, state_bytes)


@pytest.mark.skipif(not os.path.isdir(tuning.SHARED_MEMORY_DIR),
                    reason="no shared memory directory on this machine")
def test_owners_of_one_host_share_their_ranges_through_memory(graph, alone, spread2,
                                                              monkeypatch):
    """Owners on one host write their ranges into shared memory and send a word; with
    the sharing off (as between hosts) the ranges go over Dask's comms: the same
    answers, but the state crosses the sockets every iteration."""
    state_bytes = graph.num_vertices * 9
    counter = CommBytes(spread2.client)
    written = {}
    for directory in ("", tuning.SHARED_MEMORY_DIR):
        monkeypatch.setattr(tuning, "SHARED_MEMORY_DIR", directory)
        _pagerank(graph, spread2)  # (warm)
        before = counter.total()
        result = _pagerank(graph, spread2)
        written[directory] = counter.total() - before
        assert np.abs(result.values - alone["pagerank"].values).sum() < 1e-6, directory
    assert written[""] > 10 * state_bytes, written  # 20 iterations: half the state each way
    # a word an iteration, and the state once, to the client
    assert written[tuning.SHARED_MEMORY_DIR] < 2 * state_bytes, written


def test_a_small_graph_runs_on_one_of_the_workers(graph, alone, spread2, monkeypatch):
    """Below tuning.SPREAD_ARCS the segments go to one worker (an iteration's exchange
    would cost more than its pull): same answers, no spread segment."""
    monkeypatch.setattr(tuning, "SPREAD_ARCS", graph.num_arcs + 1)
    spread_runs = []
    monkeypatch.setattr(Spread, "alone", _counted(Spread.alone, spread_runs, "alone"))
    result = _pagerank(graph, spread2)
    assert np.abs(result.values - alone["pagerank"].values).sum() < 1e-6
    assert spread_runs and set(spread_runs) == {"alone"}
    assert set(result.history["mode"]) == {"pull"}


def test_warm_segments_go_straight_to_their_workers(graph, alone, spread2, monkeypatch):
    """Once the workers were seen to hold the graph and the run's arrays, a segment
    is a call on each worker, not a Dask task: none reaches the scheduler."""
    _pagerank(graph, spread2, iterations=3)  # (warm)
    direct = []
    monkeypatch.setattr(calls, "call_all", _counted(calls.call_all, direct, "direct"))
    before = _settled_tasks_seen(spread2)
    assert before > 0  # (the cold calls' tasks: the count sees them)
    result = _pagerank(graph, spread2)
    assert direct and spread2.client.run_on_scheduler(_tasks_seen) == before
    assert np.abs(result.values - alone["pagerank"].values).sum() < 1e-6


def test_a_warm_spread_call_is_one_call_to_each_owner(graph, alone, spread2, socket_dir,
                                                      monkeypatch):
    """A warm spread call is one direct call to each owner: each drops the run's contexts
    with its last report (nothing at the run's end, not a message to every worker), and
    leaves no shared file of the run behind (a peer removes its name of an owner's file
    once it mapped it, so an owner that ended first removes none that a peer reads)."""
    monkeypatch.setattr(tuning, "SHARED_MEMORY_DIR", str(socket_dir))
    sent, left, result = warm_call_messages(spread2, lambda: _pagerank(graph, spread2))
    # the calls, then our client.run's broadcast to the scheduler and its runs
    assert sent == {"hetgraph_call": 2, "broadcast": 1, "run": 2}, sent
    assert list(left.values()) == [[], []]  # both owners dropped the run's contexts
    # (the workers' own sockets stay: made here when this test runs the cluster's first
    # spread call, before a warm one)
    sockets = (callsocket.PREFIX, datagrams.PREFIX)
    assert [p for p in os.listdir(socket_dir)
            if "-back-" not in p and not p.startswith(sockets)] == []
    assert set(result.history["mode"]) == {"pull"}  # (every iteration spread)
    assert np.abs(result.values - alone["pagerank"].values).sum() < 1e-6


def test_the_data_seen_held_is_forgotten_once_released(graph, alone, spread2):
    """What the client saw the workers hold (Cluster.holding, which lets segments go
    straight to them) names live futures only: a run's scattered state, released at
    its end, leaves no pair behind, so warm calls do not grow the set."""
    _pagerank(graph, spread2)
    _releases_taken(spread2)
    held = set(spread2.holding)
    assert held and all(key in spread2.client.futures for _, key in held)
    address = next(iter(held))[0]
    released = spread2.client.scatter(np.arange(5), workers=[address])
    spread2.holding |= {(address, released.key)}
    released.release()
    _releases_taken(spread2)
    _pagerank(graph, spread2)
    assert (address, released.key) not in spread2.holding
    assert held <= spread2.holding


def _releases_taken(cluster):
    """Let the client's loop take the releases of futures let go so far (a call through
    a worker's socket does not pass through that loop), then note them in
    Cluster.holding."""
    cluster.client.sync(asyncio.sleep, 0)
    cluster.hold(set())


def _settled_tasks_seen(cluster, wait=5.0):
    """:func:`_tasks_seen` once the releases of earlier runs' tasks reached the scheduler
    (its count unchanged for 0.3 s, ``wait`` seconds at most: a loaded host delivered one
    more than 0.1 s late)."""
    _releases_taken(cluster)
    seen, deadline = cluster.client.run_on_scheduler(_tasks_seen), time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = cluster.client.run_on_scheduler(_tasks_seen)
        if now == seen:
            break
        seen = now
    return seen


def _tasks_seen(dask_scheduler):
    """How many times the scheduler's tasks named for the CPU (hetgraph-cpu-...) changed
    state, ever."""
    return sum(sum(prefix.state_counts.values())
               for name, prefix in dask_scheduler.task_prefixes.items() if "cpu" in name)


def _counted(method, calls, name):
    def counted(*args, **kwargs):
        calls.append(name)
        return method(*args, **kwargs)
    return counted


def _warm_bytes(cluster, call):
    """(bytes through the client's process, bytes written by every process) of a warm
    ``call()`` on ``cluster``, and its result."""
    counter = CommBytes(cluster.client)
    call()  # (warm)
    before = counter.through_client(), counter.total()
    result = call()
    return counter.through_client() - before[0], counter.total() - before[1], result


@pytest.mark.skipif(not os.path.isdir(SHARED_MEMORY_DIR),
                    reason="no shared memory directory on this machine")
def test_a_warm_call_takes_the_state_through_the_client_once(graph, alone, spread2,
                                                             monkeypatch):
    """The workers keep the graph's arrays (PageRank's aux and its program's), make the
    initial state and hold the state between segments, pushing it to each other when a
    segment on one worker moves to a spread one: the whole state crosses the client's
    sockets once a call, on its way back (before: the arrays, the state to each worker
    and back, about four times), also where a small state comes back in the answer
    (``tuning.ANSWER_STATE_BYTES``); not at all where it comes through shared memory (a
    local cluster: SHARED_MEMORY_DIR)."""
    state_bytes = graph.num_vertices * 9
    source = graph.label_of(_hub(graph))
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as one:
        clusters = {"one": one, "two": spread2}
        for (name, cluster), (shared, answered) in itertools.product(
                clusters.items(), ((False, 0), (True, 0), (True, state_bytes))):
            monkeypatch.setattr(tuning, "SHARED_MEMORY_DIR",
                                SHARED_MEMORY_DIR if shared else "")
            monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", answered)
            by_file = shared and not answered  # (else it crosses the sockets once)
            calls = {"pagerank": lambda: _pagerank(graph, cluster),
                     "bfs": lambda: _bounded(lambda: hg.bfs(graph, source, cluster=cluster,
                                                            devices="cpu"))}
            for call, run in calls.items():
                through, written, result = _warm_bytes(cluster, run)
                most = 0.5 if by_file else 1.5
                assert through < most * state_bytes, (name, call, shared, answered, through)
                if shared or name == "one":  # (else the pulls' ranges cross sockets)
                    assert written < 2 * state_bytes, (name, call, written, state_bytes)
                np.testing.assert_allclose(result.values, alone[call].values, rtol=1e-12,
                                           err_msg=f"{name} {call}")
                if call == "bfs":  # (segments on one worker and spread ones)
                    assert {"pull", "push"} <= set(result.history["mode"])


def _sparse_parts(share):
    tuning.SPARSE_PART_SHARE = share


def test_owners_between_hosts_send_only_their_changes(graph, alone, spread2,
                                                      monkeypatch):
    """Owners that share no memory (as on two hosts) send a BFS wave's few changed values
    and flags, not their whole ranges: fewer bytes than whole parts, the same answers."""
    monkeypatch.setattr(tuning, "SHARED_MEMORY_DIR", "")
    source = graph.label_of(_hub(graph))
    call = lambda: _bounded(lambda: hg.bfs(graph, source, cluster=spread2,  # noqa: E731
                                           devices="cpu", cpu_mode="pull"))
    written = {}
    try:
        for share in (0.0, tuning.SPARSE_PART_SHARE):
            spread2.client.run(_sparse_parts, share)
            _, written[share], result = _warm_bytes(spread2, call)
            np.testing.assert_array_equal(result.values, alone["bfs"].values)
            assert set(result.history["mode"]) == {"pull"}
    finally:
        spread2.client.run(_sparse_parts, tuning.SPARSE_PART_SHARE)
    whole, sparse = written[0.0], written[tuning.SPARSE_PART_SHARE]
    assert sparse < 0.6 * whole, (sparse, whole)


def _read_only_view(array):
    """(a read-only view of ``array``, ``array``)."""
    view = array.view()
    view.flags.writeable = False
    return view, array


# a program's large array of n float64 as the caller may hand it, and the array the
# caller writes: whole; a strided view, which a pack carries instead of keeping it
# apart; a read-only view of a writable array, which the caller writes all the same
_FORMS = {"whole": lambda n: (np.zeros(n),) * 2,
          "strided": lambda n: (np.zeros(2 * n)[::2],) * 2,
          "read-only view": lambda n: _read_only_view(np.zeros(n))}


@pytest.mark.parametrize("form", _FORMS)
def test_a_program_array_changed_in_place_is_sent_again(graph, spread2, form):
    """The workers keep a run's large arrays by content, and a packed run's plan is
    reused only for its arrays' contents: a program's array that the caller changed in
    place between two calls is not the one kept, nor the one packed before."""
    n = graph.num_vertices
    start, written = _FORMS[form](n)
    written[:] = 1.0 / n
    weights = np.linspace(1.0, 2.0, n)
    assert start.nbytes >= tuning.KEPT_ARRAY_BYTES
    with hg.Cluster(gpus=0, dashboard_address=None) as here:
        for _ in range(2):
            expected = _pagerank(graph, here, iterations=5,
                                 program=PageRank(0.85, None, start=start.copy()))
            got = _pagerank(graph, spread2, iterations=5,
                            program=PageRank(0.85, None, start=start))
            np.testing.assert_allclose(got.values, expected.values, rtol=1e-12)
            written[:] = weights / weights.sum()  # (in place: the same array object)


class FailsOnAWorker(PageRank):
    """PageRank whose iteration hook raises on a worker process at its second call."""

    def __init__(self):
        super().__init__(0.85, None)
        self.calls = 0

    def iteration_constant(self, graph, values):
        self.calls += 1
        if os.getpid() != CLIENT_PID and self.calls == 2:
            raise ArithmeticError("the program's own error")
        return super().iteration_constant(graph, values)


def test_an_error_in_one_owner_ends_the_run_with_it(graph, spread2):
    with pytest.raises(ArithmeticError, match="the program's own error"):
        _pagerank(graph, spread2, program=FailsOnAWorker())
    assert _pagerank(graph, spread2, iterations=3).iterations == 3  # the workers are free


def test_a_worker_killed_mid_spread_leaves_its_range_to_the_survivors(graph, alone,
                                                                       tmp_path):
    marker = tmp_path / "killed"
    with hg.Cluster(cpu_workers=3, gpus=0, processes=True, dashboard_address=None) as c:
        _pagerank(graph, c, iterations=3)  # placed and warm before the kill
        before = list(c.cpu_workers)
        result = _pagerank(graph, c, iterations=40, program=KillsItsWorker(str(marker)))
        assert marker.exists(), "no worker was killed: the test did not test"
        assert set(before) - set(c.cpu_workers)  # one left (its nanny starts another)
        again = _pagerank(graph, c)
    assert np.abs(result.values - alone["long"].values).sum() < 1e-6
    assert result.history["iteration"].tolist() == list(range(1, 41))
    assert np.abs(again.values - alone["pagerank"].values).sum() < 1e-6


def _kill_first_owner_at_hand_back(marker):
    """Make this worker's process die (SIGKILL) when it hands the state back to the
    client (the first owner, after a run's last spread segment), once (``marker``)."""
    from hetgraph.scheduler import spread

    original = spread._whole

    def dies(*args):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return original(*args)
        os.kill(os.getpid(), signal.SIGKILL)

    spread._whole = dies


def _short_segments():
    """Make this worker's spread segments end after their first iteration (a slice)."""
    tuning.SEGMENT_SECONDS = 0.0


@pytest.mark.parametrize("call", ["pagerank", "bfs"])
def test_the_state_survives_its_first_owner_lost_at_the_runs_end(graph, alone, tmp_path,
                                                                 call):
    """The owners of a run's last segment drop their contexts as they end; should the
    first, which sends the state back, die after its last exchange, another owner
    still gives the client the state after it (PageRank: the segment ends with a
    spread pull, which left the state on every owner), or runs the segment again from
    the state it began from (BFS: it ends with iterations on the first owner alone)."""
    marker = tmp_path / "killed"
    source = graph.label_of(_hub(graph))
    run = {"pagerank": lambda c: _pagerank(graph, c),
           "bfs": lambda c: _bounded(lambda: hg.bfs(graph, source, cluster=c,
                                                    devices="cpu"))}[call]
    with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as c:
        run(c)  # placed and warm before the kill
        before = set(c.cpu_workers)
        c.client.run(_kill_first_owner_at_hand_back, str(marker))
        c.client.run(_short_segments)  # (the last segment starts from a held state)
        result = run(c)
        assert marker.exists(), "no worker was killed: the test did not test"
        # the dead worker left the cluster's list: the next run does not call it (a
        # refused connection would be retried for Dask's connect timeout)
        assert len(before - set(c.cpu_workers)) == 1
        again = run(c)
    for got in (result, again):
        if call == "pagerank":
            assert np.abs(got.values - alone[call].values).sum() < 1e-6
        else:
            np.testing.assert_array_equal(got.values, alone[call].values)
    assert result.history["iteration"].tolist() == alone[call].history["iteration"].tolist()
    last = result.history["mode"].iloc[-1]
    assert last == "pull" if call == "pagerank" else last != "pull"  # (both ways tested)


class KilledAlone(BreadthFirst):
    """BFS whose convergence test (called every iteration) kills the worker process
    running it (SIGKILL) at its first call on a worker: the first owner's, in a spread
    segment's iterations on it alone (BFS from a hub starts with a push), once
    (``marker``: a file made then)."""

    def __init__(self, source, marker):
        super().__init__(source)
        self.marker = marker

    def converged(self, graph, previous, values):
        if os.getpid() != CLIENT_PID and KillsItsWorker._first_time(self):
            os.kill(os.getpid(), signal.SIGKILL)
        return False


def test_a_worker_killed_alone_leaves_the_segment_to_the_survivors(graph, alone, tmp_path):
    marker = tmp_path / "killed"
    source = _hub(graph)
    with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as c:
        _pagerank(graph, c, iterations=3)  # placed and warm before the kill
        before = list(c.cpu_workers)
        result = _bounded(lambda: hg.run(KilledAlone(source, str(marker)), graph,
                                         cluster=c, devices="cpu"))
        assert marker.exists(), "no worker was killed: the test did not test"
        assert set(before) - set(c.cpu_workers)  # one left (its nanny starts another)
    np.testing.assert_array_equal(result.values, alone["bfs"].values)
    assert result.history["iteration"].tolist() == list(range(1, result.iterations + 1))
    assert {"pull", "push"} <= set(result.history["mode"])


def test_a_lost_worker_fails_the_run_naming_it_when_no_retry_is_left(graph, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(tuning, "LOST_TASK_RETRIES", 0)
    with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as c:
        before = set(c.cpu_workers)
        with pytest.raises(WorkerLostError, match="spread segment") as error:
            _pagerank(graph, c, iterations=40, program=KillsItsWorker(str(tmp_path / "k")))
        gone = before - set(c.cpu_workers)
    assert gone and all(address in str(error.value) for address in gone)


def test_a_timed_out_wait_keeps_no_frame_of_its_caller(monkeypatch):
    """distributed keeps a wait's timeout error a while (in a closure its event loop
    holds): the error must not keep the frames of the waiting call alive, whose locals
    hold the run's result (its state file lent to it, so a later call made a third)."""
    import distributed

    kept = []

    def timing_out(futures, timeout, **options):
        kept.append(TimeoutError())
        raise kept[-1]

    monkeypatch.setattr(distributed, "wait", timing_out)

    class Result:
        pass

    def waiting_call():
        result = Result()
        spread._wait_a_while([], return_when="FIRST_COMPLETED")
        return weakref.ref(result)

    assert waiting_call()() is None and kept
