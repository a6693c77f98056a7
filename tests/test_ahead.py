"""Work started before the dispatcher's import (scheduler/ahead.py): a program's derived
arrays and a GPU run's page layout."""

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.engines import gpu as gpu_engine
from hetgraph.scheduler import ahead

GRAPH = hg.generate.rmat(10, edge_factor=8, seed=3)


@pytest.fixture
def laid_out(monkeypatch):
    """The calls of the GPU layout function, which here records and does nothing."""
    calls = []
    monkeypatch.setattr(gpu_engine, "lay_out_ahead",
                        lambda *args: calls.append(args))
    monkeypatch.setattr("hetgraph.kernels.gpu.device.availability",
                        lambda: (True, "a stand-in GPU"))
    monkeypatch.setattr("hetgraph.kernels.gpu.device.use_device",
                        lambda index: _Device(calls, index))
    monkeypatch.setattr(ahead, "_gpu_count", lambda: 1)
    return calls


class _Device:
    def __init__(self, calls, index):
        self.calls, self.index = calls, index

    def __enter__(self):
        self.calls.append(("device", self.index))

    def __exit__(self, *exc):
        return False


class _Plain(PageRank):
    """PageRank without derived arrays: only a layout starts a thread."""
    derived = None


def _started(program, graph, **options):
    """Whether :func:`ahead.start` started a thread (joined here) for ``program``
    (PageRank's derived arrays left out: see _Plain)."""
    if type(program) is PageRank:
        program = _Plain(**{k: getattr(program, k) for k in ("damping", "tol", "dtype")},
                         weighted=program.needs_weights)
    made, thread = ahead.start(program, graph, options)
    if thread is not None:
        thread.join()
    assert made.is_set()
    return thread is not None


@pytest.mark.parametrize("options", [
    dict(devices="auto"), dict(devices="cpu"), dict(devices="hybrid"),
    dict(devices="gpu", mode="colored"), dict(devices="gpu", cluster="not a cluster"),
    dict(devices="gpu", graph="store")])
def test_only_a_gpu_run_in_this_process_lays_out_ahead(laid_out, options, tmp_path):
    graph = GRAPH
    if options.pop("graph", None):  # out of core: the run reads the store's own pages
        graph = GRAPH.save(tmp_path / "store").stored_graph()
    assert not _started(PageRank(), graph, **options)
    assert laid_out == []


def test_a_gpu_run_lays_out_the_pages_it_will_look_for(laid_out):
    """The pages with weights only for a program that reads them, of its value's size,
    with the run's GPU options, on the embedded cluster's GPU (the process's only one)."""
    weighted = hg.generate.rmat(10, edge_factor=8, seed=3, weights=(1.0, 2.0))
    assert _started(PageRank(weighted=False, dtype=np.float32), weighted, devices="gpu",
                    gpu={"streams": 3})
    assert _started(ShortestPaths(0), weighted, devices="gpu")
    assert _started(ShortestPaths(0), GRAPH, devices="gpu")  # (no weights to read)
    assert laid_out[0::2] == [("device", 0)] * 3
    assert laid_out[1::2] == [(weighted, False, 4, {"streams": 3}), (weighted, True, 8, {}),
                              (GRAPH, False, 8, {})]


def test_an_in_process_cluster_of_one_gpu_lays_out_on_its_gpu(laid_out, monkeypatch):
    class OneGpu(hg.Cluster):
        def __init__(self):  # (a stand-in: not started)
            self.in_process, self.gpu_devices = True, [3]

    cluster = OneGpu()
    assert _started(PageRank(), GRAPH, devices="gpu", cluster=cluster)
    assert laid_out[0] == ("device", 3)
    cluster.in_process = False  # worker processes lay their own pages out
    assert not _started(PageRank(), GRAPH, devices="gpu", cluster=cluster)


def test_without_a_gpu_the_thread_lays_nothing_out(laid_out, monkeypatch):
    """No GPU (or several, where the embedded cluster's run spreads its pages): the
    thread ends without a layout."""
    assert _started(PageRank(), GRAPH, devices="gpu")
    assert len(laid_out) == 2
    monkeypatch.setattr(ahead, "_gpu_count", lambda: 2)
    assert _started(PageRank(), GRAPH, devices="gpu")
    monkeypatch.setattr("hetgraph.kernels.gpu.device.availability",
                        lambda: (False, "no GPU here"))
    monkeypatch.setattr(ahead, "_gpu_count", lambda: 1)
    assert _started(PageRank(), GRAPH, devices="gpu")
    assert len(laid_out) == 2


def test_a_gpu_run_without_a_gpu_still_says_so():
    """Where no GPU runs (this machine, in CI), the layout's thread ends quietly and the
    run raises the error a GPU run without one raises."""
    from hetgraph.kernels.gpu.device import available

    if available():
        pytest.skip("a GPU is here")
    with pytest.raises(hg.HetGraphError, match="devices='gpu' but the cluster has no GPU"):
        hg.pagerank(GRAPH, devices="gpu")


@pytest.mark.gpu
def test_the_run_takes_the_layout_made_ahead():
    """A GPU run finds the pages laid out ahead kept (the same object: not laid out
    again) and answers as the CPU."""
    from hetgraph.kernels.gpu import kept

    graph = hg.generate.rmat(12, edge_factor=8, seed=11)
    program = PageRank(dtype=np.float32)
    kept.release()
    assert _started(program, graph, devices="gpu")
    made = kept._KEPT[0][2]
    got = hg.pagerank(graph, devices="gpu", tol=None, max_iterations=20, dtype=np.float32)
    assert kept._KEPT[0][2] is made
    want = hg.pagerank(graph, devices="cpu", tol=None, max_iterations=20)
    np.testing.assert_allclose(got.values, want.values, rtol=1e-5, atol=1e-9)


def test_the_derived_arrays_are_made_in_the_thread_and_kept(monkeypatch):
    """PageRank's derived arrays (dangling set, scale) are made in the thread, kept by
    the graph, and the event is set once they are; a run then finds them kept."""
    import threading

    graph = hg.generate.rmat(9, edge_factor=4, seed=5)
    program, where = PageRank(), []
    original = PageRank.derived

    def derived(self, g):
        where.append(threading.current_thread().name)
        return original(self, g)

    monkeypatch.setattr(PageRank, "derived", derived)
    made, thread = ahead.start(program, graph, {"devices": "cpu"})
    thread.join()
    assert made.is_set() and where == ["hetgraph-ahead"]
    kept = graph.kept("pagerank", dict)["arrays"]
    assert kept[1][0] is program._dangling
    # (the run takes the kept arrays: the same objects, no second computation)
    got = hg.run(PageRank(tol=None), graph, max_iterations=3, devices="cpu")
    assert graph.kept("pagerank", dict)["arrays"] is kept
    np.testing.assert_allclose(got.values.sum(), 1.0, rtol=1e-12)


def test_a_failing_derived_leaves_the_error_to_the_run(monkeypatch):
    """An error in the thread's derived arrays sets the event and is not raised there;
    the run makes them again and raises it."""
    def broken(self, graph):
        raise hg.GraphError("a stand-in for a bad graph")

    monkeypatch.setattr(PageRank, "derived", broken)
    made, thread = ahead.start(PageRank(), GRAPH, {"devices": "cpu"})
    thread.join()
    assert made.is_set()
    with pytest.raises(hg.GraphError, match="a stand-in for a bad graph"):
        hg.run(PageRank(), GRAPH, devices="cpu", max_iterations=2)


def test_only_the_first_dispatched_run_starts_work_ahead(monkeypatch):
    """Once the dispatcher is imported, runs go straight to it: no thread a call."""
    from hetgraph.scheduler import entry

    entry._DISPATCH.pop("run", None)
    started = []
    original = ahead.start
    monkeypatch.setattr(ahead, "start",
                        lambda *args: started.append(args) or original(*args))
    for _ in range(2):  # (threads=: not the direct path)
        hg.pagerank(GRAPH, tol=None, max_iterations=2, devices="cpu", threads=1)
    assert len(started) == 1
