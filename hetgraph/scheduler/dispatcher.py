"""The dispatcher: a VertexProgram's iterations as Dask tasks on CPU and GPU workers.

Garaph section 5.1 on Dask. Before each iteration the dispatcher measures the frontier
(f) and asks the cost model where it runs (alpha = min(2*f*rho, 1) * T_pull / T_GPU):

- "cpu": alpha < 1, the CPU alone (pull or notify-pull, Garaph 4.2);
- "gpu": the GPU alone; "hybrid": pages go reactively to whichever worker kind frees
  first (:mod:`.placement`).

A stretch of CPU-only or single-GPU iterations runs as one *segment* task on that
device (one round trip per second of work, not per iteration); hybrid iterations are
one task per page batch, named after the pages and the device so that the dashboard's
task stream shows the placement. Page times measured by the tasks update the model.
A small graph (``tuning.SMALL_ARCS``) stays on the CPU under "auto". On an in-process
cluster a run's segments run in the calling thread until they took
``tuning.INLINE_SECONDS`` in all, and only later ones are tasks: a task's round trip
would otherwise weigh on short runs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import logging
import operator
import os
import time
import weakref

import numba
import numpy as np
from distributed import CancelledError
from distributed.scheduler import KilledWorker

from .. import tuning
from ..cluster import ClusterError, WorkerLostError, cluster_for
from ..engines.cpu import pull_threads
from ..engines.cpu_modes import notify_fraction, push_factor
from ..coloring import coloring_of
from ..errors import GraphError, OutOfCoreError
from ..graph import Graph
from ..io.store import StoredGraph, as_graph, available_memory
from ..kernels.arrays import to_host
from ..program import ProgramSpec
from ..result import COLUMN, SECONDS, Result, history_row, with_overhead
from . import tasks
from .checkpoint import Checkpointer, graph_blind_digest, graph_fingerprint, \
    program_fingerprint, sampled_crc32
from .costmodel import CPU_MODES, CostModel, frontier_growth
from .placement import PageQueue
from .progress import ProgressBar, RunEvents, SchedulerLog, show_progress
from .repeat import Repeat
from .spread import Spread
from .state import VertexState

log = logging.getLogger("hetgraph.scheduler")

EXECUTION_MODES = ("sync", "async", "colored")
DEVICES = ("auto", "cpu", "gpu", "hybrid")
GPU_OPTIONS = ("memory_budget", "page_bytes", "streams", "shared_bytes", "replication",
               "threads_per_block", "edge_order", "source_ranges", "subgraph", "tocab")
_NO_AUX = np.zeros(1, np.float32)
_PLACEMENT_OF, _SECONDS_OF = (operator.itemgetter(COLUMN[name])
                              for name in ("placement", "seconds"))

# the GPU page layouts that runs' calibrations wait for while their CPU goes on, one at
# a time, in a thread of this process (joined at its exit)
_LAYOUTS = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hetgraph-gpu-layout")


class _LayoutHandle:
    """What the cost model asks whether the GPU's page layout (a future of this process)
    is done: also a segment task's copy of the model, which Dask pickles for its
    scheduler when the task goes through it (after ``tuning.INLINE_SECONDS``), and a
    future does not pickle. The future is found by key in this process; one gone (its run ended)
    is not done."""
    _futures = weakref.WeakValueDictionary()
    _keys = itertools.count()

    def __init__(self, future):
        self.key = next(self._keys)
        self._futures[self.key] = future

    def done(self):
        future = self._futures.get(self.key)
        return future is not None and future.done()


def wait_for_gpu_layouts():
    """Wait for the GPU page layouts that earlier runs left going (a run that ended on
    the CPU before its GPU's pages were laid out does not wait for them)."""
    _LAYOUTS.submit(lambda: None).result()


def _as_graph(graph, host_budget):
    graph = as_graph(graph, host_budget)
    if not isinstance(graph, Graph):
        raise GraphError(f"run needs a hetgraph.Graph or PageStore, got "
                         f"{type(graph).__name__}; read one with hg.read or hg.from_*")
    return graph


def _check_options(mode, devices, cpu_mode, max_iterations, threads, partitions, gpu,
                   page_bytes, host_budget):
    if mode not in EXECUTION_MODES:
        raise GraphError(f"mode={mode!r} is not an execution mode; use 'sync', 'async' or "
                         f"'colored'")
    if devices not in DEVICES:
        raise GraphError(f"devices={devices!r} is not valid; use 'auto', 'cpu', 'gpu' or "
                         f"'hybrid'")
    if cpu_mode not in ("auto",) + CPU_MODES:
        raise GraphError(f"cpu_mode={cpu_mode!r} is not valid; use 'auto', 'pull', "
                         f"'notify-pull' or 'push'")
    if threads is not None and (not isinstance(threads, (int, np.integer))
                                or not 1 <= threads <= numba.config.NUMBA_NUM_THREADS):
        raise GraphError(f"threads={threads!r} is out of range; use "
                         f"1..{numba.config.NUMBA_NUM_THREADS} (NUMBA_NUM_THREADS) or None "
                         f"for all")
    if not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0:
        raise GraphError(f"max_iterations={max_iterations!r} must be an integer >= 0")
    if partitions is not None and (not isinstance(partitions, (int, np.integer))
                                   or partitions < 1):
        raise GraphError(f"partitions={partitions!r} must be an integer >= 1 or None")
    for name, value in (("page_bytes", page_bytes), ("host_budget", host_budget)):
        if value is not None and (not isinstance(value, (int, np.integer)) or value < 1):
            raise GraphError(f"{name}={value!r} must be a positive integer (bytes) or None")
    if gpu is not None:
        if devices == "cpu":
            raise GraphError("gpu= options were given with devices='cpu'; pass "
                             "devices='gpu' or 'auto', or drop them")
        unknown = set(gpu) - set(GPU_OPTIONS) if isinstance(gpu, dict) else {gpu}
        if unknown:
            raise GraphError(f"gpu={gpu!r} has unknown options {sorted(map(str, unknown))}; "
                             f"use a dict with keys among {', '.join(GPU_OPTIONS)}")


def run(program, graph, *, cluster=None, devices="auto", mode="sync", max_iterations=100,
        threads=None, partitions=None, cpu_mode="auto", rho=None, page_bytes=None,
        gpu=None, host_budget=None, checkpoint=None, checkpoint_every=10,
        resume=False, progress=None) -> Result:
    """Run a vertex program on ``graph`` until no vertex is active, the program's
    ``converged`` test holds, or ``max_iterations`` iterations ran.

    Parameters
    ----------
    program : hetgraph.VertexProgram
        The program (an instance); its initial state, hooks and finalize are used.
    graph : hetgraph.Graph or hetgraph.PageStore
        The graph, in memory or as an on-disk page store.
    cluster : hetgraph.Cluster, optional
        Default: the one of an enclosing ``with hg.Cluster()``, else the embedded one
        (local, in-process, started by the first run given no cluster and kept until
        exit or :func:`hetgraph.cluster.close_embedded_cluster`).
    devices : {"auto", "cpu", "gpu", "hybrid"}, default "auto"
        "auto": the cost model places every iteration on the CPU, the GPU or both;
        "gpu" errors when the cluster has no GPU worker; "hybrid": every iteration's
        pages spread over all workers, without the cost model's switch. Under "auto"
        a graph of at most ``hetgraph.tuning.SMALL_ARCS`` arcs runs on the CPU.
    mode : {"sync", "async", "colored"}, default "sync"
        "sync": new values visible next iteration (deterministic); "async": visible
        at once on the device that computed them, between devices at the end of the
        iteration; "colored": Frog's asynchronous model, one pass per color of the
        graph's hybrid coloring (:mod:`hetgraph.coloring`), each seeing the colors
        before it (deterministic; fewer iterations than "sync"). On a GPU it needs a
        color-major graph (``graph.reorder("color")``); a hybrid iteration or several
        GPUs run their pages as "async" does.
    max_iterations : int, default 100
        Iterations at most (>= 0).
    threads : int, optional
        CPU threads, 1..NUMBA_NUM_THREADS (default: all Numba threads).
    partitions : int, optional
        Edge partitions per CPU pass (default: the threads, for passes over at least
        ``hetgraph.tuning.SERIAL_EDGES`` edges).
    cpu_mode : {"auto", "pull", "notify-pull", "push"}, default "auto"
        "auto": Garaph's switch at f <= 1/(2*rho), corrected for the in-degree skew
        (:mod:`hetgraph.engines.cpu_modes`); the others force one mode ("push": for
        incremental programs on a graph in memory).
    rho : float, optional
        Read-cost ratio of the graph's storage (default 1 in memory; out of core k,
        the store's sequential over random read speed, measured).
    page_bytes : int, optional
        Edge bytes per page, the unit of placement when pages are spread over several
        workers (default 32 MiB, or ``gpu["page_bytes"]``).
    gpu : dict, optional
        Options of the GPU engine: memory_budget, page_bytes, streams, shared_bytes,
        replication, threads_per_block, edge_order, source_ranges, subgraph, tocab (see
        :class:`hetgraph.engines.gpu.GpuEngine`).
    host_budget : int, optional
        Bytes of host memory for a run on a PageStore (default: half the memory
        available); a store whose data does not fit runs out of core, its pages read
        from disk as each pass needs them, by the CPU workers and one GPU worker
        (:mod:`hetgraph.engines.store_gpu`).
    checkpoint : str or os.PathLike, optional
        A directory where the vertex state is written atomically every
        ``checkpoint_every`` iterations and at the end.
    checkpoint_every : int, default 10
        Iterations between checkpoints.
    resume : bool, default False
        Continue from the newest good checkpoint in ``checkpoint`` (from the start
        when there is none); a checkpoint of another graph, program or mode is
        refused (:mod:`hetgraph.scheduler.checkpoint`).
    progress : bool, optional
        Draw a progress bar on stderr once the run takes over
        ``tuning.PROGRESS_DELAY`` seconds (default None: when stderr is a terminal).

    Returns
    -------
    hetgraph.Result
        The finalized values keyed by the original labels, and the run's history
        (one row per iteration, :data:`hetgraph.result.HISTORY_COLUMNS`). Every row
        is also sent to the Dask scheduler's event log (in batches, at most every
        ``tuning.EVENT_INTERVAL`` seconds), for the dashboard's hetgraph page
        (:mod:`hetgraph.dashboard`).

    Raises
    ------
    hetgraph.GraphError
        An option out of range, a graph that is not a Graph or PageStore,
        ``cpu_mode="push"`` where it cannot run, or ``resume`` without ``checkpoint``.
    hetgraph.ClusterError
        ``devices`` names a worker kind the cluster lacks.
    hetgraph.kernels.gpu.GpuUnavailableError
        ``devices="gpu"`` and no GPU worker.
    hetgraph.OutOfCoreError
        A ``host_budget`` too small for the vertex arrays, or for the pages in flight.

    Examples
    --------
    >>> import hetgraph as hg
    >>> from hetgraph.algorithms.bfs import BreadthFirst
    >>> g = hg.generate.grid(3, 3)
    >>> result = hg.run(BreadthFirst(0), g, devices="cpu")
    >>> int(result[8]), result.converged
    (4, True)
    """
    spec = ProgramSpec(program)
    _check_options(mode, devices, cpu_mode, max_iterations, threads, partitions, gpu,
                   page_bytes, host_budget)
    graph = _as_graph(graph, host_budget)
    in_memory = not isinstance(graph, StoredGraph)
    if not in_memory:
        host_budget = available_memory() // 2 if host_budget is None else int(host_budget)
    if cpu_mode == "push" and not (spec.incremental and in_memory):
        why = "the graph is read out of core" if spec.incremental else \
            f"{spec.name} is not incremental (see hg.VertexProgram)"
        raise GraphError(f"cpu_mode='push' cannot run: {why}; use 'auto', 'pull' or "
                         f"'notify-pull'")
    if rho is None:
        rho = 1.0 if in_memory else graph.store.read_ratio()
    coloring = _coloring(graph, mode, in_memory)
    options = dict(threads=threads, partitions=partitions, cpu_mode=cpu_mode,
                   rho=float(rho), page_bytes=page_bytes, gpu=dict(gpu or {}),
                   host_budget=host_budget, coloring=coloring)
    # (progress None: a kept call's run ended in one time slice, before a bar is drawn)
    repeat = None if checkpoint is not None or resume or not in_memory or progress else \
        _repeat(cluster, spec, graph, devices, mode, max_iterations, options)
    if repeat is not None and repeat.entry is not None:
        result = _repeated(repeat, program, devices, mode, max_iterations, options)
        if result is not None:
            return result
    key, placed = _placed_ahead(cluster, devices, spec, graph, mode == "sync", options,
                                max_iterations) if checkpoint is None else (None, devices)
    xp, device = _state_module(cluster, placed, spec, checkpoint, graph)
    # the workers make the initial state: here only the room it comes back to
    made_there = xp is np and not resume and max_iterations > 0 and spec.init_apart \
        and _held_on_workers(cluster, devices, graph)
    if made_there:
        n = graph.num_vertices
        values, flags, aux = np.empty(n, spec.dtype), np.empty(n, np.uint8), \
            spec.initial_aux(graph)
    else:
        try:
            with device:
                values, flags, aux = spec.initial_state(graph, xp)
        except MemoryError:  # (CuPy's OutOfMemoryError) the cost model may use the CPU
            if devices != "auto":
                raise
            xp, device = np, contextlib.nullcontext()
            values, flags, aux = spec.initial_state(graph, xp)
    state = VertexState(values, flags, sync=mode == "sync")
    # (the program as its init leaves it: the one that wrote a checkpoint resumes it)
    checkpointer = _checkpointer(checkpoint, checkpoint_every, resume, spec, graph, mode)
    aux = _NO_AUX if aux is None else aux
    history, converged = _resume(checkpointer, state) if resume else ([], False)
    compile_seconds = round_trips = 0.0
    finalized = False  # (by the GPU worker process that held the state: spread._whole)
    if not converged:  # (a resumed run that had converged is returned as it was)
        with cluster_for(cluster) as active_cluster:
            driver = _Driver(active_cluster, spec, graph, state, aux, devices, options,
                             fresh=not history, made_there=made_there,
                             limit=max_iterations, key=key,
                             park=None if repeat is None else repeat.token)
            bar = ProgressBar(spec.name, max_iterations) if show_progress(progress) else None
            try:
                history, converged = driver.run(max_iterations, history, checkpointer,
                                                bar=bar)
            finally:
                driver.close()
        if repeat is not None and driver.parked is not None:
            repeat.keep(driver.parked)
        compile_seconds = driver.compile_seconds
        round_trips = driver.round_trips + (
            0.0 if driver._spread is None else driver._spread.round_trips)
        finalized = driver._spread is not None and driver._spread.finalized
    values = state.values if finalized else _finalize(
        program, graph, state.values, *((np, contextlib.nullcontext()) if state.on_host
                                        else (xp, device)))
    # (the result's alone: the run's objects, in reference cycles, may outlive it, and
    # values over a file lent to the result would keep the file, see hostshare.lend)
    state.values = state.new_values = None
    return Result(graph, values, program=spec.name, iterations=len(history),
                  converged=converged, history=history, mode=mode,
                  compile_seconds=compile_seconds, round_trip_seconds=round_trips)


def _finalize(program, graph, values, xp=np, device=contextlib.nullcontext()):
    """The program's finalized ``values`` (an array of the array module ``xp``, on the
    device that ``device`` makes current) as a host array."""
    with device:
        return to_host(program.finalize(graph, values, **({} if xp is np else {"xp": xp})))


def _repeat(cluster, spec, graph, devices, mode, max_iterations, options):
    """The :class:`.repeat.Repeat` of a run that may repeat a kept call or leave one:
    a run on worker processes of the CPU alone that hold its state
    (:func:`_holds_state`: made there from the program's initial one, whose ``init``
    has no side effects), small enough to come back in a call's answer
    (``tuning.ANSWER_STATE_BYTES``); None for any other."""
    if max_iterations < 1 or not spec.init_apart or graph.num_vertices * (
            spec.dtype.itemsize + 1) > tuning.ANSWER_STATE_BYTES:
        return None
    with cluster_for(cluster) as active:
        if active.in_process:
            return None
        kinds = _kinds(active, devices, False, graph.num_arcs <= tuning.SMALL_ARCS)
        if "gpu" in kinds or not _holds_state(active, kinds, False):
            return None
        return Repeat.of(active, spec, graph, kinds, (
            devices, mode, int(max_iterations), options["threads"], options["partitions"],
            options["cpu_mode"], options["rho"], options["page_bytes"],
            tuple(sorted(options["gpu"].items())), options["host_budget"]))


def _repeated(repeat, program, devices, mode, max_iterations, options):
    """The Result of a call that repeats the kept one of ``repeat`` on its worker (see
    :mod:`.repeat`), its events posted as the driver posts a run's; None where the
    kept call could not be repeated (the call then runs the whole way)."""
    answer = repeat.answer()
    if answer is None:
        return None
    report, wall = answer
    rows, spec, graph = report.rows, repeat.spec, repeat.graph
    converged = report.status == "converged" or (
        bool(rows) and rows[-1][COLUMN["activated"]] == 0)
    events = _run_events(repeat.cluster.client, os.urandom(4).hex(), spec, graph, devices,
                         repeat.kinds, max_iterations, 1, options["coloring"])
    events.rows(rows)
    events.end(len(rows), converged)
    events.post.flush()  # (the scheduler outlives this process: it must see the end)
    values = report.out[2][0]
    return Result(graph, _finalize(program, graph, values), program=spec.name,
                  iterations=len(rows), converged=converged, history=rows, mode=mode,
                  compile_seconds=report.build_seconds,
                  round_trip_seconds=max(wall - report.build_seconds -
                                         sum(row[SECONDS] for row in rows), 0.0))


def _run_events(client, run_id, spec, graph, devices, kinds, max_iterations, first,
                coloring):
    """The :class:`RunEvents` of a run (its start posted) to ``client``'s scheduler."""
    return RunEvents(SchedulerLog.of(client), run_id, program=spec.name,
                     vertices=int(graph.num_vertices), arcs=int(graph.num_arcs),
                     devices=devices, kinds=dict(kinds), max_iterations=int(max_iterations),
                     first=first, **({} if coloring is None else
                                     {"coloring": coloring.describe()}))


def _color_cuts(coloring):
    """``Graph.partition``'s option that cuts shards and pages at the colors of a
    colored run's color-major graph (a GPU sweeps color by color over whole shards);
    none otherwise."""
    return {"cuts": coloring.cuts} if coloring is not None and coloring.contiguous else {}


def _coloring(graph, mode, in_memory):
    """The coloring of a colored run (the graph's, :func:`coloring_of`), else None."""
    if mode != "colored":
        return None
    if not in_memory:
        raise OutOfCoreError("mode='colored' runs on a graph in memory; open the store "
                             "with hg.open_store, raise host_budget or use mode='async'")
    return coloring_of(graph)


def _placed_ahead(cluster, devices, spec, graph, sync, options, limit):
    """(calibration key, devices) of a run before its state is made: a run placed by
    the cost model ("auto") on both device kinds, whose program's ``init`` leaves it as
    it was (the key is then the one its driver would take after ``init``), takes the
    key of its kept calibration (:meth:`_Driver._calibrate`) and, where that holds a
    settled answer for ``limit`` iterations (:class:`_Settled`), its device kind: a run
    settled on the CPU makes its state as the CPU alone does (on the host, not on a
    GPU it will not use). (None, ``devices``) for any other run."""
    if devices != "auto" or not spec.init_apart or isinstance(graph, StoredGraph):
        return None, devices
    with cluster_for(cluster) as active:
        if len(_kinds(active, devices, False, graph.num_arcs <= tuning.SMALL_ARCS)) < 2:
            return None, devices
        key = _calibration_key(active, spec, graph, sync, options)
        settled = _settled_answer(active, key, limit)[1]
    return key, devices if settled is None else settled.kind


def _settled_answer(cluster, key, limit):
    """(the calibration kept on ``cluster`` under ``key``, the :class:`_Settled` answer it
    holds for runs of ``limit`` iterations at most), None for either where there is
    none: what a run placed by the cost model looks up before its state is made
    (:func:`_placed_ahead`) and its driver follows (:meth:`_Driver._settled`)."""
    kept = None if key is None else cluster.calibrations.get(key)
    return kept, None if kept is None else kept.settled.get(limit)


def _calibration_key(cluster, spec, graph, sync, options):
    """What a calibration of a run of ``spec`` on ``graph`` depends on: the graph, the
    program with its parameters (which make the initial state; its arrays by a sample
    of their elements: a calibration taken for another costs speed, not an answer;
    those it derives from the graph not at all: the graph and the parameters say
    them), the execution mode (``sync``, async or colored), the run's options and the
    cluster's workers."""
    # (a sample of a large array: its CRC32 cost a warm call 0.3 ms)
    digest = graph_blind_digest(spec, graph, sampled_crc32)
    return (graph.token, spec.key(graph, digest), sync, options["coloring"] is not None,
            options["threads"], options["partitions"], options["cpu_mode"],
            options["rho"], options["page_bytes"], tuple(sorted(options["gpu"].items())),
            tuple(cluster.cpu_workers), tuple(cluster.gpu_workers))


def _state_module(cluster, devices, spec, checkpoint, graph):
    """(array module, context making its device current) of a run's vertex state: CuPy
    on the first GPU of an in-process cluster with GPU workers, for a run of a program
    that can build and finish its state there (:attr:`ProgramSpec.any_device`), without
    checkpoints, on a graph in memory, with ``devices="gpu"`` or ``"auto"`` (unless the
    graph is small enough for the CPU alone): such a run's state crosses to the host
    only for its final values or when an iteration runs there
    (:meth:`VertexState.to_host`; several GPUs load it from the first and store their
    vertices back, GPU to GPU). Else NumPy."""
    if spec.any_device and checkpoint is None and not isinstance(graph, StoredGraph) and (
            devices == "gpu" or devices == "auto" and graph.num_arcs > tuning.SMALL_ARCS):
        with cluster_for(cluster) as active:
            if active.in_process and active.gpu_workers:
                import cupy

                from ..kernels.gpu.device import use_device

                return cupy, use_device(active.gpu_devices[0])
    return np, contextlib.nullcontext()


def _checkpointer(directory, every, resume, spec, graph, mode):
    if directory is None:
        if resume:
            raise GraphError("resume=True needs checkpoint=DIR, the directory of the "
                             "checkpoints to resume from")
        return None
    return Checkpointer(directory, every=every, graph_fp=graph_fingerprint(graph),
                        program_fp=program_fingerprint(spec, graph_blind_digest(spec, graph)),
                        mode=mode)


def _resume(checkpointer, state):
    """Load the newest good checkpoint into ``state``; returns (history so far, whether
    that run had converged)."""
    saved = checkpointer.load(len(state.values), state.values.dtype)
    if saved is None:
        log.info("no checkpoint in %s: starting from the beginning", checkpointer.directory)
        return [], False
    state.values[:] = saved["values"]
    state.flags[:] = saved["flags"]
    log.info("resuming after iteration %d from %s", saved["iteration"],
             checkpointer.directory)
    return saved["history"], saved["converged"]


def _held_on_workers(cluster, devices, graph):
    """Whether a run's state lives on worker processes from its start (:mod:`.spread`),
    which make the initial state themselves."""
    if isinstance(graph, StoredGraph):
        return False
    with cluster_for(cluster) as active:
        return not active.in_process and _holds_state(active, _kinds(
            active, devices, False, graph.num_arcs <= tuning.SMALL_ARCS), False)


def _holds_state(cluster, kinds, out_of_core):
    """Whether the workers of ``kinds`` of ``cluster`` hold a run's state between its
    segments: worker processes of one kind alone, over a graph in memory."""
    return not cluster.in_process and not out_of_core and len(kinds) == 1 and \
        tuning.SPREAD_SEGMENTS


def _kinds(cluster, devices, out_of_core, small):
    """{kind: worker count} of the devices the run may use (CPU workers only for a
    ``small`` graph with devices "auto"; out of core, one GPU worker at most: its pages
    come through the page cache, see :mod:`hetgraph.engines.store_gpu`)."""
    workers = {"cpu": len(cluster.cpu_workers), "gpu": len(cluster.gpu_workers)}
    if small and devices == "auto" and workers["cpu"]:
        return {"cpu": workers["cpu"]}
    if out_of_core:
        workers["gpu"] = min(workers["gpu"], 1)
    if devices == "cpu" and not workers["cpu"]:
        raise ClusterError("devices='cpu' but the cluster has no CPU worker; start one "
                           "with --resources CPU=1")
    if devices == "gpu" and not workers["gpu"]:
        from ..kernels.gpu.device import GpuUnavailableError, availability

        reason = availability()[1] if cluster.in_process else "no worker has resource GPU"
        raise GpuUnavailableError(f"devices='gpu' but the cluster has no GPU worker "
                                  f"({reason}); use devices='cpu' or 'auto'")
    if devices in ("cpu", "gpu"):
        return {devices: workers[devices]}
    if devices == "hybrid" and not all(workers.values()):
        raise ClusterError(f"devices='hybrid' needs CPU and GPU workers; the cluster has "
                           f"{workers['cpu']} CPU and {workers['gpu']} GPU worker(s)")
    return {kind: n for kind, n in workers.items() if n}


@dataclasses.dataclass
class _Settled:
    """What a call under a kept calibration found: the cost model placed each of its
    ``iterations`` iterations on ``kind``, in ``seconds`` in all. A later call of that
    key and iteration limit runs on ``kind`` alone, without the model (the key fixes
    the graph, the program, its parameters and the options, so the model, given the
    same times, would place it so again), and is checked against it (:meth:`after`)."""

    kind: str
    iterations: int
    seconds: float
    margin: float  # the share of ``seconds`` the device may lose before the model is
    # asked again (:meth:`CostModel.deviation`)

    def after(self, iterations, seconds):
        """This answer after a settled call of ``iterations`` iterations in ``seconds``:
        kept while the call ran as many iterations, slower by at most ``margin`` or by
        ``tuning.CHOOSE_SECONDS`` (a segment asks the model no more often: a shorter
        delay changes none of its answers), else None (the next call asks the model)."""
        slower = seconds - self.seconds
        if iterations != self.iterations or (
                slower > self.margin * self.seconds and slower > tuning.CHOOSE_SECONDS):
            return None
        return self


@dataclasses.dataclass
class _Calibration:
    """A calibration kept on the cluster for later runs under its key (see
    :meth:`_Driver._calibrate`): its reports, the cost model they make, which the
    first later run makes and the others copy (None until then), and by iteration
    limit (``max_iterations``) what the last call under it settled (:class:`_Settled`;
    none: the next call asks the model). The CPU's report alone: a run's whose GPU
    was still laying out its pages (:attr:`complete` False); a later run calibrates
    the GPU alone and keeps both."""

    reports: list
    model: CostModel | None = None
    settled: dict = dataclasses.field(default_factory=dict)

    @property
    def complete(self):
        """Whether it holds the GPU's report beside the CPU's."""
        return len(self.reports) > 1


class _Driver:
    """One run's iteration loop on a cluster; ``fresh``: the state is the program's
    initial one (not a resumed run's); ``made_there``: ``state`` holds nothing yet, the
    workers that hold the run's state make the initial one (:func:`_held_on_workers`);
    ``limit``: the run's ``max_iterations`` (None: unknown, nothing settled for it);
    ``key``: the calibration key :func:`_placed_ahead` took (None: the driver takes it);
    ``park``: the token under which the worker of a run that ends in one segment on one
    CPU worker process keeps its context for the call's repeats (:mod:`.repeat`; the
    worker's address then in :attr:`parked`).

    A run placed by the cost model ("auto") whose kept calibration says that the last
    call like it ran on one device alone (:class:`_Settled`) runs there alone: no
    calibration, no question to the model, no measurement folded into it; its
    iterations' time then keeps or drops that answer for the next call (:meth:`_settle`)."""

    def __init__(self, cluster, spec, graph, state, aux, devices, options, fresh=True,
                 made_there=False, limit=None, key=None, park=None):
        self.client = cluster.client
        self.shared = cluster.in_process
        self.spec, self.graph, self.state = spec, graph, state
        self.devices = devices
        out_of_core = isinstance(graph, StoredGraph)
        self._one_pool = self.shared and not out_of_core  # (see _segment_possible)
        small = graph.num_arcs <= tuning.SMALL_ARCS
        self.kinds = _kinds(cluster, devices, out_of_core, small)
        self.inline_left = tuning.INLINE_SECONDS if self.shared else 0.0
        self.cluster = cluster
        self._pinned = False  # see _pin_state
        gpu = options["gpu"]
        if out_of_core:  # the store's pages
            partition, pages = None, graph.store.page_vertices()
        elif len(self.kinds) == 2 or max(self.kinds.values()) > 1:  # pages spread out
            from ..kernels.gpu.layout import page_bytes_for
            from ..partition import edge_bytes

            per_edge = edge_bytes(graph.index_dtype, spec.needs_weights and graph.weighted)
            page_bytes = page_bytes_for(graph.num_arcs * per_edge, gpu.get("memory_budget"),
                                        options["page_bytes"] or gpu.get("page_bytes",
                                                                         tuning.PAGE_BYTES),
                                        gpu.get("streams", tuning.GPU_STREAMS))
            partition = graph.partition(page_bytes=page_bytes,
                                        shared_bytes=gpu.get("shared_bytes",
                                                             tuning.GPU_SHARED_BYTES),
                                        replication=gpu.get("replication"),
                                        vertex_bytes=spec.dtype.itemsize,
                                        **_color_cuts(options["coloring"]))
            pages = partition.page_ranges
        else:  # one worker in all: the CPU reads the graph as one page, the GPU engine
            # pages (and degrades) alone
            partition, pages = None, np.array([[0, graph.num_vertices]], np.int64)
        self.gpu_devices = self._segment_gpus(partition, options["coloring"])
        self.run_id = os.urandom(4).hex()  # (uuid4's object: several times the cost)
        self.runspec = tasks.RunSpec(self.run_id, spec, graph, aux, state.sync, self.shared,
                                 pages, partition, options["threads"], options["partitions"],
                                 options["cpu_mode"], options["rho"], gpu,
                                 options["host_budget"], options["coloring"])
        self._share_run()
        # worker processes of one kind alone: they hold the state between segments
        self._spread = Spread(cluster, self.run_id, graph.in_indptr, fresh,
                              self._reshared, kind=next(iter(self.kinds)), pages=pages) \
            if _holds_state(cluster, self.kinds, out_of_core) else None
        self._made_there = made_there and self._spread is not None
        self._park = park
        if made_there and not self._made_there:  # (the cluster changed meanwhile)
            state.values[:], state.flags[:] = spec.initial_state(graph)[:2]
        self.page_edges = partition.page_arcs if partition is not None else \
            (graph.in_indptr[pages[:, 1]] - graph.in_indptr[pages[:, 0]]).astype(np.int64)
        threads = options["threads"] or numba.config.NUMBA_NUM_THREADS
        pull_threads_used = pull_threads(graph.num_arcs, threads, options["partitions"])
        self.model = CostModel(skew=graph.in_degree_skew(),
                               push=push_factor(spec.incremental and not out_of_core,
                                                pull_threads_used),
                               growth=graph.kept("frontier_growth", lambda: frontier_growth(
                                   graph.in_degree(), graph.out_degree()))  # (kept: a pass)
                               if len(self.kinds) == 2 else 1.0,
                               threads=pull_threads_used, sparse_edges=tuning.SPARSE_EDGES,
                               cpu_mode=options["cpu_mode"],
                               buckets=spec.bucket_width(graph) > 0)
        self.round_trip = 0.0
        self.workers_lost = []  # addresses of the workers that died during the run
        self.placed = None  # where the last iteration ran
        self.frontier = None  # (active vertices, out-degree sum) the last segment left
        self.version = 0
        self.compile_seconds = 0.0
        self.round_trips = 0.0  # seconds of the segments' tasks outside their rows
        self._layout = None  # the GPU's page layout the calibration waits for
        self._memory_key = None  # what the model's memory of earlier runs is kept under
        self._key, self._kept, self._limit = None, None, limit  # (see _settle)
        self.settled = None  # the _Settled answer this run follows
        if len(self.kinds) == 2:
            key = self._key = (key or _calibration_key(cluster, spec, graph, state.sync,
                                                       options)) if fresh else None
            self.settled = self._settled(key, limit)
            if self.settled is not None:  # (the partition above is the placed runs':
                # their engines, kept by it, serve this run too)
                self.kinds = {self.settled.kind: self.kinds[self.settled.kind]}
                self._measure_round_trip()  # (kept: a CPU pull's page tasks size by it)
            else:
                self._calibrate(key)
                self._recall(key)

    def _segment_gpus(self, partition, coloring):
        """The GPUs of this process that GPU segments share when the run is on several
        GPUs alone (one when its pages are fewer than the GPUs, or for a colored run,
        whose passes go color by color over one GPU's pages), as a tuple; else None
        (one GPU worker runs a segment; several share a pull's pages as tasks)."""
        gpus = self.kinds.get("gpu", 0)
        if not self.shared or gpus < 2 or len(self.kinds) > 1 or partition is None:
            return None
        devices = tuple(self.cluster.gpu_devices)
        whole = partition.num_pages >= len(devices) and coloring is None
        return devices if whole else devices[:1]

    # tasks --------------------------------------------------------------------------------
    def _submit(self, function, kind, name, *args):
        key = f"hetgraph-{kind}-{name}-{self.run_id}"
        return self.client.submit(function, self.run_ref, self._state_ref, *args, key=key,
                                  resources={kind.upper(): 1})

    def _run_task(self, function, kind, name, *args, here=(), device=None):
        """The report of ``function(run, state, *args)`` on a worker of ``kind``: called
        in this thread while segments run here (``tuning.INLINE_SECONDS``), with the arguments
        ``here`` and, on a GPU, ``device`` (default the in-process cluster's first); else a
        task, given ``device`` when one is named (after ``here``'s place, left default)."""
        if self.inline_left > 0:
            device = () if kind == "cpu" else \
                (self.cluster.gpu_devices[0] if device is None else device,)
            return function(self.run_ref, self._state_ref, *args, *here, *device)
        named = () if device is None else (None,) * len(here) + (device,)
        for attempt in itertools.count():
            retry = f"-retry{attempt}" if attempt else ""
            future = self._submit(function, kind, name + retry, *args, *named)
            try:
                return future.result()
            except (CancelledError, KilledWorker) as exc:
                self._lost(future.key, exc, attempt)

    def _lost(self, key, exc, attempt):
        """Task ``key`` was lost (``exc``) with a worker, and its inputs maybe with it:
        share the run and its state again (the graph too, where no worker holds it any
        more) for its ``attempt`` + 1-th retry; WorkerLostError, naming the workers that
        left during the run, after ``tuning.LOST_TASK_RETRIES``."""
        self.workers_lost += self.cluster.lost_workers()
        lost = ", ".join(self.workers_lost) or "none known"
        if attempt >= tuning.LOST_TASK_RETRIES:
            raise WorkerLostError(f"task {key} was lost {attempt + 1} times with its "
                                  f"worker (workers that left during the run: {lost}): "
                                  f"{exc}; check the workers' logs (memory, crashes) and "
                                  f"run again") from exc
        log.warning("task %s was lost with a worker (workers that left: %s); sending it "
                    "again", key, lost)
        self._share_run()
        self._share_state()
        self.cluster.lost_workers()  # (the workers that took the run's data are there)

    def _pin_state(self):
        """Move the host state into page-locked memory before a GPU of this process first
        copies it (between tasks: none may hold the arrays). The GPU loads and stores it
        at every segment start and end and every hybrid iteration, several times faster
        from page-locked memory; a run that the cost model keeps on the CPU does not pay
        for the allocation."""
        if self.shared and not self._pinned and self.state.on_host:
            from ..kernels.gpu.device import pinned_copy, pinned_empty

            self.state.pin(pinned_copy, pinned_empty)
            self._pinned = True

    def _state_to_host(self):
        """Bring a state kept on the GPU (see :func:`_state_module`) and the run's aux
        to page-locked host memory, for an iteration on the host or a host count of its
        frontier; they stay there for the rest of the run."""
        if self.state.on_host:
            return
        self.state.to_host()
        self._pinned = True
        self.runspec = dataclasses.replace(self.runspec, aux=to_host(self.runspec.aux))
        self._share_run()

    def _share_run(self):
        """The run's reference for tasks: in process, a handle to the driver's objects;
        else (the RunSpec without its graph, sent with every call: :func:`tasks.pack`;
        the graph, placed on the workers once: :meth:`Cluster.placed`)."""
        if self.shared:
            self.run_ref = tasks.share(self.runspec, self.state)
            return
        # the graph's arrays and the program's derived ones are never written: the
        # same object has the same contents, not compared again (a partition refers
        # to the graph's in-edge offsets); their ids taken once an array is kept
        @functools.cache
        def unchanged():
            return {id(a) for a in self.spec.derived_arrays(self.graph)} | {
                id(a) for a in vars(self.graph).values() if isinstance(a, np.ndarray)}

        def keep(array):
            return self.cluster.kept_array(self.graph, array, id(array) in unchanged())

        packed, arrays = tasks.pack(self.runspec, keep, self.cluster.ended,
                                    self.cluster.plans(self.graph))
        self.run_ref = (packed, self.cluster.placed(self.graph), arrays)

    def _reshared(self):
        """The run's reference for tasks, shared again (see :meth:`_share_run`)."""
        self._share_run()
        return self.run_ref

    def _share_state(self):
        self._state_ref = self.run_ref if self.shared else self.cluster.scatter(self.state)

    def _merge(self, report):
        """Take a task's values and flags into the host state (workers in processes)."""
        self.compile_seconds += report.build_seconds
        if report.out is None:
            return
        written, ranges, values, flags = report.out
        target = tasks.written_values(self.state) if written else self.state.values
        for (a, b), v, f in zip(ranges, values, flags):
            target[a:b] = v
            self.state.flags[a:b] = f

    def _calibrate(self, key=None):
        """Time a task round trip, then a pull on each device kind (building their
        contexts): of pages spread over the graph on the CPU
        (:func:`tasks.calibration_pages`), of all pages on the GPU
        (:func:`tasks.calibrate`). The cost model starts from these. A calibration is
        kept on the cluster under ``key`` (None: not kept, nor looked up) and a later
        run with the same key starts from it without measuring again (a calibration can
        take longer than a small graph's whole run), from a copy of the model it made
        (:meth:`_take_kept`); the run's own measurements then update the model as they
        would have. One kind at a time, so that neither is
        timed while the other keeps the cores busy (the GPU's passes over a small graph
        are bound by the host's launch work). The GPU goes last: the first GPU work
        after the CPU's calibration is slow, and the GPU's own calibration takes that.
        While segments run in this thread (``tuning.INLINE_SECONDS``), so do the
        calibrations, without their task round trips. The CPU's calibration counts the
        state's frontier: the first iteration's.

        A run placed by the cost model ("auto") in process, whose GPU does not keep this
        graph's pages, lays them out in a thread of its own
        (:func:`tasks.lay_out_gpu_pages`) while the run goes on the CPU alone; the GPU is
        calibrated once they are there (:meth:`_calibrate_gpu`, when the model answers
        "calibrate"): done first, the layout made a graph's first auto run slower than
        the CPU alone. Not out of core: there the GPU's pages come with its passes, and
        a first pass on the CPU is one the GPU must read again, while the GPU's first
        pass reads the pages it keeps once for the whole run. Meanwhile the CPU's report
        is kept under ``key`` alone: a run that starts before the GPU is calibrated
        takes it, and calibrates the GPU alone (once its pages are there)."""
        self._share_state()
        self._measure_round_trip()
        kept = None if key is None else self.cluster.calibrations.get(key)
        if kept is not None and kept.complete:
            self._take_kept(kept)
            return
        from ..kernels.gpu.kept import keeps_pages_of

        device = self.cluster.gpu_devices[0] if self.shared else None
        cpu = self._calibrate_cpu() if kept is None else kept.reports[0]
        self._take_calibration([cpu])
        if kept is not None:  # (its frontier: maybe another initial state's, see _take_kept)
            self.frontier = None
        in_memory = not isinstance(self.graph, StoredGraph)
        if self.devices == "auto" and self.shared and in_memory and \
                not keeps_pages_of(self.graph, device):
            self._layout = _LAYOUTS.submit(tasks.lay_out_gpu_pages, self.runspec, device)
            self.model.waiting = _LayoutHandle(self._layout)
            self._layout_key, self._cpu_report = key, cpu
            if key is not None and kept is None:
                self.cluster.keep_calibration(key, _Calibration([cpu]))
        else:
            self._calibrate_gpu(key, cpu)

    def _calibrate_cpu(self):
        """The report of the CPU's calibration (:func:`tasks.calibrate`) of this run."""
        self._state_to_host()
        cpu = self._run_task(tasks.calibrate, "cpu", "calibrate", "cpu",
                             tasks.calibration_pages(len(self.page_edges)), self.version)
        self.compile_seconds += cpu.build_seconds
        return cpu

    def _calibrate_gpu(self, key, cpu, layout=None):
        """Calibrate the GPU, once ``layout`` (its pages laid out while the CPU ran, see
        :meth:`_calibrate`) is done, and keep the calibration under ``key`` with the CPU's
        report ``cpu``. When the GPU cannot hold the run, the CPU takes it alone."""
        try:
            if layout is not None:
                layout.result()
            self._pin_state()
            gpu = self._run_task(tasks.calibrate, "gpu", "calibrate", "gpu", (),
                                 self.version)
        except MemoryError as exc:
            log.warning("the GPU cannot take this run (%s); running on the CPU", exc)
            del self.kinds["gpu"]
            return
        self.compile_seconds += gpu.build_seconds
        if key is not None:
            self.cluster.keep_calibration(key, _Calibration([cpu, gpu]))
        self._take_calibration([gpu])

    def _take_calibration(self, reports):
        """Start the cost model from calibration ``reports``: their rates, and with the
        CPU's the state's frontier, with the GPU's the costs of moving the state."""
        for report in reports:
            self.model.observe(report.kind, "pull", report.edges, report.seconds,
                               calibration=True)
            self.model.observe_rows(report.rows, self.graph.num_arcs,  # (its start)
                                    progress=False)
        of = {report.kind: report for report in reports}
        if "cpu" in of:
            self._take_cpu_report(of["cpu"])
        if "gpu" not in of:
            return
        self.model.subgraph = of["gpu"].subgraph
        vertex_bytes = self.graph.num_vertices * (self.spec.dtype.itemsize + 1)
        copies = 2 * of["gpu"].copy_per_byte * vertex_bytes  # the state there and back
        # until segments measure it: a move between segments run in this thread costs
        # the copies and the CPU's takeover; between tasks, two round trips more
        trips = 0.0 if self.inline_left > 0 else 2 * self.round_trip
        self.model.switch = trips + copies + self._takeover
        self.model.overhead = 2 * self.round_trip + copies
        log.info("calibrated: %s, round trip %.2f ms, hybrid overhead %.2f ms",
                 self.model.per_edge, self.round_trip * 1e3, self.model.overhead * 1e3)

    def _take_cpu_report(self, cpu):
        """What the CPU's calibration report ``cpu`` tells the driver: the state's
        frontier (the first iteration's) and the CPU's takeover of a state changed
        elsewhere."""
        self.frontier, self._takeover = cpu.frontier, cpu.takeover

    def _take_kept(self, kept):
        """Start from a kept :class:`_Calibration`: a copy of the cost model its reports
        made, not made again (the model a run starts from depends on nothing that the
        calibration's key does not say); the first run to take it makes it
        (:meth:`_take_calibration`) and keeps a copy. Not its frontier: the key
        describes the program's parameters in part (an array by a sample of its
        elements, an object by its type), so this run's initial state may differ; the
        loop counts this run's own."""
        if kept.model is None:
            self._take_calibration(kept.reports)
            kept.model = self.model.copy()
        else:
            self.model = kept.model.copy()
            self._take_cpu_report(next(r for r in kept.reports if r.kind == "cpu"))
        self.frontier = None

    def _settled(self, key, limit):
        """The :class:`_Settled` answer that the calibration kept under ``key`` holds for
        a run placed by the model ("auto") of ``limit`` iterations at most, else None."""
        self._kept, settled = _settled_answer(self.cluster, key, limit) \
            if self.devices == "auto" else (None, None)
        return settled

    def _settle(self, rows):
        """After the run (``rows``: its history; None: it failed), what the next call
        under its kept calibration starts from: a run that followed a settled answer
        keeps it while its time agrees (:meth:`_Settled.after`); a run placed by the
        model settles on the device it placed every iteration on, if one, once the
        GPU is calibrated; any other drops it."""
        if self.settled is not None:
            kept = self._kept
        elif self._key is not None and self.devices == "auto":  # (maybe made by this run)
            kept = self.cluster.calibrations.get(self._key)
        else:
            return
        if kept is None or not kept.complete:  # (the GPU not calibrated: no answer)
            return
        settled = kept.settled
        settled.pop(self._limit, None)  # (the newest last)
        answer = self._answer(rows) if rows else None  # (None: failed)
        if answer is not None:
            settled[self._limit] = answer
            while len(settled) > tuning.CALIBRATIONS_KEPT:  # (limits of many calls)
                settled.pop(next(iter(settled)), None)

    def _answer(self, rows):
        """The :class:`_Settled` answer that this run's history ``rows`` leave for the
        next call like it (None: it asks the model)."""
        seconds = sum(map(_SECONDS_OF, rows))  # (thousands of rows: no generator)
        if self.settled is not None:
            return self.settled.after(len(rows), seconds)
        kinds = set(map(_PLACEMENT_OF, rows))
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind not in ("cpu", "gpu"):
            return None
        return _Settled(kind, len(rows), seconds, self.model.deviation(kind))

    def _recall(self, key):
        """Start the cost model from what the earlier runs under calibration ``key``
        left (:meth:`CostModel.remembered`: a hybrid iteration that lost is not tried
        again on the same graph, program and budget while the model's inputs stay),
        kept by the cluster; this run's is kept there when it closes."""
        self._memory_key = key
        if key is not None:
            self.model.recall(self.cluster.placement_memory.get(key))

    def _remember(self):
        """Keep the cost model's memory for later runs (see :meth:`_recall`)."""
        self.cluster.remember_placements(self._memory_key, self.model.remembered())

    def _measure_round_trip(self):
        """The median of three task round trips, measured once a cluster and kept on it
        (measured in every run, they took longer than a small graph's iterations)."""
        if self.cluster.round_trip is None:
            trips = []
            for i in range(3):
                start = time.perf_counter()
                self.client.submit(tasks.ping, key=f"hetgraph-ping-{i}-{self.run_id}",
                                   resources={"CPU": 1}).result()
                trips.append(time.perf_counter() - start)
            self.cluster.round_trip = float(np.median(trips))
        self.round_trip = self.cluster.round_trip

    # placement ------------------------------------------------------------------------------
    def _place(self, f):
        if self._layout is not None and self._layout.done():
            layout, self._layout, self.model.waiting = self._layout, None, None
            self._calibrate_gpu(self._layout_key, self._cpu_report, layout)
        rho = self.runspec.rho
        if len(self.kinds) == 1:
            kind = next(iter(self.kinds))
            return kind, self.model.alpha(f, rho, self.graph.num_arcs)
        if self.devices == "hybrid":
            return "hybrid", self.model.alpha(f, rho, self.graph.num_arcs)
        placed = self.model.placement(f, rho, self.graph.num_arcs, current=self.placed,
                                      start=self.version == 0)
        return self._place(f) if placed[0] == "calibrate" else placed  # (laid out since)

    def _segment_possible(self, kind, f):
        """Whether iterations placed on ``kind`` run as a segment on one worker: always
        on the CPU in process over a graph in memory (its workers share one pool of
        threads, which a segment uses whole) and for notify-pull and push on the CPU,
        else when the run has one worker of that kind (with several, the pull pages
        are spread over them)."""
        if kind == "cpu" and (self._one_pool or self.model.cpu_mode_for(
                f, self.runspec.rho, self.graph.num_arcs) != "pull"):
            return True
        if kind == "gpu" and self.gpu_devices is not None:  # this process's GPUs
            return True
        return self.kinds.get(kind) == 1

    # the loop ---------------------------------------------------------------------------------
    def run(self, max_iterations, history=(), checkpointer=None, bar=None):
        """Iterations after ``history`` (rows of a resumed run) up to ``max_iterations``;
        returns (history, converged). With ``checkpointer``, the state is saved after
        every iteration it says is due, and at the end; ``bar``: a ProgressBar updated
        as iterations finish (as is the scheduler's event log)."""
        history = list(history)
        self.events = _run_events(self.client, self.run_id, self.spec, self.graph,
                                  self.devices, self.kinds, max_iterations,
                                  len(history) + 1, self.runspec.coloring)
        self.bar = bar
        converged, error = False, None
        try:
            converged = self._loop(max_iterations, history, checkpointer)
            self._host_state()
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._settle(None)
            raise
        finally:
            self.events.end(len(history), converged, error)
            if not self.shared:  # the scheduler outlives this process: it must see the end
                self.events.post.flush()
            if bar is not None:
                bar.close(len(history), converged, error)
        self._settle(history)
        if checkpointer is not None and (converged or checkpointer.last != len(history)):
            checkpointer.save(len(history), self.state.values, self.state.flags, history,
                              converged=converged)
        return history, converged

    def _loop(self, max_iterations, history, checkpointer):
        iteration = len(history) + 1
        while iteration <= max_iterations:
            start = time.perf_counter()
            frontier = self.frontier or self._count_frontier()
            self.frontier = None
            if frontier is not None and frontier[0] == 0:
                return True
            f = float("nan") if frontier is None else \
                notify_fraction(frontier[1], self.graph.num_arcs)
            placement, a = self._place(f)
            self.placed = placement
            lead = time.perf_counter() - start  # counted in the first row (overhead)
            rows, done = self._spread_segment(placement, f, iteration, max_iterations,
                                              checkpointer, frontier)
            if not rows and not done and self._segment_possible(placement, f):
                last = max_iterations if checkpointer is None else \
                    min(max_iterations, checkpointer.next_due(iteration))
                rows, status = self._segment(placement, iteration, last, frontier)
                done = status == "converged"
                if status == "moved":  # the segment's model decided: no second check
                    self.placed = None
            if not rows and not done:  # a hybrid iteration, or pull pages spread over
                # several workers of one kind (a segment computes its first iteration)
                kinds = self.kinds if placement == "hybrid" else \
                    {placement: self.kinds[placement]}
                row, done = self._page_iteration(iteration, kinds, placement, f, a, frontier)
                rows = [row]
            if rows:
                rows[0] = with_overhead(rows[0], lead)
            history += rows
            self.events.rows(rows)
            if self.bar is not None:
                self.bar.update(rows)
            iteration += len(rows)
            if done:
                return True
            if checkpointer is not None and checkpointer.due(iteration - 1):
                self._host_state()
                checkpointer.save(iteration - 1, self.state.values, self.state.flags, history)
        return bool(history) and history[-1][COLUMN["activated"]] == 0

    def _spread_segment(self, placement, f, first, max_iterations, checkpointer, frontier):
        """(rows, done) of a segment on worker processes that hold the run's state
        (:mod:`.spread`) from iteration ``first``: a spread one on several (its pull
        iterations spread over them; a colored run's on one: its passes go color by
        color), else on the one; ([], False) for a step elsewhere, with the host state
        brought up to date from the workers first."""
        if self._spread is None:
            return [], False
        if placement != self._spread.kind:
            self._host_state()
            return [], False
        last = max_iterations if checkpointer is None else \
            min(max_iterations, checkpointer.next_due(first))
        spread = self.kinds[placement] > 1 and self.runspec.coloring is None
        result = last == max_iterations and checkpointer is None  # (nothing reads the
        # state after the run's last segment but its result: its values alone)
        rows, status, self.frontier, built = self._spread.segment(
            self.run_ref, self.state, self.version, first, last,
            self.model if spread else None, frontier, final=last == max_iterations,
            result=result, park=self._park if result and self.version == 0 else None)
        self._made_there = False
        self.compile_seconds += built
        self.version += 1
        return rows, status == "converged"

    @property
    def parked(self):
        """The address of the worker that keeps the run's context for the call's
        repeats (see ``park``), else None."""
        return None if self._spread is None else self._spread.parked

    def _host_state(self):
        """Bring the host state up to date where the workers of spread segments hold a
        newer one (a step that reads it comes next)."""
        if self._spread is not None:
            self._spread.collect(self.state, self.version)

    def _count_frontier(self):
        """The frontier of the host state (active vertices, their out-degree sum): None
        in a run on one GPU alone, which places nothing by it (its segment counts it on
        the device, after the copy of the state); counted on the GPU in a run with
        one while segments run in this thread (:func:`tasks.gpu_frontier`: the copy and
        the count there take less than the count on the host), else on the host."""
        if self.kinds == {"gpu": 1} or self.gpu_devices is not None or self._made_there:
            return None  # (the workers count it; made there: where the state is)
        if "gpu" in self.kinds and self._layout is None and (
                self.inline_left > 0 or not self.state.on_host):
            self._pin_state()
            self._share_state()
            return tasks.gpu_frontier(self.run_ref, self._state_ref, self.version,
                                      self.cluster.gpu_devices[0])
        self._state_to_host()
        return tasks.frontier_of(self.state, self.graph)

    def _segment(self, kind, first, last, frontier):
        start = time.perf_counter()  # (a move of the state to this device is the switch's)
        if kind == "cpu":
            self._state_to_host()
        else:
            self._pin_state()
        self._share_state()
        name = f"iterations-from-{first}"
        others = len(self.kinds) > 1
        args = (self.version, first, last, self.model, others) + (
            (self.kinds["cpu"] > 1 and not self._one_pool, frontier) if kind == "cpu"
            else (frontier,))
        task = tasks.cpu_segment if kind == "cpu" else tasks.gpu_segment
        inline = self.inline_left > 0
        report = self._run_task(task, kind, name, *args, here=(self.inline_left,),
                                device=self.gpu_devices if kind == "gpu" else None)
        if inline:
            self.inline_left -= time.perf_counter() - start - report.build_seconds
        self._merge(report)
        self.version += 1
        self.model = report.model  # the driver's, plus what the segment measured
        self.frontier = report.frontier
        rows = report.rows
        if kind == "gpu" and len(self.kinds) > 1:  # one measurement a segment
            self.model.observe_gpu_segment(rows)
        report.wait_stored()  # (the work above overlapped the state's copy)
        if rows:  # the task's round trip is no iteration's (Result.round_trip_seconds)
            extra = time.perf_counter() - start - report.build_seconds - \
                sum(row[SECONDS] for row in rows)
            self.round_trips += max(extra, 0.0)
            if len(self.kinds) > 1:  # what moving to or from this device costs
                self.model.observe_switch(extra)
                if inline and self.inline_left <= 0:  # moves are tasks from now on
                    self.model.switch += 2 * self.round_trip
        return rows, report.status

    def _page_iteration(self, iteration, kinds, placement, f, a, frontier):
        """One iteration of pull pages spread reactively over the workers of ``kinds``."""
        self._state_to_host()
        program, spec, graph, state = self.spec.program, self.spec, self.graph, self.state
        start = time.perf_counter()
        constant = float(program.iteration_constant(graph, state.values)) \
            if spec.uses_constant else 0.0
        previous = state.values.copy() if spec.has_converged else None
        if "gpu" in kinds:
            self._pin_state()
        self._share_state()
        queue = PageQueue(self.page_edges, self.model, self.round_trip, kinds.get("gpu", 0),
                          kinds.get("cpu", 0))
        busy = dict.fromkeys(kinds, 0)
        done = {kind: [0, 0, 0.0] for kind in ("cpu", "gpu")}  # pages, edges, seconds
        activated = read_bytes = 0
        from distributed import as_completed

        pending = as_completed()
        take = {"gpu": queue.take_gpu, "cpu": queue.take_cpu}
        task = {"gpu": tasks.gpu_pages, "cpu": tasks.cpu_pages}

        def fill():
            for kind in sorted(kinds, reverse=True):  # the GPU first
                while busy[kind] < kinds[kind]:
                    pages = take[kind]()
                    if not pages:
                        break
                    submit(kind, pages)
                    busy[kind] += 1

        def submit(kind, pages, attempt=0):
            retry = f"-retry{attempt}" if attempt else ""
            future = self._submit(task[kind], kind,
                                  f"pages-{pages[0]}-{pages[-1]}-it{iteration}{retry}",
                                  self.version, iteration, pages, constant)
            placed[future.key] = (kind, pages, attempt)
            pending.add(future)

        placed = {}
        fill()
        try:
            for future in pending:
                try:
                    report = future.result()
                except (CancelledError, KilledWorker) as exc:
                    kind, pages, attempt = placed[future.key]
                    self._lost(future.key, exc, attempt)
                    submit(kind, pages, attempt + 1)
                    continue
                kind = report.kind
                busy[kind] -= 1
                queue.done(kind, report.pages)
                self._merge(report)
                activated += report.activated
                read_bytes += report.read_bytes
                totals = done[kind]
                totals[0] += len(report.pages)
                totals[1] += report.edges
                totals[2] += report.seconds / kinds[kind]
                # hybrid page tasks only deal pages (CostModel.page_seconds)
                self.model.observe(kind, "pages" if len(kinds) == 2 else "pull",
                                   report.edges, report.seconds)
                fill()
        except BaseException:
            for future in pending.futures:
                future.cancel()
            raise
        state.swap()
        self.version += 1
        finished = spec.has_converged and program.converged(graph, previous, state.values)
        seconds = time.perf_counter() - start
        overhead = seconds - max(done["cpu"][2], done["gpu"][2])
        if len(kinds) == 2:
            self.model.observe_overhead(overhead)
            self.model.observe_iteration("hybrid", seconds)
        row = history_row(
            iteration=iteration, placement=placement if len(kinds) == 2 else next(iter(kinds)),
            mode="pull", f=f, rho=self.runspec.rho, alpha=a, active=frontier[0],
            computed=graph.num_vertices, edges=graph.num_arcs, activated=activated,
            cpu_pages=done["cpu"][0], gpu_pages=done["gpu"][0], cpu_edges=done["cpu"][1],
            gpu_edges=done["gpu"][1], cpu_seconds=done["cpu"][2], gpu_seconds=done["gpu"][2],
            read_bytes=read_bytes, seconds=seconds, overhead=overhead)
        return row, finished

    def close(self):
        """Drop the run's contexts on every worker (device memory included), and a GPU
        page layout it asked for that has not started (one under way is kept for later
        runs of the graph)."""
        if self._layout is not None:
            self._layout.cancel()
        if self._spread is not None:
            self._spread.close()
        if self._memory_key is not None and "gpu" in self.kinds:
            self._remember()
        try:
            if self.shared:
                tasks.unshare(self.run_id)
                tasks.drop_contexts(self.run_id)
            else:  # (not waited for: a later run's tasks drop them first if need be)
                self.cluster.ended.append(self.run_id)
                if self._spread is None or not self._spread.ended_on_workers():
                    self.cluster.run_soon(tasks.drop_contexts, self.run_id)
        except Exception as exc:  # a closing cluster must not hide the run's own error
            log.debug("could not drop the contexts of run %s: %s", self.run_id, exc)
