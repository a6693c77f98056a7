"""The CPU engine standing in for the GPU engine on "GPU" worker processes (issue 51), so
that the plumbing of GPU workers that hold a run's state (hetgraph.scheduler.spread,
gpuowner) runs on a machine without a GPU: the client is told the machine has GPUs
(``cluster.gpu_count``), and a worker plugin replaces, in every worker process,
``gpuowner.make_engine`` (the GPU engine's factory) with :class:`StandIn` and the
GPU's device context with nothing. A StandIn keeps its own copy of the state (the
"device" arrays), loads and stores it as the GPU engine does and, given a range of
the partition's pages, computes only their vertices and counts only their frontier,
as a GpuEngine with ``pages=`` does. A spy counts what a GpuEngine would copy to its
device (a host aux it is built or bound with) and the host memory the worker
page-locks (:func:`spied`)."""

import contextlib
import sys
import time
import types

import cloudpickle
import numpy as np
from distributed.diagnostics.plugin import WorkerPlugin

import hetgraph as hg
from hetgraph.engines.cpu import CpuEngine
from hetgraph.kernels import cpu
from hetgraph.scheduler.state import VertexState

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class StandIn(CpuEngine):
    """A CPU engine with the GPU engine's calls that the GPU worker tasks make."""

    def __init__(self, run, pages):
        n = run.graph.num_vertices
        self.device = VertexState(np.zeros(n, run.spec.dtype), np.zeros(n, np.uint8),
                                  sync=run.sync)
        _count_upload(run.aux)
        super().__init__(run.spec, run.graph, self.device, run.aux, threads=1)
        self.owned = pages
        pv = run.page_vertices
        self.vertices = (0, n) if pages is None else (int(pv[pages.start][0]),
                                                      int(pv[pages.stop - 1][1]))
        self.partition = types.SimpleNamespace(
            num_pages=len(pv) if pages is None else len(pages))
        self._own = None
        _built().append(None if pages is None else (pages.start, pages.stop))

    def bind(self, spec, graph, state, aux):  # (the "device" state stays its own)
        _count_upload(aux)
        super().bind(spec, graph, self.device, aux)

    @property
    def flags(self):
        return self.state.flags

    @property
    def new_values(self):  # (the GPU engine's array of the iteration before, in sync mode)
        return self.state.new_values

    def load(self, values, flags, ranges):
        for a, b in ranges:
            self.state.values[a:b] = values[a:b]
            if flags is not None:
                self.state.flags[a:b] = flags[a:b]

    def store(self, values, flags, ranges, written=True, wait=True):
        source = self.state.new_values if written else self.state.values
        for a, b in ranges:
            values[a:b] = source[a:b]
            flags[a:b] = self.state.flags[a:b]

    # an owner of part of the pages computes its vertices only (GpuEngine(pages=))
    def launch(self, constant, frontier=None, chained=True):
        if self.owned is None:
            return super().launch(constant, frontier)
        a, b = self.vertices
        start = time.perf_counter()
        edges, activated = self.pull_pages([(a, b)], float(constant))
        self.state.swap()
        self._own = cpu.frontier_size(self.state.flags[a:b].copy(),
                                      self.graph.out_indptr[a:b + 1].copy())
        slowdown = _slowdown()  # (a test's slower GPU: its pulls reported slower)
        return ("gpu-pull", b - a, edges, self._own[0],
                slowdown * (time.perf_counter() - start))

    def frontier(self):
        if self.owned is None or self._own is None:
            return super().frontier()
        return self._own

    def reset_frontier(self, counted=None):
        self._own = None
        super().reset_frontier(counted)


def stand_in_engine(run, pages):
    return StandIn(run, pages)


# --- what a GpuEngine would copy to the device, what a GPU worker page-locks ----------------

def _spied():
    """This process's spy records, kept on a module of the package (see :func:`_built`):
    "on_device" {id: (host array, its "device" copy)}, "uploads" [bytes of each host
    array an engine copied to its device], "pinned" [(address, bytes)] and "unpinned"
    [address] of the host memory page-locked and let go."""
    from hetgraph.scheduler import gpuowner

    return gpuowner.__dict__.setdefault("stand_in_spied", {
        "on_device": {}, "uploads": [], "pinned": [], "unpinned": []})


def _count_upload(aux):
    """A GpuEngine built or bound with ``aux`` copies it to its device unless it is a
    device array already (here: a copy that :func:`stand_in_kept_on_device` made)."""
    if not any(copy is aux for _, copy in _spied()["on_device"].values()):
        _spied()["uploads"].append(aux.nbytes)


def stand_in_kept_on_device(array):
    """gpuowner.kept_on_device with a host copy for the device's: made once per array
    (counted as an upload), for arrays the worker keeps."""
    from hetgraph import tuning

    if array.nbytes < tuning.KEPT_ARRAY_BYTES:
        return array
    kept = _spied()["on_device"]
    entry = kept.get(id(array))
    if entry is None or entry[0] is not array:
        _spied()["uploads"].append(array.nbytes)
        entry = kept[id(array)] = (array, array.copy())
    return entry[1]


def spied():
    """{record: list} of this worker's spy (see :func:`_spied`; run there by client.run),
    emptied."""
    records = _spied()
    out = {k: list(records[k]) for k in ("uploads", "pinned", "unpinned")}
    for k in out:
        records[k].clear()
    return out


def _slowdown():
    """How much slower this worker's stand-in reports its pulls (set by a test)."""
    from hetgraph.scheduler import gpuowner

    return gpuowner.__dict__.get("stand_in_slowdown", 1.0)


def _built():
    """[pages] of every StandIn this process built, kept on a module of the package
    (this module's globals are a copy in every function sent by value)."""
    from hetgraph.scheduler import gpuowner

    return gpuowner.__dict__.setdefault("stand_ins_built", [])


def built():
    """The pages of every StandIn this worker built (run there by client.run)."""
    return list(_built())


class StandInPlugin(WorkerPlugin):
    """Puts :class:`StandIn` in place of the GPU engine in a worker (and in every worker
    that joins later: a nanny's replacement of a killed one)."""

    name = "hetgraph-gpu-stand-in"

    def setup(self, worker):
        from hetgraph.kernels.gpu import device
        from hetgraph.scheduler import gpuowner

        gpuowner.make_engine = stand_in_engine
        gpuowner.kept_on_device = stand_in_kept_on_device
        gpuowner.pin_host = lambda address, nbytes: _spied()["pinned"].append(
            (address, nbytes))
        gpuowner.unpin_host = lambda address: _spied()["unpinned"].append(address)
        device.use_device = lambda index: contextlib.nullcontext()


@contextlib.contextmanager
def stand_in_cluster(gpus, cpu_workers=1):
    """A local cluster of worker processes with ``gpus`` "GPU" workers, whose GPU engine
    is a :class:`StandIn`."""
    from hetgraph import cluster as clusters

    original = clusters.gpu_count
    clusters.gpu_count = lambda: gpus
    try:
        with hg.Cluster(cpu_workers=cpu_workers, gpus=gpus, processes=True,
                        dashboard_address=None) as c:
            c.client.register_plugin(StandInPlugin())
            yield c
    finally:
        clusters.gpu_count = original


# --- an in-process cluster's "GPU" ---------------------------------------------------------

class InProcessStandIn(StandIn):
    """A StandIn for the GPU worker of an in-process cluster (:func:`in_process`): the
    whole graph, the GPU engine's calls that the in-process driver and tasks make."""

    bursts = False  # (a GpuEngine runs no bursts)

    def __init__(self, run):
        super().__init__(run, None)

    def launch(self, constant, frontier=None, chained=True):
        return super().launch(constant, self.frontier() if frontier is None else frontier)

    def counts(self):  # (the GPU's wait for a copy)
        return None

    def count_frontier(self):
        self.reset_frontier()
        return self.frontier()

    def finish(self):
        pass


def in_process(monkeypatch, cpu_slowdown=100.0):
    """Make the next ``hg.Cluster(gpus=1)`` in process have a "GPU" worker whose engine
    is an :class:`InProcessStandIn` (the state on the host, page-locking a copy),
    whose pages are laid out already; the CPU's calibration reports its pulls
    ``cpu_slowdown`` times slower, so that the cost model places on the "GPU"; and
    graphs of any size run under "auto" on both kinds (``tuning.SMALL_ARCS`` 0)."""
    from hetgraph import cluster as clusters
    from hetgraph import tuning
    from hetgraph.kernels.gpu import device, kept
    from hetgraph.scheduler import dispatcher, tasks

    monkeypatch.setattr(clusters, "gpu_count", lambda: 1)
    monkeypatch.setattr(tuning, "SMALL_ARCS", 0)
    monkeypatch.setattr(dispatcher, "_state_module",
                        lambda *args: (np, contextlib.nullcontext()))
    monkeypatch.setattr(tasks, "_gpu_engine", lambda run, devices=None: InProcessStandIn(run))
    monkeypatch.setattr(device, "use_device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(device, "pinned_copy", lambda array: array.copy())
    monkeypatch.setattr(device, "pinned_empty", lambda shape, dtype: np.empty(shape, dtype))
    monkeypatch.setattr(kept, "keeps_pages_of", lambda graph, index: True)
    calibrate_cpu = tasks._calibrate_cpu

    def slower_cpu(*args):
        report = calibrate_cpu(*args)
        report.seconds *= cpu_slowdown
        return report

    monkeypatch.setattr(tasks, "_calibrate_cpu", slower_cpu)
