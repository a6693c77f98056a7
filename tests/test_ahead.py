"""A GPU run's page layout started before the dispatcher's import (scheduler/ahead.py)."""

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


def _started(program, graph, **options):
    thread = ahead.lay_out_ahead(program, graph, options)
    if thread is not None:
        thread.join()
    return thread is not None


@pytest.mark.parametrize("options", [
    dict(devices="auto"), dict(devices="cpu"), dict(devices="hybrid"),
    dict(devices="gpu", mode="colored"), dict(devices="gpu", cluster="not a cluster")])
def test_only_a_gpu_run_in_this_process_lays_out_ahead(laid_out, options):
    assert not _started(PageRank(), GRAPH, **options)
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
