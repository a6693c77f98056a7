"""The Dask side: in-process and multi-process clusters, joining a scheduler, page
tasks spread over several CPU workers, and a worker killed in the middle of a run."""

import os
import signal
import tempfile
import time

import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from hetgraph import tuning
from hetgraph.cluster import ClusterError
from hetgraph.kernels.gpu.device import GpuUnavailableError

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.usefixtures("dispatcher_only")]  # (the dispatcher's own runs)

PAGE_BYTES = 64 << 10  # small pages: the test graphs span many pages


@pytest.fixture(scope="module")
def graph():
    return hg.generate.rmat(scale=12, edge_factor=8, seed=3)


@pytest.fixture(scope="module")
def weighted():
    return hg.generate.rmat(scale=11, edge_factor=8, seed=5, weights=(1.0, 10.0))


def reference(graph, weighted):
    """Single in-process CPU worker, one edge range per pass (bitwise reproducible)."""
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        return run_all(graph, weighted, cluster)


def run_all(graph, weighted, cluster, **options):
    options = dict(partitions=1, page_bytes=PAGE_BYTES, **options)
    return {
        "pagerank": hg.pagerank(graph, tol=None, max_iterations=12, cluster=cluster,
                                **options),
        "sssp": hg.sssp(weighted, weighted.label_of(0), cluster=cluster, **options),
        "bfs": hg.bfs(graph, graph.label_of(1), cluster=cluster, **options),
        "cc": hg.connected_components(graph, cluster=cluster, mode="sync", **options),
    }


def assert_identical(results, expected):
    for name in expected:
        np.testing.assert_array_equal(results[name].values, expected[name].values,
                                      err_msg=name)
        assert results[name].iterations == expected[name].iterations, name


@pytest.fixture(scope="module")
def expected(graph, weighted):
    return reference(graph, weighted)


def test_reference_is_right(graph, weighted, expected):
    dist = csgraph.dijkstra(weighted.to_scipy(), indices=0)
    np.testing.assert_array_equal(expected["sssp"].values, dist)
    _, labels = csgraph.connected_components(graph.to_scipy(), directed=True,
                                             connection="weak")
    cc = expected["cc"].values
    assert len(np.unique(cc)) == labels.max() + 1
    assert expected["pagerank"].values.sum() == pytest.approx(1.0)


def test_runs_in_several_threads_at_once(graph, weighted, expected):
    """Runs started from several threads of one process share the cluster: their first
    second runs in each caller's thread, at the same time; each gives its answer."""
    from concurrent.futures import ThreadPoolExecutor

    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(run_all, graph, weighted, cluster) for _ in range(4)]
            for future in futures:
                assert_identical(future.result(), expected)


def test_two_cpu_workers_in_process_pull_every_page(graph, weighted, expected,
                                                    monkeypatch):
    from hetgraph.scheduler import tasks

    page_tasks = []  # (segments over the process's one pool of threads, no page task)
    pages = tasks.cpu_pages
    monkeypatch.setattr(tasks, "cpu_pages", lambda *a: page_tasks.append(a) or pages(*a))
    with hg.Cluster(cpu_workers=2, gpus=0, dashboard_address=None) as cluster:
        results = run_all(graph, weighted, cluster)
    assert_identical(results, expected)
    assert page_tasks == []
    h = results["pagerank"].history
    assert (h["placement"] == "cpu").all()
    assert (h["cpu_pages"] > 1).all() and (h["cpu_edges"] == graph.num_arcs).all()
    # sparse BFS frontiers run as push segments on one worker
    assert "push" in set(results["bfs"].history["mode"])


def test_worker_processes_give_the_in_process_answers(graph, weighted, expected):
    from distributed.system import MEMORY_LIMIT

    with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as cluster:
        assert not cluster.in_process
        limits = cluster.client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
        assert sorted(limits.values()) == [MEMORY_LIMIT // 2] * 2  # the host memory shared
        results = run_all(graph, weighted, cluster)
        # the scheduler outlives a process cluster's driver: each run's end reached it
        # before the run returned
        events = cluster.client.get_events(hg.events.TOPIC)
        assert [m["event"] for _, m in events].count("end") == 4
    assert_identical(results, expected)


def test_in_process_workers_never_pause_for_memory(graph, expected):
    """Dask pauses a worker whose process passes a share of its memory limit (default
    80% of host memory / cores). In process every worker measures the whole process, so
    a graph of a few GiB paused them and the run waited for ever (16-core H100 host,
    RMAT-24). Here the pause share is a millionth: the workers must still run."""
    import dask

    with dask.config.set({"distributed.worker.memory.pause": 1e-6,
                          "distributed.worker.memory.monitor-interval": "5ms"}):
        with hg.Cluster(cpu_workers=2, gpus=0, dashboard_address=None) as cluster:
            time.sleep(0.1)  # many memory checks
            status = cluster.client.run(lambda dask_worker: dask_worker.status.name)
            assert set(status.values()) == {"running"}
            result = hg.bfs(graph, graph.label_of(1), cluster=cluster)
    np.testing.assert_array_equal(result.values, expected["bfs"].values)


def test_joining_a_running_scheduler_sends_the_state(graph, weighted, expected):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      resources={"CPU": 1}, dashboard_address=None) as dask_cluster:
        with hg.Cluster(address=dask_cluster.scheduler_address) as cluster:
            assert not cluster.in_process and len(cluster.cpu_workers) == 1
            results = run_all(graph, weighted, cluster)
    assert_identical(results, expected)


class _KillOnce:
    """Worker plugin: SIGKILL this worker process when it starts a page task of
    iteration 3, once (a file marks that it happened)."""

    name = "hetgraph-kill-once"

    def __init__(self, marker):
        self.marker = marker

    def setup(self, worker):
        pass

    def teardown(self, worker):
        pass

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and "-pages-" in str(key) and "-it3-" in str(key):
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os.kill(os.getpid(), signal.SIGKILL)


def test_killed_worker_page_is_rerun(graph, weighted, expected, monkeypatch):
    from distributed.diagnostics.plugin import WorkerPlugin

    # page tasks (spread segments' own losses: tests/test_spread.py)
    monkeypatch.setattr(tuning, "SPREAD_SEGMENTS", False)

    plugin_class = type("KillOnce", (_KillOnce, WorkerPlugin), {})
    with tempfile.TemporaryDirectory() as tmp:
        marker = os.path.join(tmp, "killed")
        with hg.Cluster(cpu_workers=2, gpus=0, processes=True, dashboard_address=None) as cluster:
            cluster.client.register_plugin(plugin_class(marker))
            result = hg.pagerank(graph, tol=None, max_iterations=12, cluster=cluster,
                                 partitions=1, page_bytes=PAGE_BYTES)
        assert os.path.exists(marker), "no worker was killed: the test did not test"
    np.testing.assert_array_equal(result.values, expected["pagerank"].values)


def test_embedded_cluster_is_kept_between_runs_and_replaced_once_closed(graph):
    from hetgraph.cluster import close_embedded_cluster, embedded_cluster

    first = hg.bfs(graph, graph.label_of(1))
    embedded = embedded_cluster()
    assert embedded.running() and embedded.in_process and embedded.dashboard_link is None
    second = hg.bfs(graph, graph.label_of(1))
    assert embedded_cluster() is embedded  # the second run did not start another
    embedded.close()  # stopped behind hetgraph's back: the next run replaces it
    assert not embedded.running()
    third = hg.bfs(graph, graph.label_of(1))
    replacement = embedded_cluster()
    assert replacement is not embedded and replacement.running()
    close_embedded_cluster()
    assert not replacement.running()
    close_embedded_cluster()  # closing when none runs is harmless
    fourth = hg.bfs(graph, graph.label_of(1))
    for later in (second, third, fourth):
        np.testing.assert_array_equal(first.values, later.values)


def test_embedded_cluster_and_enclosing_cluster(graph):
    alone = hg.bfs(graph, graph.label_of(1))  # on the embedded cluster
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        inside = hg.bfs(graph, graph.label_of(1))
        explicit = hg.bfs(graph, graph.label_of(1), cluster=cluster)
    np.testing.assert_array_equal(alone.values, inside.values)
    np.testing.assert_array_equal(alone.values, explicit.values)


def test_a_runs_first_moments_run_in_the_callers_thread(graph, expected, monkeypatch):
    """In process, the segments of a run's first INLINE_SECONDS run in the calling
    thread, with no Dask task (a task's round trip costs more than many whole runs);
    with that budget spent after one iteration, the rest of the run is tasks; with none,
    the whole run. All give the same answer."""
    from distributed import get_task_stream

    def segments(**options):
        with get_task_stream(cluster.client) as stream:
            result = hg.bfs(graph, graph.label_of(1), cluster=cluster, **options)
        names = sorted(str(t["key"]).split("-iterations-from-")[1].split("-")[0]
                       for t in stream.data if "-iterations-from-" in str(t["key"]))
        return result, names

    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        inline, names = segments()
        assert names == []
        monkeypatch.setattr(tuning, "INLINE_SECONDS", 1e-9)
        mixed, names = segments(cpu_mode="pull")
        assert mixed.iterations > 2 and names == ["2"]  # one iteration in this thread
        monkeypatch.setattr(tuning, "INLINE_SECONDS", 0.0)
        tasked, names = segments()
        assert names[0] == "1"
    for result in (inline, mixed, tasked):
        np.testing.assert_array_equal(result.values, expected["bfs"].values)


def test_auto_keeps_a_small_graph_off_the_gpu():
    from types import SimpleNamespace

    from hetgraph.scheduler.dispatcher import _kinds

    cluster = SimpleNamespace(cpu_workers=["cpu-0"], gpu_workers=["gpu-0", "gpu-1"],
                              in_process=True)
    assert _kinds(cluster, "auto", False, small=True) == {"cpu": 1}
    assert _kinds(cluster, "auto", False, small=False) == {"cpu": 1, "gpu": 2}
    assert _kinds(cluster, "gpu", False, small=True) == {"gpu": 2}  # asked for
    assert _kinds(cluster, "hybrid", False, small=True) == {"cpu": 1, "gpu": 2}


def test_a_cluster_measures_its_task_round_trip_once():
    """The cost model's task round trip (the median of three pings to a CPU worker) is
    measured by the first run that calibrates, then kept on the cluster for the next."""
    from types import SimpleNamespace

    from hetgraph.scheduler import dispatcher

    with hg.Cluster(dashboard_address=None) as cluster:
        keys = []
        submit = cluster.client.submit

        def recording(*args, key=None, **kwargs):
            keys.append(key)
            return submit(*args, key=key, **kwargs)

        cluster.client.submit = recording
        assert cluster.round_trip is None
        for run_id in ("first", "second"):
            driver = SimpleNamespace(cluster=cluster, client=cluster.client, run_id=run_id)
            dispatcher._Driver._measure_round_trip(driver)
            assert driver.round_trip == cluster.round_trip > 0
        assert keys == [f"hetgraph-ping-{i}-first" for i in range(3)]


def test_a_cluster_keeps_its_newest_calibrations(monkeypatch):
    """Calibrations are kept by key, the newest last, at most CALIBRATIONS_KEPT; keeping
    one again makes it the newest."""
    from hetgraph import tuning

    monkeypatch.setattr(tuning, "CALIBRATIONS_KEPT", 3)
    with hg.Cluster(dashboard_address=None) as cluster:
        for key in ("a", "b", "c", "a", "d"):
            cluster.keep_calibration(key, [key.upper()])
        assert list(cluster.calibrations) == ["c", "a", "d"]
        assert cluster.calibrations["a"] == ["A"]


def test_history_records_the_placement(graph):
    r = hg.pagerank(graph, tol=None, max_iterations=3, devices="cpu")
    h = r.history
    assert list(h.columns) == list(hg.result.HISTORY_COLUMNS)
    assert (h["placement"] == "cpu").all() and (h["gpu_pages"] == 0).all()
    assert h["alpha"].isna().all()  # no GPU took part in the decision
    assert (h["rho"] == 1.0).all()
    assert (h["overhead"] >= 0).all() and (h["cpu_seconds"] > 0).all()
    assert np.allclose(h["seconds"], h["cpu_seconds"] + h["overhead"])


def test_history_counts_the_dispatchers_own_work(graph, monkeypatch):
    """The frontier the dispatcher counts before placing a segment is wall time of the
    run: it shows in the segment's first row, as overhead."""
    from hetgraph.scheduler import tasks

    count = tasks.frontier_of

    def slow_count(state, g):
        time.sleep(0.05)
        return count(state, g)

    monkeypatch.setattr(tasks, "frontier_of", slow_count)
    h = hg.pagerank(graph, tol=None, max_iterations=3, devices="cpu").history
    assert len(h) == 3 and h["seconds"].iloc[0] >= 0.05 and h["overhead"].iloc[0] >= 0.05
    assert np.allclose(h["seconds"], h["cpu_seconds"] + h["overhead"])


def test_segments_hand_on_the_frontier_they_leave(weighted, monkeypatch, tmp_path):
    """A segment ends with the frontier of the next iteration, which the dispatcher goes
    on from: the host state's, counted once, at the start of the run."""
    from hetgraph.kernels import cpu
    from hetgraph.scheduler import tasks

    counts, count, segment = [], tasks.frontier_of, tasks.cpu_segment

    def checked(run, state, *args):
        report = segment(run, state, *args)
        if isinstance(run, tasks.InProcess):
            run, state = tasks._SHARED[run.run_id]
        if report.frontier is not None:
            assert report.frontier == cpu.frontier_size(state.flags, run.graph.out_indptr)
        return report

    monkeypatch.setattr(tasks, "frontier_of", lambda *a: counts.append(1) or count(*a))
    monkeypatch.setattr(tasks, "cpu_segment", checked)
    # a checkpoint every 2 iterations ends a segment every 2
    r = hg.sssp(weighted, 0, devices="cpu", checkpoint=tmp_path, checkpoint_every=2)
    np.testing.assert_array_equal(r.values, csgraph.dijkstra(weighted.to_scipy(), indices=0))
    assert r.iterations > 6 and len(counts) == 1


@pytest.mark.skipif(hg.cluster.gpu_count() > 0, reason="this machine has a GPU")
def test_cluster_without_gpu_refuses_gpu_devices(graph):
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        assert cluster.gpu_workers == [] and "0 GPU" in repr(cluster)
        with pytest.raises(GpuUnavailableError, match="devices='cpu'"):
            hg.pagerank(graph, devices="gpu", cluster=cluster)
        with pytest.raises(ClusterError, match="CPU and GPU workers"):
            hg.pagerank(graph, devices="hybrid", cluster=cluster)


def test_dashboard_listens_on_localhost():
    import urllib.request

    pytest.importorskip("bokeh")
    with hg.Cluster(dashboard_address="127.0.0.1:0") as cluster:
        link = cluster.dashboard_link
        assert link.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(link.replace("/status", "/health"), timeout=10) as r:
            assert r.status == 200


def test_a_cluster_without_a_dashboard_starts_no_event_loop_profiler(monkeypatch):
    # Dask's profiler samples the event loop every 10 ms (Python 3.12 on); only the
    # dashboard shows what it gathers
    import dask
    import distributed.core

    seen = []
    original = distributed.core.Server.__init__

    def spy(self, *args, **kwargs):
        seen.append(dask.config.get("distributed.worker.profile.enabled"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(distributed.core.Server, "__init__", spy)
    with hg.Cluster(dashboard_address=None):
        pass
    assert seen and not any(seen)


def test_the_gpu_probe_started_early_is_the_answer_availability_waits_for(monkeypatch):
    """The probe thread (started before the dispatcher's first import) runs the GPU
    check once; availability() waits for it rather than running a second check."""
    import importlib.util
    import threading

    from hetgraph.kernels.gpu import device

    calls, release = [], threading.Event()

    def slow_check():
        calls.append(threading.current_thread().name)
        release.wait(5)
        return False, "a stand-in GPU check"

    monkeypatch.setattr(device, "_PROBE", {})
    monkeypatch.setattr(device, "_probe", slow_check)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    device.probe_in_background()
    device.probe_in_background()  # (a second start does nothing)
    waiter = threading.Thread(target=lambda: calls.append(device.availability()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and calls == ["hetgraph-gpu-probe"]  # waiting on the probe
    release.set()
    waiter.join(5)
    assert calls[0] == "hetgraph-gpu-probe" and calls[-1] == (False, "a stand-in GPU check")


def test_without_cupy_the_probe_looks_for_it_once(monkeypatch):
    """Every dispatched run asks for the probe: where CuPy is missing, the first
    answer stands (a look-up of the package costs tens of microseconds a run)."""
    import importlib.util

    from hetgraph.kernels.gpu import device

    asked = []
    monkeypatch.setattr(device, "_PROBE", {})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: asked.append(name))
    for _ in range(3):
        device.probe_in_background()
    assert asked == ["cupy"] and device._PROBE == {"thread": None}
