"""Connected components: union-find (Afforest on the CPU, ECL-CC on a GPU), whose work
depends on neither the diameter nor the vertex order, and minimum-label propagation,
the vertex program

    label'[v] = min(label[v], min_{u - v} label[u]),  label[v] = v initially

whose iterations grow with the diameter. On a directed graph the components are the
weakly connected ones (edge directions ignored). Each vertex ends with the smallest
dense id of its component.
"""

from __future__ import annotations

import functools
import inspect
import time

import numba
import numpy as np

from .. import tuning
from ..coloring import KEPT, coloring_of
from ..errors import GraphError
from ..io.store import StoredGraph, as_graph
from ..registry import algorithm
from ..result import Result, history_row
from ..scheduler import direct
from ..scheduler.entry import run
from ..threadcount import numba_threads
from .common import MinRelaxation

ALGORITHMS = ("auto", "union-find", "label-propagation")
UNION_FIND_OPTIONS = ("devices", "threads", "host_budget", "progress")
UNION_FIND_DEVICES = ("auto", "cpu", "gpu")


class MinLabel(MinRelaxation):
    """Label propagation program; run it on an undirected graph."""

    def __init__(self, dtype=np.int64):
        self.dtype = np.dtype(dtype)

    @staticmethod
    def gather(src, weight, dst):
        return src

    def init(self, graph, xp=np):
        return xp.arange(graph.num_vertices, dtype=self.dtype), None


@algorithm("cc", program=MinLabel,
           networkx=("connected_components", "weakly_connected_components",
                     "number_connected_components", "is_connected", "is_weakly_connected",
                     "node_connected_component"))
def connected_components(graph, algorithm="auto", **options):
    """Connected component of every vertex (weakly connected components on a directed
    graph: edge directions are ignored).

    Parameters
    ----------
    graph : Graph or PageStore
    algorithm : {"auto", "union-find", "label-propagation"}
        "union-find": Afforest on the CPU (Numba threads), ECL-CC on a GPU, in the
        calling process; its work depends on neither the diameter nor the vertex
        order, and a graph read out of core is read page by page. It takes the options
        ``devices`` ("auto": the GPU of this process for a graph in memory of at
        least ``hetgraph.tuning.CC_GPU_MIN_ARCS`` arcs that fits its free memory,
        else the CPU; "cpu"; "gpu"), ``threads`` (CPU threads, default all Numba
        threads if there are at least ``hetgraph.tuning.CC_PARALLEL_MIN_THREADS``,
        else one; a graph of fewer than ``hetgraph.tuning.CC_PARALLEL_ARCS`` arcs
        takes one), ``host_budget`` and ``progress`` (nothing to draw: one pass).
        "label-propagation": the :class:`MinLabel` vertex program on the undirected
        graph through :func:`hetgraph.run`, with every option of a run (``mode``
        default "async": a label crosses many vertices per iteration;
        ``max_iterations`` default N). "auto" (default): union-find, unless an option
        only label propagation has is given a value other than :func:`hetgraph.run`'s
        default (``mode="async"``, ``checkpoint``, ``max_iterations``, ``cluster``,
        ``cpu_mode``, ``gpu``, ``devices="hybrid"``, ...); in process, on a graph in
        memory of at most ``hetgraph.tuning.DIRECT_ARCS`` arcs with ``devices``
        "auto" or "cpu" and no ``threads``, one breadth-first traversal per
        component in one compiled call (:mod:`hetgraph.scheduler.direct`: program
        "BFS", mode "direct", one history row); so too a larger sparse graph of
        hostile vertex order where union-find would run on one thread
        (:func:`hetgraph.scheduler.direct.traverses_components`).
    **options
        As above.

    Returns
    -------
    Result
        ``values``: for every vertex, the smallest dense vertex id of its component
        (int32 below 2**31 vertices); ``len(np.unique(result.values))`` is the number
        of components. The result refers to ``graph``. Union-find's history has a row
        per phase (``mode``: "sample", "finish" (or "link" alone, for a small graph)
        on the CPU, "hook", "flatten" on a
        GPU; ``placement``: the device), its ``program`` is "Afforest" or "ECL-CC"
        and its ``mode`` "union-find".

    Raises
    ------
    GraphError
        An unknown ``algorithm`` or option, or union-find given an option it lacks.
    hetgraph.kernels.gpu.GpuUnavailableError
        ``devices="gpu"`` where this process has no usable GPU.

    Examples
    --------
    >>> import numpy as np
    >>> import hetgraph as hg
    >>> labels = hg.connected_components(hg.datasets.load("wiki-vote")).values
    >>> len(np.unique(labels))
    24
    """
    if algorithm not in ALGORITHMS:
        raise GraphError(f"algorithm={algorithm!r} is not a components algorithm; use "
                         f"{', '.join(map(repr, ALGORITHMS))}")
    if algorithm == "auto" and options.get("host_budget") is None:
        start = time.perf_counter()
        graph = as_graph(graph)
        if direct.traverses_components(graph, options):  # (an option it lacks: below)
            return direct.components(graph, _label_dtype(graph), start)
    run_options = _run_defaults()
    unknown = sorted(set(options) - set(run_options))
    if unknown:
        raise GraphError(f"connected_components got unknown option(s) {unknown}; use "
                         f"{', '.join(sorted(run_options))}")
    asked = sorted(name for name, value in options.items()
                   if name not in UNION_FIND_OPTIONS and not _is_default(value,
                                                                      run_options[name]))
    if options.get("devices") == "hybrid":
        asked.append("devices='hybrid'")
    if algorithm == "auto":
        algorithm = "label-propagation" if asked else "union-find"
    if algorithm == "label-propagation":
        return _label_propagation(graph, **options)
    if asked:
        raise GraphError(f"algorithm='union-find' takes no {', '.join(asked)} (options of "
                         f"a vertex program's run); drop them or pass "
                         f"algorithm='label-propagation'")
    return union_find(graph, **{name: value for name, value in options.items()
                                if name in UNION_FIND_OPTIONS})  # (the rest: defaults)


@functools.lru_cache(maxsize=None)
def _run_defaults():
    """{option: default} of :func:`hetgraph.run`'s keywords."""
    from ..scheduler.dispatcher import run

    return {name: parameter.default for name, parameter in
            inspect.signature(run).parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY}


def _is_default(value, default):
    return value is default or (type(value) is type(default) and value == default)


def _label_propagation(graph, mode="async", **options):
    """The MinLabel program on the undirected graph through the dispatcher."""
    graph = as_graph(graph, options.get("host_budget"))
    undirected = graph.to_undirected()
    if mode == "colored" and undirected is not graph:  # (the coloring separates arcs
        undirected.kept(KEPT, lambda: coloring_of(graph))  # both ways: a color-major one)
    options.setdefault("max_iterations", max(graph.num_vertices, 1))
    result = run(MinLabel(_label_dtype(graph)), undirected, mode=mode, **options)
    result.graph = graph
    return result


def _label_dtype(graph):
    return np.int32 if graph.num_vertices < 2**31 else np.int64


def union_find(graph, devices="auto", threads=None, host_budget=None, progress=None):
    """Components by union-find (see :func:`connected_components`, algorithm
    "union-find"); ``progress`` is accepted and unused (no iterations to show)."""
    del progress
    if devices not in UNION_FIND_DEVICES:
        raise GraphError(f"devices={devices!r} is not valid for union-find; use "
                         f"{', '.join(map(repr, UNION_FIND_DEVICES))}")
    from ..scheduler.dispatcher import _check_options

    # threads and host_budget as a run checks them (the other options: neutral values)
    _check_options("sync", devices, "auto", 0, threads, None, None, None, host_budget)
    graph = as_graph(graph, host_budget)
    device = _device(graph, devices)
    rows = []
    clock = _Clock(rows, device)
    if device == "gpu":
        from ..kernels.gpu.components import ecl_cc

        labels = ecl_cc(graph.num_vertices, graph.in_indptr, _blocks(graph),
                        index_dtype=graph.index_dtype, symmetric=not graph.directed,
                        single=not isinstance(graph, StoredGraph), clock=clock)
        name = "ECL-CC"
    else:
        labels = _afforest(graph, threads, clock)
        name = "Afforest"
    return Result(graph, labels.astype(_label_dtype(graph), copy=False), program=name,
                  iterations=len(rows), converged=True, history=rows, mode="union-find")


def _afforest(graph, threads, clock):
    """Afforest's labels on the CPU with ``threads`` Numba threads (None: all)."""
    from ..kernels.cpu.components import afforest

    many = numba.get_num_threads() >= tuning.CC_PARALLEL_MIN_THREADS if threads is None \
        else threads > 1  # (threads given: as asked)
    parallel = many and graph.num_arcs >= tuning.CC_PARALLEL_ARCS
    sample = graph.num_arcs >= tuning.CC_SAMPLE_ARCS
    out = (graph.out_indptr, _blocks(graph, out=True)) if graph.directed else None
    with numba_threads(threads):
        return afforest(graph.num_vertices, graph.in_indptr, _blocks(graph), out=out,
                        k=tuning.CC_SAMPLE_NEIGHBOURS if sample else 0,
                        samples=tuning.CC_FREQUENT_SAMPLES, parallel=parallel,
                        dtype=_label_dtype(graph), clock=clock)


def _device(graph, devices):
    """"cpu" or "gpu": where union-find runs (see :func:`connected_components`)."""
    if devices == "cpu":
        return "cpu"
    from ..kernels.gpu import device as gpu

    if devices == "gpu":
        gpu.require_gpu()
        if graph.num_vertices >= 2**31:
            raise GraphError(f"union-find on a GPU takes fewer than 2**31 vertices, the "
                             f"graph has {graph.num_vertices:,}; use devices='cpu'")
        return "gpu"
    if (isinstance(graph, StoredGraph) or graph.num_arcs < tuning.CC_GPU_MIN_ARCS
            or graph.num_vertices >= 2**31 or not gpu.available()):
        return "cpu"
    from ..kernels.gpu.components import device_fits

    fits = device_fits(graph.num_vertices, graph.num_arcs, graph.index_dtype.itemsize)
    return "gpu" if fits else "cpu"


def _blocks(graph, out=False):
    """A function yielding the graph's in-edges (``out``: its out-edges) as (first
    position, sources (targets), first vertex, end vertex) runs of whole vertices: the
    CSC (CSR) at once in memory, a page at a time from a store."""
    if not isinstance(graph, StoredGraph):
        whole = [(0, graph.out_indices if out else graph.in_indices, 0, graph.num_vertices)]
        return lambda: iter(whole if graph.num_arcs else [])
    store = graph.store
    block, start = ("out_dst", "out_edge_start") if out else ("src", "edge_start")

    def pages():
        for p, page in enumerate(store.manifest["pages"]):
            if page["vertex_stop"] > page["vertex_start"]:
                yield (page[start], store.page_block(p, block, fetch=True),
                       page["vertex_start"], page["vertex_stop"])
    return pages


class _Clock:
    """The history rows of a union-find run, one per phase: called as each phase ends
    with its name, vertices and edges; the time since the previous call is its."""

    def __init__(self, rows, device):
        self.rows, self.device = rows, device
        self.last = time.perf_counter()

    def __call__(self, phase, vertices, edges):
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        self.rows.append(history_row(
            iteration=len(self.rows), placement=self.device, mode=phase, f=1.0, rho=1.0,
            alpha=float("nan"), active=vertices, computed=vertices, edges=edges,
            **{f"{self.device}_edges": edges, f"{self.device}_seconds": seconds},
            seconds=seconds))
