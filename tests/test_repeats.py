"""A warm call repeated on a CPU worker process (issue 51, :mod:`hetgraph.scheduler.repeat`):
its worker keeps the first call's run context and a repeat sends a token alone. Each
answer is checked against SciPy, each repeat counted (the drivers this process makes,
the contexts the worker keeps), and whatever may make a kept context stale gives the
right answer: a changed parameter, an array changed in place, another graph, a killed
and restarted worker, another cluster, two threads at once, a failing call. No test
here times anything."""

import concurrent.futures
import gc
import os
import signal
import sys
import time

import cloudpickle
import numpy as np
import pytest
from scipy.sparse import csgraph

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.scheduler import dispatcher
from test_processes import Reach, _bounded

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
# the worker processes run this module's programs and functions: send them by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

FAIL = "HETGRAPH_TEST_REPEAT_FAILS"  # set in a worker's environment: Failing fails there


def _graph(seed, vertices=3000):
    return hg.generate.erdos_renyi(vertices, 6 / vertices, seed=seed)


@pytest.fixture(scope="module")
def cluster():
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as c:
        yield c


@pytest.fixture
def drivers(monkeypatch):
    """A list that grows by one for every run this process drives the whole way (a
    call that is no repeat)."""
    made, init = [], dispatcher._Driver.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(dispatcher._Driver, "__init__", counted)
    return made


def _levels(graph, sources):
    """BFS levels from the dense ids ``sources`` by SciPy, -1 where none reaches."""
    levels = csgraph.shortest_path(graph.to_scipy(), unweighted=True,
                                   indices=np.atleast_1d(sources))
    levels = levels.min(axis=0)
    return np.where(np.isinf(levels), -1, levels)


def _bfs(graph, cluster, source):
    return _bounded(lambda: hg.bfs(graph, graph.label_of(source), cluster=cluster,
                                   devices="cpu"))


def _parked():
    """The tokens of the contexts this worker keeps for repeats, once its call thread
    did what followed its last answer."""
    from hetgraph.scheduler import callsocket, spread

    return callsocket.call_thread().submit(lambda: sorted(spread._PARKED)).result(
        timeout=60)


def _parked_on(cluster):
    return sorted(t for tokens in cluster.client.run(_parked).values() for t in tokens)


def test_a_repeated_call_runs_on_the_context_its_worker_kept(cluster, drivers):
    graph = _graph(1)
    first = _bfs(graph, cluster, 0)
    repeats = [_bfs(graph, cluster, 0) for _ in range(3)]
    assert len(drivers) == 1  # the first call's run; the others repeated it
    assert len(_parked_on(cluster)) >= 1
    for result in [first] + repeats:
        np.testing.assert_array_equal(result.values, _levels(graph, 0))
        assert result.converged and result.iterations == first.iterations
        for column in ("iteration", "active", "activated", "edges", "mode"):
            assert result.history[column].tolist() == first.history[column].tolist()


def test_a_changed_parameter_is_no_repeat(cluster, drivers):
    """A BFS from other sources: each answer its own; a source seen before repeats its
    call, one kept beside the others."""
    graph = _graph(2)
    for source in (0, 0, 7, 7, 0, 11, 7):
        np.testing.assert_array_equal(_bfs(graph, cluster, source).values,
                                      _levels(graph, source))
    assert len(drivers) == 3  # one run for each source, the rest repeats
    program = BreadthFirst(0)  # (one object changed between calls)
    for source in (0, 5, 0):
        program.source = source
        got = _bounded(lambda: hg.run(program, graph, cluster=cluster, devices="cpu",
                                      max_iterations=graph.num_vertices))
        np.testing.assert_array_equal(got.values, _levels(graph, source))


class Seeded(Reach):
    """1 where any of the vertices that ``seeds`` marks 1 (an int32 array of a value a
    vertex: kept apart from a packed run, ``tuning.KEPT_ARRAY_BYTES``) reaches."""

    def __init__(self, seeds):
        self.seeds = seeds

    def init(self, graph):
        values = self.seeds.copy()
        return values, values == 1


def test_an_array_changed_in_place_is_no_repeat(cluster, drivers):
    graph = _graph(3, 5000)
    seeds = np.zeros(graph.num_vertices, np.int32)
    assert seeds.nbytes >= tuning.KEPT_ARRAY_BYTES  # (held by identity in the key)
    seeds[0] = 1
    program = Seeded(seeds)
    for changed in range(3):
        for _ in range(2):
            got = _bounded(lambda: hg.run(program, graph, cluster=cluster, devices="cpu"))
            np.testing.assert_array_equal(got.values,
                                          _levels(graph, np.flatnonzero(seeds)) >= 0)
        seeds[[5, 17][changed % 2] + changed] = 1  # (in place)
    assert len(drivers) == 3  # one run for each contents, each repeated once


def _tokens_of(cluster, graph):
    """The tokens of the calls on ``graph`` that ``cluster``'s client keeps."""
    from hetgraph.scheduler import repeat

    return {e.token for e in repeat._KEPT[cluster].entries if e.key[0] == graph.token}


def test_another_graph_is_no_repeat_and_its_end_lets_its_context_go(cluster, drivers):
    graph, other = _graph(4), _graph(5)
    assert not np.array_equal(_levels(graph, 0), _levels(other, 0))
    for g in (graph, other, graph, other):
        np.testing.assert_array_equal(_bfs(g, cluster, 0).values, _levels(g, 0))
    assert len(drivers) == 2
    kept, gone = _tokens_of(cluster, graph), _tokens_of(cluster, other)
    assert len(kept) == len(gone) == 1 and gone <= set(_parked_on(cluster))
    del g, other
    gc.collect()
    deadline = time.monotonic() + 30  # (let go on the worker without waiting)
    while gone <= set(_parked_on(cluster)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not gone & set(_parked_on(cluster)) and kept <= set(_parked_on(cluster))
    np.testing.assert_array_equal(_bfs(graph, cluster, 0).values, _levels(graph, 0))
    assert len(drivers) == 2


def _pid():
    return os.getpid()


def test_a_killed_and_restarted_worker_is_no_repeat(drivers):
    graph = _graph(6)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as c:
        for _ in range(2):
            np.testing.assert_array_equal(_bfs(graph, c, 0).values, _levels(graph, 0))
        assert len(drivers) == 1
        (first, pid), = c.client.run(_pid).items()
        os.kill(pid, signal.SIGKILL)
        for _ in range(3):  # the run again (on the new worker), then its repeats
            np.testing.assert_array_equal(_bfs(graph, c, 0).values, _levels(graph, 0))
        assert first not in c.cpu_workers
        assert len(drivers) == 2
        assert len(_parked_on(c)) == 1


def test_another_cluster_is_no_repeat(cluster, drivers):
    graph = _graph(7)
    with hg.Cluster(cpu_workers=1, gpus=0, processes=True, dashboard_address=None) as c:
        for on in (cluster, c, cluster, c):
            np.testing.assert_array_equal(_bfs(graph, on, 0).values, _levels(graph, 0))
        assert len(drivers) == 2
    np.testing.assert_array_equal(_bfs(graph, cluster, 0).values, _levels(graph, 0))
    assert len(drivers) == 2


def test_calls_from_two_threads_at_once_each_get_their_answer(cluster):
    graph = _graph(8)
    sources = (0, 7, 0, 11)
    expected = {s: _levels(graph, s) for s in sources}

    def calls(source):
        return [_bfs(graph, cluster, source).values for _ in range(12)]

    with concurrent.futures.ThreadPoolExecutor(len(sources)) as pool:
        answers = dict(zip(range(len(sources)), pool.map(calls, sources)))
    for i, source in enumerate(sources):
        for values in answers[i]:
            np.testing.assert_array_equal(values, expected[source])


class Failing(BreadthFirst):
    """A BFS whose convergence test fails on a worker whose environment says so."""

    def converged(self, graph, previous, values):
        if os.environ.get(FAIL):
            raise ValueError("told to fail")
        return False


def _fail(on):
    if on:
        os.environ[FAIL] = "1"
    else:
        os.environ.pop(FAIL, None)


def test_a_repeat_that_fails_fails_as_the_whole_call_does(cluster, drivers):
    graph = _graph(9)
    program = Failing(0)

    def call():
        return _bounded(lambda: hg.run(program, graph, cluster=cluster, devices="cpu",
                                       max_iterations=graph.num_vertices))

    try:
        cluster.client.run(_fail, True)
        with pytest.raises(ValueError, match="told to fail") as whole:
            call()
        cluster.client.run(_fail, False)
        for _ in range(2):
            np.testing.assert_array_equal(call().values, _levels(graph, 0))
        ran = len(drivers)
        cluster.client.run(_fail, True)
        with pytest.raises(ValueError, match="told to fail") as repeated:
            call()
        assert len(drivers) == ran + 1  # (the repeat failed: the call ran the whole way)
        assert str(repeated.value) == str(whole.value)
    finally:
        cluster.client.run(_fail, False)
    np.testing.assert_array_equal(call().values, _levels(graph, 0))


def test_a_repeat_posts_its_runs_events_as_a_whole_call_does(cluster, drivers):
    """The dashboard sees a repeat as a run of its own: its start, its history rows and
    its end, under a run id of its own."""
    from hetgraph import events

    graph = _graph(10)
    results = [_bfs(graph, cluster, 0) for _ in range(2)]
    assert len(drivers) == 1
    got = [m for _, m in cluster.client.get_events(events.TOPIC)]
    runs = [m["run"] for m in got if m["event"] == "start"][-2:]
    assert len(set(runs)) == 2
    for run, result in zip(runs, results):
        mine = [m for m in got if m["run"] == run]
        assert mine[0]["event"] == "start" and mine[-1]["event"] == "end"
        assert mine[0]["program"] == "BreadthFirst" and mine[0]["kinds"] == {"cpu": 1}
        assert mine[-1]["iterations"] == result.iterations and mine[-1]["converged"]
        rows = [r for m in mine if m["event"] == "iterations" for r in events.message_rows(m)]
        assert [r["iteration"] for r in rows] == result.history["iteration"].tolist()
        assert [r["seconds"] for r in rows] == result.history["seconds"].tolist()


STEP = 1  # what Hops.gather reads: a global that Numba compiles into the code


class Hops(Reach):
    """-STEP times the hops from ``source`` (a global read by ``gather``), UNREACHED
    where it does not reach."""

    reduce = "max"
    UNREACHED = -10**6

    @staticmethod
    def gather(src, weight, dst):
        return src - STEP

    @staticmethod
    def apply(old, acc, aux):
        return max(old, acc)

    def init(self, graph):
        values = np.full(graph.num_vertices, self.UNREACHED, np.int32)
        values[self.source] = 0
        return values, values == 0


@pytest.fixture(params=["repeats", "plans"])
def repeats(request, monkeypatch):
    """Whether calls repeat kept ones; else (a state too large to come back in an
    answer) each runs the whole way, on a plan its worker may keep."""
    if request.param == "plans":
        monkeypatch.setattr(tuning, "ANSWER_STATE_BYTES", 0)
    return request.param == "repeats"


def test_a_global_its_functions_read_rebound_is_another_program(cluster, drivers,
                                                                repeats):
    """A global that ``gather`` reads, bound to another value between calls, is
    compiled into the code anew: neither a repeat nor a run's kept plan may run the
    code compiled with the old one."""
    global STEP
    graph = _graph(11)
    levels = _levels(graph, 0)
    try:
        for step in (1, 1, 3, 3, 1):
            STEP = step
            got = _bounded(lambda: hg.run(Hops(0), graph, cluster=cluster, devices="cpu",
                                          max_iterations=graph.num_vertices))
            np.testing.assert_array_equal(
                got.values, np.where(levels >= 0, -step * levels, Hops.UNREACHED))
    finally:
        STEP = 1
    assert len(drivers) == (2 if repeats else 5)  # a repeat for each value's second call


SCALE = 1.0  # what Scaled.iteration_constant reads: a global a worker unpickles


class Scaled(Hops):
    """-SCALE times the hops from ``source``: SCALE a global read by
    ``iteration_constant`` (a method a worker process calls), not by the functions."""

    dtype = np.float64
    incremental = False  # (apply takes a constant)

    @staticmethod
    def gather(src, weight, dst):
        return src

    @staticmethod
    def apply(old, acc, aux, constant):
        return max(old, acc - constant)

    def iteration_constant(self, graph, values):
        return SCALE


def test_a_global_a_method_reads_rebound_is_another_program(cluster, drivers, repeats):
    global SCALE
    graph = _graph(18)
    levels = _levels(graph, 0)
    try:
        for scale in (1.0, 1.0, 2.5, 2.5, 1.0):
            SCALE = scale
            got = _bounded(lambda: hg.run(Scaled(0), graph, cluster=cluster,
                                          devices="cpu", max_iterations=graph.num_vertices))
            np.testing.assert_array_equal(
                got.values, np.where(levels >= 0, -scale * levels, Hops.UNREACHED))
    finally:
        SCALE = 1.0
    # (the last runs whole: 2.5's run rebound the worker's class's methods, its globals)
    assert len(drivers) == (3 if repeats else 5)


class Signed(Hops):
    """Hops from ``source`` where ``sign``'s sign bit is clear, else from ``other``:
    0.0 and -0.0 are equal numbers, and different parameters."""

    def __init__(self, source, other, sign):
        self.source, self.other, self.sign = source, other, sign

    def init(self, graph):
        values = np.full(graph.num_vertices, self.UNREACHED, np.int32)
        values[self.source if np.copysign(1.0, self.sign) > 0 else self.other] = 0
        return values, values == 0


def test_a_zero_of_another_sign_is_another_parameter(cluster, repeats):
    graph = _graph(12)
    for sign in (0.0, -0.0, 0.0, np.float64(-0.0), (-0.0,)):
        got = _bounded(lambda: hg.run(Signed(0, 7, sign), graph, cluster=cluster,
                                      devices="cpu", max_iterations=graph.num_vertices))
        levels = _levels(graph, 0 if np.copysign(1.0, sign) > 0 else 7)
        np.testing.assert_array_equal(got.values, np.where(levels >= 0, -levels,
                                                           Hops.UNREACHED))


class Sources(Reach):
    """Reach from the vertices of ``sources``, a small array (keyed by its bytes)."""

    def __init__(self, sources):
        self.sources = sources

    def init(self, graph):
        values = np.zeros(graph.num_vertices, np.int32)
        values[self.sources] = 1
        return values, values == 1


def test_a_small_array_or_attribute_changed_on_the_object_is_no_repeat(cluster, drivers):
    graph = _graph(13)
    sources = np.array([0, 3])
    assert sources.nbytes < tuning.KEPT_ARRAY_BYTES
    program = Sources(sources)
    for change in (None, 5, None, 9):
        if change is not None:
            sources[1] = change  # (in place)
        for _ in range(2):
            got = _bounded(lambda: hg.run(program, graph, cluster=cluster, devices="cpu"))
            np.testing.assert_array_equal(got.values, _levels(graph, sources) >= 0)
    program.sources = [0, 11]  # (an attribute of another kind on the same object)
    for _ in range(2):
        got = _bounded(lambda: hg.run(program, graph, cluster=cluster, devices="cpu"))
        np.testing.assert_array_equal(got.values, _levels(graph, [0, 11]) >= 0)
    assert len(drivers) == 4


def test_other_programs_between_repeats_leave_each_its_own(cluster, drivers):
    """BFS, Reach and Hops on one worker, one after another, each repeated: a parked
    engine is no other run's."""
    graph = _graph(14)
    levels = _levels(graph, 0)
    expected = {"bfs": levels, "reach": levels >= 0,
                "hops": np.where(levels >= 0, -levels, Hops.UNREACHED)}
    programs = {"bfs": lambda: BreadthFirst(0), "reach": lambda: Reach(0),
                "hops": lambda: Hops(0)}
    for name in ("bfs", "reach", "hops") * 3:
        got = _bounded(lambda: hg.run(programs[name](), graph, cluster=cluster,
                                      devices="cpu", max_iterations=graph.num_vertices))
        np.testing.assert_array_equal(got.values, expected[name])
    assert len(drivers) == 3


def test_many_repeated_calls_keep_few_contexts(cluster, drivers):
    """More keys than ``tuning.REPEATS_KEPT``, each called twice, then all again: the
    client and the worker keep the newest few, and each answer is its own."""
    from hetgraph.scheduler import repeat

    graph = _graph(15)
    sources = range(2 * tuning.REPEATS_KEPT + 3)
    for rounds in range(2):
        for source in sources:
            for _ in range(2):
                np.testing.assert_array_equal(_bfs(graph, cluster, source).values,
                                              _levels(graph, source))
        assert len(repeat._KEPT[cluster].entries) <= tuning.REPEATS_KEPT
        assert len(_parked_on(cluster)) <= tuning.REPEATS_KEPT
    assert len(drivers) == 2 * len(sources)


def _networkx_pagerank(graph, **kwargs):
    """NetworkX's PageRank of ``graph`` in dense-id order."""
    import networkx as nx

    ranks = nx.pagerank(nx.from_scipy_sparse_array(graph.to_scipy(),
                                                   create_using=nx.DiGraph), **kwargs)
    return np.array([ranks[i] for i in range(graph.num_vertices)])


def test_pagerank_arrays_and_tolerances_changed_between_calls(cluster, drivers):
    """``personalization`` and ``nstart`` arrays changed in place, ``tol`` and
    ``max_iterations`` changed: each answer NetworkX's."""
    graph = hg.generate.erdos_renyi(2000, 4 / 2000, seed=16, directed=True)
    teleport, start = np.ones(graph.num_vertices), np.ones(graph.num_vertices)
    calls = [dict(), dict(), dict(tol=1e-9), dict(tol=1e-9, max_iterations=300)]
    for change in range(3):
        teleport[change * 10:change * 10 + 500] = 5.0 + change  # (in place)
        start[change] = 100.0
        for kwargs in calls:
            got = _bounded(lambda: hg.pagerank(
                graph, personalization=teleport, nstart=start, cluster=cluster,
                devices="cpu", **kwargs))
            expected = _networkx_pagerank(
                graph, personalization=dict(enumerate(teleport)),
                nstart=dict(enumerate(start)), tol=kwargs.get("tol", 1e-6),
                max_iter=kwargs.get("max_iterations", 100))
            np.testing.assert_allclose(got.values, expected, rtol=1e-5, atol=0)
    assert len(drivers) == 3 * (len(calls) - 1)  # (each change's second call repeats)


FINALIZE = "HETGRAPH_TEST_FINALIZE_FAILS"  # set here: FailingFinal.finalize fails


class FailingFinal(Hops):
    """Hops whose ``finalize`` (in the calling process) fails while FINALIZE is set."""

    def finalize(self, graph, values):
        if os.environ.get(FINALIZE):
            raise ValueError("finalize told to fail")
        return values


def test_a_finalize_that_fails_after_a_repeat_leaves_the_next_right(cluster, drivers,
                                                                    monkeypatch):
    graph = _graph(17)
    levels = _levels(graph, 0)
    expected = np.where(levels >= 0, -levels, Hops.UNREACHED)

    def call():
        return _bounded(lambda: hg.run(FailingFinal(0), graph, cluster=cluster,
                                       devices="cpu", max_iterations=graph.num_vertices))

    np.testing.assert_array_equal(call().values, expected)
    monkeypatch.setenv(FINALIZE, "1")
    with pytest.raises(ValueError, match="finalize told to fail"):
        call()
    monkeypatch.delenv(FINALIZE)
    for _ in range(2):
        np.testing.assert_array_equal(call().values, expected)
    assert len(drivers) == 1
