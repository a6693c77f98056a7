"""Work a GPU run starts before the dispatcher's import: a new process's first run
imports Dask (tenths of a second, holding the interpreter), while laying the graph's
pages out on the GPU mostly waits for the device; in a thread of its own, the layout
goes on under the import, and the run's engine finds it kept
(:func:`hetgraph.engines.gpu.lay_out_ahead`)."""

from __future__ import annotations

import logging
import threading

import numpy as np

from .. import cluster as clusters
from ..graph import Graph

log = logging.getLogger(__name__)


def lay_out_ahead(program, graph, options):
    """Start laying out ``graph``'s pages on the GPU when the run that ``options`` (the
    keywords of :func:`hetgraph.run`) asks for takes them as laid out here: on the GPU
    alone (``devices="gpu"``), of a graph in memory, not colored, in a cluster of this
    process with one GPU. Returns the thread, or None."""
    cluster = options.get("cluster")
    cluster = clusters.current_cluster() if cluster is None else cluster
    if not (options.get("devices") == "gpu" and isinstance(graph, Graph)
            and options.get("mode", "sync") != "colored" and (cluster is None or (
                isinstance(cluster, clusters.Cluster) and cluster.in_process
                and len(cluster.gpu_devices) == 1))):
        return None
    from ..engines.gpu import lay_out_ahead as lay_out_pages  # (here: no import in turns)

    device = None if cluster is None else cluster.gpu_devices[0]
    thread = threading.Thread(target=_lay_out, name="hetgraph-gpu-layout", daemon=True,
                              args=(lay_out_pages, program, graph,
                                    dict(options.get("gpu") or {}), device))
    thread.start()
    return thread


def _lay_out(lay_out_pages, program, graph, gpu, device):
    """:func:`lay_out_ahead`'s thread: ``lay_out_pages`` on ``device`` (None: the
    process's only GPU, the embedded cluster's), once the GPU probe says it runs. A
    failure is left for the run to meet (its engine lays the pages out again)."""
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
