"""A warm call (issue 49): what a run builds once per graph is kept and reused by later
runs (counted, not timed), their answers and history rows stay those of a fresh call,
and what is kept goes with the graph."""

import gc
import pickle
import threading
import weakref

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst

pytestmark = pytest.mark.usefixtures("dispatcher_only")  # (the engines a call keeps)
from hetgraph.engines.cpu import CpuEngine
from hetgraph.program import ProgramSpec
from hetgraph.result import COLUMN, HISTORY_COLUMNS
from hetgraph.scheduler import tasks
from hetgraph.scheduler.state import VertexState
from seeded import FromSeeds, levels_from

# the columns that hold wall or device seconds: the only ones two runs may differ in
TIMES = {COLUMN[name] for name in ("cpu_seconds", "gpu_seconds", "seconds", "overhead")}


@pytest.fixture
def built(monkeypatch):
    """The CpuEngines built while the test runs (a list, appended by each)."""
    engines = []

    class Counted(CpuEngine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(tasks, "CpuEngine", Counted)
    return engines


def _graph(seed=3, weighted=True):
    return hg.generate.rmat(9, 8, seed=seed, weights=(1.0, 4.0) if weighted else None)


def _rows_without_times(result):
    """The history rows less their times, NaN written "nan" (NaN is not NaN)."""
    return [tuple("nan" if v != v else v for i, v in enumerate(row) if i not in TIMES)
            for row in result._rows]


def _hubs(graph, count):
    """The dense ids of the ``count`` vertices of largest out-degree."""
    return np.argsort(-graph.out_degree(), kind="stable")[:count].tolist()


def _dijkstra(graph, source):
    """Distances from dense id ``source`` by SciPy (the oracle)."""
    targets = np.repeat(np.arange(graph.num_vertices), np.diff(graph.in_indptr))
    weights = graph.in_weights if graph.weighted else np.ones(graph.num_arcs)
    matrix = sp.coo_matrix((weights.astype(np.float64), (graph.in_indices, targets)),
                           shape=(graph.num_vertices,) * 2).tocsr()
    return csgraph.dijkstra(matrix, indices=source)


def test_a_warm_call_builds_no_engine(built):
    graph = _graph()
    hg.bfs(graph, 0, devices="cpu")
    assert len(built) == 1
    for source in (0, 1, 2):  # another source: another program instance, the same kernel
        hg.bfs(graph, source, devices="cpu")
    assert len(built) == 1
    hg.sssp(graph, 0, devices="cpu")  # another program: its own engine, then kept too
    hg.sssp(graph, 5, devices="cpu")
    assert len(built) == 2
    hg.bfs(graph, 0, devices="cpu", threads=1)  # other options: another engine
    assert len(built) == 3
    hg.bfs(_graph(), 0, devices="cpu")  # another graph (equal): its own
    assert len(built) == 4


def test_warm_results_and_history_are_those_of_a_fresh_call(built):
    graph = _graph()
    first, second = _hubs(graph, 2)
    calls = [lambda g, s=s: hg.sssp(g, g.label_of(s), devices="cpu")
             for s in (first, second, first)]
    calls += [lambda g: hg.bfs(g, g.label_of(second), devices="cpu", max_iterations=2),
              lambda g: hg.bfs(g, g.label_of(second), devices="cpu"),
              lambda g: hg.connected_components(g, algorithm="label-propagation",
                                                devices="cpu"),
              lambda g: hg.pagerank(g, devices="cpu")]
    for call in calls:  # each warm (the same graph), against a fresh graph's first call
        warm, fresh = call(graph), call(_graph())
        np.testing.assert_array_equal(warm.values, fresh.values)
        assert _rows_without_times(warm) == _rows_without_times(fresh)
        assert (warm.iterations, warm.converged) == (fresh.iterations, fresh.converged)
        assert list(warm.history.columns) == list(HISTORY_COLUMNS)
    assert len(built) == 4 + len(calls)  # the warm graph: one a program; a fresh one each


def test_warm_sssp_from_many_sources_matches_scipy():
    """A kept engine's scratch (a push's bits, the buckets' deferred vertices) is left
    clean by every run: distances from one source after another stay exact."""
    graph = _graph(seed=5)
    a, b, c = _hubs(graph, 3)
    for source in (a, b, a, c, 0, b):
        got = hg.sssp(graph, graph.label_of(source), devices="cpu").values
        np.testing.assert_allclose(got, _dijkstra(graph, source), rtol=1e-12)


def test_runs_at_once_do_not_share_an_engine(built):
    graph = _graph()
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(graph)
    aux = np.zeros(1, np.float32)
    state = VertexState(values, flags, sync=True)
    runs = [tasks.RunSpec(run_id, spec, graph, aux, True, True,
                          np.array([[0, graph.num_vertices]]), None, None, None, "auto", 1.0,
                          {}) for run_id in ("test-warm-a", "test-warm-b")]
    engines = [tasks._cpu_context(run, state).engine for run in runs]
    assert engines[0] is not engines[1] and len(built) == 2
    for run in runs:
        tasks.drop_contexts(run.run_id)
    assert len(tasks.idle_engines(graph)) == 1  # one idle engine a kind
    again = tasks._cpu_context(tasks.RunSpec("test-warm-c", *tuple(vars(runs[0]).values())[1:]),
                               state).engine
    assert again in engines and again.graph is graph and len(built) == 2
    tasks.drop_contexts("test-warm-c")


def test_runs_in_threads_on_one_graph_are_exact():
    graph = _graph(seed=6)
    sources = _hubs(graph, 4)
    found = {}

    def call(source):
        found[source] = hg.sssp(graph, graph.label_of(source), devices="cpu").values

    threads = [threading.Thread(target=call, args=(s,)) for s in sources]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for source in sources:
        np.testing.assert_allclose(found[source], _dijkstra(graph, source), rtol=1e-12)


def test_kept_engines_go_with_their_graph():
    graph = _graph()
    result = hg.bfs(graph, 0, devices="cpu")
    idle = tasks.idle_engines(graph)
    assert len(idle) == 1
    engine = next(iter(idle.values()))
    assert engine.graph is None and engine.state is None  # idle: holds no run, no graph
    gone = weakref.ref(graph), weakref.ref(engine)
    del graph, result, idle, engine
    gc.collect()
    assert gone[0]() is None and gone[1]() is None


def test_a_graph_with_kept_engines_still_pickles():
    """What a worker process gets of a graph: its arrays, not the engines kept for it."""
    graph = _graph()
    hg.bfs(graph, 0, devices="cpu")
    assert tasks.idle_engines(graph)
    copy = pickle.loads(pickle.dumps(graph))
    assert not tasks.idle_engines(copy)
    np.testing.assert_array_equal(hg.bfs(copy, 0, devices="cpu").values,
                                  hg.bfs(graph, 0, devices="cpu").values)


@pytest.mark.gpu
def test_a_warm_gpu_call_takes_the_engine_its_graph_kept(monkeypatch):
    """A GPU engine goes back to its graph when the run ends and serves the next run of
    the same program there (another source, another aux), with exact answers; it goes
    when its device drops the graph's layout for another graph's."""
    from hetgraph.engines import gpu as gpu_engines

    made, original = [], gpu_engines.GpuEngine.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(gpu_engines.GpuEngine, "__init__", spy)
    graph, other = _graph(seed=5), _graph(seed=6)
    a, b = _hubs(graph, 2)
    with hg.Cluster(gpus=1, dashboard_address=None):
        for source in (a, b, a):
            got = hg.sssp(graph, graph.label_of(source), devices="gpu").values
            np.testing.assert_allclose(got, _dijkstra(graph, source), rtol=1e-12)
        assert len(made) == 1
        ranks = [hg.pagerank(graph, tol=None, max_iterations=20, devices="gpu").values
                 for _ in range(2)]
        assert len(made) == 2
        reference = hg.pagerank(graph, tol=None, max_iterations=20, devices="cpu").values
        for got in ranks:  # (the GPU's sums run in any order: not bitwise equal)
            assert np.abs(got - reference).sum() < 1e-9
        hg.sssp(other, 0, devices="gpu")  # (its layout replaces the first graph's)
        assert len(made) == 3
        got = hg.sssp(graph, graph.label_of(b), devices="gpu").values
        assert len(made) == 4
        np.testing.assert_allclose(got, _dijkstra(graph, b), rtol=1e-12)


def _paced(monkeypatch, seconds):
    """Make every iteration of the in-process stand-in GPU (tests/gpu_standin.py) sleep
    ``seconds`` first, far above this machine's noise; returns the list whose one item
    is that pause, which a test may change."""
    import time

    import gpu_standin

    launch, pause = gpu_standin.InProcessStandIn.launch, [seconds]

    def paced(self, *args, **kwargs):
        time.sleep(pause[0])
        return launch(self, *args, **kwargs)

    monkeypatch.setattr(gpu_standin.InProcessStandIn, "launch", paced)
    return pause


def test_a_settled_warm_auto_call_does_what_the_gpu_alone_does_and_little_more(
        monkeypatch):
    """A warm call placed by the cost model ("auto") after a call like it whose
    iterations all went to the GPU (issue 59: within 1% of the GPU alone) runs on the
    GPU alone: it takes the GPU engine and partition's key as the first call left
    them, without calibrating, building or digesting them again, nor the program's
    code, and never asks the model; its answers are the GPU alone's. (An in-process
    cluster's GPU is a CPU engine here: tests/gpu_standin.py.)"""
    import zlib

    import gpu_standin
    from hetgraph import tuning
    from hetgraph.kernels.gpu import kept
    from hetgraph.scheduler import checkpoint, costmodel

    gpu_standin.in_process(monkeypatch)
    monkeypatch.setattr(tuning, "CHOOSE_SECONDS", 60.0)  # (no question a clock asks,
    # no settled call's check that this machine's noise fails)
    counts = dict.fromkeys(("calibrate", "engine", "crc", "code", "asked"), 0)

    def counted(name, function, when=lambda *args: True):
        def call(*args, **kwargs):
            counts[name] += bool(when(*args))
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(tasks, "calibrate", counted("calibrate", tasks.calibrate))
    monkeypatch.setattr(tasks, "_gpu_engine", counted("engine", tasks._gpu_engine))
    monkeypatch.setattr(kept, "zlib", type("Zlib", (), {"crc32": staticmethod(counted(
        "crc", zlib.crc32))}))
    monkeypatch.setattr(checkpoint, "_describe", counted(  # (a code's constants: a list)
        "code", checkpoint._describe, lambda value, *rest: isinstance(value, list)))
    monkeypatch.setattr(costmodel.CostModel, "placement", counted(
        "asked", costmodel.CostModel.placement))
    graph = _graph(seed=7)

    def call(devices="auto"):  # (every iteration a pull: the "GPU" wins each)
        return hg.pagerank(graph, tol=None, max_iterations=10, devices=devices,
                           cluster=cluster)

    with hg.Cluster(gpus=1, dashboard_address=None) as cluster:
        cold = call()
        assert set(cold.history["placement"]) == {"gpu"} and counts["calibrate"] == 2
        assert counts["engine"] == counts["crc"] / 3 == 1
        for _ in range(2):
            counts.update(dict.fromkeys(counts, 0))
            warm = call()
            assert counts == {"calibrate": 0, "engine": 0, "crc": 0, "code": 0,
                              "asked": 0}
            assert set(warm.history["placement"]) == {"gpu"} and warm.iterations == 10
            # (the stand-in's pages are all "resident": nothing copied in nor generated)
            moved = warm.history[["generation_seconds", "transfer_seconds"]]
            assert (moved == 0).all(axis=None)
            np.testing.assert_array_equal(warm.values, call("gpu").values)
        reference = call("cpu").values
    assert np.abs(warm.values - reference).sum() < 1e-9



def test_a_settled_answer_is_dropped_when_its_device_slows_or_the_call_changes(
        monkeypatch):
    """A call settled on the GPU (every iteration of the call before it placed there)
    is checked by its own time: once the GPU is slower than the settled calls by more
    than the model's margin, the next call asks the model again (where it places
    depends on the stand-in CPU's load-dependent speed, and a split between the two
    is not one the stand-in GPU runs: the GPU is made fast again first). Another iteration limit, another GPU budget or another
    graph are calls of their own: the model places them (each settled apart)."""
    import gpu_standin
    from hetgraph import tuning
    from hetgraph.scheduler import costmodel

    # (the CPU's pull reported at tens of ms: a loaded machine's 1 ms "GPU" iterations
    # stay far below it)
    gpu_standin.in_process(monkeypatch, cpu_slowdown=1000.0)
    monkeypatch.setattr(tuning, "SETTLED_MARGIN", 5.0)  # (not this machine's noise)
    pause = _paced(monkeypatch, 1e-3)
    asked = []
    placement = costmodel.CostModel.placement

    def counted(*args, **kwargs):
        asked.append(1)
        return placement(*args, **kwargs)

    monkeypatch.setattr(costmodel.CostModel, "placement", counted)
    graph, other = _graph(seed=7), _graph(seed=8)
    reference = hg.pagerank(graph, tol=None, max_iterations=10, devices="cpu").values

    def call(g=graph, iterations=10, **options):
        asked.clear()
        result = hg.pagerank(g, tol=None, max_iterations=iterations, cluster=cluster,
                             **options)
        return result, len(asked)

    with hg.Cluster(gpus=1, dashboard_address=None) as cluster:
        cold, _ = call()
        (kept,) = cluster.calibrations.values()
        assert set(cold.history["placement"]) == {"gpu"}
        assert [(limit, s.kind, s.iterations) for limit, s in kept.settled.items()] == \
            [(10, "gpu", 10)]
        warm, questions = call()
        assert questions == 0 and set(warm.history["placement"]) == {"gpu"}
        for changed in (dict(iterations=9), dict(gpu={"memory_budget": 1 << 30}),
                        dict(g=other)):
            result, questions = call(**changed)
            assert questions > 0 and set(result.history["placement"]) == {"gpu"}
        assert call()[1] == 0  # (the first call's answer stands beside theirs)
        assert [{limit: s.kind for limit, s in kept.settled.items()}
                for kept in cluster.calibrations.values()] == [{9: "gpu", 10: "gpu"},
                                                               {10: "gpu"}, {10: "gpu"}]
        pause[0] = 100e-3  # (the GPU's iterations now far slower than the settled ones)
        slowed, questions = call()
        assert questions == 0 and 10 not in kept.settled  # (this call's own time told)
        pause[0] = 1e-3
        asked_again, questions = call()
        assert questions > 0  # (the settled answer was dropped: the model is asked)
    for result in (cold, warm, slowed, asked_again):
        assert np.abs(result.values - reference).sum() < 1e-9


def test_a_call_settled_on_the_cpu_makes_its_state_as_the_cpu_alone_does(monkeypatch):
    """An auto run on a cluster with a GPU in process makes its initial state on the
    GPU, which a run placed on the CPU copies back to the host; a warm call settled on
    the CPU (every iteration of the call before it placed there) makes it where the
    CPU alone does, as a call that the model places, or of another limit, still does
    not; the answers are the CPU alone's. (The stand-in GPU's state is on the host:
    the module asked for is what is counted.)"""
    import gpu_standin
    from hetgraph import tuning
    from hetgraph.scheduler import dispatcher

    # (the CPU's calibration 1000x faster, the "GPU" 1 ms an iteration: the CPU wins each)
    gpu_standin.in_process(monkeypatch, cpu_slowdown=1e-3)
    _paced(monkeypatch, 1e-3)
    monkeypatch.setattr(tuning, "SETTLED_MARGIN", 5.0)  # (not this machine's noise)
    asked, module = [], dispatcher._state_module
    monkeypatch.setattr(dispatcher, "_state_module", lambda cluster, devices, *rest: (
        asked.append(devices), module(cluster, devices, *rest))[1])
    graph = hg.generate.grid(30, 30)

    def call(devices="auto", limit=100):
        return hg.bfs(graph, 0, devices=devices, max_iterations=limit, cluster=cluster)

    with hg.Cluster(gpus=1, dashboard_address=None) as cluster:
        reference = call("cpu").values
        results = [call(), call(), call(), call(limit=99)]
    assert asked == ["cpu", "auto", "cpu", "cpu", "auto"]
    for result in results:
        assert set(result.history["placement"]) == {"cpu"}
        np.testing.assert_array_equal(result.values, reference)


def test_auto_calls_while_the_gpu_lays_out_its_pages_calibrate_the_cpu_once(
        monkeypatch):
    """An auto run whose GPU does not keep the graph's pages lays them out in a thread
    and runs on the CPU meanwhile; one that ends first keeps its CPU's calibration: the
    calls after it, while the layout goes on and once it is done, do not calibrate the
    CPU again (on grid-1000 BFS that took three times the CPU's whole run), the first
    after the layout calibrates the GPU alone, and none settles on the CPU before the
    GPU was calibrated. The answers are the CPU alone's."""
    import threading

    import gpu_standin
    from hetgraph.kernels.gpu import kept
    from hetgraph.scheduler import dispatcher

    gpu_standin.in_process(monkeypatch)
    laid_out, go = [False], threading.Event()

    def lay_out(run, device):  # (held until the test lets it go, a minute at most)
        go.wait(60)
        laid_out[0] = True

    monkeypatch.setattr(kept, "keeps_pages_of", lambda graph, index: laid_out[0])
    monkeypatch.setattr(tasks, "lay_out_gpu_pages", lay_out)
    calibrated, calibrate = [], tasks.calibrate
    monkeypatch.setattr(tasks, "calibrate", lambda run, state, kind, *rest: (
        calibrated.append(kind), calibrate(run, state, kind, *rest))[1])
    graph = hg.generate.grid(30, 30)

    def call(devices="auto"):
        return hg.bfs(graph, 0, devices=devices, cluster=cluster)

    with hg.Cluster(gpus=1, dashboard_address=None) as cluster:
        reference = call("cpu").values
        results = [call(), call()]
        assert calibrated == ["cpu"]
        for result in results:
            assert set(result.history["placement"]) == {"cpu"}
        go.set()
        dispatcher.wait_for_gpu_layouts()
        results += [call(), call()]
        assert calibrated == ["cpu", "gpu"]
    for result in results:
        np.testing.assert_array_equal(result.values, reference)


def test_a_warm_auto_call_counts_its_own_frontier(monkeypatch):
    """A warm call placed by the model takes the calibration kept under its key, whose
    key tells programs apart by a sample of an array's elements and an object by its
    type: a program of other seeds (a mask that differs where the sample does not
    look, another set) starts from its own frontier, not the calibrated call's (which
    had none: the warm call stopped at once, its values the initial ones)."""
    import gpu_standin

    gpu_standin.in_process(monkeypatch)
    graph = hg.generate.grid(70, 70)  # (4,900 vertices: the key samples every other)
    n = graph.num_vertices
    with hg.Cluster(gpus=1, dashboard_address=None) as cluster:
        for ids in ([], [1], [1, 3, 5]):  # (odd ids: where no sample looks)
            mask = np.zeros(n, np.uint8)
            mask[ids] = 1
            for seeds in (set(ids), mask):
                got = hg.run(FromSeeds(seeds), graph, cluster=cluster, max_iterations=n)
                np.testing.assert_array_equal(got.values, levels_from(graph, ids))


class Until(BreadthFirst):
    """BFS levels from ``source`` until ``target`` is reached (None: every level; its
    instance has no converged test, as PageRank's of tol=None)."""

    def __init__(self, source, target=None):
        self.source, self.target = source, target
        if target is None:
            self.converged = None

    def converged(self, graph, previous, values):
        return values[self.target] < np.iinfo(np.int32).max


def test_a_kept_kernel_serves_each_instance_as_its_own_flags_say():
    """Two instances of one program class, one with a converged test and one without:
    the kernel kept for the first serves the second without the first's flags (it ran
    its iterations in bursts, which test no convergence, past the target's level)."""
    graph = hg.generate.grid(30, 30)
    target = 435  # (level 29 from vertex 0)
    levels = levels_from(graph, [0])
    for _ in range(2):
        every = hg.run(Until(0), graph, devices="cpu", max_iterations=1000)
        np.testing.assert_array_equal(every.values, levels)
        until = hg.run(Until(0, target), graph, devices="cpu", max_iterations=1000)
        assert until.iterations == levels[target] and until.converged
        np.testing.assert_array_equal(until.values, np.where(
            levels <= levels[target], levels, -1))
