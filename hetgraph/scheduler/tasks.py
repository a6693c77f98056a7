"""What runs on the workers: page tasks, iteration segments and calibration.

Each worker keeps a context per run and device kind (the program compiled for its
device, and on a GPU the device vertex arrays and resident pages), built on the first
task that needs it and dropped when the run ends. Every task gets the run's
:class:`RunSpec` and the host :class:`VertexState`: in an in-process cluster the task
gets an :class:`InProcess` handle and looks up the driver's own objects (Dask copies
task arguments even in process), so tasks write the host arrays directly; in worker
processes they are copies sent by Dask, and the tasks send back what they computed;
there the RunSpec comes without its graph and its large arrays, which each worker keeps
across runs (:func:`pack`). A run on CPU worker processes alone runs its segments
through :mod:`.spread` instead (pull iterations on several workers as spread segments,
not page tasks), the state kept in the workers' CPU contexts.

- a page task pulls some pages of one iteration (the hybrid placement);
- a segment runs whole iterations on one device while the cost model keeps choosing
  that device (so a CPU-only or GPU-only stretch of a run costs one task round trip per
  ``tuning.SEGMENT_SECONDS``, not one per iteration), with the program's hooks on that device.
  The dispatcher may also call a segment in its own thread (in process, for a run's
  first moments; :mod:`.dispatcher`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import io
import itertools
import pickle
import threading
import time
import weakref

import cloudpickle
import numba
import numpy as np

from .. import tuning
from ..engines.cpu import CpuEngine
from ..engines.store import StoreEngine
from ..io.store import StoredGraph
from ..kernels import cpu
from ..kernels.cpu.kernel import reads_key
from ..kernels.gpu import kept as kept_layouts
from ..program import kept_apart, key_part
from ..result import COLUMN, device_row, with_overhead
from ..threadcount import numba_threads
from . import callsocket, exchange

ACTIVATED = COLUMN["activated"]


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
    coloring: object = None  # a colored run's Coloring (hetgraph.coloring), else None

    def ranges(self, pages):
        """[(first vertex, end vertex)] of ``pages``, in increasing order, adjacent pages
        merged into one range. A batch's pages are mostly adjacent, and every range
        costs a kernel dispatch on the CPU and two synchronous copies on the GPU."""
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
    subgraph: float = 0.0  # a GPU's Engine.subgraph_share
    takeover: float = 0.0
    frontier: tuple | None = None
    stored: object = None
    held: bool = True  # a spread segment's worker holds the state after it (.spread)
    dropped: bool = False  # the run's last segment dropped its contexts (.spread)
    parked: bool = False  # its worker kept its CPU context for the call's repeats
    # (.spread.park)
    speeds: tuple = ()  # a spread GPU segment's owners' pulls, edges a second (.spread)

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


def resolved(task):
    """Let ``task(run, state, ...)`` take an InProcess handle for (run, state), or for
    ``run`` a tuple (:class:`Packed` RunSpec, the graph placed on this worker, the
    arrays it keeps by key)."""
    @functools.wraps(task)
    def wrapper(run, state, *args):
        if isinstance(run, InProcess):
            run, state = _SHARED[run.run_id]
        elif isinstance(run, tuple):
            run = _unpacked(*run)
        return task(run, state, *args)
    return wrapper


@dataclasses.dataclass(frozen=True)
class Packed:
    """A RunSpec pickled for worker processes with every reference to its graph left
    out (the program may hold one too), and its large arrays (the aux, the program's
    arrays derived from the graph) by key: the workers keep the graph and those arrays
    across runs (:meth:`hetgraph.cluster.Cluster.placed` and ``kept_array``), so a
    warm call sends neither edges nor O(V) arrays. Small: sent with each task."""

    run_id: str
    data: bytes
    ended: tuple = ()  # runs that ended on the cluster: their contexts go first


class _Refs:
    """What a packed run refers to instead of holding it: its id, its graph, and the
    arrays the workers keep (``keep(array)``: the future of the copy they keep), by key
    (``arrays``: [(array, key)] in the order met)."""

    def __init__(self, run, keep):
        self.run_id, self.graph, self.keep = run.run_id, run.graph, keep
        self.kept, self.ids, self.arrays = {}, {}, []

    def __call__(self, obj):
        if obj is self.run_id:  # (the packed bytes serve later runs of the same plan)
            return "run_id"
        if obj is self.graph:
            return "graph"
        if kept_apart(obj):
            if id(obj) not in self.ids:  # (an array met twice, compared with the
                # kept one's contents once: the aux is a program's array too)
                future = self.keep(obj)
                self.kept[future.key] = future
                self.ids[id(obj)] = ("array", future.key)
                self.arrays.append((obj, future.key))
            return self.ids[id(obj)]
        return None


class _GraphIn(pickle.Unpickler):
    def __init__(self, file, run_id, graph, arrays):
        super().__init__(file)
        self.run_id, self.graph, self.arrays = run_id, graph, arrays

    def persistent_load(self, pid):
        if pid == "run_id":
            return self.run_id
        if pid == "graph":
            return self.graph
        if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "array" and \
                pid[1] in self.arrays:
            return self.arrays[pid[1]]
        raise pickle.UnpicklingError(f"unknown reference {pid!r} in a packed run")


_PLANS_LOCK = threading.Lock()


def pack(run, keep, ended=(), plans=None):
    """(``run`` for worker processes without its id nor its graph, {key: Dask future}
    of the arrays it refers to): ``keep(array)`` gives the future of an array the
    workers keep (see :class:`Packed`); ``ended``: the ids of runs whose contexts the
    workers drop first, if they have not yet. ``plans``: a list where the packs of
    earlier runs on the graph are kept (:func:`plan_key`; the newest
    ``tuning.PLANS_KEPT`` last): a run of an equal key takes its pack as it is, once
    ``keep`` gave the same futures for its arrays (contents compared as ever)."""
    key = None if plans is None else plan_key(run)
    if key is not None:
        with _PLANS_LOCK:
            found = next((i for i, plan in enumerate(plans) if plan[0] == key), None)
            plan = None if found is None else plans.pop(found)
        kept = None if plan is None else _kept_again(plan[2], keep)
        if kept is not None:
            with _PLANS_LOCK:
                plans.append(plan)
            return Packed(run.run_id, plan[1], tuple(ended)), kept
    refs = _Refs(run, keep)
    try:  # (the standard pickle's writer: several times faster than cloudpickle's)
        data = _written(pickle.Pickler, run, refs)
    except Exception:  # (a lambda, a local class: what only cloudpickle writes)
        data = None
    if data is None or not callsocket.by_reference(data):
        data = _written(cloudpickle.Pickler, run, refs)
    if key is not None:
        with _PLANS_LOCK:
            plans.append((key, data, refs.arrays))
            del plans[:-tuning.PLANS_KEPT]
    return Packed(run.run_id, data, tuple(ended)), refs.kept


def _kept_again(arrays, keep):
    """{key: future} of ``arrays`` ([(array, key)] of a kept pack) kept again by
    ``keep``; None where one is kept under another key now (its contents changed)."""
    kept = {}
    for array, key in arrays:
        future = keep(array)
        if future.key != key:
            return None
        kept[key] = future
    return kept


def plan_key(run):
    """A key of all that a packed ``run`` holds but its id: two runs of equal keys pack
    to the same bytes, the arrays they hold by identity kept again (see :func:`pack`).
    The program's :meth:`.ProgramSpec.initial_key` and the values its functions and
    methods read (:func:`.kernel.reads_key`: a global bound to another value is
    another plan), the other fields by value (small arrays by content, large ones and
    other objects by identity); None where the program has no such key."""
    program, code = run.spec.initial_key(run.graph), reads_key(run.spec)
    if program is None or code is None:
        return None
    parts = [program, code]
    for name in _PLANNED_FIELDS:
        value = getattr(run, name)
        parts.append(tuple(sorted((k, key_part(v, True)) for k, v in value.items()))
                     if isinstance(value, dict) else key_part(value, True))
    return tuple(parts)


# the RunSpec's fields that plan_key takes by value (the program's by its initial key)
_PLANNED_FIELDS = tuple(f.name for f in dataclasses.fields(RunSpec)
                        if f.name not in ("run_id", "spec", "graph"))


def _written(pickler, value, refs):
    """``value`` written by a ``pickler`` (a Pickler class) that writes what ``refs``
    names as its references."""
    out = io.BytesIO()
    writer = pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    writer.persistent_id = refs
    writer.dump(value)
    return out.getvalue()


_UNPACKED: dict = {}  # run_id -> this process's RunSpec of a packed run (till its end)
# run_id -> (packed bytes, the program's initial key, its reads_key as unpacked) of the
# runs whose RunSpec goes to _PLANS at their end
_PLANNED: dict = {}
# graph -> {packed bytes: (the RunSpec of an ended run unpacked from them, without its
# id and graph, the names of its program's attributes that were the graph, the
# program's initial key, its reads_key as unpacked)}, the newest
# tuning.PLANS_KEPT last: what an idle plan holds lets its graph go (callers hold _LOCK)
_PLANS = weakref.WeakKeyDictionary()


def _unpacked(packed, graph, arrays):
    """The RunSpec of ``packed`` over ``graph`` and the kept ``arrays``, the copy this
    worker keeps (the same object every run: its idle engines are found), unpacked once
    a run, or taken from an ended run of the same bytes (:func:`_planned`)."""
    with _LOCK:
        run = _UNPACKED.get(packed.run_id)
        if run is None:
            for ended in packed.ended:  # (their idle engines are this run's to find)
                if ended in _UNPACKED:
                    drop_contexts(ended)
            run = _UNPACKED[packed.run_id] = _planned(packed, graph, arrays)
    return run


def _planned(packed, graph, arrays):
    """The RunSpec of ``packed``: the one an ended run unpacked from the same bytes
    (they name the same kept arrays), its program shared, given this run's id and
    ``graph``; else unpacked. Either goes back to :data:`_PLANS` at the run's end
    (:func:`_plan_ended`) when its program has an initial key
    (:meth:`.ProgramSpec.initial_key`). One run at a time has a plan's RunSpec. A plan
    whose methods read other values now (:func:`.kernel.reads_key`: bytes unpacked
    since rebound its class's methods, their globals with them) is unpacked again."""
    plan = _PLANS.setdefault(graph, collections.OrderedDict()).pop(packed.data, None)
    if plan is not None and reads_key(plan[0].spec) != plan[3]:
        plan = None
    if plan is None:
        run = _GraphIn(io.BytesIO(packed.data), packed.run_id, graph, arrays).load()
        key, reads = run.spec.initial_key(graph), reads_key(run.spec)
    else:
        idle, names, key, reads = plan
        for name in names:  # (its program refers to the run's graph again)
            setattr(idle.spec.program, name, graph)
        run = dataclasses.replace(idle, run_id=packed.run_id, graph=graph)
    if key is not None:
        _PLANNED[packed.run_id] = (packed.data, key, reads)
    return run


def initial_key(run):
    """``run``'s :meth:`.ProgramSpec.initial_key` on its graph: as taken when this worker
    unpacked it (:func:`_planned`), else computed."""
    planned = _PLANNED.get(run.run_id)
    return run.spec.initial_key(run.graph) if planned is None else planned[1]


def unpacked_reads(run):
    """``run``'s :func:`.kernel.reads_key`: as taken when this worker unpacked it
    (:func:`_planned`), else computed."""
    planned = _PLANNED.get(run.run_id)
    return reads_key(run.spec) if planned is None else planned[2]


def _plan_ended(run):
    """Keep ``run``'s RunSpec (its run ended) for the next run of its bytes, unless
    the run changed its program's attributes (their initial key differs): without its
    id and graph, nor the program's references to the graph."""
    data, key, reads = _PLANNED.pop(run.run_id, (None, None, None))
    if key is None or run.spec.initial_key(run.graph) != key:
        return
    program, graph = run.spec.program, run.graph
    names = [name for name, value in vars(program).items() if value is graph]
    for name in names:
        setattr(program, name, None)
    plans = _PLANS.setdefault(graph, collections.OrderedDict())
    plans[data] = (dataclasses.replace(run, run_id="", graph=None), names, key, reads)
    while len(plans) > tuning.PLANS_KEPT:
        plans.popitem(last=False)


# --- contexts --------------------------------------------------------------------------------

_CONTEXTS: dict = {}
_LOCK = threading.RLock()  # (re-entered: a GPU engine's build may drop idle engines)
# graph -> {(kind, program, options): idle engine}: an idle engine holds no reference to
# its graph, so the engines go with it (and are not pickled with it to worker processes)
_IDLE = weakref.WeakKeyDictionary()


def idle_engines(graph) -> dict:
    """The idle engines kept for later runs on ``graph`` (see :func:`_kept_engine`; this
    module's callers hold ``_LOCK``)."""
    return _IDLE.setdefault(graph, {})


class _Context:
    idle = None  # the idle engines of the graph where the engine goes back (None: closed)
    idle_key = None  # its key there
    version = None  # the host state version this device's arrays hold
    pages: tuple = ()  # pages it computed for that version
    pending_finish = False  # a sync hybrid iteration awaits its swap
    held = None  # the version of a spread run's state this CPU engine holds (.spread)
    backup = None  # (version, values, flags) a spread segment began from
    iteration = None
    counted = 0
    build_seconds = 0.0

    def take_build_seconds(self):
        """Seconds spent building this context, reported once."""
        seconds, self.build_seconds = self.build_seconds, 0.0
        return seconds


def drop_contexts(run_id, files=True):
    """Forget every context of ``run_id`` in this process (device memory included); a
    CPU engine over a graph in memory goes back to its graph's idle engines.
    ``files``: see :func:`.hostshare.forget`."""
    exchange.forget(run_id, files)
    with _LOCK:
        run = _UNPACKED.pop(run_id, None)
        if run is not None:
            _plan_ended(run)
        for key in [k for k in _CONTEXTS if k[0] == run_id]:
            release(_CONTEXTS.pop(key))


def release(ctx):
    """Close the engine of context ``ctx``, which no run uses any more, or give it back
    to its graph's idle engines (a ``reusable`` engine over a graph in memory)."""
    with _LOCK:
        if ctx.idle is None or not ctx.engine.reusable:
            ctx.engine.close()
        else:  # (one idle engine a kind: a second, of runs at once, is dropped)
            ctx.engine.unbind()
            ctx.idle.setdefault(ctx.idle_key, ctx.engine)


def keep_cpu_context(run_id):
    """Take the CPU context of run ``run_id`` out of this process's contexts, its engine
    still bound to the run's state, for the run's repeats (:func:`.spread.park`); the
    run's other contexts and its unpacked RunSpec dropped as :func:`drop_contexts` drops
    them, but the RunSpec not kept as a plan (its program stays the parked run's)."""
    with _LOCK:
        ctx = _CONTEXTS.pop((run_id, "cpu", 0), None)
        _UNPACKED.pop(run_id, None)
        _PLANNED.pop(run_id, None)
    drop_contexts(run_id)
    return ctx


def cpu_context_of(run_id):
    """This process's CPU context of run ``run_id`` (None: none)."""
    return _CONTEXTS.get((run_id, "cpu", 0))


def _cpu_context(run, state):
    """This process's CPU context of ``run``, built on first use, its engine bound to
    ``state``."""
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
                kept = ("cpu", cpu.compile_program(run.spec, run.aux.dtype),
                        *options.values(), run.coloring is not None)  # (the graph's)
                ctx.engine = _kept_engine(ctx, run, state, kept, lambda: CpuEngine(
                    run.spec, run.graph, state, run.aux, coloring=run.coloring, **options))
            ctx.build_seconds = time.perf_counter() - start
            _CONTEXTS[key] = ctx
    ctx.engine.state = state
    return ctx


def _kept_engine(ctx, run, state, key, build):
    """An engine for ``run``: the idle one its graph keeps under ``key`` (the engine's
    kind, compiled program and options), bound to the run, else ``build()``; ``ctx``
    notes where it goes back when the run ends (:func:`drop_contexts`: a ``reusable``
    engine only). Called under ``_LOCK``."""
    ctx.idle, ctx.idle_key = idle_engines(run.graph), key
    engine = ctx.idle.pop(key, None)
    if engine is None:
        return build()
    engine.bind(run.spec, run.graph, state, run.aux)
    return engine


def _gpu_engine(run, devices=None):
    """A GpuEngine for ``run`` on the current device, its vertex state zero (loaded from
    the host before use): made on the device, not copied there (host zeros and their
    copy took most of a small graph's GPU context). ``devices``: a tuple of several GPUs
    of this process, which then share the run's pages (a MultiGpuEngine)."""
    import cupy as cp

    if isinstance(devices, tuple) and len(devices) > 1:
        from ..engines.multigpu import MultiGpuEngine

        return MultiGpuEngine(run.spec, run.graph, None, None, run.aux, devices,
                              partition=run.partition, sync=run.sync, **run.gpu)
    from ..engines.gpu import GpuEngine

    n = run.graph.num_vertices
    if isinstance(run.graph, StoredGraph):  # out of core: its pages read from the store
        from ..engines.store_gpu import StoreGpuEngine

        return StoreGpuEngine(run.spec, run.graph, cp.zeros(n, run.spec.dtype),
                              cp.zeros(n, cp.uint8), run.aux, sync=run.sync,
                              budget=run.host_budget, **run.gpu)
    return GpuEngine(run.spec, run.graph, cp.zeros(n, run.spec.dtype), cp.zeros(n, cp.uint8),
                     run.aux, sync=run.sync, partition=run.partition,
                     coloring=run.coloring, **run.gpu)


def _gpu_engine_key(run, device):
    """What a GPU engine kept idle for later runs (:func:`_kept_engine`) is kept under:
    its device(s), the program's code (None when it has no stable key: not kept) and
    the options its kernel and layout were made for (an out-of-core run's is not kept:
    its pages are the run's page cache's)."""
    code = run.spec.code_key()
    if code is None or isinstance(run.graph, StoredGraph):
        return None
    return ("gpu", device, code, run.spec.name, run.aux.dtype.str, run.sync,
            run.coloring is not None, tuple(sorted(run.gpu.items())),
            kept_layouts.partition_key(run.partition))


def _drop_idle_gpu_engines(device):
    """Let go of the idle GPU engines on ``device``, whose kept layout is being dropped
    (:func:`hetgraph.kernels.gpu.kept.on_release`)."""
    with _LOCK:
        for idle in list(_IDLE.values()):
            for key in [k for k in idle if k[0] == "gpu" and device in (
                    k[1] if isinstance(k[1], tuple) else (k[1],))]:
                idle.pop(key).close()


kept_layouts.on_release(_drop_idle_gpu_engines)


def _first_gpu(device):
    """The GPU that a segment's ``device`` (one, or a tuple of several) starts from."""
    return device[0] if isinstance(device, tuple) else device


def _gpu_context(run, device):
    from ..kernels.gpu.device import use_device

    key = (run.run_id, "gpu", device)
    with _LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            ctx = _Context()
            start = time.perf_counter()
            with use_device(_first_gpu(device)):
                kept = _gpu_engine_key(run, device)
                ctx.engine = _gpu_engine(run, device) if kept is None else \
                    _kept_engine(ctx, run, None, kept, lambda: _gpu_engine(run, device))
            ctx.device = device
            ctx.build_seconds = time.perf_counter() - start
            _CONTEXTS[key] = ctx
    return ctx


def lay_out_gpu_pages(run, device):
    """Lay the pages of ``run`` out on GPU ``device``, where they are kept for the run's
    GPU context to find (:func:`hetgraph.kernels.gpu.kept.device_pages`): the part of a
    graph's first GPU run that takes longest, which a run placed by the cost model lets
    its CPU work through (see the dispatcher's ``_calibrate``). Makes no context."""
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

@resolved
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


@resolved
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
    read = engine.read_bytes  # (out of core: its pages' reads)
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
                  read_bytes=engine.read_bytes - read, out=_out(run, state, ranges))


# --- segments ------------------------------------------------------------------------------------

def queue_depth(spec, engine, test):
    """Iterations a segment keeps in flight on ``engine``: its ``queued``, but for a
    program with a ``converged`` test one where the host makes it (``test``, of
    :func:`device_test`, None: it must see each iteration's values before the next is
    launched) and at most two where the device does (the one queued after the
    iteration that converged writes a sync run's other array; a third would write
    that iteration's)."""
    if not spec.has_converged:
        return engine.queued
    return 1 if test is None else min(2, engine.queued)


def device_test(spec, engine, graph):
    """(weights, limit) of the program's convergence test on ``graph`` where ``engine``
    makes it on the device (:meth:`Program.change_test`, an engine that
    ``tests_change``), else None."""
    if not (spec.has_converged and engine.tests_change):
        return None
    test = spec.program.change_test
    return None if test is None else test(graph, engine.values)


@dataclasses.dataclass(slots=True)
class Launched:
    """An iteration in flight in a segment (a segment reuses ``depth`` entries in turn: one
    made every iteration would cost more than the rest of the iteration's bookkeeping)."""

    ticket: object = None  # the engine's, for wait / discard
    iteration: int = 0
    known: tuple | None = None  # (frontier, f, front) it starts from, when known at launch
    alpha: float = 0.0  # the cost model's answer that placed it
    start: float = 0.0  # when its host work began
    read: int = 0  # the engine's read_bytes before it
    moved: tuple = (0, 0)  # the engine's h2d_bytes and d2h_bytes before it
    previous: object = None  # the values before it (a program with a converged test)


class Segment:
    """Iterations ``first``..``last`` of ``engine`` on device ``kind`` (the engine reads
    ``pages`` pages per pass) while ``choose(f, ran)`` returns (``kind``, alpha), each
    but the first measured into ``model`` (None: a run on one device kind, whose
    placement needs no measurement). :meth:`run` returns (rows, status) with status
    "converged", "moved" (the cost model chose another placement), "slice"
    (``slice_seconds`` passed) or "limit".

    An engine with ``queued`` > 1 keeps up to that many iterations in flight (one for a
    program with a ``converged`` test): ``choose`` then sees the frontier of the last
    finished iteration, the rows record each iteration's own, and the iterations
    launched after one that activated nothing are discarded. A move, the slice's end or
    the limit first waits for those in flight.

    An engine with ``bursts`` runs iterations in bursts where it can (:meth:`try_burst`);
    without a model, from frontiers of at most ``max_degree`` out-edges (a calibration's
    limit). Rows go into the model ``tuning.CHOOSE_SECONDS`` at a time
    (:meth:`CostModel.observe_rows`), a burst's by its counts
    (:meth:`CostModel.observe_burst`); a batch's rows are set aside when its time is up
    and folded in, oldest batch first, when the model is next asked or the segment
    ends (:meth:`fold`): the model the segment asks is the same, and its batches fold
    together, not each between two iterations whose host work left the caches cold.

    The steps are :meth:`try_burst`, :meth:`launch_next`, :meth:`finish_oldest` and
    :meth:`end`; their state lives in slots, which the loop in :meth:`run` reads
    every iteration.
    """

    __slots__ = ("engine", "kind", "program", "graph", "arcs", "arcs_or_one", "rho",
                 "uses_constant", "has_converged", "first", "last", "choose", "pages",
                 "model", "slice_seconds", "depth", "launched", "ring", "next_entry",
                 "rows", "clock", "frontier_of", "launch", "wait", "began", "finished",
                 "fold_due", "iteration", "status", "observed", "bursts", "may_burst",
                 "burst_seconds", "burst_degree", "ran", "alpha", "limits_of",
                 "choose_seconds", "lead_seconds", "max_burst", "answer", "batches", "limit")

    def __init__(self, run, engine, kind, first, last, choose, pages, model, slice_seconds,
                 max_degree=cpu.NO_LIMIT):
        spec = run.spec
        self.engine, self.kind, self.program, self.graph = engine, kind, spec.program, \
            run.graph
        self.arcs = run.graph.num_arcs  # (a property: read once)
        self.arcs_or_one = self.arcs or 1  # f = out-degree sum / arcs_or_one
        self.rho, self.uses_constant, self.has_converged = run.rho, spec.uses_constant, \
            spec.has_converged
        self.first, self.last, self.choose, self.pages = first, last, choose, pages
        # a chooser of _chooser says until when its last answer stands (``due``): no
        # call until then, which a run on one device kind does not pay either
        self.answer = choose if hasattr(choose, "due") else None
        self.model, self.slice_seconds = model, slice_seconds
        test = device_test(spec, engine, run.graph)
        self.limit = None if test is None else test[1]  # (None: the host tests)
        if engine.tests_change:
            engine.test_change(None if test is None else test[0])
        self.depth = queue_depth(spec, engine, test)
        self.launched = collections.deque()
        self.ring, self.next_entry = [Launched() for _ in range(self.depth)], 0
        self.rows = []
        # (bound once: read every iteration)
        self.clock, self.frontier_of = time.perf_counter, engine.frontier
        self.launch, self.wait = engine.launch, engine.wait
        self.choose_seconds, self.lead_seconds = tuning.CHOOSE_SECONDS, tuning.LEAD_SECONDS
        self.max_burst = tuning.BURST_ROWS
        self.began = self.finished = self.clock()
        self.batches = []  # (start, end) of the batches of rows set aside for the model
        # when the rows so far next make a batch (never without a model)
        self.fold_due = self.began + self.choose_seconds if model is not None else \
            float("inf")
        self.iteration, self.status = first, None
        # rows[observed:] go into the model, never the first: it carries the segment's
        # start (the state's load, the frontier's ids), a move's cost, which the model's
        # ``switch`` counts; but the run's first CPU iteration goes in when its frontier
        # has more out-edges than the CPU's calibration times: nothing else measures it
        self.observed = 0 if model is not None and kind == "cpu" and first == 1 and \
            self.frontier_of()[1] > tuning.CALIBRATION_EDGES else 1
        # with the model, a burst runs CHOOSE_SECONDS at most (LEAD_SECONDS within the
        # CPU's lead), then the model is asked about the next (``ran``: the iterations
        # its last answer stood for, bursts included); without, while it can
        self.bursts = engine.bursts
        self.burst_seconds, self.burst_degree = slice_seconds, max_degree
        self.may_burst, self.ran, self.alpha = self.bursts and model is None, 0, float("nan")
        self.limits_of = None  # the answer (its alpha) that the burst's limits follow

    def run(self):
        """Run the segment's iterations; returns (rows, status)."""
        launched, depth, last = self.launched, self.depth, self.last
        try_burst, launch_next, finish_oldest = self.try_burst, self.launch_next, \
            self.finish_oldest
        while True:
            if self.status is None and self.iteration <= last:
                if self.may_burst and not launched and try_burst():
                    continue
                if len(launched) < depth:
                    launch_next()
                    if len(launched) < depth:  # (full: wait for the oldest at once)
                        continue
            if not launched:
                return self.end(self.status or "limit")
            finish_oldest()

    def try_burst(self):
        """Run the next iterations as one burst of the engine, within the limits that the
        model's last answer sets; returns whether a burst ran."""
        model, rows, kind = self.model, self.rows, self.kind
        if self.batches:
            self.fold()
        if model is not None and self.alpha != self.limits_of:  # a new answer (or nan)
            self.limits_of = alpha = self.alpha
            lead = model.lead_degree(self.rho, self.arcs) if alpha < 1.0 else 0
            self.burst_seconds, self.burst_degree = (self.lead_seconds, lead) \
                if lead >= self.frontier_of()[1] else (self.choose_seconds, cpu.NO_LIMIT)
        start = self.clock()
        iteration = self.iteration
        burst = self.engine.burst(min(self.last - iteration + 1, self.max_burst),
                                  min(self.burst_seconds,
                                      self.slice_seconds - (start - self.began)),
                                  self.burst_degree)
        self.may_burst = model is None
        if burst is None:
            return False
        now = self.clock()
        seconds = now - max(start, self.finished)
        if model is not None:  # (the rows before it first, then the burst)
            if len(rows) > self.observed:
                model.observe_rows(rows[self.observed:], self.arcs)
            model.observe_burst(burst, iteration, self.rho, seconds, self.arcs)
        rows += burst_rows(burst, iteration, kind, self.rho, self.alpha, self.arcs,
                           self.pages, seconds)
        if model is not None:
            self.observed, self.fold_due = len(rows), now + self.choose_seconds
        count = len(burst[1])
        self.iteration, self.finished, self.ran = iteration + count, now, self.ran + count
        if rows[-1][ACTIVATED] == 0:
            self.status = "converged"
        elif now - self.began > self.slice_seconds:
            self.status = "slice"
        elif model is not None:
            placement, self.alpha = self.choose(self.frontier_of()[1] / self.arcs_or_one,
                                                self.ran)
            self.ran = 0
            self.may_burst = placement == kind
            if not self.may_burst:
                self.status = "moved"
        return True

    def launch_next(self):
        """Ask where the next iteration goes (the first is where the driver placed it)
        and launch it here, or end the segment: converged or moved."""
        start = self.clock()
        frontier = self.frontier_of()
        if frontier[0] == 0:  # (never while some are launched: see finish_oldest)
            self.status = "converged"
            return
        engine, iteration, model, launched = self.engine, self.iteration, self.model, \
            self.launched
        f = frontier[1] / self.arcs_or_one
        if iteration == self.first:
            placement = self.kind
            alpha = float("nan") if model is None else model.alpha(f, self.rho, self.arcs)
        elif self.answer is not None and start < self.answer.due:  # (as choose's stay)
            placement, alpha = self.kind, self.alpha
            self.ran += 1
        else:
            if self.batches:
                self.fold()
            placement, alpha = self.choose(f, self.ran + 1)
            self.ran = 0
        self.alpha = alpha
        if placement != self.kind:
            self.status = "moved"
            return
        if self.bursts:
            self.may_burst = True
        entry = self.ring[self.next_entry]  # (launched `depth` launches ago: finished)
        self.next_entry = (self.next_entry + 1) % self.depth
        entry.known = None if launched else (frontier, f, engine.front)
        constant = self.program.iteration_constant(self.graph, engine.values) \
            if self.uses_constant else 0.0
        entry.previous = engine.values.copy() if self.has_converged and \
            self.limit is None and not engine.keeps_previous(frontier) else None
        entry.read = engine.read_bytes
        entry.moved = engine.h2d_bytes, engine.d2h_bytes
        entry.ticket = self.launch(constant, frontier)
        entry.iteration, entry.alpha, entry.start = iteration, alpha, start
        launched.append(entry)
        self.iteration = iteration + 1
        # the rows so far make a batch every CHOOSE_SECONDS, however rarely the model
        # is asked
        if start > self.fold_due and len(self.rows) > self.observed:
            self.batches.append((self.observed, len(self.rows)))
            self.observed, self.fold_due = len(self.rows), start + self.choose_seconds

    def finish_oldest(self):
        """Wait for the oldest iteration in flight and record its row; on convergence,
        discard those launched after it."""
        entry, engine = self.launched.popleft(), self.engine
        known = entry.known
        if known is None:  # the frontier of the one before, finished
            frontier = self.frontier_of()
            known = frontier, frontier[1] / self.arcs_or_one, engine.front
        (active, _), f, front = known
        generation, transfer = engine.generation_seconds, engine.transfer_seconds  # (wait adds)
        mode, computed, edges, activated, kernel = self.wait(entry.ticket)
        converged = activated == 0 or (self.has_converged and (
            engine.change(entry.ticket) < self.limit if self.limit is not None else
            self.program.converged(
                self.graph, engine.previous if entry.previous is None else entry.previous,
                engine.values)))
        now, start, finished = self.clock(), entry.start, self.finished
        seconds = now - (start if start > finished else finished)
        self.finished = now
        self.rows.append(device_row(
            self.kind, entry.iteration, self.kind, mode, f, self.rho, entry.alpha,
            int(active), computed, edges, activated, self.pages,
            engine.read_bytes - entry.read, seconds,
            seconds - kernel if seconds > kernel else 0.0, kernel, front,
            h2d_bytes=engine.h2d_bytes - entry.moved[0],
            d2h_bytes=engine.d2h_bytes - entry.moved[1],
            generation_seconds=engine.generation_seconds - generation,
            transfer_seconds=engine.transfer_seconds - transfer))
        if converged:
            launched = self.launched
            if launched:
                engine.discard([d.ticket for d in launched])
                launched.clear()
            self.status = "converged"
        elif self.status is None and now - self.began > self.slice_seconds:
            self.status = "slice"

    def fold(self):
        """Fold the batches of rows set aside into the model, oldest first (each as
        :meth:`CostModel.observe_rows` folds a batch)."""
        rows, model, arcs = self.rows, self.model, self.arcs
        for start, end in self.batches:
            model.observe_rows(rows[start:end], arcs)
        self.batches.clear()

    def end(self, status):
        """(rows, status), what the rows measured gone into the model first."""
        if self.limit is not None:
            self.engine.test_change(None)
        if self.model is not None:
            self.fold()
            self.model.observe_rows(self.rows[self.observed:], self.arcs)
        return self.rows, status


def run_iterations(run, engine, kind, first, last, choose, pages, model, slice_seconds,
                   max_degree=cpu.NO_LIMIT):
    """(rows, status) of a :class:`Segment` of these arguments, run."""
    return Segment(run, engine, kind, first, last, choose, pages, model, slice_seconds,
                   max_degree).run()


def burst_rows(burst, first, kind, rho, alpha, arcs, pages, seconds):
    """History rows of a burst (mode, stats, fronts) of :meth:`CpuEngine.burst` whose
    iterations begin at ``first``, on a device ``kind`` that read ``pages`` pages a pass,
    placed by the cost model's answer ``alpha`` (nan: none); ``seconds``: the call's
    own, whose time outside the passes' goes to its first row. Built column by column
    (:func:`device_row` given columns), which is faster than row by row."""
    mode, stats, fronts = burst
    count = len(stats)
    active, degree, computed, edges, activated, kernel, since = stats.T
    kernel, since = kernel * 1e-9, since * 1e-9
    f = degree / arcs if arcs else np.zeros(count)
    same = itertools.repeat
    rows = list(zip(*device_row(
        kind, range(first, first + count), same(kind), same(mode), f.tolist(), same(rho),
        same(alpha), active.tolist(), computed.tolist(), edges.tolist(), activated.tolist(),
        same(pages), same(0), since.tolist(), (since - kernel).tolist(), kernel.tolist(),
        fronts.tolist(), same(0), same(0.0))))
    rows[0] = with_overhead(rows[0], max(seconds - float(since.sum()), 0.0))
    return rows


def _chooser(model, run, kind, others, spread_pull=False):
    """choose(f, ran=1) for a segment: the kind the cost model places the iteration on
    (``kind`` itself when no other device kind is in the run). ``spread_pull``: end a
    CPU segment at a pull iteration, which several CPU workers share by pages. The
    model is asked at most every ``tuning.CHOOSE_SECONDS`` (longer in a GPU segment far
    ahead, see CHOOSE_BACKOFF: ``choose.interval``); its
    answer to stay stands for the iterations in between (``ran`` a call: those since
    the last call, bursts included), which count in the next answer
    (:meth:`CostModel.placement`'s ``weight``), as do the seconds since the segment
    began or the model was last asked (its ``seconds``). A GPU segment first asks after
    ``tuning.CHOOSE_SECONDS``: the driver's answer that placed it, just given, stands
    that long, as any answer does (a short segment then asks nothing)."""
    stay, calls = (kind, float("nan")), 0
    since = time.perf_counter()
    asked = since if kind == "gpu" else -float("inf")
    every, backoff = tuning.CHOOSE_SECONDS, tuning.CHOOSE_BACKOFF

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
        short = now - since < calls * every / backoff
        calls, asked, since = 0, now, now
        choose.interval = every
        if answer[0] == kind:
            stay = answer
            if kind == "gpu" and short and answer[1] > 2.0:  # (alpha: nan, or > 1)
                choose.interval *= min(answer[1] / 2.0, backoff)
        choose.due = asked + choose.interval
        return answer

    choose.interval = every  # until the next question (see CHOOSE_BACKOFF)
    choose.due = asked + every  # (the clock before which the last answer stands)
    if not others and not spread_pull:
        def same(f, ran=1):
            return stay

        same.due = float("inf")
        return same
    return choose


def cpu_iterations(run, ctx, version, first, last, model, others, spread_pull, frontier,
                   seconds=None):
    """(rows, status, frontier after: None when converged) of :func:`cpu_segment`'s
    iterations on the engine of CPU context ``ctx``, which then holds ``version`` + 1."""
    seconds = tuning.SEGMENT_SECONDS if seconds is None else seconds
    if ctx.version != version:
        ctx.engine.reset_frontier(frontier)
    rows, status = run_iterations(run, ctx.engine, "cpu", first, last,
                                  _chooser(model, run, "cpu", others, spread_pull),
                                  len(run.page_vertices), model if others else None,
                                  seconds)
    ctx.version = version + 1
    return rows, status, None if status == "converged" else ctx.engine.frontier()


@resolved
def cpu_segment(run, state, version, first, last, model, others, spread_pull, frontier,
                seconds=None):
    """Iterations on the CPU engine (pull, notify-pull or push per iteration) while the
    cost model keeps the run on the CPU (and, with ``spread_pull``, while it does not
    pull), from the host state's ``frontier`` (active vertices, their out-degree sum),
    for about ``seconds`` at most (default ``tuning.SEGMENT_SECONDS``)."""
    with numba_threads(run.threads):
        ctx = _cpu_context(run, state)
        rows, status, after = cpu_iterations(run, ctx, version, first, last, model, others,
                                             spread_pull, frontier, seconds)
    return Report("cpu", [], rows=rows, status=status,
                  build_seconds=ctx.take_build_seconds(),
                  out=_out(run, state, [(0, run.graph.num_vertices)], written=False),
                  model=model, frontier=after)


@resolved
def gpu_segment(run, state, version, first, last, model, others, frontier,
                seconds=None, device=None):
    """Iterations on a GPU (``device``; default: this worker's; a tuple: several GPUs of
    this process sharing the pages) with the vertex state kept on the device, while the cost model keeps the run on the GPU, for about
    ``seconds`` at most (default ``tuning.SEGMENT_SECONDS``), from the host state's
    ``frontier`` (None: counted on the device once the state is there); the state is
    copied back at the end (in a run sharing the driver's state, without waiting: see
    Report's ``stored``). The setup of the iterations overlaps the state's copy and
    count, the driver's work after the segment the copy back."""
    from ..kernels.gpu.device import use_device

    seconds = tuning.SEGMENT_SECONDS if seconds is None else seconds
    device = _device_of_worker(run) if device is None else device
    ctx = _gpu_context(run, device)
    engine = ctx.engine
    n = run.graph.num_vertices
    with use_device(_first_gpu(device)):
        _bring_up_to_date(run, state, ctx, version)
        engine.reset_frontier(frontier)
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


@resolved
def gpu_frontier(run, state, version, device):
    """(active vertices, their out-degree sum) of the host state at ``version``, counted
    on the GPU ``device`` once its context holds that state, which the next GPU segment
    or page task then need not copy again (the dispatcher counts so, in process, a run
    with a GPU: faster than the host's count, whose copy would then come later)."""
    from ..kernels.gpu.device import use_device

    ctx = _gpu_context(run, device)
    with use_device(device):
        _bring_up_to_date(run, state, ctx, version)
        counted = ctx.engine.count_frontier()
    _holds(run, ctx, version)
    return counted


# --- calibration -------------------------------------------------------------------------------

def _fastest(pull):
    """Seconds of the fastest of ``tuning.CALIBRATION_PULLS`` calls of ``pull`` but the
    first."""
    times = []
    for _ in range(tuning.CALIBRATION_PULLS):
        start = time.perf_counter()
        pull()
        times.append(time.perf_counter() - start)
    return min(times[1:])


def _scratch(state):
    """A copy of the host ``state`` that calibration may change."""
    from .state import VertexState

    return VertexState(state.values.copy(), state.flags.copy(), sync=state.sync)


def _first_iterations(run, engine, kind, pages, max_degree=cpu.NO_LIMIT):
    """History rows of the run's first ``tuning.CALIBRATION_ITERATIONS`` iterations on
    ``engine`` of ``kind`` (over a scratch state), timed as a segment times them, but
    the first, which also makes the engine's scratch arrays; those after the first only
    while their frontier has at most ``max_degree`` out-edges."""
    arcs = run.graph.num_arcs

    def choose(f, ran=1):
        return (kind if f * arcs <= max_degree else "none"), float("nan")

    rows, _ = run_iterations(run, engine, kind, 1, tuning.CALIBRATION_ITERATIONS, choose,
                             pages, None, float("inf"), max_degree)
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
    """The pages of ``num_pages`` that the CPU's pull is calibrated on:
    ``tuning.CALIBRATION_PAGES`` spread evenly, the first and the last among them (a
    page's rate varies along a graph renumbered hubs first, and the largest page alone
    made the CPU look faster than it is)."""
    count = tuning.CALIBRATION_PAGES
    return sorted({round(i * (num_pages - 1) / max(count - 1, 1)) for i in range(count)})


@resolved
def calibrate(run, state, kind, pages, version, device=None):
    """Build this worker's context and time ``tuning.CALIBRATION_PULLS`` pulls (the
    first warms up) without touching the run's state: of ``pages`` on the CPU (see
    :func:`calibration_pages`), of every page on a GPU (``pages`` unused), whose launch
    and wait one page would pay many times over; out of core, of the CPU's sample on
    a GPU too, without the first iterations (every pass would read the store). The
    GPU's passes are paced as a segment paces them (:func:`_paced_passes`), so that
    their host work overlaps; a timed GPU pull is a stretch of such passes
    (``tuning.CALIBRATION_SECONDS``).

    The run's first iterations are also timed as a segment times them
    (:func:`_first_iterations`): on the CPU when they do not pull and while their
    frontier has at most ``tuning.CALIBRATION_EDGES`` out-edges, since a small frontier
    costs the CPU a fixed part that the notify-pull fit cannot know before it measured
    one; on a GPU, since a segment's rows carry the host's work of each iteration. So
    is the CPU's takeover of a state changed elsewhere (its frontier's ids gathered
    from the flags), part of a move's cost.

    Returns a Report with the fastest of the timed pulls (per pass); on the CPU, the
    state's frontier (active vertices, their out-degree sum), which the run's first
    iteration then need not count again; on a GPU (``device``; default: this worker's),
    the per-byte time of a host-to-device copy of the values. A GPU context is left
    holding the host state at ``version``, which the first GPU segment finds in place."""
    if kind == "cpu":
        return _calibrate_cpu(run, state, pages)
    return _calibrate_gpu(run, state, version, device)


def _calibrate_cpu(run, state, pages):
    """:func:`calibrate` on the CPU."""
    limit = tuning.CALIBRATION_EDGES
    with numba_threads(run.threads):
        ctx = _cpu_context(run, _scratch(state))
        engine, rows = ctx.engine, []
        engine.reset_frontier()
        counted = engine.frontier()
        if engine.mode(counted[1]) != "pull" and counted[1] <= limit:  # (a pull: below)
            rows = _first_iterations(run, engine, "cpu", 1, limit)
            engine.state = _scratch(state)  # (the iterations changed the first)
        start = time.perf_counter()
        engine.reset_frontier(counted)
        engine.frontier()
        takeover = time.perf_counter() - start
        seconds = _fastest(lambda: engine.pull_pages(run.ranges(pages), 0.0))
    return Report("cpu", list(pages), run.edges(pages), seconds=seconds, rows=rows,
                  build_seconds=ctx.take_build_seconds(), takeover=takeover,
                  frontier=counted)


def _calibrate_gpu(run, state, version, device):
    """:func:`calibrate` on a GPU."""
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
        pages, edges = list(range(engine.partition.num_pages)), run.graph.num_arcs
        if isinstance(run.graph, StoredGraph):  # out of core: a sample of the pages,
            pages = calibration_pages(len(pages))  # never a pass (each reads the store)
            seconds, rows, edges = _fastest(lambda: engine.pull_sample(pages)), [], \
                run.edges(pages)
        else:
            depth = queue_depth(run.spec, engine, device_test(run.spec, engine, run.graph))
            start = time.perf_counter()
            _paced_passes(engine, depth, depth)  # (also warms up)
            passes = int(min(tuning.CALIBRATION_PASSES, max(
                depth, tuning.CALIBRATION_SECONDS * depth / (time.perf_counter() - start))))
            seconds = _fastest(lambda: _paced_passes(engine, depth, passes)) / passes
            engine.load(state.values, state.flags, [(0, n)])
            engine.reset_frontier(engine.count_frontier())
            rows = _first_iterations(run, engine, "gpu", engine.partition.num_pages)
        engine.load(state.values, state.flags, [(0, n)])
    ctx.pending_finish = False
    _holds(run, ctx, version)
    bytes_ = n * (state.values.itemsize + 1)
    return Report("gpu", pages, edges, seconds=seconds, rows=rows,
                  build_seconds=ctx.take_build_seconds(),
                  copy_per_byte=copy / max(bytes_, 1), subgraph=engine.subgraph_share)


def ping():
    """A task that does nothing: its round trip is the task overhead."""
    return time.perf_counter()


def frontier_of(state, graph):
    """(active vertices, sum of their out-degrees) of the host state."""
    return cpu.frontier_size(state.flags, graph.out_indptr)
