"""The iteration loop: run a VertexProgram to convergence on the CPU or the GPU engine.

Each iteration measures the active frontier (f), lets the engine run one pass (the CPU
engine picks pull or notify-pull through the cost model) and records what it did.
"""

from __future__ import annotations

import contextlib
import logging
import time

import numba
import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ..program import ProgramSpec
from ..result import Result
from .costmodel import CPU_MODES, notify_fraction
from .cpu_engine import CpuEngine

log = logging.getLogger("hetgraph.scheduler")

EXECUTION_MODES = ("sync", "async")
DEVICES = ("auto", "cpu", "gpu")
GPU_OPTIONS = ("memory_budget", "page_bytes", "streams", "shared_bytes", "replication",
               "threads_per_block", "edge_order", "source_ranges")
_NO_AUX = np.zeros(1, np.float32)


@contextlib.contextmanager
def _numba_threads(threads):
    if threads is None:
        yield numba.get_num_threads()
        return
    limit = numba.config.NUMBA_NUM_THREADS
    if not isinstance(threads, (int, np.integer)) or not 1 <= threads <= limit:
        raise GraphError(f"threads={threads!r} is out of range; use 1..{limit} "
                         f"(NUMBA_NUM_THREADS) or None for all")
    before = numba.get_num_threads()
    numba.set_num_threads(int(threads))
    try:
        yield int(threads)
    finally:
        numba.set_num_threads(before)


def _as_graph(graph):
    from ..io.store import PageStore

    if isinstance(graph, PageStore):
        return graph.load()
    if not isinstance(graph, Graph):
        raise GraphError(f"run needs a hetgraph.Graph or PageStore, got "
                         f"{type(graph).__name__}; read one with hg.read or hg.from_*")
    return graph


def _check_options(mode, devices, cpu_mode, max_iterations, partitions, gpu):
    if mode not in EXECUTION_MODES:
        raise GraphError(f"mode={mode!r} is not an execution mode; use 'sync' or 'async'")
    if devices not in DEVICES:
        raise GraphError(f"devices={devices!r} is not valid; use 'auto', 'cpu' or 'gpu'")
    if cpu_mode not in ("auto",) + CPU_MODES:
        raise GraphError(f"cpu_mode={cpu_mode!r} is not valid; use 'auto', 'pull' or "
                         f"'notify-pull'")
    if not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0:
        raise GraphError(f"max_iterations={max_iterations!r} must be an integer >= 0")
    if partitions is not None and (not isinstance(partitions, (int, np.integer))
                                   or partitions < 1):
        raise GraphError(f"partitions={partitions!r} must be an integer >= 1 or None")
    if gpu is not None:
        if devices != "gpu":
            raise GraphError(f"gpu= options were given with devices={devices!r}; "
                             f"pass devices='gpu' or drop them")
        unknown = set(gpu) - set(GPU_OPTIONS) if isinstance(gpu, dict) else {gpu}
        if unknown:
            raise GraphError(f"gpu={gpu!r} has unknown options {sorted(map(str, unknown))}; "
                             f"use a dict with keys among {', '.join(GPU_OPTIONS)}")


def run(program, graph, *, devices="auto", mode="sync", max_iterations=100, threads=None,
        partitions=None, cpu_mode="auto", rho=1.0, gpu=None) -> Result:
    """Run a VertexProgram on ``graph`` until no vertex is active, the program's
    ``converged`` test holds, or ``max_iterations`` (default 100) iterations ran.

    ``mode``: "sync" (new values visible next iteration; deterministic) or "async"
    (visible at once). ``devices``: "cpu", "gpu" (one GPU, CuPy; errors when none is
    usable) or "auto" (the CPU until the hybrid dispatcher places pages on both).
    ``threads``: CPU threads (default all Numba threads). ``partitions``: edge
    partitions per CPU pass (default = threads). ``cpu_mode``: "auto" (Garaph's switch
    at f <= 1/(2*rho)), or force "pull" / "notify-pull". ``rho``: read-cost ratio of
    the graph's storage (1 in memory). ``gpu``: options of the GPU engine as a dict
    (memory_budget, page_bytes, streams, shared_bytes, replication, threads_per_block,
    edge_order, source_ranges;
    see :class:`hetgraph.kernels.gpu.GpuEngine`).
    """
    spec = ProgramSpec(program)
    graph = _as_graph(graph)
    _check_options(mode, devices, cpu_mode, max_iterations, partitions, gpu)
    values, flags, aux = spec.initial_state(graph)
    aux = _NO_AUX if aux is None else aux
    with _numba_threads(threads) as nthreads:
        if devices == "gpu":
            from ..kernels.gpu import GpuEngine

            engine = GpuEngine(spec, graph, values, flags, aux, sync=mode == "sync",
                               **(gpu or {}))
        else:
            engine = CpuEngine(spec, graph, values, flags, aux, sync=mode == "sync",
                               threads=nthreads, partitions=partitions, cpu_mode=cpu_mode,
                               rho=rho)
        history, converged = _iterate(spec, graph, engine, max_iterations)
    values = program.finalize(graph, engine.result())
    return Result(graph, values, program=spec.name, iterations=len(history),
                  converged=converged, history=history, mode=mode,
                  compile_seconds=engine.compile_seconds)


def _iterate(spec, graph, engine, max_iterations):
    """The iteration loop over an engine (CPU or GPU); returns (history, converged).
    The program's hooks get the values on the engine's device (NumPy or CuPy)."""
    program = spec.program
    history = []
    activated = -1
    for iteration in range(1, max_iterations + 1):
        start = time.perf_counter()
        active, degree = frontier = engine.frontier()
        if active == 0:
            return history, True
        f = notify_fraction(degree, graph.num_arcs)
        constant = (program.iteration_constant(graph, engine.values)
                    if spec.uses_constant else 0.0)
        previous = engine.values.copy() if spec.has_converged else None
        chosen, computed, edges, activated = engine.iterate(constant, frontier)
        done = spec.has_converged and program.converged(graph, previous, engine.values)
        seconds = time.perf_counter() - start
        history.append((iteration, chosen, f, int(active), computed, edges, activated,
                        seconds))
        log.debug("iteration %d: %s f=%.4f active=%d computed=%d %.4f s", iteration,
                  chosen, f, active, computed, seconds)
        if done:
            return history, True
    return history, activated == 0
