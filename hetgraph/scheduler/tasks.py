"""What runs on the workers: page tasks, iteration segments and calibration.

Each worker keeps a context per run and device kind (the program compiled for its
device, and on a GPU the device vertex arrays and resident pages), built on the first
task that needs it and dropped when the run ends. Every task gets the run's
:class:`RunSpec` and the host :class:`VertexState`: in an in-process cluster the task
gets an :class:`InProcess` handle and looks up the driver's own objects (Dask copies
task arguments even in process), so tasks write the host arrays directly; in worker
processes they are copies sent by Dask, and the tasks send back what they computed.

- a page task pulls some pages of one iteration (the hybrid placement);
- a segment runs whole iterations on one device while the cost model keeps choosing
  that device (so a CPU-only or GPU-only stretch of a run costs one task round trip per
  ``SEGMENT_SECONDS``, not one per iteration), with the program's hooks on that device.
  The dispatcher may also call a segment in its own thread (in process, for a run's
  first moments; :mod:`.dispatcher`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import threading
import time

import numba
import numpy as np

from ..io.store import StoredGraph
from ..kernels import cpu
from ..result import COLUMN, with_overhead
from .cpu_engine import SPARSE_EDGES, CpuEngine
from .outofcore import StoreEngine

SEGMENT_SECONDS = 1.0  # a segment returns to the driver after this long (progress, dashboard)
# a segment asks the cost model where to go, and folds its rows into it, at most
# every CHOOSE_SECONDS: a question and its fold take 7-15 us of host time (placement,
# relax, trend, the rows' sums), a GPU iteration of the grid-1000 BFS 25 us. Asked
# every 0.3 ms, the rows that asked made the 90th percentile of a grid-1000 SSSP run
# all on the GPU 70 us against 57 us for the GPU alone (H100 host), its total 5%
# more. Longer iterations are each placed (RMAT-22 streamed: 10 ms, 6 of them in a
# BFS). A move costs 0.5-1 ms and more (the state's copies, the frontier's ids):
# deciding it this much later loses little.
CHOOSE_SECONDS = 1e-3
# a GPU segment of short iterations (CHOOSE_BACKOFF a CHOOSE_SECONDS or more) whose
# answer to stay had a margin alpha (the GPU's speed over the CPU's) asks again only
# after CHOOSE_SECONDS * alpha / 2, CHOOSE_BACKOFF times at most (its rows are folded
# every CHOOSE_SECONDS still, see run_iterations): the grid-1000 CC's GPU rows took 33
# us alone and 36 us in auto runs (H100 host), whose alpha stayed at 40-80 for 1,500 of
# their 2,000 iterations. Long
# iterations ask every CHOOSE_SECONDS still: one of them can end the GPU's lead
# (RMAT-22 streamed: the last two iterations of a BFS go to the CPU's push)
CHOOSE_BACKOFF = 8
# a CPU burst that the model placed while the CPU leads runs while its frontier stays
# within the model's lead (:meth:`CostModel.lead_degree`), for LEAD_SECONDS at most:
# each burst's start and end (the call, the fold, its rows, the question) took 75 us on
# the 2-core VM and 200-270 us on the H100 host, after a millisecond of pushes had left
# the caches cold; a grid-1000 BFS placed on the CPU by the model ran 27-31 bursts of
# about 1.5 ms there, 6-8 ms more than the CPU alone's one burst of 25-45 ms, and 3
# with bursts of 16 ms. The frontier's limit, not the time, ends a burst where the GPU
# would take over; the time bounds how long the model goes unasked
LEAD_SECONDS = 64e-3
BURST_ROWS = 4096  # iterations of a burst at most (its table of counts and times)
# pulls that calibrate a device: the first warms up, the fastest other counts
# (one timed pull may still carry first-use costs, and the model starts from it)
CALIBRATION_PULLS = 4
# pages the CPU's pull is calibrated on, spread evenly over the graph (see
# calibration_pages)
CALIBRATION_PAGES = 4
# a GPU's timed pull is a stretch of paced passes (see calibrate) of about
# CALIBRATION_SECONDS, at most CALIBRATION_PASSES passes: timed as a stretch of QUEUED
# passes (3) launched then waited for, the grid-1000 BFS's pass was taken for 52-58 us
# on the H100 host (as the history's alpha against the CPU rows' seconds implies; the
# calibration itself was not logged) where a segment's rows took 23-25 us, and auto
# runs stayed on the CPU long after it lost
CALIBRATION_SECONDS = 1e-3
CALIBRATION_PASSES = 16
CALIBRATION_ITERATIONS = 4  # first iterations the CPU's calibration times (see calibrate)
# ... while their frontier has at most this many out-edges (those run from its ids, whose
# fixed part the model cannot know before it measured one): RMAT-22 SSSP's second to
# fourth iterations, passes over the whole graph, took 255 ms of an auto run's 570 ms
# on the H200 host, iterations that the run then gave the GPU
CALIBRATION_EDGES = SPARSE_EDGES


@dataclasses.dataclass
class RunSpec:
    """What a worker needs to build its context for a run (sent once per worker)."""

    run_id: str
    spec: object  # ProgramSpec
    graph: object  # Graph
    aux: np.ndarray
    sync: bool
    shared: bool  # tasks run in the driver's process and share its host arrays
    page_vertices: np.ndarray  # (pages, 2): first and end vertex of each page
    partition: object  # the Partition of the pages, for the GPU (None: its own)
    threads: int | None
    partitions: int | None
    cpu_mode: str
    rho: float
    gpu: dict
    host_budget: int | None = None  # bytes of host memory of an out-of-core run

    def ranges(self, pages):
        """[(first vertex, end vertex)] of ``pages``, in increasing order, adjacent pages
        merged into one range. A batch's pages are mostly adjacent, and every range
        costs a kernel dispatch on the CPU and two synchronous copies on the GPU:
        RMAT-22 with a quarter of its 110 pages resident, a CPU task over the last 27
        pages and a GPU task over the others at the same time took 88 and 28 ms page by
        page, 41 and 4.7 ms merged (no Dask)."""
        merged = []
        for p in sorted(pages):
            a, b = (int(v) for v in self.page_vertices[p])
            if merged and merged[-1][1] == a:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        return merged

    def edges(self, pages):
        """In-edges of ``pages``."""
        indptr = self.graph.in_indptr
        return sum(int(indptr[b] - indptr[a]) for a, b in self.ranges(pages))


@dataclasses.dataclass
class Report:
    """What a task did: device kind, pages (for page tasks), edges, vertices activated,
    seconds on the device, history rows and the cost model with what they measured
    (segments), the values and flags it computed when the state is not shared (vertex
    ranges, values, flags), the seconds per byte of a host-to-device copy
    (GPU calibration), the seconds the CPU engine takes to start from a state changed
    elsewhere (CPU calibration: its frontier's ids gathered from the flags), the
    frontier a segment leaves (active vertices, their out-degree sum; None when it
    converged) and, from a GPU segment sharing the driver's state, the CUDA event of
    the state's copy back to the host, which the driver waits for before it reads that
    state (``stored``; None: copied)."""

    kind: str
    pages: list
    edges: int = 0
    activated: int = 0
    seconds: float = 0.0
    build_seconds: float = 0.0
    rows: list = dataclasses.field(default_factory=list)
    status: str = ""
    read_bytes: int = 0
    out: tuple | None = None
    model: object = None
    copy_per_byte: float = 0.0
    takeover: float = 0.0
    frontier: tuple | None = None
    stored: object = None

    def wait_stored(self):
        """Wait for the state's copy to the host (see ``stored``)."""
        if self.stored is not None:
            self.stored.synchronize()
            self.stored = None


@dataclasses.dataclass(frozen=True)
class InProcess:
    """Stands for the RunSpec and host state of a run whose tasks run in the driver's
    process (see :func:`share`)."""

    run_id: str


_SHARED: dict = {}  # run_id -> (RunSpec, VertexState) of the in-process runs


def share(run, state) -> InProcess:
    """Make ``run`` and ``state`` reachable by this process's tasks; returns the handle
    to pass instead of them."""
    _SHARED[run.run_id] = (run, state)
    return InProcess(run.run_id)


def unshare(run_id):
    _SHARED.pop(run_id, None)


def _resolved(task):
    """Let ``task(run, state, ...)`` take an InProcess handle for (run, state)."""
    @functools.wraps(task)
    def wrapper(run, state, *args):
        if isinstance(run, InProcess):
            run, state = _SHARED[run.run_id]
        return task(run, state, *args)
    return wrapper


# --- contexts --------------------------------------------------------------------------------

_CONTEXTS: dict = {}
_LOCK = threading.Lock()


class _Context:
    version = None  # the host state version this device's arrays hold
    pages: tuple = ()  # pages it computed for that version
    pending_finish = False  # a sync hybrid iteration awaits its swap
    iteration = None
    counted = 0
    build_seconds = 0.0

    def take_build_seconds(self):
        """Seconds spent building this context, reported once."""
        seconds, self.build_seconds = self.build_seconds, 0.0
        return seconds


def drop_contexts(run_id):
    """Forget every context of ``run_id`` in this process (device memory included)."""
    with _LOCK:
        for key in [k for k in _CONTEXTS if k[0] == run_id]:
            _CONTEXTS.pop(key).engine.close()


@contextlib.contextmanager
def numba_threads(threads):
    """Numba's thread count for this thread (it is per thread) while the block runs."""
    if threads is None:
        yield numba.get_num_threads()
        return
    before = numba.get_num_threads()
    numba.set_num_threads(int(threads))
    try:
        yield int(threads)
    finally:
        numba.set_num_threads(before)


def _cpu_context(run, state):
    key = (run.run_id, "cpu", 0)
    with _LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            ctx = _Context()
            start = time.perf_counter()
            options = dict(threads=numba.get_num_threads(), partitions=run.partitions,
                           cpu_mode=run.cpu_mode, rho=run.rho)
            if isinstance(run.graph, StoredGraph):
                ctx.engine = StoreEngine(run.spec, run.graph, state, run.aux,
                                         budget=run.host_budget, **options)
            else:
                ctx.engine = CpuEngine(run.spec, run.graph, state, run.aux, **options)
            ctx.build_seconds = time.perf_counter() - start
            _CONTEXTS[key] = ctx
    ctx.engine.state = state
    return ctx


def _gpu_engine(run):
    """A GpuEngine for ``run`` on the current device, its vertex state zero (loaded from
    the host before use): made on the device, not copied there (host zeros and their
    copy took 1.5-2 ms of each grid-1000 run's 3 ms of GPU context on the H200 host)."""
    import cupy as cp

    from ..engines.gpu import GpuEngine

    n = run.graph.num_vertices
    return GpuEngine(run.spec, run.graph, cp.zeros(n, run.spec.dtype), cp.zeros(n, cp.uint8),
                     run.aux, sync=run.sync, partition=run.partition, **run.gpu)


def _gpu_context(run, device):
    from ..kernels.gpu.device import use_device

    key = (run.run_id, "gpu", device)
    with _LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            ctx = _Context()
            start = time.perf_counter()
            with use_device(device):
                ctx.engine = _gpu_engine(run)
            ctx.device = device
            ctx.build_seconds = time.perf_counter() - start
            _CONTEXTS[key] = ctx
    return ctx


def lay_out_gpu_pages(run, device):
    """Lay the pages of ``run`` out on GPU ``device``, where they are kept for the run's
    GPU context to find (:func:`hetgraph.kernels.gpu.device_pages`): the part of a
    graph's first GPU run that takes longest (RMAT-22 with a quarter of its pages
    resident: 0.55 s of layout, 219 pages, against 0.13 s of GPU iterations), which a
    run placed by the cost model lets its CPU work through (see the dispatcher's
    ``_calibrate``). Makes no context."""
    from ..kernels.gpu.device import use_device

    with use_device(device):
        _gpu_engine(run).close()


def _device_of_worker(run):
    """GPU of this worker: "gpu-<i>" in an in-process cluster, else its only one."""
    from distributed import get_worker

    from ..cluster import gpu_index

    return gpu_index(get_worker().name) if run.shared else 0


def written_values(state):
    """The array an iteration writes: new_values in sync mode, values in async mode."""
    return state.new_values if state.sync else state.values


def _out(run, state, ranges, written=True):
    """(written, ranges, values, flags) to send back: the values of ``ranges`` written
    by this iteration (``written``) or the current ones; None when the state is shared."""
    if run.shared:
        return None
    values = written_values(state) if written else state.values
    return written, ranges, [values[a:b].copy() for a, b in ranges], \
        [state.flags[a:b].copy() for a, b in ranges]


def _complement(ranges, n):
    """The vertex ranges of 0..n not covered by the sorted, disjoint ``ranges``."""
    gaps, at = [], 0
    for a, b in sorted(ranges):
        if a > at:
            gaps.append((at, a))
        at = max(at, b)
    if at < n:
        gaps.append((at, n))
    return gaps


def _stale_ranges(run, ctx, version):
    """The vertex ranges whose host values (at ``version``) this GPU context lacks: all
    of them when it last held another version, else those the other devices computed
    while it took part in a hybrid iteration (none after one of its own segments)."""
    n = run.graph.num_vertices
    if ctx.version != version:
        return [(0, n)]
    return _complement(run.ranges(ctx.pages), n)


# --- page tasks --------------------------------------------------------------------------------

@_resolved
def cpu_pages(run, state, version, iteration, pages, constant):
    """Pull ``pages`` of one iteration on the CPU into the state's written values."""
    with numba_threads(run.threads):
        ctx = _cpu_context(run, state)
        start = time.perf_counter()
        ranges = run.ranges(pages)
        read = ctx.engine.read_bytes
        edges, activated = ctx.engine.pull_pages(ranges, constant)
        seconds = time.perf_counter() - start
    return Report("cpu", list(pages), edges, activated, seconds,
                  build_seconds=ctx.take_build_seconds(),
                  read_bytes=ctx.engine.read_bytes - read, out=_out(run, state, ranges))


@_resolved
def gpu_pages(run, state, version, iteration, pages, constant):
    """Pull ``pages`` of one iteration on this worker's GPU; their values and flags are
    copied into the host state. The first task of an iteration first brings the device
    values up to date: only the ranges other devices computed when this GPU took part in
    the previous iteration, else all of them."""
    from ..kernels.gpu.device import use_device

    device = _device_of_worker(run)
    ctx = _gpu_context(run, device)
    engine = ctx.engine
    start = time.perf_counter()
    with use_device(device):
        if ctx.iteration != iteration:
            if ctx.pending_finish:
                engine.finish()
            engine.load(state.values, None, _stale_ranges(run, ctx, version))
            engine.begin(constant)
            ctx.iteration, ctx.pages, ctx.counted = iteration, (), 0
            ctx.version, ctx.pending_finish = version + 1, True
        engine.run_pages(pages)
        ranges = run.ranges(pages)
        engine.store(written_values(state), state.flags, ranges)
        activated = engine.counts()[0]
    ctx.pages = tuple(ctx.pages) + tuple(pages)
    activated, ctx.counted = activated - ctx.counted, activated
    return Report("gpu", list(pages), run.edges(pages), activated,
                  time.perf_counter() - start, build_seconds=ctx.take_build_seconds(),
                  out=_out(run, state, ranges))


# --- segments ------------------------------------------------------------------------------------

class Immediate:
    """launch / wait over an engine whose iterate() computes the iteration at once (the
    CPU engines): nothing is ever queued."""

    queued = 1

    def __init__(self, engine):
        self.engine = engine

    def launch(self, constant, frontier):
        start = time.perf_counter()
        return (*self.engine.iterate(constant, frontier), time.perf_counter() - start)

    def wait(self, ticket):
        return ticket


def queue_depth(spec, queue):
    """Iterations a segment keeps in flight on ``queue`` (an engine with ``launch``, or
    an Immediate): its ``queued``, but one for a program with a ``converged`` test,
    which must see each iteration's values before the next is launched."""
    return 1 if spec.has_converged else queue.queued


def run_iterations(run, engine, kind, first, last, choose, pages, model, slice_seconds):
    """Iterations ``first``..``last`` of ``engine`` (which reads ``pages`` pages per
    pass) while ``choose(f, ran)`` returns (``kind``, alpha), each but the first measured
    into ``model`` (None: a run on one device kind, whose placement needs no
    measurement; rows are folded in CHOOSE_SECONDS at a time, see
    :meth:`CostModel.observe_rows`, and a CPU burst's by its counts, see
    :meth:`CostModel.observe_burst`); returns (rows, status) with status "converged",
    "moved" (the cost model chose another placement), "slice" (``slice_seconds``
    passed) or "limit". Without a model, a burst starts no iteration from a frontier
    of more than ``choose.max_degree`` out-edges, where given (a calibration's).

    An engine with ``launch`` (the GPU) keeps up to ``engine.queued`` iterations in
    flight (one for a program with a ``converged`` test): ``choose`` then sees the
    frontier of the last finished iteration, the rows record each iteration's own, and
    the iterations launched after one that activated nothing are discarded. A move, the
    slice's end or the limit first waits for those in flight."""
    program, spec, graph = run.spec.program, run.spec, run.graph
    arcs = graph.num_arcs  # (a property: read once)
    arcs_or_one = arcs or 1  # f = out-degree sum / arcs_or_one (notify_fraction inline)
    uses_constant, has_converged = spec.uses_constant, spec.has_converged
    queue = engine if hasattr(engine, "launch") else Immediate(engine)
    depth = queue_depth(spec, queue)
    # (bound once: the loop below runs every iteration, 25 us of a grid-1000 BFS's)
    launch, wait, frontier_of, clock = queue.launch, queue.wait, engine.frontier, \
        time.perf_counter
    rows, launched, rho = [], collections.deque(), run.rho
    # the row's columns of this device kind (an iteration can take 25 us: grid-1000 BFS)
    pages_at, edges_at, seconds_at = (COLUMN[f"{kind}_{name}"]
                                      for name in ("pages", "edges", "seconds"))
    began = finished = folded = clock()
    # rows[observed:] go into the model, never the first: it carries the segment's
    # start (the state's load, the frontier's ids), a move's cost, which ``switch``
    # counts (grid-1000 BFS on the H100: 140-430 us, against 25-40 us for the next);
    # folded, it raised the new side's rate by 15-25% and drew the run back. But the
    # run's first CPU iteration goes in when its frontier has more out-edges than the
    # CPU's calibration times (CALIBRATION_EDGES): no move precedes it, and a push
    # from it was otherwise predicted by its prior alone (RMAT-22 BFS from the hub, a
    # quarter of the pages on the H200's GPU: the fourth iteration's push, 335k
    # frontier edges, at 3.9 ms against the GPU's 6.5, where it took 18 ms; SSSP 5.6
    # predicted, 34 taken; the first push, 98k edges in 2.5-3.9 ms, predicts 8 and 23)
    iteration, status = first, None
    observed = 0 if model is not None and kind == "cpu" and first == 1 and \
        frontier_of()[1] > CALIBRATION_EDGES else 1

    def end(status):  # what the rows measured goes into the model first
        if model is not None:
            model.observe_rows(rows[observed:], arcs)
        return rows, status

    # A CPU engine may run iterations in bursts (:meth:`CpuEngine.burst`). On one device
    # kind they run while they can; with the cost model, for CHOOSE_SECONDS at most
    # (while the CPU leads: within its lead, see LEAD_SECONDS), after which it is asked
    # about the next (``choose``'s count of the iterations its answer stood for
    # includes the burst's: ``ran``), and bursts go on while it says stay (a single
    # iteration between them cost 150 us of Python on the H100 host, where a grid-1000
    # BFS's bursts ran 50-100 iterations a millisecond)
    bursts = getattr(engine, "bursts", False)
    burst_seconds, burst_degree = slice_seconds, getattr(choose, "max_degree", cpu.NO_LIMIT)
    may_burst, ran, alpha = bursts and model is None, 0, float("nan")
    limits_of = None  # the answer (its alpha) that the burst's limits follow
    while True:
        if may_burst and status is None and iteration <= last and not launched:
            if model is not None and alpha != limits_of:  # a new answer (or nan again)
                limits_of = alpha
                lead = model.lead_degree(rho, arcs) if alpha < 1.0 else 0
                burst_seconds, burst_degree = (LEAD_SECONDS, lead) \
                    if lead >= frontier_of()[1] else (CHOOSE_SECONDS, cpu.NO_LIMIT)
            start = clock()
            burst = engine.burst(min(last - iteration + 1, BURST_ROWS),
                                 min(burst_seconds, slice_seconds - (start - began)),
                                 burst_degree)
            may_burst = model is None
            if burst is not None:
                now = clock()
                seconds = now - max(start, finished)
                if model is not None:  # (the rows before it first, then the burst)
                    if len(rows) > observed:
                        model.observe_rows(rows[observed:], arcs)
                    model.observe_burst(burst, iteration, rho, seconds, arcs)
                rows += burst_rows(burst, iteration, kind, rho, alpha, arcs, pages, seconds)
                if model is not None:
                    observed, folded = len(rows), now
                iteration, finished = iteration + len(burst[1]), now
                ran += len(burst[1])
                if rows[-1][COLUMN["activated"]] == 0:
                    return end("converged")
                if now - began > slice_seconds:
                    status = "slice"
                elif model is not None:
                    placement, alpha = choose(frontier_of()[1] / arcs_or_one, ran)
                    ran = 0
                    may_burst = placement == kind
                    if not may_burst:
                        status = "moved"
                continue
        if status is None and iteration <= last and len(launched) < depth:
            start = clock()
            frontier = frontier_of()
            if frontier[0] == 0:  # (never while some are launched: see below)
                return end("converged")
            f, front = frontier[1] / arcs_or_one, engine.front
            if iteration == first:  # the driver has just placed it here
                placement = kind
                alpha = float("nan") if model is None else model.alpha(f, run.rho, arcs)
            else:
                placement, alpha = choose(f, ran + 1)
                ran = 0
            if placement != kind:
                status = "moved"
                continue
            may_burst = bursts
            constant = program.iteration_constant(graph, engine.values) if uses_constant \
                else 0.0
            previous = engine.values.copy() if has_converged else None
            read = engine.read_bytes
            # (ticket, iteration, the frontier it starts from, its f and its lowest
            # priority if known now, alpha, start of its host work, read_bytes before
            # it, values before it): a tuple, not a class, made and read every iteration
            launched.append((launch(constant, frontier), iteration,
                             None if launched else (frontier, f, front), alpha, start,
                             read, previous))
            iteration += 1
            # once it is queued, the rows so far go into the model (every
            # CHOOSE_SECONDS, however rarely the model is asked): on the GPU, the host's
            # work then overlaps a full queue (a fold of 170 rows took 110 us on the
            # H100 host; done after a wait, with two 30 us iterations left in the
            # queue, the folds stalled the device: grid-1000 CC, auto 5% slower than
            # the GPU alone). Folded as rarely as asked (8 ms, 300 rows), a fold
            # outlasted the queue's three 27 us passes: grid-1000 CC on the H200 host,
            # auto/GPU alone 0.961-0.989 by paired medians, 0.988-0.990 folded every ms
            if model is not None and len(rows) > observed and \
                    start - folded > CHOOSE_SECONDS:
                model.observe_rows(rows[observed:], arcs)
                observed, folded = len(rows), start
            continue
        if not launched:
            return end(status or "limit")
        ticket, number, known, its_alpha, its_start, read, previous = launched.popleft()
        if known is None:  # the frontier of the one before, finished
            known = frontier_of()
            known = known, known[1] / arcs_or_one, engine.front
        (active, _), its_f, its_front = known
        mode, computed, edges, activated, kernel = wait(ticket)
        converged = activated == 0 or (
            has_converged and program.converged(graph, previous, engine.values))
        now = clock()
        seconds = now - (its_start if its_start > finished else finished)
        finished = now
        # (HISTORY_COLUMNS' order)
        row = [number, kind, mode, its_f, rho, its_alpha, int(active), computed, edges,
               activated, 0, 0, 0, 0, 0.0, 0.0, engine.read_bytes - read, seconds,
               seconds - kernel if seconds > kernel else 0.0, its_front]
        row[pages_at], row[edges_at], row[seconds_at] = pages, edges, kernel
        rows.append(tuple(row))
        if converged:
            if launched:
                engine.discard([d[0] for d in launched])
            return end("converged")
        if status is None and now - began > slice_seconds:
            status = "slice"


def burst_rows(burst, first, kind, rho, alpha, arcs, pages, seconds):
    """History rows of a burst (mode, stats, fronts) of :meth:`CpuEngine.burst` whose
    iterations begin at ``first``, on a device ``kind`` that read ``pages`` pages a pass,
    placed by the cost model's answer ``alpha`` (nan: none); ``seconds``: the call's
    own, whose time outside the passes' goes to its first row. Built column by column
    (a grid-1000 BFS's 1,997 rows, 2-core VM, collector off: 0.9 ms, against 1.1-1.7
    ms for a loop over rows)."""
    mode, stats, fronts = burst
    count = len(stats)
    active, degree, computed, edges, activated, kernel, since = stats.T
    kernel, since = kernel * 1e-9, since * 1e-9
    f = degree / arcs if arcs else np.zeros(count)
    edge_list, same = edges.tolist(), itertools.repeat
    # (HISTORY_COLUMNS' order; the device kind's pages, edges and seconds set below)
    columns = [range(first, first + count), same(kind), same(mode), f.tolist(), same(rho),
               same(alpha), active.tolist(), computed.tolist(), edge_list,
               activated.tolist(), same(0), same(0), same(0), same(0), same(0.0), same(0.0),
               same(0), since.tolist(), (since - kernel).tolist(), fronts.tolist()]
    columns[COLUMN[f"{kind}_pages"]] = same(pages)
    columns[COLUMN[f"{kind}_edges"]] = edge_list
    columns[COLUMN[f"{kind}_seconds"]] = kernel.tolist()
    rows = list(zip(*columns))
    rows[0] = with_overhead(rows[0], max(seconds - float(since.sum()), 0.0))
    return rows


def _chooser(model, run, kind, others, spread_pull=False):
    """choose(f, ran=1) for a segment: the kind the cost model places the iteration on
    (``kind`` itself when no other device kind is in the run). ``spread_pull``: end a
    CPU segment at a pull iteration, which several CPU workers share by pages. The
    model is asked at most every CHOOSE_SECONDS (longer in a GPU segment far ahead, see
    CHOOSE_BACKOFF: ``choose.interval``; rows are folded every CHOOSE_SECONDS); its
    answer to stay stands for the iterations in between (``ran`` a call: those since
    the last call, bursts included), which count in the next answer
    (:meth:`CostModel.placement`'s ``weight``), as do the seconds since the segment
    began or the model was last asked (its ``seconds``)."""
    stay, calls, asked = (kind, float("nan")), 0, -float("inf")
    since = time.perf_counter()

    def ask(f, weight, seconds):
        if spread_pull and model.cpu_mode_for(f, run.rho, run.graph.num_arcs) == "pull":
            return "pages", float("nan")
        if not others:  # one device kind: the model has no two rates to compare
            return kind, float("nan")
        return model.placement(f, run.rho, run.graph.num_arcs, current=kind, weight=weight,
                               seconds=seconds)

    def choose(f, ran=1):
        nonlocal stay, calls, asked, since
        calls += ran
        now = time.perf_counter()
        if now - asked < choose.interval:
            return stay
        answer = ask(f, calls, now - since)
        short = now - since < calls * CHOOSE_SECONDS / CHOOSE_BACKOFF
        calls, asked, since = 0, now, now
        choose.interval = CHOOSE_SECONDS
        if answer[0] == kind:
            stay = answer
            if kind == "gpu" and short and answer[1] > 2.0:  # (alpha: nan, or > 1)
                choose.interval *= min(answer[1] / 2.0, CHOOSE_BACKOFF)
        return answer

    choose.interval = CHOOSE_SECONDS  # until the next question (see CHOOSE_BACKOFF)
    if not others and not spread_pull:
        return lambda f, ran=1: stay
    return choose


@_resolved
def cpu_segment(run, state, version, first, last, model, others, spread_pull, frontier,
                seconds=SEGMENT_SECONDS):
    """Iterations on the CPU engine (pull, notify-pull or push per iteration) while the
    cost model keeps the run on the CPU (and, with ``spread_pull``, while it does not
    pull), from the host state's ``frontier`` (active vertices, their out-degree sum),
    for about ``seconds`` at most."""
    with numba_threads(run.threads):
        ctx = _cpu_context(run, state)
        if ctx.version != version:
            ctx.engine.reset_frontier(frontier)
        rows, status = run_iterations(run, ctx.engine, "cpu", first, last,
                                      _chooser(model, run, "cpu", others, spread_pull),
                                      len(run.page_vertices), model if others else None,
                                      seconds)
        ctx.version = version + 1
        after = None if status == "converged" else ctx.engine.frontier()
    return Report("cpu", [], rows=rows, status=status,
                  build_seconds=ctx.take_build_seconds(),
                  out=_out(run, state, [(0, run.graph.num_vertices)], written=False),
                  model=model, frontier=after)


@_resolved
def gpu_segment(run, state, version, first, last, model, others, frontier,
                seconds=SEGMENT_SECONDS, device=None):
    """Iterations on a GPU (``device``; default: this worker's) with the vertex state
    kept on the device, while the cost model keeps the run on the GPU, for about
    ``seconds`` at most, from the host state's ``frontier`` (None: counted on the
    device once the state is there); the state is copied back at the end (in a run
    sharing the driver's state, without waiting: see Report's ``stored``). The setup
    of the iterations overlaps the state's copy and count, the driver's work after
    the segment (50-70 us on the H200 host) the copy back: grid-1000 PageRank, 20
    iterations on the GPU (1.1 ms), the run's excess over the bare loop went from
    7.8 to 6.5% (paired medians of 60 runs, same host)."""
    from ..kernels.gpu.device import use_device

    device = _device_of_worker(run) if device is None else device
    ctx = _gpu_context(run, device)
    engine = ctx.engine
    n = run.graph.num_vertices
    with use_device(device):
        _bring_up_to_date(run, state, ctx, version)
        if frontier is None:
            engine.recount_frontier()
        else:
            engine.reset_frontier(*frontier)
        rows, status = run_iterations(run, engine, "gpu", first, last,
                                      _chooser(model, run, "gpu", others),
                                      engine.partition.num_pages, model if others else None,
                                      seconds)
        stored = engine.store(state.values, state.flags, [(0, n)], written=False,
                              wait=not run.shared)
    _holds(run, ctx, version + 1)
    return Report("gpu", [], rows=rows, status=status,
                  build_seconds=ctx.take_build_seconds(),
                  out=_out(run, state, [(0, n)], written=False), model=model,
                  frontier=None if status == "converged" else engine.frontier(),
                  stored=stored)


def _holds(run, ctx, version):
    """Mark the GPU context ``ctx`` as holding every page's values at ``version``."""
    ctx.version, ctx.iteration = version, None
    ctx.pages = tuple(range(len(run.page_vertices)))


def _bring_up_to_date(run, state, ctx, version):
    """Copy to the GPU context ``ctx`` the host values and flags (at ``version``) that
    it lacks, ending first a hybrid iteration that awaits its swap."""
    if ctx.pending_finish:
        ctx.engine.finish()
        ctx.pending_finish = False
    ctx.engine.load(state.values, state.flags, _stale_ranges(run, ctx, version))


@_resolved
def gpu_frontier(run, state, version, device):
    """(active vertices, their out-degree sum) of the host state at ``version``, counted
    on the GPU ``device`` once its context holds that state, which the next GPU segment
    or page task then need not copy again. The dispatcher counts so, in process, a run
    with a GPU: the host's count of RMAT-22's 4M flags took 1 ms on the H100 host, the
    copy and the count on the device 0.1-0.3 ms."""
    from ..kernels.gpu.device import use_device

    ctx = _gpu_context(run, device)
    with use_device(device):
        _bring_up_to_date(run, state, ctx, version)
        counted = ctx.engine.count_frontier()
    _holds(run, ctx, version)
    return counted


# --- calibration -------------------------------------------------------------------------------

def _fastest(pull):
    """Seconds of the fastest of CALIBRATION_PULLS calls of ``pull`` but the first."""
    times = []
    for _ in range(CALIBRATION_PULLS):
        start = time.perf_counter()
        pull()
        times.append(time.perf_counter() - start)
    return min(times[1:])


def _scratch(state):
    """A copy of the host ``state`` that calibration may change."""
    from .state import VertexState

    return VertexState(state.values.copy(), state.flags.copy(), sync=state.sync)


def _first_iterations(run, engine, kind, pages, max_degree=cpu.NO_LIMIT):
    """History rows of the run's first CALIBRATION_ITERATIONS iterations on ``engine``
    of ``kind`` (over a scratch state), timed as a segment times them, but the first,
    which also makes the engine's scratch arrays (a push's: once over 1 ms for the
    grid-1000 BFS, which a time limit on these iterations then cut to that one); those
    after the first only while their frontier has at most ``max_degree`` out-edges."""
    arcs = run.graph.num_arcs

    def choose(f, ran=1):
        return (kind if f * arcs <= max_degree else "none"), float("nan")

    choose.max_degree = max_degree  # (a burst's limit: see run_iterations)
    rows, _ = run_iterations(run, engine, kind, 1, CALIBRATION_ITERATIONS, choose, pages,
                             None, float("inf"))
    return rows[1:]


def _paced_passes(engine, depth, passes):
    """``passes`` pull passes of every page, at most ``depth`` in flight (each launched
    once the oldest is waited for): the pace of a GPU segment that keeps ``depth``
    iterations in flight."""
    launched = collections.deque()
    for _ in range(passes):
        if len(launched) == depth:
            engine.wait(launched.popleft())
        launched.append(engine.launch(0.0, chained=False))
    for ticket in launched:
        engine.wait(ticket)


def calibration_pages(num_pages):
    """The pages of ``num_pages`` that the CPU's pull is calibrated on: CALIBRATION_PAGES
    spread evenly, the first and the last among them. A page's rate varies along a
    graph renumbered hubs first: RMAT-24 (108 pages) on the H200 host's 16 cores, 0.14-
    0.42 ns an edge over seven pages timed, 4.1-4.7 ns over the last two, 0.82 ns over a
    whole pull, and over these four 0.82 ns (0.60-0.80 in three runs' calibrations).
    The largest page, the one timed before (0.35 ns), made the CPU 2.3 times faster than
    it is, and a split with the GPU look faster than the GPU alone with a quarter of the
    pages resident: the runs' one hybrid iteration took 220-330 ms, the GPU's 47-60 ms
    (since, the one SSSP tried in the final RMAT-24 benchmark took 62 ms)."""
    return sorted({round(i * (num_pages - 1) / max(CALIBRATION_PAGES - 1, 1))
                   for i in range(CALIBRATION_PAGES)})


@_resolved
def calibrate(run, state, kind, pages, version, device=None):
    """Build this worker's context and time CALIBRATION_PULLS pulls (the first warms
    up), without touching the run's state: of ``pages`` on the CPU (see
    :func:`calibration_pages`), of every page on a GPU (``pages`` unused), which pulls
    them all in a fraction of the CPU's time for one page. Timed on one
    page, a GPU pays its launch and wait many times over and, with pages streamed, copies
    that page without overlap: RMAT-22 with a quarter of its pages resident measured
    4-20 times its rate in a whole pass, and runs that the GPU would have done in 15 ms
    per iteration started on the CPU at 77 ms. The GPU's passes are paced as a segment
    paces them (:func:`_paced_passes`), so that their host work overlaps: timed one by
    one, a pass of the grid-1000 BFS took 1.5 times its pace in a segment (45 against
    29 us on the H100), and runs stayed on the CPU for hundreds of iterations the GPU
    would have won; a timed pull of the GPU is a stretch of such passes (see
    CALIBRATION_SECONDS), timed as one.
    The run's first iterations are also timed as a segment times them
    (:func:`_first_iterations`): on the CPU when they do not pull and while their
    frontier has at most CALIBRATION_EDGES out-edges, since a small
    frontier costs the CPU a fixed part (10-25 us a row on the grid-1000 BFS) that the
    notify-pull fit cannot know before it has measured one; on a GPU, since a segment's
    rows carry the host's work of each iteration as well (the grid-1000 BFS's paced
    passes took 20-25 us on the H100 host, its rows 37-50 us: a run that started on the
    CPU, never having measured the GPU, left for it when the CPU's iterations reached
    35 us, and came back 243 iterations later). And so is the CPU's takeover of a
    state changed elsewhere, part of a move's cost (a sparse frontier's ids gathered
    from the flags: 120-250 us of the 0.7-1 ms a move of the grid-1000 BFS took on the
    H100 host).
    Returns a Report with the fastest of the timed pulls (per pass); on the CPU, the
    state's frontier (active vertices, their out-degree sum), which the run's first
    iteration then needs not count again (the GPU's count of it took 0.14-0.5 ms of
    the grid-1000 BFS's first row on the H100); on a GPU (``device``; default: this
    worker's), the per-byte time of a host-to-device copy of the values. A GPU context
    is left holding the host state at ``version``, which the first GPU segment finds
    in place (copied at the run's first count instead, after the CPU's
    calibration, copy and count took 0.6-0.7 ms against 0.45 ms in a GPU-alone run:
    RMAT-22 on the H100)."""
    if kind == "cpu":
        with numba_threads(run.threads):
            ctx = _cpu_context(run, _scratch(state))
            engine, rows = ctx.engine, []
            engine.reset_frontier()
            counted = engine.frontier()
            # (a pull is timed below)
            if engine.mode(counted[1]) != "pull" and counted[1] <= CALIBRATION_EDGES:
                rows = _first_iterations(run, engine, "cpu", 1, CALIBRATION_EDGES)
                engine.state = _scratch(state)  # (the iterations changed the first)
            start = time.perf_counter()
            engine.reset_frontier(counted)
            engine.frontier()
            takeover = time.perf_counter() - start
            seconds = _fastest(lambda: engine.pull_pages(run.ranges(pages), 0.0))
        return Report("cpu", list(pages), run.edges(pages), seconds=seconds, rows=rows,
                      build_seconds=ctx.take_build_seconds(), takeover=takeover,
                      frontier=counted)
    from ..kernels.gpu.device import use_device

    device = _device_of_worker(run) if device is None else device
    ctx = _gpu_context(run, device)
    engine = ctx.engine
    n = run.graph.num_vertices
    with use_device(device):
        start = time.perf_counter()
        engine.load(state.values, None, [(0, n)])
        engine.counts()  # waits for the copy
        copy = time.perf_counter() - start
        depth = queue_depth(run.spec, engine)
        start = time.perf_counter()
        _paced_passes(engine, depth, depth)  # (also warms up)
        passes = int(min(CALIBRATION_PASSES, max(
            depth, CALIBRATION_SECONDS * depth / (time.perf_counter() - start))))
        seconds = _fastest(lambda: _paced_passes(engine, depth, passes)) / passes
        engine.load(state.values, state.flags, [(0, n)])
        engine.reset_frontier(*engine.count_frontier())
        rows = _first_iterations(run, engine, "gpu", engine.partition.num_pages)
        engine.load(state.values, state.flags, [(0, n)])
    ctx.pending_finish = False
    _holds(run, ctx, version)
    bytes_ = n * (state.values.itemsize + 1)
    return Report("gpu", list(range(engine.partition.num_pages)), run.graph.num_arcs,
                  seconds=seconds, rows=rows, build_seconds=ctx.take_build_seconds(),
                  copy_per_byte=copy / max(bytes_, 1))


def ping():
    """A task that does nothing: its round trip is the task overhead."""
    return time.perf_counter()


def frontier_of(state, graph):
    """(active vertices, sum of their out-degrees) of the host state."""
    return cpu.frontier_size(state.flags, graph.out_indptr)
