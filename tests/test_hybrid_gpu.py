"""The hybrid dispatcher with a GPU worker (marked gpu: run on the GPU machine).

Every placement (auto, GPU only, every iteration split over CPU and GPU, pages forced
to interleave between the devices, worker processes) gives the CPU engine's answer:
exactly for min programs, to 1e-9 relative for float64 sums.
"""

import itertools

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import tuning
from hetgraph.scheduler import dispatcher, placement, tasks

pytestmark = pytest.mark.gpu

PAGE_BYTES = 256 << 10


@pytest.fixture(scope="module")
def graph():
    return hg.generate.rmat(16, seed=7, weights=(1.0, 9.0))


@pytest.fixture(autouse=True)
def placement_for_every_graph(monkeypatch):
    """"auto" keeps a graph of at most SMALL_ARCS arcs (as RMAT-16) on the CPU; here the
    cost model places it, so that these tests exercise every placement quickly."""
    monkeypatch.setattr(tuning, "SMALL_ARCS", 0)


@pytest.fixture(scope="module")
def cluster():
    with hg.Cluster(dashboard_address=None) as c:
        assert c.gpu_workers and c.cpu_workers
        yield c


@pytest.fixture(autouse=True)
def pages_on_the_gpu(graph, cluster):
    """The GPU keeps the graph's pages, as after any GPU run of it: an auto run then
    calibrates both devices before its first iteration (the first auto run of a graph
    runs on the CPU while they are laid out: see
    test_a_first_auto_run_goes_on_the_cpu_while_the_gpu_lays_out_its_pages)."""
    from hetgraph.kernels.gpu.kept import keeps_pages_of

    if not keeps_pages_of(graph, cluster.gpu_devices[0]):
        RUNS["pagerank"](graph, cluster=cluster, devices="gpu", max_iterations=1)


RUNS = {
    "pagerank": lambda g, **o: hg.pagerank(g, tol=None, **{"max_iterations": 15, **o}),
    "sssp": lambda g, **o: hg.sssp(g, g.label_of(int(np.argmax(g.out_degree()))), **o),
    "bfs": lambda g, **o: hg.bfs(g, g.label_of(int(np.argmax(g.out_degree()))), **o),
    "cc": lambda g, mode="sync", **o: hg.connected_components(
        g, algorithm="label-propagation", mode=mode, **o),
}


@pytest.fixture(scope="module")
def expected(graph, cluster):
    return {name: f(graph, cluster=cluster, devices="cpu") for name, f in RUNS.items()}


def check(name, values, reference):
    if name == "pagerank":
        np.testing.assert_allclose(values, reference, rtol=1e-9)
    else:
        np.testing.assert_array_equal(values, reference)


@pytest.mark.parametrize("devices", ["auto", "gpu", "hybrid"])
@pytest.mark.parametrize("name", list(RUNS))
def test_every_placement_equals_the_cpu(name, devices, graph, cluster, expected):
    if devices == "auto" and name == "cc":  # CC runs on the undirected graph, whose
        # pages the GPU keeps after a GPU run of it (see pages_on_the_gpu)
        RUNS[name](graph, cluster=cluster, devices="gpu", page_bytes=PAGE_BYTES)
    r = RUNS[name](graph, cluster=cluster, devices=devices, page_bytes=PAGE_BYTES)
    check(name, r.values, expected[name].values)
    h = r.history
    if devices == "hybrid":
        assert (h["placement"] == "hybrid").all()
        assert (h["cpu_pages"] + h["gpu_pages"] > 0).all()
    if devices == "gpu":
        assert (h["placement"] == "gpu").all() and (h["cpu_pages"] == 0).all()
    if devices == "auto":
        assert h["alpha"].notna().all()


@pytest.fixture
def interleaved(monkeypatch):
    """Pages alternate between the devices: the GPU takes one page from the front,
    the CPU one from the back, without the cost model's guard."""
    monkeypatch.setattr(placement.PageQueue, "take_gpu",
                        lambda self: [self.pages.popleft()] if self.pages else [])
    monkeypatch.setattr(placement.PageQueue, "take_cpu",
                        lambda self: [self.pages.pop()] if self.pages else [])


@pytest.mark.parametrize("name, mode", [(name, "sync") for name in RUNS] +
                         [("sssp", "async"), ("bfs", "async"), ("cc", "async")])
def test_interleaved_pages_equal_the_cpu(name, mode, graph, cluster, expected, interleaved):
    r = RUNS[name](graph, cluster=cluster, devices="hybrid", page_bytes=PAGE_BYTES, mode=mode)
    h = r.history
    assert (h["cpu_pages"] > 0).all() and (h["gpu_pages"] > 0).all()
    check(name, r.values, expected[name].values)


PLACEMENTS = ["hybrid", "gpu", "gpu", "hybrid", "cpu", "hybrid", "cpu", "gpu", "cpu"]


def _unsettled(monkeypatch):
    """Every auto run asks ``_Driver._place`` (which the test scripts), none follows the
    answer an earlier test's call under the same calibration settled on, nor makes its
    state where that answer's device would."""
    answer = dispatcher._settled_answer
    monkeypatch.setattr(dispatcher, "_settled_answer",
                        lambda *args: (answer(*args)[0], None))


@pytest.mark.parametrize("name", ["pagerank", "sssp"])
def test_every_move_between_placements_keeps_the_state(name, graph, cluster, expected,
                                                        interleaved, monkeypatch):
    """The driver places the iterations by a script that crosses every boundary (a
    hybrid iteration, then a GPU segment, ...), and a segment stops after one
    iteration (no CPU bursts, which run before the segment's next question): each move
    must hand over the whole vertex state."""
    from hetgraph.kernels import cpu

    monkeypatch.setattr(cpu.CpuKernel, "bursts", property(lambda self: False))
    script = itertools.cycle(PLACEMENTS)
    monkeypatch.setattr(dispatcher._Driver, "_place", lambda self, f: (next(script), 1.0))
    _unsettled(monkeypatch)
    monkeypatch.setattr(tasks, "_chooser", lambda *args: lambda f, ran=1: ("elsewhere", 1.0))
    r = RUNS[name](graph, cluster=cluster, devices="auto", page_bytes=PAGE_BYTES)
    n = min(r.iterations, len(PLACEMENTS))
    assert r.history["placement"].tolist()[:n] == PLACEMENTS[:n] and n >= 6
    check(name, r.values, expected[name].values)


@pytest.mark.parametrize("inline_seconds", [1.0, 0.0])
def test_calibration_runs_where_the_segments_run(inline_seconds, graph, cluster, expected,
                                                 monkeypatch):
    """In process, the calibrations run in the calling thread while segments do, and
    are tasks on the workers of their kind once segments are; either way the run gives
    the CPU's answer."""
    submitted = []
    submit = dispatcher._Driver._submit

    def recording(self, function, kind, name, *args):
        submitted.append((kind, name))
        return submit(self, function, kind, name, *args)

    monkeypatch.setattr(dispatcher._Driver, "_submit", recording)
    monkeypatch.setattr(tuning, "INLINE_SECONDS", inline_seconds)
    monkeypatch.setattr(cluster, "calibrations", {})  # (an earlier run's would be kept)
    r = RUNS["bfs"](graph, cluster=cluster, devices="auto")
    calibrations = [kind for kind, name in submitted if name == "calibrate"]
    assert calibrations == ([] if inline_seconds else ["cpu", "gpu"])
    check("bfs", r.values, expected["bfs"].values)


def test_a_hybrid_iteration_is_predicted_with_its_copies_and_round_trips(
        graph, cluster, monkeypatch):
    """Once the GPU is calibrated, the cost model counts a hybrid iteration's work beside
    its pages, until one is measured, as the state's copies there and back and a round
    trip for each device kind."""
    models = []
    take = dispatcher._Driver._take_calibration

    def recording(self, reports):
        take(self, reports)
        if any(report.kind == "gpu" for report in reports):
            models.append((self.model, self.round_trip, self.spec.dtype, reports))

    RUNS["bfs"](graph, cluster=cluster, devices="gpu")  # (the pages on the device)
    monkeypatch.setattr(dispatcher._Driver, "_take_calibration", recording)
    monkeypatch.setattr(cluster, "calibrations", {})
    RUNS["bfs"](graph, cluster=cluster, devices="auto")
    (model, round_trip, dtype, reports), = models
    gpu = next(report for report in reports if report.kind == "gpu")
    state_bytes = graph.num_vertices * (dtype.itemsize + 1)
    assert round_trip > 0 and gpu.copy_per_byte > 0
    assert model.overhead == pytest.approx(2 * gpu.copy_per_byte * state_bytes +
                                           2 * round_trip)


def test_auto_runs_ping_the_workers_once_a_cluster(graph, cluster, expected, monkeypatch):
    """The first calibrated run measures the task round trip; the next ones reuse it."""
    pings = []
    submit = cluster.client.submit

    def recording(*args, key=None, **kwargs):
        if key and key.startswith("hetgraph-ping-"):
            pings.append(key)
        return submit(*args, key=key, **kwargs)

    monkeypatch.setattr(cluster.client, "submit", recording)
    monkeypatch.setattr(cluster, "round_trip", None)
    for _ in range(2):
        check("bfs", RUNS["bfs"](graph, cluster=cluster, devices="auto").values,
              expected["bfs"].values)
    assert len(pings) == 3 and cluster.round_trip > 0


def test_auto_runs_calibrate_once_a_graph_program_and_options(graph, cluster, expected,
                                                              monkeypatch):
    """A run's calibration is kept on the cluster: the next auto run of the same program
    (parameters included) on the same graph with the same options starts from it,
    measuring nothing, and from its first frontier; another source or other options
    calibrate again. Every run gives the CPU's answer."""
    calibrated = []
    calibrate = tasks.calibrate

    def recording(run, state, kind, *args):
        calibrated.append(kind)
        return calibrate(run, state, kind, *args)

    monkeypatch.setattr(tasks, "calibrate", recording)
    monkeypatch.setattr(cluster, "calibrations", {})
    runs = [RUNS["bfs"](graph, cluster=cluster, devices="auto") for _ in range(2)]
    assert calibrated == ["cpu", "gpu"] and len(cluster.calibrations) == 1
    for r in runs:
        check("bfs", r.values, expected["bfs"].values)
        assert r.history["active"].iloc[0] == 1
    other = int(np.argsort(graph.out_degree())[-2])
    r = hg.bfs(graph, graph.label_of(other), cluster=cluster, devices="auto")
    np.testing.assert_array_equal(
        r.values, hg.bfs(graph, graph.label_of(other), cluster=cluster, devices="cpu").values)
    check("bfs", RUNS["bfs"](graph, cluster=cluster, devices="auto", page_bytes=PAGE_BYTES)
          .values, expected["bfs"].values)
    assert calibrated == ["cpu", "gpu"] * 3 and len(cluster.calibrations) == 3


def test_gpu_and_auto_runs_share_the_pages_kept_on_the_device(graph, cluster, expected,
                                                             monkeypatch):
    """A run on the GPU alone cuts the graph as a run with the CPU does, when it fits the
    device: GPU, auto and hybrid runs, and an unweighted program's, all find the pages
    the first one laid out."""
    from hetgraph.engines import gpu as gpu_engine
    from hetgraph.kernels.gpu import kept as gpu_kept

    built, real_pages = [], gpu_engine.DevicePages
    monkeypatch.setattr(gpu_engine, "DevicePages", lambda *a, **k: built.append(a[1]) or
                        real_pages(*a, **k))
    gpu_kept.release()
    for devices in ("gpu", "auto", "hybrid", "gpu"):
        check("sssp", RUNS["sssp"](graph, cluster=cluster, devices=devices).values,
              expected["sssp"].values)
    check("bfs", RUNS["bfs"](graph, cluster=cluster, devices="auto").values,
          expected["bfs"].values)
    assert len(built) == 1


@pytest.mark.parametrize("inline", [tuning.INLINE_SECONDS, 0.0])
def test_a_first_auto_run_goes_on_the_cpu_while_the_gpu_lays_out_its_pages(
        graph, cluster, expected, monkeypatch, inline):
    """An auto run on a graph whose pages the GPU does not keep lays them out in the
    background and runs on the CPU meanwhile: a run that ends first is the CPU's alone,
    does not wait for them and keeps its CPU's calibration alone; a longer one is calibrated once they are there, moves
    to the GPU, keeps its calibration, and gives the CPU's answer. So too when its
    segments are tasks (``inline`` 0: Dask pickles their arguments, the cost model
    that asks whether the layout is done among them; RMAT-24 with a quarter of its
    pages resident failed there, its layout outlasting INLINE_SECONDS)."""
    import threading

    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.kernels.gpu import kept as gpu_kept

    go, started, layouts = threading.Event(), threading.Event(), []
    lay_out = tasks.lay_out_gpu_pages

    def held(run, device):  # (waits for the test, at most a minute)
        started.set()
        go.wait(60)
        layouts.append(run.run_id)
        return lay_out(run, device)

    monkeypatch.setattr(tasks, "lay_out_gpu_pages", held)
    monkeypatch.setattr(cluster, "calibrations", {})
    monkeypatch.setattr(tuning, "INLINE_SECONDS", inline)
    gpu_kept.release()
    r = RUNS["bfs"](graph, cluster=cluster, devices="auto")
    assert started.is_set() and not layouts  # it ended with the layout held
    assert set(r.history["placement"]) == {"cpu"}
    (cpu_alone,) = cluster.calibrations.values()  # (the CPU's report, for the next run)
    assert [report.kind for report in cpu_alone.reports] == ["cpu"]
    assert not cpu_alone.settled  # (its GPU not calibrated: nothing settled)
    check("bfs", r.values, expected["bfs"].values)

    class Releasing(PageRank):  # lets the layout go in its fifth iteration on the CPU
        calls = 0

        def iteration_constant(self, g, values):
            Releasing.calls += 1
            if Releasing.calls == 5:
                go.set()
            return super().iteration_constant(g, values)

    gpu_kept.release()  # (the first layout may have ended by now)
    r = hg.run(Releasing(tol=None), graph, cluster=cluster, devices="auto",
               max_iterations=400)
    placements = r.history["placement"].tolist()
    assert placements[:5] == ["cpu"] * 5 and set(placements[5:]) - {"cpu"}
    assert len(layouts) == 2 and [c.complete for c in cluster.calibrations.values()] == \
        [False, True]  # (BFS's CPU report alone, PageRank's both)
    reference = hg.run(PageRank(tol=None), graph, cluster=cluster, devices="cpu",
                       max_iterations=400)
    np.testing.assert_allclose(r.values, reference.values, rtol=1e-9)


def test_runs_with_a_gpu_count_the_frontier_on_the_device(graph, cluster, expected,
                                                         monkeypatch):
    """A run with a GPU, in process, does not count the host flags: the GPU counts them
    (a run on the GPU alone in its segment), and a run with no active vertex ends before
    its first iteration."""
    from hetgraph.algorithms.bfs import BreadthFirst

    monkeypatch.setattr(tasks, "frontier_of", None)  # (called, it would fail)
    source = int(np.argmax(graph.out_degree()))
    for devices in ("gpu", "auto", "hybrid"):
        for name in ("bfs", "pagerank"):
            r = RUNS[name](graph, cluster=cluster, devices=devices, page_bytes=PAGE_BYTES)
            check(name, r.values, expected[name].values)
        r = hg.bfs(graph, graph.label_of(source), cluster=cluster, devices=devices)
        assert r.history["active"].iloc[0] == 1
        assert r.history["f"].iloc[0] == graph.out_degree()[source] / graph.num_arcs

    class Idle(BreadthFirst):
        def init(self, graph):
            return super().init(graph)[0], np.zeros(graph.num_vertices, bool)

    r = hg.run(Idle(source), graph, cluster=cluster, devices="gpu")
    assert r.iterations == 0 and r.converged
    assert (r.values == -1).sum() == graph.num_vertices - 1 and r.values[source] == 0


def test_calibration_leaves_the_gpu_holding_the_state(graph, cluster, expected,
                                                      monkeypatch):
    """After its calibration, the GPU context of an in-process auto run holds the host
    state, and the first frontier is the CPU calibration's count: the first GPU
    segment neither copies nor counts (a later count finds the state in place)."""
    from hetgraph.engines.gpu import GpuEngine

    loads = []
    load = GpuEngine.load

    def recording(self, values, flags, ranges):
        loads.append((flags is not None, [tuple(r) for r in ranges]))
        return load(self, values, flags, ranges)

    counted = tasks.gpu_frontier

    def first_count(run_ref, state_ref, version, device):
        run, state = tasks._SHARED[run_ref.run_id]  # (in process: shared handles)
        ctx = tasks._CONTEXTS[(run.run_id, "gpu", device)]
        assert ctx.version == version
        np.testing.assert_array_equal(ctx.engine.values.get(), state.values)
        np.testing.assert_array_equal(ctx.engine.flags.get(), state.flags)
        loads.append("count")
        return counted(run_ref, state_ref, version, device)

    monkeypatch.setattr(GpuEngine, "load", recording)
    monkeypatch.setattr(tasks, "gpu_frontier", first_count)
    monkeypatch.setattr(cluster, "calibrations", {})  # (an earlier run's would be kept)
    r = RUNS["bfs"](graph, cluster=cluster, devices="auto")
    check("bfs", r.values, expected["bfs"].values)
    n = graph.num_vertices
    # calibration: the timed copy of the values, then the state for its first
    # iterations and again after them; then no count
    assert loads[:3] == [(False, [(0, n)]), (True, [(0, n)]), (True, [(0, n)])]
    assert loads[3:4] != ["count"]
    if r.history["placement"].iloc[0] == "gpu":
        assert loads[3] == (True, [])  # the first segment's: nothing to copy


@pytest.mark.parametrize("placed", ["cpu", "gpu", "hybrid"])
def test_the_state_stays_on_the_gpu_until_the_host_computes(placed, graph, cluster,
                                                           expected, monkeypatch):
    """An auto run (its calibration kept) starts with its state on the GPU. One whose
    iterations all run there never copies it to the host but for the final values; one
    that reaches the CPU (a segment, or a hybrid iteration's pages) brings it to
    page-locked host memory once, before its first host pass, and never pins it again;
    each gives the CPU's answer."""
    from hetgraph.scheduler.state import VertexState

    RUNS["bfs"](graph, cluster=cluster, devices="auto", page_bytes=PAGE_BYTES)  # (kept)
    events = []
    pin, to_host = VertexState.pin, VertexState.to_host

    def pinning(self, copy, empty):
        events.append("pin")
        return pin(self, copy, empty)

    def moving(self):
        events.append("stays" if self.on_host else "to host")
        return to_host(self)

    def choosing(model, run, kind, *args):
        events.append(kind)
        return lambda f, ran=1: (kind, 1.0)

    monkeypatch.setattr(VertexState, "pin", pinning)
    monkeypatch.setattr(VertexState, "to_host", moving)
    monkeypatch.setattr(dispatcher._Driver, "_place", lambda self, f: (placed, 1.0))
    _unsettled(monkeypatch)
    monkeypatch.setattr(tasks, "_chooser", choosing)
    r = RUNS["bfs"](graph, cluster=cluster, devices="auto", page_bytes=PAGE_BYTES)
    check("bfs", r.values, expected["bfs"].values)
    assert (r.history["placement"] == placed).all()
    assert "pin" not in events
    if placed == "gpu":
        assert "to host" not in events and events[0] == "gpu"
    else:
        assert events[0] == "to host" and events.count("to host") == 1


def test_streamed_pages_in_a_hybrid_run(graph, cluster, expected):
    budget = graph.num_arcs * 10 // 4
    r = hg.sssp(graph, graph.label_of(int(np.argmax(graph.out_degree()))), cluster=cluster,
                devices="hybrid", page_bytes=PAGE_BYTES, gpu={"memory_budget": budget})
    check("sssp", r.values, expected["sssp"].values)


def test_worker_processes_with_a_gpu(graph, expected):
    with hg.Cluster(processes=True, dashboard_address=None) as c:
        assert not c.in_process and c.gpu_workers
        for name in ("pagerank", "bfs"):
            r = RUNS[name](graph, cluster=c, devices="hybrid", page_bytes=PAGE_BYTES)
            check(name, r.values, expected[name].values)
            r = RUNS[name](graph, cluster=c, devices="gpu")
            check(name, r.values, expected[name].values)


@pytest.mark.parametrize("devices", ["gpu", "hybrid", "auto"])
def test_checkpointed_gpu_runs_resume_to_the_cpu_answer(graph, cluster, expected, devices,
                                                        tmp_path):
    for name in ("pagerank", "sssp"):
        RUNS[name](graph, cluster=cluster, devices=devices, max_iterations=3,
                   checkpoint=tmp_path / name, checkpoint_every=2)
        r = RUNS[name](graph, cluster=cluster, devices=devices, checkpoint=tmp_path / name,
                       resume=True)
        assert r.history["iteration"].tolist()[:4] == [1, 2, 3, 4]
        check(name, r.values, expected[name].values)


def test_out_of_core_runs_place_store_pages_on_either_device(graph, cluster, expected,
                                                             tmp_path):
    store = graph.save(tmp_path / "s", page_bytes=PAGE_BYTES)
    source = graph.label_of(int(np.argmax(graph.out_degree())))
    for devices, allowed in (("cpu", {"cpu"}), ("auto", {"cpu", "gpu"})):
        r = hg.sssp(store, source, cluster=cluster, devices=devices,
                    host_budget=store.data_bytes // 2)
        assert set(r.history["placement"]) <= allowed and r.history["read_bytes"].sum() > 0
        check("sssp", r.values, expected["sssp"].values)
