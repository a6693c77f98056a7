"""The GPU engine (:class:`GpuEngine`): a program running on one GPU, one pull pass of
the shard kernel an iteration over pages that stay on the device or are streamed in.

Pages live in device memory when they fit the budget; the others stay in pinned host
memory and are copied in every iteration over several CUDA streams, so that the copy of
one page overlaps the kernel of another. A segment's iteration of an incremental
program with few active out-edges copies only those into the streamed pages and pushes
them instead (Subway's active subgraph, :mod:`hetgraph.engines.subway`). The pieces it
drives are in :mod:`hetgraph.kernels.gpu` (device, layout, kept layouts, source, launch,
reduce).
cupy is imported when an engine is made: without a GPU this module imports.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .. import tuning
from ..errors import GraphError
from ..partition import edge_bytes
from ..kernels.gpu.device import (GpuMemoryError, on_current_device, pinned_empty,
                                  require_gpu, wait_for_writes)
from ..kernels.gpu.kept import (device_pages, first_pages, is_kept, kept_bytes,
                               partition_key, release)
from ..kernels.gpu.launch import PackedLaunch
from ..kernels.gpu.layout import EDGE_ORDERS, DevicePages, page_bytes_for
from ..kernels.gpu.reduce import WeightedChange
from ..kernels.gpu.reduce import count_frontier_kernel as _count_frontier_kernel
from ..kernels.gpu.source import compile_kernel, front_of_key
from ..kernels.gpu.spans import IterationTimes
from ..kernels.gpu.tocab import BlockedPass, KernelChoice, compile_tocab, l2_bytes, tocab_ranges
from ..kernels.transpile import c_type
from .base import Engine
from .subway import SUBGRAPH_MODES, active_subgraphs
from .colored import color_shards
from .gpu_colored import ColoredLaunches

log = logging.getLogger(__name__)


def _check_options(memory_budget, page_bytes, streams, threads_per_block, edge_order,
                   source_ranges, subgraph, tocab):
    if not (tocab is None or isinstance(tocab, bool) or (
            isinstance(tocab, (int, float, np.integer, np.floating)) and 0 < tocab < 1e3)):
        raise GraphError(f"tocab={tocab!r} is not valid; use None, True, False or the share "
                         f"of the L2 cache one source range's values take (a number > 0)")
    if subgraph not in SUBGRAPH_MODES:
        raise GraphError(f"subgraph={subgraph!r} is not valid; use True, False or 'async'")
    if edge_order not in EDGE_ORDERS:
        raise GraphError(f"edge_order={edge_order!r} is not valid; use 'source' or "
                         f"'destination'")
    if not isinstance(source_ranges, (int, np.integer)) or not 1 <= source_ranges <= 1024:
        raise GraphError(f"source_ranges={source_ranges!r} must be an integer in 1..1024")
    if source_ranges > 1 and edge_order != "source":
        raise GraphError("source_ranges > 1 needs edge_order='source'")
    for name, value in (("memory_budget", memory_budget), ("page_bytes", page_bytes),
                        ("streams", streams)):
        if value is not None and (not isinstance(value, (int, np.integer)) or value < 1):
            raise GraphError(f"{name}={value!r} must be a positive integer")
    if threads_per_block not in (32, 64, 128, 256, 512, 1024):
        raise GraphError(f"threads_per_block={threads_per_block!r} must be a power of two "
                         f"from 32 to 1024")


def _degree_dtype(graph):
    """The out-degrees' dtype (they are at most the arcs: no pass over them to choose)."""
    return np.uint32 if graph.num_arcs < 2**32 else np.uint64


def _default_budget(device):
    """Device bytes for a run's pages given no budget: a share of the free memory once
    the pages kept on ``device`` are dropped."""
    import cupy as cp

    free, _ = cp.cuda.runtime.memGetInfo()
    return int((free + kept_bytes(device)) * tuning.GPU_BUDGET_FRACTION)


def _pages_key(graph, degree_dtype, edge_order, ranges, memory_budget, streams, partition,
               owned):
    """What a layout is kept under (:func:`device_pages`). A run given no budget takes
    what it finds kept for its partition: its budget was measured on the same device,
    less what the kept pages held."""
    return (graph.token, np.dtype(degree_dtype).str, edge_order, ranges, memory_budget,
            streams, partition_key(partition),
            None if owned is None else (owned.start, owned.stop))


def _lay_out(graph, partition, weighted, edge_order, ranges, budget, streams, degree_dtype,
             owned=None):
    """The DevicePages of ``graph``'s ``partition`` (``owned``: a range of its pages;
    None: all) on the current device."""
    return DevicePages(graph, partition, per_edge=edge_bytes(graph.index_dtype, weighted),
                       weighted=weighted, edge_order=edge_order, ranges=ranges,
                       budget=budget, streams=streams,
                       degree=graph.out_degree().astype(degree_dtype), pages=owned)


def _partition_for(graph, edge_bytes_total, budget, page_bytes, streams, layout):
    """``graph``'s partition for a ``budget`` of device bytes holding
    ``edge_bytes_total`` bytes of edges: pages of ``page_bytes``, smaller when the edges
    do not fit (:func:`page_bytes_for`); ``layout``: ``Graph.partition``'s other
    options."""
    page_bytes = page_bytes_for(edge_bytes_total, budget, page_bytes, streams)
    return graph.partition(page_bytes=page_bytes, **layout)


def lay_out_ahead(graph, weighted, vertex_bytes, gpu):
    """Lay out on the current device, and keep (:func:`first_pages`: when the device
    keeps no layout yet), the pages that a one-GPU run of ``graph`` given the GPU options
    ``gpu`` (a dict, ``hg.run``'s ``gpu=``) looks for first, so that they can be built
    while the caller does other work. Only when every edge fits half the budget such a
    run takes (its vertex arrays, allocated first, then cannot change its partition);
    returns whether it laid them out. ``weighted``: the run reads edge weights;
    ``vertex_bytes``: its value's itemsize."""
    import cupy as cp

    def option(name, default):  # the engine's default also where None is given
        value = gpu.get(name)
        return default if value is None else value

    memory_budget = gpu.get("memory_budget")
    streams = option("streams", tuning.GPU_STREAMS)
    edge_order, ranges = option("edge_order", "source"), option("source_ranges", 1)
    device = cp.cuda.runtime.getDevice()
    budget = _default_budget(device) if memory_budget is None else memory_budget
    total = graph.num_arcs * edge_bytes(graph.index_dtype, weighted)
    if 2 * total > budget:
        return False
    layout = dict(shared_bytes=option("shared_bytes", tuning.GPU_SHARED_BYTES),
                  replication=gpu.get("replication"), vertex_bytes=vertex_bytes)
    partition = _partition_for(graph, total, budget,
                               option("page_bytes", tuning.PAGE_BYTES), streams, layout)
    degree_dtype = _degree_dtype(graph)
    key = _pages_key(graph, degree_dtype, edge_order, ranges, memory_budget, streams,
                     partition, None)

    def build():
        pages = _lay_out(graph, partition, weighted, edge_order, ranges, budget, streams,
                         degree_dtype)
        cp.cuda.Device().synchronize()  # (a run's streams do not wait for this thread's)
        return pages

    return first_pages(key, weighted, build)


class GpuEngine(Engine):
    """A program running on one GPU: device vertex arrays, resident and streamed pages.
    ``values``, ``flags`` and ``aux``: the initial state, copied to the device (CuPy
    arrays on this device are taken as they are).

    ``memory_budget``: device bytes for edge data (default 80% of the free memory after
    the vertex arrays). ``page_bytes``: the page size used when pages must be streamed
    (default 32 MiB, smaller when the budget asks). ``streams``: CUDA streams for page
    copies (default 4). ``shared_bytes``: shared memory per block (default 16 KiB).
    ``replication``: a fixed R for every shard instead of Garaph eq. 2.
    ``page_bytes``, ``streams``, ``shared_bytes``, ``threads_per_block``: default
    ``tuning.PAGE_BYTES``, ``GPU_STREAMS``, ``GPU_SHARED_BYTES``,
    ``GPU_THREADS_PER_BLOCK``. ``edge_order``: "source" (default) or
    "destination", the order of the edges inside a shard (see :func:`page_layout`).
    ``partition``: the shards and pages to use (default: made for the layout options
    and the budget); a hybrid run passes the one it shares with the CPU.
    ``source_ranges``: passes over the resident pages, one per range of source vertices,
    so that the values gathered in a pass stay in the L2 cache (GraphCage's cache
    blocking). Default 1: more ranges repeat the per-shard work in every pass.
    ``pages``: the range of the partition's pages this engine owns (default all; needs
    ``partition``): only they are laid out on its device and computed, and its
    frontier counts only their vertices (several GPUs share a run so, see
    :mod:`hetgraph.engines.multigpu`). ``coloring``: a colored run's (``sync`` False, a
    color-major graph: :mod:`.colored`), whose pass is one launch per color's shards.
    ``subgraph``: when pages stream, a segment's iteration of an incremental program
    whose frontier has under ``tuning.SUBGRAPH_ACTIVE_EDGES`` of the arcs copies only
    the active vertices' out-edges into the streamed pages and pushes them (Subway,
    :mod:`hetgraph.engines.subway`; default True); "async": what is loaded (the
    resident pages, each chunk) is iterated until it settles, the list taking the
    listed vertices' streamed out-neighbours too; False: the pages always stream.
    ``tocab``: GraphCage's cache blocking of a pull pass (:mod:`hetgraph.kernels.gpu.tocab`), for pages all resident
    in source order, one source range pass: None (default) when the values do not fit
    the L2 cache, the shard kernel and TOCAB then alternating until each has
    ``tuning.TOCAB_CALIBRATION_PASSES`` passes timed, the faster kept (its passes are
    "gpu-tocab" in the history, its choices in :meth:`describe`); True: always, with
    ranges of ``tuning.TOCAB_L2_SHARE`` of the L2; a number: always, with ranges of
    that share of the L2; False: never. ``h2d_bytes`` and ``d2h_bytes``
    count the graph's bytes copied in and out (edges and offsets in, the active
    lists out; not the vertex state nor the counts); ``transfer_seconds``, the device
    seconds the copies in took (the union of their spans on the copy streams), and
    ``generation_seconds``, those the active subgraphs' generation took (the device's
    scans and the lists' copies out, the host's gathers), both added as each
    iteration launched by :meth:`launch` is waited for (see
    :mod:`hetgraph.kernels.gpu.spans`).

    It keeps up to ``tuning.QUEUED`` iterations launched (see :meth:`launch`), one when
    it streams pages: a chained pass after convergence skips its kernels but not its
    page copies. ``front`` is the frontier's lowest priority (programs with one, see
    :meth:`wait`); ``read_bytes`` stays 0 (pages come from host memory).
    """

    mode = "gpu-pull"
    after_run = None  # see split_resident_runs

    def __init__(self, spec, graph, values, flags, aux, *, sync=True, memory_budget=None,
                 page_bytes=None, streams=None, shared_bytes=None, replication=None,
                 threads_per_block=None, edge_order="source", source_ranges=1,
                 partition=None, pages=None, subgraph=True, coloring=None, tocab=None):
        require_gpu()
        page_bytes = tuning.PAGE_BYTES if page_bytes is None else page_bytes
        streams = tuning.GPU_STREAMS if streams is None else streams
        shared_bytes = tuning.GPU_SHARED_BYTES if shared_bytes is None else shared_bytes
        if threads_per_block is None:
            threads_per_block = tuning.GPU_THREADS_PER_BLOCK
        _check_options(memory_budget, page_bytes, streams, threads_per_block, edge_order,
                       source_ranges, subgraph, tocab)
        import cupy

        self.cupy = cupy
        self.spec = spec
        self.graph = graph
        self.sync = sync
        self.threads_per_block = int(threads_per_block)
        self.edge_order = edge_order
        self.ranges = int(source_ranges)
        if pages is not None and partition is None:
            raise GraphError("pages= needs the partition they are pages of")
        self.owned = pages
        self.weighted = bool(spec.needs_weights and graph.weighted)
        start = time.perf_counter()
        degree_dtype = _degree_dtype(graph)
        #: compile_kernel's options for this engine's shard kernels (one per variant)
        self.kernel_options = dict(aux_dtype=aux.dtype, index_dtype=graph.index_dtype,
                                   degree_dtype=degree_dtype, weighted=self.weighted,
                                   sync=sync, warp_combine=edge_order == "destination")
        self.kernel = compile_kernel(spec, **self.kernel_options)
        self.compile_seconds = time.perf_counter() - start
        self._upload_vertices(values, flags, aux)
        self.per_edge = edge_bytes(graph.index_dtype, self.weighted)
        self.layout = dict(shared_bytes=shared_bytes, replication=replication,
                           vertex_bytes=spec.dtype.itemsize)
        self.coloring = coloring
        if coloring is not None and coloring.contiguous:  # shards and pages cut at colors
            self.layout["cuts"] = coloring.cuts
        self._place_pages(memory_budget, partition, int(page_bytes), int(streams),
                          degree_dtype)
        self._tocab = self._blocked_pass(tocab, degree_dtype)
        self.h2d_bytes = self.d2h_bytes = 0
        self.generation_seconds = self.transfer_seconds = 0.0
        self._subgraphs = active_subgraphs(self, subgraph)
        self._active, self._degree = self.count_frontier()

    # setup -------------------------------------------------------------------------------
    def _upload_vertices(self, values, flags, aux):
        cp = self.cupy
        try:
            self.values = on_current_device(values)
            self.new_values = cp.empty_like(self.values) if self.sync else self.values
            self.flags = on_current_device(flags)
            self.aux = on_current_device(aux)
            self._aux_given = aux if self.aux is aux else None  # (the caller's array)
            self._colored_aux = None  # a colored pass's own aux (see _color_runs)
            # the activated counts of QUEUED + 1 iterations (a ring: the one a queued
            # iteration reads as its go, and those in flight), copied to pinned memory:
            # vertices activated, their out-degree sum, the key of their lowest
            # priority (see front_of_key)
            ring = tuning.QUEUED + 1
            slots = cp.zeros((ring, 3), cp.uint64)
            self._slots = [slots[i] for i in range(ring)]  # views made once
            self._slot_pointers = [slot.data.ptr for slot in self._slots]
            self._host_slots = pinned_empty((ring, 3), np.uint64)
            self._host_pointers = [self._host_slots[i].ctypes.data for i in range(ring)]
            self._events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(ring)]
            self._held = [None] * ring  # each slot's device constant, kept alive
            # each slot's (mode, vertices computed, edges read, frontier's out-edges) when
            # it pushed an active subgraph, else None
            self._ran = [None] * ring
            self._blocked = [False] * ring  # whether each slot's pass ran TOCAB
            # each slot's copies and generation, timed (read when it is waited for)
            self._times = [IterationTimes(cp) for _ in range(ring)]
            self.times = self._times[0]  # the slot's that begin() took
            self._next_slot, self._chain = 0, None
            self.counters = self._slots[0]
            self._go = self._one = cp.ones(1, cp.uint64)
            self._counters_pointer, self._go_pointer = self._slot_pointers[0], \
                self._one.data.ptr
            self.constant = cp.zeros(1, cp.float64)
            self._constant_value = 0.0
            self._constant_at = self.constant
            self._no_weight = cp.empty(1, np.float32)
            # the frontier's count (active vertices, out-degree sum), on the device and
            # copied to pinned memory; ``_counting``: a count is queued that
            # :meth:`frontier` has not yet waited for (see :meth:`reset_frontier`)
            self._count = cp.zeros(2, cp.uint64)
            self._count_host = pinned_empty(2, np.uint64)
            self._counted = cp.cuda.Event(disable_timing=True)
            self._counting = False
            self._change = None  # a convergence test made on the device (test_change)
        except cp.cuda.memory.OutOfMemoryError:
            raise GpuMemoryError(f"the GPU cannot hold the vertex arrays of "
                                 f"{self.graph.num_vertices:,} vertices") from None

    def _place_pages(self, memory_budget, given, page_bytes, streams, degree_dtype):
        """Find the pages kept on this device for this graph, partition and options, or
        lay them out (:func:`device_pages`), then allocate this run's staging buffers;
        when the device runs out, halving the budget (and, without a ``given``
        partition, the pages)."""
        cp = self.cupy
        device = cp.cuda.runtime.getDevice()
        budget = _default_budget(device) if memory_budget is None else memory_budget
        partition = given if given is not None else \
            self._partition(budget, page_bytes, streams)
        key = _pages_key(self.graph, degree_dtype, self.edge_order, self.ranges,
                         memory_budget, streams, partition, self.owned)
        while True:
            try:
                self.pages = device_pages(key, self.weighted, lambda: _lay_out(
                    self.graph, partition, self.weighted, self.edge_order, self.ranges,
                    budget, streams, degree_dtype, self.owned))
                self._allocate()
                return
            except GpuMemoryError:  # a page larger than the budget: smaller will not do
                raise
            except MemoryError:  # CuPy's OutOfMemoryError, or a sort's std::bad_alloc
                self._release_pages()
                release(device)
                smaller = budget // 2
                log.warning("GPU out of memory with a page budget of %d bytes; trying %d",
                            budget, smaller)
                if smaller < 1 << 16:
                    raise GpuMemoryError(f"the GPU ran out of memory for the pages of "
                                         f"{self.graph.summary()} even with a budget of "
                                         f"{budget:,} bytes") from None
                budget = smaller
                partition = given if given is not None else \
                    self._partition(budget, page_bytes, streams)

    def _partition(self, budget, page_bytes, streams):
        """The graph's partition for a ``budget`` of device bytes
        (:func:`_partition_for`)."""
        return _partition_for(self.graph, self.graph.num_arcs * self.per_edge, budget,
                              page_bytes, streams, self.layout)

    def _allocate(self):
        """This run's part beside the shared pages: the staging buffers and streams of
        the streamed pages, the partial sums of the source ranges, the arguments of the
        shard kernel and of the frontier's count."""
        cp = self.cupy
        pages = self.pages
        self.partition, self.plan = pages.partition, pages.plan
        self.queued = 1 if len(self.plan.streamed_pages) else len(self._slots) - 1
        self.shared_bytes = pages.slots * self.spec.dtype.itemsize
        # with the kernel's 16 static bytes, 48 KiB of dynamic memory needs the opt-in
        self.kernel.max_dynamic_shared_size_bytes = self.shared_bytes
        self.partial = (cp.empty(self.graph.num_vertices, self.spec.dtype) if self.ranges > 1
                        else self._no_weight)
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(self.plan.streams)]
        self.stages = [tuple(None if d is None else cp.empty(self.plan.stage_edges, d)
                             for d in pages.dtypes) for _ in range(self.plan.streams)]
        # the shard kernel's arguments in its order; _launch sets those marked None and
        # those that change between launches
        self.shard_arguments = dict(
            src=None, offsets=None, weight=None, shard_start=pages.shard_start,
            shard_edge=pages.shard_edge, shard_log_r=pages.shard_log_r,
            ranges=np.int32(self.ranges), k_begin=np.int32(0), k_end=np.int32(0),
            first=np.int32(0), last=np.int32(0), partial=self.partial,
            edge_base=np.int64(0), first_shard=np.int32(0), values=None, new_values=None,
            flags=self.flags, aux=self.aux, aux_per_vertex=np.int32(self.aux.size > 1),
            constant_at=None, out_degree=pages.out_degree, counters=None, go=None)
        self._pass = PackedLaunch(self.kernel, self.shard_arguments)
        # what a launch changes every iteration, set through the holders; the rest is
        # set when the edges or the shard range change (see _launch)
        self._changing = self._pass.holders("values", "new_values", "constant_at",
                                            "counters", "go")
        self._placed_edges = self._placed_shards = None
        part, plan = pages.partition, self.plan  # the resident pages come first
        self._resident_runs = self.resident_runs(1)
        self._colors = self._color_runs()
        # the vertices this engine computes: those of its pages
        v0 = part.page_vertices(plan.pages.start)[0] if len(plan.pages) else 0
        v1 = part.page_vertices(plan.pages.stop - 1)[1] if len(plan.pages) else 0
        self.vertices = (v0, v1)
        self._count_blocks = int(min(1024, max(1, -(-(v1 - v0) // 256))))
        self._count_pass = PackedLaunch(
            _count_frontier_kernel(c_type(pages.out_degree.dtype), cp.cuda.runtime.getDevice()),
            dict(flags=self.flags[v0:v1], degree=pages.out_degree[v0:v1],
                 n=np.int64(v1 - v0), out=self._count))

    def _blocked_pass(self, option, degree_dtype):
        """TOCAB's pass for the option ``tocab`` (see the class), or None: off, the
        values fit the L2, or the layout or the device's memory does not allow it."""
        if option is False or not self.graph.num_arcs:
            return None
        if self.ranges > 1 or self.edge_order != "source" or self.coloring is not None \
                or self.owned is not None or len(self.plan.streamed_pages):
            if option is not None:
                log.warning("tocab runs only on one GPU's pages all resident, in source "
                            "order, one source range, not colored: the shard kernel runs")
            return None
        l2 = l2_bytes()
        ranges, forced = tocab_ranges(option, self.graph.num_vertices,
                                      self.spec.dtype.itemsize, l2)
        if ranges == 1:
            return None
        start = time.perf_counter()
        kernels = compile_tocab(self.spec, self.aux.dtype, self.graph.index_dtype,
                                degree_dtype, weighted=self.weighted, sync=self.sync)
        self.compile_seconds += time.perf_counter() - start
        choice = KernelChoice(tuning.TOCAB_CALIBRATION_PASSES, True if forced else None)
        try:
            return BlockedPass(self.cupy, self.graph, self.pages, self.spec.dtype,
                               self.flags, self.aux, self._no_weight, kernels=kernels,
                               ranges=ranges, threads=self.threads_per_block,
                               shared_bytes=self.shared_bytes, l2_bytes=l2,
                               choice=choice)
        except MemoryError:  # CuPy's OutOfMemoryError
            self.cupy.get_default_memory_pool().free_all_blocks()
            log.warning("no device memory for TOCAB's segments: the shard kernel runs")
            return None

    def _color_runs(self):
        """The colored pass (:class:`ColoredLaunches` of the shards of each color,
        :func:`color_shards`) of a colored run whose pages are all resident; else None
        (with a coloring: the pass runs as async does, logged)."""
        if self.coloring is None:
            return None
        runs = color_shards(self.partition.shard_start, self.coloring,
                            sparse=self.spec.incremental and not self.spec.notify_self)
        if runs is None or len(self.plan.streamed_pages) or self.owned is not None:
            log.warning("mode='colored' runs as 'async' on this GPU: it needs a "
                        "color-major graph (graph.reorder('color')) whose pages are all "
                        "resident on one GPU")
            return None
        self.mode = "gpu-colored"
        if self._colored_aux is None:  # (a later run's aux is written into it)
            self._colored_aux = self.aux.copy() if self.aux is self._aux_given else self.aux
            self.aux = self._colored_aux
            self._pass.update(aux=self.aux)
        return ColoredLaunches(self, runs)

    def resident_runs(self, count):
        """The resident pages as up to ``count`` runs of consecutive shards
        [(first shard, end shard), ...] of about equal edges (whole pages): a pass
        launches one kernel a run; :attr:`after_run` sees each run end."""
        part, plan = self.partition, self.plan
        first, end = plan.pages.start, plan.resident_end
        if end <= first:
            return []
        edges = plan.page_edges[first:end, 1] - plan.page_edges[first, 0]
        cuts = np.searchsorted(edges, edges[-1] * np.arange(1, count) / count, side="left")
        bounds = np.unique(np.concatenate([[first], first + 1 + cuts, [end]]).clip(first, end))
        return [(int(part.page_shard[a]), int(part.page_shard[b]))
                for a, b in zip(bounds[:-1], bounds[1:])]

    def split_resident_runs(self, runs, after_run):
        """Launch the resident pages as ``runs`` (of :meth:`resident_runs`, in the order
        given) and call ``after_run(first shard, end shard, stream)`` once each run's
        kernels are queued (several GPUs start copying a run's values while the next
        one runs)."""
        self._resident_runs = list(runs)
        self.after_run = after_run

    def _release_pages(self):
        for name in ("pages", "stages", "partial", "_pass", "_count_pass", "_subgraphs",
                     "_tocab", "_colors"):
            setattr(self, name, None)

    def close(self):
        """Let go of the pages (kept for later runs, see :func:`device_pages`) and free this
        run's staging buffers now (the run is over)."""
        if self._subgraphs is not None:
            self._subgraphs.release()
        self._release_pages()

    @property
    def reusable(self):
        """Whether :meth:`bind` may take the engine to another run: while its pages are
        the layout its device keeps (see :func:`device_pages`)."""
        return self.pages is not None and is_kept(self.pages)

    def bind(self, spec, graph, state, aux):
        """See :meth:`Engine.bind`: a later run of the program this engine compiled, on
        the same graph, partition and options, takes its pages, arrays, kernel and
        launch arguments as they are (the run loads its state before its first pass:
        ``state`` is unused); only ``aux`` is new (copied to this device if elsewhere)."""
        self.spec, self.graph = spec, graph
        self.aux = self._bound_aux(aux)
        self._pass.update(aux=self.aux, aux_per_vertex=int(self.aux.size > 1))
        if self._colors is not None:  # (this run's program's constant and aux)
            self._colors.bind()
        if self._tocab is not None:
            self._tocab.set_aux(self.aux)
        self._chain, self._counting, self.front = None, False, float("nan")

    def _bound_aux(self, aux):
        """``aux`` on this device; for a colored pass, copied into the engine's own
        array where it fits (its launches keep their arguments)."""
        fresh, own = on_current_device(aux), self._colored_aux
        if self._colors is None or (fresh.shape, fresh.dtype) != (own.shape, own.dtype):
            return fresh
        self.cupy.copyto(own, fresh)
        return own

    def unbind(self):
        """See :meth:`Engine.unbind`."""
        self.spec = self.graph = self.aux = self._change = None
        self._held = [None] * len(self._slots)

    # iteration ------------------------------------------------------------------------------
    def frontier(self):
        """(active vertices, sum of their out-degrees) after the last iteration (waits
        for a count that :meth:`reset_frontier` queued)."""
        if self._counting:
            self._active, self._degree = self._counted_frontier()
            self._counting = False
        return self._active, self._degree

    def _launch(self, grid, first_shard, edge_base, edges, stream, k_begin=0, k_end=None):
        """Shards [first_shard, first_shard + grid) over the source ranges
        [k_begin, k_end) (default all): the first range starts from the identity, the
        last one applies; the others keep their sums in ``partial``. The arguments
        that only change with the edges or the shards are set only then: an argument
        set by keyword costs microseconds of host time, which a short pass waits for."""
        if grid == 0:
            return
        k_end = self.ranges if k_end is None else k_end
        shards = (first_shard, edge_base, k_begin, k_end)
        if self._placed_edges is not edges or self._placed_shards != shards:
            src, offsets, weight = edges
            self._pass.update(src=src, offsets=offsets,
                              weight=self._no_weight if weight is None else weight,
                              k_begin=k_begin, k_end=k_end, first=int(k_begin == 0),
                              last=int(k_end == self.ranges), edge_base=edge_base,
                              first_shard=first_shard)
            self._placed_edges, self._placed_shards = edges, shards
        values_arg, new_values_arg, constant_arg, counters_arg, go_arg = self._changing
        values_arg.value = self.values.data.ptr
        new_values_arg.value = self.new_values.data.ptr
        constant_arg.value = self._constant_at.data.ptr
        counters_arg.value = self._counters_pointer
        go_arg.value = self._go_pointer
        self._pass(grid, self.threads_per_block, self.shared_bytes, stream.ptr)

    def iterate(self, constant, frontier=None):
        """One pull pass over every page (the GPU computes every vertex, so the frontier
        is not needed), waited for; returns (mode, vertices computed, edges read,
        vertices activated)."""
        return self.wait(self.launch(constant, chained=False))[:4]

    def launch(self, constant, frontier=None, chained=True, go=None):
        """Queue one pull pass over every page without waiting for it; returns the
        ticket that :meth:`wait` or :meth:`discard` takes. In sync mode the values it
        writes are current at once for what is queued after it (the device runs them in
        order). ``chained``: its kernels return at once when the iteration launched
        before it activated no vertex; the caller must then discard it. At most
        :attr:`queued` launches may be waiting. ``go``: with ``chained``, a one-element
        uint64 device array read instead of the previous launch's activated count
        (several GPUs chain on their sum). Given the ``frontier`` (a segment's
        iteration), a small one pushes the active subgraph instead of streaming the
        pages (see ``subgraph``); without, it pulls every page."""
        stream = self.cupy.cuda.get_current_stream()
        slot = self.begin(constant, chained, stream, go)
        start, end = self._events[slot]
        start.record(stream)
        blocked = False
        if self._subgraphs is not None and frontier is not None and \
                self._subgraphs.wanted(frontier[1]):
            computed, edges, h2d, d2h = self._subgraphs.run(stream)
            self.h2d_bytes, self.d2h_bytes = self.h2d_bytes + h2d, self.d2h_bytes + d2h
            self._ran[slot] = ("gpu-push", computed, edges, frontier[1])
        else:
            blocked = self._tocab is not None and self._tocab.choice.next()
            if blocked:
                self._tocab.run(stream, self.values.data.ptr, self.new_values.data.ptr,
                                self._constant_at.data.ptr, self._counters_pointer,
                                self._go_pointer)
            else:
                self.run_pages(stream=stream)
            self._ran[slot] = None
        self._blocked[slot] = blocked
        if self._change is not None:  # (sync: new_values from values, both still there)
            self._change.queue(slot, self.new_values, self.values, stream)
        self.cupy.cuda.runtime.memcpyAsync(
            self._host_pointers[slot], self._counters_pointer, self.counters.nbytes,
            self.cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        end.record(stream)
        self.finish()
        return slot

    def wait(self, ticket):
        """Wait for a launched iteration; returns (mode, vertices computed, edges read,
        vertices activated, seconds it took on the device) and makes its activated
        vertices the frontier (and ``front`` their lowest priority, for a program with
        a priority)."""
        start, end = self._events[ticket]
        end.synchronize()
        self._active, self._degree, key = self._host_slots[ticket].tolist()
        self._counting = False
        if self.spec.priority is not None:
            self.front = front_of_key(key)
        seconds = self.cupy.cuda.get_elapsed_time(start, end) / 1e3
        ran, blocked = self._ran[ticket], self._blocked[ticket]
        times = self._times[ticket]
        if times.recorded:
            generation, transfer = times.seconds()
            self.generation_seconds += generation
            self.transfer_seconds += transfer
        if self._subgraphs is not None:
            self._subgraphs.observe(ran, seconds)
        if ran is not None:
            return (*ran[:3], self._active, seconds)
        if self._tocab is not None:
            self._tocab.choice.observe(blocked, seconds)
        return ("gpu-tocab" if blocked else self.mode, self.graph.num_vertices, self.graph.num_arcs, self._active,
                seconds)

    @property
    def tests_change(self) -> bool:
        """Whether :meth:`test_change` makes a convergence test on the device: in sync
        mode, where an iteration queued after the one that converged leaves that one's
        values (:meth:`discard` swaps them back)."""
        return self.sync

    def test_change(self, weights):
        """From the next launch on, sum |values - values before| * ``weights`` on the
        device in every launch (float64 on this GPU, N of them; None, or not
        :attr:`tests_change`: no sum), read by :meth:`change` once waited for."""
        if weights is None or not self.tests_change:
            self._change = None
        elif self._change is None or self._change.weights is not weights:
            self._change = WeightedChange(weights, self.values.dtype, len(self._slots))

    def change(self, ticket) -> float:
        """The sum :meth:`test_change` asked for, of launched iteration ``ticket``
        (waited for)."""
        return self._change.read(ticket)

    def discard(self, tickets):
        """Undo launched iterations that followed one activating nothing (their kernels
        returned at once): in sync mode, their swaps of the value arrays."""
        if self.sync and len(tickets) % 2:
            self.values, self.new_values = self.new_values, self.values
        self._chain = None

    def begin(self, constant, chained=False, stream=None, go=None):
        """Start an iteration with the program's iteration constant (a number, or a 0-d
        device array passed to the kernels as it is: no copy, no wait): take the next
        counter slot and zero it on ``stream`` (default: the current one); returns the
        slot. ``chained`` and ``go``: see :meth:`launch`."""
        cp = self.cupy
        slot = self._next_slot
        self._next_slot = (slot + 1) % len(self._slots)
        chain = self._chain if chained else None
        self._go = self._one if chain is None else self._slots[chain] if go is None else go
        self._go_pointer = self._go.data.ptr
        self._chain = slot
        self.counters = self._slots[slot]
        self.times = self._times[slot]
        self.times.clear()
        self._counters_pointer = self._slot_pointers[slot]
        stream = cp.cuda.get_current_stream() if stream is None else stream
        cp.cuda.runtime.memsetAsync(self._counters_pointer, 0, self.counters.nbytes,
                                    stream.ptr)
        self._held[slot], self._constant_at = None, self.constant
        if isinstance(constant, cp.ndarray) and constant.dtype == cp.float64 and \
                constant.size == 1:  # computed on the device: read where it is
            self._held[slot] = self._constant_at = constant
        elif isinstance(constant, cp.ndarray):
            self.constant[...] = constant.reshape(1)
            self._constant_value = None
        elif float(constant) != self._constant_value:  # queued passes read it in order
            self.constant.fill(float(constant))
            self._constant_value = float(constant)
        return slot

    def run_pages(self, pages=None, stream=None, resident_only=False):
        """Pull the pages ``pages`` (increasing page numbers; default every page) on
        ``stream`` (default: the current one): resident runs of pages in one launch per
        source range, streamed pages copied over the streams (not with
        ``resident_only``)."""
        part, plan = self.partition, self.plan
        if pages is None:
            runs, streamed = self._resident_runs, plan.streamed_pages
        else:
            pages = np.asarray(pages, np.int64)
            resident = pages[pages < plan.resident_end]
            cuts = np.flatnonzero(np.diff(resident) != 1) + 1  # runs of consecutive pages
            runs = [(int(part.page_shard[run[0]]), int(part.page_shard[run[-1] + 1]))
                    for run in (np.split(resident, cuts) if len(resident) else ())]
            streamed = pages[pages >= plan.resident_end]
        if resident_only:
            streamed = ()
        main = self.cupy.cuda.get_current_stream() if stream is None else stream
        if pages is None and self._colors is not None:
            self._colors.run(main)
            return
        # streamed copies may start while the resident pages run
        ready = main.record() if len(streamed) else None
        first = plan.first_edge  # (the resident arrays' first edge)
        for s0, s1 in runs:
            for k in range(self.ranges):  # cache blocking: one pass per source range
                self._launch(s1 - s0, s0, first, self.pages.resident, main, k, k + 1)
            if self.after_run is not None:
                self.after_run(s0, s1, main)
        if len(streamed):
            split, copies = self.plan.resident_edges, self.times.copies
            for k, p in enumerate(streamed):
                stream = self.streams[k % len(self.streams)]
                stream.wait_event(ready)
                e0, e1 = (int(x) for x in self.plan.page_edges[p])
                self.h2d_bytes += (e1 - e0) * self.per_edge
                stage = self.stages[k % len(self.stages)]
                copies.mark(stream)
                for device, host in zip(stage, self.pages.pinned):
                    if device is not None:
                        device[:e1 - e0].set(host[e0 - split:e1 - split], stream=stream)
                copies.mark(stream)
                s0, s1 = int(part.page_shard[p]), int(part.page_shard[p + 1])
                self._launch(s1 - s0, s0, e0, stage, stream)
            for stream in self.streams:
                main.wait_event(stream.record())

    def pull_resident(self, stream, source, target, counters):
        """Pull the resident pages once on ``stream`` from the values ``source`` into
        ``target`` (device arrays of every vertex, distinct), the activated vertices
        counted into ``counters`` (a zeroed device uint64 array of three) and flagged
        (async-subgraph mode re-pulls them from the latest values until none changes)."""
        kept = self.values, self.new_values, self._counters_pointer
        self.values, self.new_values, self._counters_pointer = source, target, \
            counters.data.ptr
        try:
            self.run_pages(stream=stream, resident_only=True)
        finally:
            self.values, self.new_values, self._counters_pointer = kept

    def counts(self):
        """(vertices activated, their out-degree sum) since :meth:`begin` (waits)."""
        active, degree = (int(x) for x in self.counters[:2].get())
        return active, degree

    def finish(self):
        """End an iteration: in sync mode the values written become current."""
        if self.sync:
            self.values, self.new_values = self.new_values, self.values

    def load(self, values, flags, ranges):
        """Copy ``values`` and ``flags`` (host NumPy arrays, or CuPy arrays on any GPU of
        this process: a state kept there) of the vertex ``ranges`` [(v0, v1), ...] to
        the engine's arrays; ``flags`` may be None."""
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        for source, target in ((values, self.values), (flags, self.flags)):
            if source is None:
                continue
            if isinstance(source, np.ndarray):
                for v0, v1 in ranges:
                    target[v0:v1].set(source[v0:v1])
                continue
            wait_for_writes(source, stream)
            size = target.itemsize
            for v0, v1 in ranges:
                cp.cuda.runtime.memcpyAsync(target.data.ptr + v0 * size,
                                            source.data.ptr + v0 * size, (v1 - v0) * size,
                                            cp.cuda.runtime.memcpyDefault, stream.ptr)

    def store(self, values, flags, ranges, written=True, wait=True):
        """Copy the device values of the vertex ``ranges`` and their flags into the host
        arrays ``values`` and ``flags`` (contiguous, of the program's dtype and uint8; or
        CuPy arrays on any GPU of this process, a state kept there):
        the values written by the current iteration (``written``; before
        :meth:`finish`) or the current ones. ``wait=False``: the copies are queued on
        the current stream and their CUDA event is returned, which the caller must
        synchronize before reading those host arrays (page-locked ones: from pageable
        memory a copy returns when done); the host's work in between overlaps them."""
        source = self.new_values if written else self.values
        if values.dtype != source.dtype or flags.dtype != self.flags.dtype or not (
                values.flags.c_contiguous and flags.flags.c_contiguous):
            raise TypeError(f"store into {values.dtype}/{flags.dtype} arrays (both "
                            f"contiguous) from {source.dtype}/{self.flags.dtype} device "
                            f"arrays")
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        for target, device in ((values, source), (flags, self.flags)):
            on_host = isinstance(target, np.ndarray)  # else a state kept on a GPU
            size = target.itemsize
            for v0, v1 in ranges:
                cp.cuda.runtime.memcpyAsync(
                    (target.ctypes.data if on_host else target.data.ptr) + v0 * size,
                    device.data.ptr + v0 * size, (v1 - v0) * size,
                    cp.cuda.runtime.memcpyDeviceToHost if on_host else
                    cp.cuda.runtime.memcpyDefault, stream.ptr)
        done = stream.record()
        if not wait:
            return done
        done.synchronize()
        return None

    def count_frontier(self):
        """(active vertices, sum of their out-degrees) of the device flags, counted on the
        device (waits): a run with a GPU counts the host state's frontier here, after
        copying that state, not on the host, where the copy would wait for the count."""
        self._queue_count()
        return self._counted_frontier()

    def _queue_count(self):
        """Queue the count of the device flags' frontier and its copy to the host."""
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memsetAsync(self._count.data.ptr, 0, self._count.nbytes, stream.ptr)
        self._count_pass(self._count_blocks, 256, 0, stream.ptr)
        cp.cuda.runtime.memcpyAsync(self._count_host.ctypes.data, self._count.data.ptr,
                                    self._count.nbytes, cp.cuda.runtime.memcpyDeviceToHost,
                                    stream.ptr)
        self._counted.record(stream)

    def _counted_frontier(self):
        """The count :meth:`_queue_count` last queued (waits for it)."""
        self._counted.synchronize()
        active, degree = self._count_host.tolist()
        return active, degree

    def reset_frontier(self, counted=None):
        """Set the frontier after the vertex state was loaded from the host (the next
        chained launch does not depend on the iterations before): ``counted``, or when
        None that of the device flags, counted on the device without waiting, so that
        the host's work before a segment's first iteration overlaps the state's copy and
        the count (:meth:`frontier` waits for it when first asked)."""
        if counted is None:
            self._queue_count()
        else:
            self._active, self._degree = int(counted[0]), int(counted[1])
        self._counting = counted is None
        self._chain, self.front = None, float("nan")

    def result(self):
        """The current values as a host NumPy array."""
        return self.values.get()

    @property
    def subgraph_share(self):
        """The share of the arcs that stream as active subgraphs (0.0: none)."""
        if self._subgraphs is None:
            return 0.0
        streamed = self.plan.page_edges[self.plan.streamed_pages]
        return float((streamed[:, 1] - streamed[:, 0]).sum()) / max(self.graph.num_arcs, 1)

    def describe(self):
        """The page placement, for logs and benchmarks."""
        return {"pages": self.partition.num_pages, "resident_pages": self.plan.resident,
                "streamed_pages": len(self.plan.streamed_pages), "streams": self.plan.streams,
                "resident_edges": self.plan.resident_edges - self.plan.first_edge,
                "streamed_edges": sum(int(e1 - e0) for e0, e1 in
                                      self.plan.page_edges[self.plan.streamed_pages]),
                "shards": self.partition.num_shards, "shared_bytes": self.shared_bytes,
                "source_ranges": self.ranges,
                "tocab": None if self._tocab is None else self._tocab.describe(),
                "subgraph": None if self._subgraphs is None else self._subgraphs.describe(),
                **({} if self._colors is None else
                   {"mode": self.mode, **self.coloring.describe(),
                    "passes_per_iteration": self._colors.passes,
                    "graph_captures": self._colors.replay.captures,
                    "launch_blocks": self._colors.blocks,
                    "split_shards": self._colors.split_shards})}
