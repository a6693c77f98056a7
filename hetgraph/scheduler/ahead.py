"""Work a run starts before the dispatcher's import: a new process's first run imports
Dask (tenths of a second, holding the interpreter), while a program's arrays derived
from the graph (NumPy passes over the vertices) and a GPU run's page layout (mostly
waiting for the device) let the interpreter go. In a thread of their own they go on
under the import: the run waits for the derived arrays (:func:`start`'s event), and its
GPU engine finds the layout kept (:func:`hetgraph.engines.gpu.lay_out_ahead`)."""

from __future__ import annotations

import logging
import threading

import numpy as np

from .. import cluster as clusters
from ..graph import Graph
from ..io.store import StoredGraph

log = logging.getLogger(__name__)


def start(program, graph, options):
    """Start the work ahead of the run of ``program`` on ``graph`` that ``options`` (the
    keywords of :func:`hetgraph.run`) ask for: the program's ``derived(graph)`` when it
    has one (see :class:`hetgraph.VertexProgram`), and the graph's GPU pages when the
    run takes them as laid out here (:func:`_layout_device`). Returns (an event set
    once the derived arrays are made, at once when there is nothing to make; the thread
    or None)."""
    derived = getattr(program, "derived", None)
    derived = derived if callable(derived) and isinstance(graph, Graph) else None
    device = _layout_device(graph, options)
    made = threading.Event()
    if derived is None and device is None:
        made.set()
        return made, None
    lay_out = None
    if device is not None:
        from ..engines.gpu import lay_out_ahead  # (here: no two threads import at once)

        lay_out = (lay_out_ahead, program, dict(options.get("gpu") or {}), device[0])
    thread = threading.Thread(target=_work, name="hetgraph-ahead", daemon=True,
                              args=(derived, graph, made, lay_out))
    thread.start()
    return made, thread


def _layout_device(graph, options):
    """(the GPU, None: the process's only one) of a run on the GPU alone
    (``devices="gpu"``), of a graph in memory (a store's run reads its own pages), not
    colored, in a cluster of this process with one GPU (the embedded one: see
    :func:`hetgraph.cluster.cluster_for`), else None: the pages this process would lay
    out are not the run's."""
    cluster = options.get("cluster")
    cluster = clusters.current_cluster() if cluster is None else cluster
    if not (options.get("devices") == "gpu" and isinstance(graph, Graph)
            and not isinstance(graph, StoredGraph)
            and options.get("mode", "sync") != "colored" and (cluster is None or (
                isinstance(cluster, clusters.Cluster) and cluster.in_process
                and len(cluster.gpu_devices) == 1))):
        return None
    return (None if cluster is None else cluster.gpu_devices[0],)


def _work(derived, graph, made, lay_out):
    """:func:`start`'s thread: ``derived(graph)``, then ``made`` set, then the layout
    ``lay_out`` = (function, program, GPU options, device) if any. A failure is left
    for the run to meet (it makes both again and reports its own errors)."""
    try:
        if derived is not None:
            derived(graph)
    except Exception as exc:
        log.debug("no derived arrays ahead of the run: %s", exc)
    finally:
        made.set()
    if lay_out is not None:
        _lay_out(*lay_out, graph)


def _lay_out(lay_out_pages, program, gpu, device, graph):
    """``lay_out_pages`` on ``device`` (None: the process's only GPU), once the GPU
    probe says it runs."""
    from ..kernels.gpu.device import availability, use_device

    try:
        if not availability()[0] or (device is None and _gpu_count() != 1):
            return
        weighted = bool(program.needs_weights) and graph.weighted
        with use_device(0 if device is None else device):
            lay_out_pages(graph, weighted, np.dtype(program.dtype).itemsize, gpu)
    except Exception as exc:  # (the run checks its options and reports their errors)
        log.debug("no GPU layout ahead of the run: %s", exc)


def _gpu_count():
    """The GPUs this process sees."""
    import cupy as cp

    return cp.cuda.runtime.getDeviceCount()
