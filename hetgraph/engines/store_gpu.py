"""The GPU engine out of core: a graph read from its page store, its pages pulled on
the GPU.

Garaph section 2 (Dispatcher): each page is read from the striped store into host
memory, then computed by whichever device is free. Here the page cache's I/O threads
read a page once a pass (:func:`hetgraph.io.pagecache.shared_cache`: shared with the
run's CPU engine in this process, bounded by the run's host budget); the engine copies
it into a pinned staging buffer, then to the device on one of its CUDA streams, where
the shard kernel of :class:`~hetgraph.engines.gpu.GpuEngine` pulls it while the next
page is read and copied. A store's blocks are the kernel's layout in destination order
(source ids, 16-bit destination offsets, weights; the shard table comes from the
pointers, :func:`shard_edge_table`): nothing is laid out on the host. The pages the
GPU's budget holds (a prefix, :class:`~hetgraph.kernels.gpu.layout.PagePlan`) stay on
the device once read, a second cache level read from the disk once a run (and dropped
from the host cache, which keeps the others); the others go through the device's
staging buffers every pass.

cupy is imported when an engine is made: without a GPU this module imports.
"""

from __future__ import annotations

import numpy as np

from .. import tuning
from ..errors import GraphError
from ..io.pagecache import shared_cache
from ..kernels.gpu.device import GpuMemoryError, pinned_empty
from ..kernels.gpu.kept import release
from ..kernels.gpu.layout import DevicePages, PagePlan, unsigned_index
from .gpu import GpuEngine
from .store import vertex_bytes


def shard_edge_table(partition):
    """(shards, 2) int64: every shard's first and end edge (graph-wide), the shard
    kernel's edge table for edges in destination order and one source range (what
    :func:`~hetgraph.kernels.gpu.layout.page_layout` gives with ``order="destination"``)."""
    bounds = partition.in_indptr[partition.shard_start].astype(np.int64)
    return np.stack([bounds[:-1], bounds[1:]], axis=1)


def page_blocks(weighted):
    """The store blocks a GPU pull reads of a page, in the kernel's order."""
    return ("src", "dst_offset", "weight") if weighted else ("src", "dst_offset")


def split_pages(pages, loaded):
    """(``pages`` already on the device, ``pages`` to read) by the bool array
    ``loaded`` (indexed by page number), each in the order given."""
    pages = np.asarray(pages, np.int64)
    held = loaded[pages]
    return pages[held], pages[~held]


def shard_runs(partition, pages):
    """Runs of consecutive ``pages`` (increasing) as [(first shard, end shard), ...]: one
    launch each."""
    pages = np.asarray(pages, np.int64)
    if not len(pages):
        return []
    cuts = np.flatnonzero(np.diff(pages) != 1) + 1
    return [(int(partition.page_shard[run[0]]), int(partition.page_shard[run[-1] + 1]))
            for run in np.split(pages, cuts)]


def stage(arrays, buffers):
    """Copy a page's block arrays (:func:`page_blocks`' order) into the staging
    ``buffers`` (same order, of the device's dtypes; None for a block not read); returns
    the page's edge count."""
    count = len(arrays[0])
    for host, buffer in zip(arrays, buffers):
        np.copyto(buffer[:count], host.view(buffer.dtype))
    return count


class StorePages(DevicePages):
    """The pages of a store's ``partition`` on the current device for a byte ``budget``
    of edge data (:class:`PagePlan`): the resident pages' arrays (filled as each page is
    first read, ``loaded``), the shard tables and the out-degrees ``degree``; no pinned
    host copy of the streamed pages (they come from the page cache)."""

    def __init__(self, graph, partition, *, per_edge, weighted, budget, streams, degree):
        import cupy as cp

        self.partition, self.budget = partition, budget
        self.plan = plan = PagePlan(partition, per_edge, budget, streams)
        self._place_shards(degree)
        self.dtypes = (unsigned_index(graph.index_dtype), np.uint16,
                       np.float32 if weighted else None)
        size = plan.resident_edges - plan.first_edge
        self.resident = tuple(None if d is None else cp.empty(size, d) for d in self.dtypes)
        self.pinned = None
        self.shard_edge = cp.asarray(shard_edge_table(partition))
        self.loaded = np.zeros(partition.num_pages, bool)
        self.nbytes = sum(a.nbytes for a in (self.shard_start, self.shard_log_r,
                                             self.out_degree, self.shard_edge,
                                             *self.resident) if a is not None)


class StoreGpuEngine(GpuEngine):
    """:class:`GpuEngine` on a :class:`~hetgraph.io.store.StoredGraph`, its pages read
    through the run's page cache (see the module docstring).

    ``budget``: the run's host memory bytes (the cache, the vertex arrays and this
    engine's pinned staging buffers, one page per stream). The store's partition is
    used as it is, in destination order with one source range (``edge_order`` and
    ``source_ranges`` can be nothing else; ``partition`` and ``page_bytes`` are
    ignored: the store fixed its pages). Other options as GpuEngine's, but
    ``subgraph``: streamed pages are always pulled, never replaced by a push of the
    active subgraph, whose out-edges stay in the store. One iteration in flight at a
    time (``queued`` = 1): pages are read on the host for each, the streamed pages of
    the next pass read ahead while the last ones compute. Calibrated on a sample of
    pages (:meth:`pull_sample`).
    """

    def __init__(self, spec, graph, values, flags, aux, *, budget, edge_order="destination",
                 source_ranges=1, partition=None, page_bytes=None, subgraph=None, **options):
        if edge_order != "destination" or source_ranges != 1:
            raise GraphError(f"edge_order={edge_order!r}, source_ranges={source_ranges!r}: "
                             f"a GPU run out of core reads the store's pages as they are, "
                             f"in destination order with one source range; leave both "
                             f"unset")
        if subgraph not in (None, False):
            raise GraphError(f"subgraph={subgraph!r}: a GPU run out of core pulls the "
                             f"pages it streams; the active subgraph's out-edges are in "
                             f"the store, not in memory. Leave subgraph unset")
        self.host_budget = int(budget)
        self.cache = None
        super().__init__(spec, graph, values, flags, aux, edge_order=edge_order,
                         source_ranges=1, subgraph=False, **options)

    def _place_pages(self, memory_budget, given, page_bytes, streams, degree_dtype):
        """The store's pages on this device (:class:`StorePages`), this run's staging
        buffers (device and pinned) and its share of the page cache."""
        cp = self.cupy
        budget = memory_budget
        if budget is None:  # the free memory once other graphs' kept pages are dropped
            release(cp.cuda.runtime.getDevice())
            free, _ = cp.cuda.runtime.memGetInfo()
            budget = int(free * tuning.GPU_BUDGET_FRACTION)
        store = self.graph.store
        try:
            self.pages = StorePages(self.graph, store.partition(), per_edge=self.per_edge,
                                    weighted=self.weighted, budget=budget, streams=streams,
                                    degree=self.graph.out_degree().astype(degree_dtype))
            self._allocate()
        except cp.cuda.memory.OutOfMemoryError:
            self._release_pages()
            raise GpuMemoryError(f"the GPU ran out of memory for the pages of "
                                 f"{self.graph.summary()} with a budget of {budget:,} "
                                 f"bytes; pass gpu={{'memory_budget': ...}} lower") from None
        self.queued = 1
        if not self.streams:  # every page resident: still read and copied over streams
            self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(streams)]
        largest = int(np.diff(self.plan.page_edges, axis=1).max(initial=1))
        self.staging = [tuple(None if d is None else pinned_empty(largest, d)
                              for d in self.pages.dtypes) for _ in self.streams]
        self.staged = [None] * len(self.streams)  # each buffer's last copy (CUDA event)
        self.blocks = page_blocks(self.weighted)
        self.staging_bytes = sum(a.nbytes for buffers in self.staging for a in buffers
                                 if a is not None)
        self.cache = shared_cache(store, self.host_budget - vertex_bytes(
            self.graph, self.spec.dtype, self.sync, self.aux), beside=self.staging_bytes)

    @property
    def read_bytes(self) -> int:
        return 0 if self.cache is None else self.cache.owner_read_bytes[self]

    def run_pages(self, pages=None, stream=None):
        """Pull the pages ``pages`` (increasing page numbers; default every page) on
        ``stream`` (default: the current one): those already on the device in one
        launch a run of them; the others read through the page cache and copied over
        the streams, into their resident place when the plan keeps them."""
        cp = self.cupy
        part, plan = self.partition, self.plan
        every = pages is None
        if every:
            pages = plan.pages
        main = cp.cuda.get_current_stream() if stream is None else stream
        held, read = split_pages(pages, self.pages.loaded)
        ready = main.record() if len(read) else None  # what the kernels read is written
        first = plan.first_edge  # (the resident arrays' first edge)
        for s0, s1 in shard_runs(part, held):
            self._launch(s1 - s0, s0, first, self.pages.resident, main)
        if not len(read):
            return
        # a whole pass: the next one reads the streamed pages again, read ahead of it
        ahead = read[read >= plan.resident_end] if every else None
        self.cache.plan(read, self.blocks, owner=self, ahead=ahead)
        read = read.tolist()
        # (a sync pull's pages are independent: any order gives the same values)
        for k, p in enumerate(self.cache.in_turn(read, self.blocks) if self.sync else read):
            slot = k % len(self.streams)
            self._copy_and_pull(p, slot, ready)
        for copies in self.streams:
            main.wait_event(copies.record())

    def _copy_and_pull(self, p, slot, ready):
        """Read page ``p``, copy it through staging buffer ``slot`` on its stream (after
        the event ``ready``) and pull it there."""
        plan, stream = self.plan, self.streams[slot]
        arrays = self.cache.get(p, self.blocks, owner=self)
        if self.staged[slot] is not None:  # the buffer's last copy must be done
            self.staged[slot].synchronize()
        count = stage(arrays, self.staging[slot])
        stream.wait_event(ready)
        e0 = int(plan.page_edges[p][0])
        resident = p < plan.resident_end
        target, base = (self.pages.resident, plan.first_edge) if resident else \
            (self.stages[slot], e0)
        self._copy_in(slot, target, e0 - base, count)
        self.staged[slot] = stream.record()
        s0, s1 = int(self.partition.page_shard[p]), int(self.partition.page_shard[p + 1])
        self._launch(s1 - s0, s0, base, target, stream)
        if resident:  # on the device from now on: the host cache keeps others instead
            self.pages.loaded[p] = True
            self.cache.discard(p, self.blocks)

    def _copy_in(self, slot, target, at, count):
        """Copy ``count`` edges from staging buffer ``slot`` into the device arrays
        ``target`` from edge ``at``, on that slot's stream."""
        for device, host in zip(target, self.staging[slot]):
            if device is not None:
                device[at:at + count].set(host[:count], stream=self.streams[slot])

    def pull_sample(self, pages):
        """One pull of ``pages`` alone (increasing page numbers), waited for: what a
        calibration times, on a sample of the pages rather than in passes over the
        whole store (each of which reads it)."""
        self.begin(0.0)
        self.run_pages(pages)
        self.counts()  # (waits for the pages' kernels)
        self.finish()

    def close(self):
        """Let go of the pages, the staging buffers and the page cache."""
        super().close()
        self.staging = self.staged = None
        if self.cache is not None:
            self.cache.release(beside=self.staging_bytes)
            self.cache = None

    def describe(self):
        """The page placement and what was read, for logs and benchmarks."""
        return {**super().describe(), "loaded_pages": int(self.pages.loaded.sum()),
                "read_bytes": self.read_bytes}
