"""The iteration loop: run a VertexProgram to convergence on the CPU engine.

Each iteration measures the active frontier (f), picks pull or notify-pull through the
cost model, runs the compiled CPU kernel over the graph and records what it did.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ..kernels import cpu
from ..program import ProgramSpec
from ..result import Result
from .costmodel import CPU_MODES, choose_cpu_mode, notify_fraction
from .state import VertexState

log = logging.getLogger("hetgraph.scheduler")

EXECUTION_MODES = ("sync", "async")
DEVICES = ("auto", "cpu", "gpu")
# a notify-pull iteration whose frontier has at most this many out-edges runs in one
# thread from the frontier's id list, without any pass over all vertices
SPARSE_EDGES = 50_000
# passes reading fewer edges run in one thread unless partitions= is given
SERIAL_EDGES = 100_000
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


@functools.lru_cache(maxsize=None)
def _thread_pool(threads):
    return ThreadPoolExecutor(threads, thread_name_prefix="hetgraph-cpu")


def _as_graph(graph):
    from ..io.store import PageStore

    if isinstance(graph, PageStore):
        return graph.load()
    if not isinstance(graph, Graph):
        raise GraphError(f"run needs a hetgraph.Graph or PageStore, got "
                         f"{type(graph).__name__}; read one with hg.read or hg.from_*")
    return graph


def _check_options(mode, devices, cpu_mode, max_iterations, partitions):
    if mode not in EXECUTION_MODES:
        raise GraphError(f"mode={mode!r} is not an execution mode; use 'sync' or 'async'")
    if devices not in DEVICES:
        raise GraphError(f"devices={devices!r} is not valid; use 'auto', 'cpu' or 'gpu'")
    if devices == "gpu":
        raise GraphError("devices='gpu': this hetgraph has no GPU engine yet; "
                         "use devices='cpu' or 'auto'")
    if cpu_mode not in ("auto",) + CPU_MODES:
        raise GraphError(f"cpu_mode={cpu_mode!r} is not valid; use 'auto', 'pull' or "
                         f"'notify-pull'")
    if not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0:
        raise GraphError(f"max_iterations={max_iterations!r} must be an integer >= 0")
    if partitions is not None and (not isinstance(partitions, (int, np.integer))
                                   or partitions < 1):
        raise GraphError(f"partitions={partitions!r} must be an integer >= 1 or None")


def _dense_pass(kernel, graph, state, aux, constant, chosen, notify_self, chunks, partitions,
                threads):
    """A pull pass, or a notify-pull pass through the active flags, with the edges cut
    into ranges over the threads; returns (vertices computed, edges read, activated)."""
    if chosen == "pull":
        vertices, prefix = cpu.ALL_VERTICES, graph.in_indptr
    else:
        cpu.notify(state.flags, graph.out_indptr, graph.out_indices, state.marks,
                   notify_self, chunks)
        vertices = cpu.compact(state.marks, chunks)
        prefix = cpu.edge_prefix(graph.in_indptr, vertices)
    edges = int(prefix[-1] - prefix[0])
    parts = partitions or (threads if edges >= SERIAL_EDGES else 1)
    activated = 0
    if chosen == "pull" or len(vertices):
        pool = _thread_pool(threads) if threads > 1 and parts > 1 else None
        activated = kernel.step(graph, state.values, state.new_values, state.flags, aux,
                                constant, vertices, prefix, 0, parts, pool)
    if chosen == "pull":
        state.swap()
    elif state.sync:
        cpu.commit(state.values, state.new_values, vertices)
    computed = graph.num_vertices if chosen == "pull" else len(vertices)
    return computed, edges, activated


def run(program, graph, *, devices="auto", mode="sync", max_iterations=100, threads=None,
        partitions=None, cpu_mode="auto", rho=1.0) -> Result:
    """Run a VertexProgram on ``graph`` until no vertex is active, the program's
    ``converged`` test holds, or ``max_iterations`` (default 100) iterations ran.

    ``mode``: "sync" (new values visible next iteration; deterministic) or "async"
    (visible at once). ``devices``: "auto" or "cpu". ``threads``: CPU threads (default
    all Numba threads). ``partitions``: edge partitions per pass (default = threads).
    ``cpu_mode``: "auto" (Garaph's switch at f <= 1/(2*rho)), or force "pull" /
    "notify-pull". ``rho``: read-cost ratio of the graph's storage (1 in memory).
    """
    spec = ProgramSpec(program)
    graph = _as_graph(graph)
    _check_options(mode, devices, cpu_mode, max_iterations, partitions)
    values, flags, aux = spec.initial_state(graph)
    kernel = cpu.compile_program(spec, np.float32 if aux is None else aux.dtype)
    aux = _NO_AUX if aux is None else aux
    state = VertexState(values, flags, sync=mode == "sync")
    start = time.perf_counter()
    kernel.warm_up(graph, state.values, state.flags, aux)
    compile_seconds = time.perf_counter() - start
    history = []
    converged = False
    activated = -1
    frontier = None  # sorted ids of the active vertices, when known
    degree = 0  # sum of the frontier's out-degrees, when known
    with _numba_threads(threads) as nthreads:
        chunks = max(1, min(graph.num_vertices // 4096, 8 * nthreads))
        for iteration in range(1, max_iterations + 1):
            start = time.perf_counter()
            if frontier is not None:
                active = len(frontier)
            elif activated == graph.num_vertices:  # all active: nothing to scan
                active, degree = activated, graph.num_arcs
            else:
                active, degree = cpu.frontier_size(state.flags, graph.out_indptr, chunks)
            if active == 0:
                converged = True
                break
            f = notify_fraction(int(degree), graph.num_arcs)
            chosen = choose_cpu_mode(f, rho) if cpu_mode == "auto" else cpu_mode
            constant = (float(program.iteration_constant(graph, state.values))
                        if spec.uses_constant else 0.0)
            previous = state.values.copy() if spec.has_converged else None
            if chosen == "notify-pull" and degree + active <= SPARSE_EDGES:
                if frontier is None:
                    frontier = cpu.compact(state.flags, chunks)
                computed, edges, frontier, degree = kernel.sparse_step(
                    graph, frontier, state.values, state.new_values, state.flags,
                    state.marks, aux, constant, state.sync)
                activated = len(frontier)
            else:
                frontier = None
                computed, edges, activated = _dense_pass(
                    kernel, graph, state, aux, constant, chosen, spec.notify_self, chunks,
                    partitions, nthreads)
            done = spec.has_converged and program.converged(graph, previous, state.values)
            seconds = time.perf_counter() - start
            history.append((iteration, chosen, f, int(active), computed, edges, activated,
                            seconds))
            log.debug("iteration %d: %s f=%.4f active=%d computed=%d %.4f s", iteration,
                      chosen, f, active, computed, seconds)
            if done:
                converged = True
                break
        else:
            converged = activated == 0
    values = program.finalize(graph, state.values)
    return Result(graph, values, program=spec.name, iterations=len(history),
                  converged=converged, history=history, mode=mode,
                  compile_seconds=compile_seconds)
