"""Pages on a GPU: how a page's edges are laid out for the shard kernel
(:func:`page_layout`), which pages stay on the device and which are streamed
(:class:`PagePlan`), and a graph's pages laid out on a device (:class:`DevicePages`).
"""

from __future__ import annotations

import logging

import numpy as np

from .device import GpuMemoryError, pinned_empty

log = logging.getLogger(__name__)

EDGE_ORDERS = ("source", "destination")


def unsigned_index(index_dtype):
    """The unsigned dtype the GPU reads vertex ids as (same size as ``index_dtype``)."""
    return {4: np.uint32, 8: np.uint64}[np.dtype(index_dtype).itemsize]


def range_cuts(num_vertices, ranges):
    """The first source vertex of each of ``ranges`` equal source ranges, and
    ``num_vertices`` after them (int64, ``ranges`` + 1 values)."""
    return (np.arange(ranges + 1, dtype=np.int64) * num_vertices) // ranges


def _stable_argsort(xp, keys):
    """Indices sorting ``keys``, equal keys kept in order (CuPy's sort is always stable)."""
    return np.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)


def page_layout(xp, graph, partition, p, weighted, order="source", ranges=1):
    """Page ``p``'s edges as the shard kernel reads them, built with the array module
    ``xp`` (CuPy on the engine's device; NumPy gives the same arrays on the host):
    (src, destination offset from the shard's first vertex (uint16), weight or None,
    table), with every shard's edges kept inside the shard.

    ``order="destination"`` keeps the CSC order; ``"source"`` sorts each shard's edges
    by source (stable), so that the blocks running at the same time gather from a narrow
    band of source vertices that stays in the L2 cache (a soft form of GraphCage's cache
    blocking; the shard kernel accumulates in shared memory, so order is free). The sort
    runs on the device when ``xp`` is CuPy: on the host it would cost more than a run.
    ``table``: (shards, ``ranges`` + 1) int64, the first edge (graph-wide) of each
    source range in each shard and the shard's end; range k holds the sources
    [k N / ranges, (k + 1) N / ranges)."""
    s0, s1 = int(partition.page_shard[p]), int(partition.page_shard[p + 1])
    v0, v1 = partition.page_vertices(p)
    e0, e1 = partition.page_edges(p)
    starts = partition.shard_start[s0:s1 + 1]
    shard_edge = graph.in_indptr[starts] - e0
    edge = xp.arange(e1 - e0)
    shard = xp.searchsorted(xp.asarray(shard_edge[1:]), edge, side="right")
    vertex = xp.searchsorted(xp.asarray(graph.in_indptr[v0 + 1:v1 + 1]) - e0, edge,
                             side="right")  # from the page's first vertex
    offsets = (vertex - xp.asarray(starts[:-1] - v0)[shard]).astype(np.uint16)
    src = xp.asarray(graph.in_indices[e0:e1].view(unsigned_index(graph.index_dtype)))
    weight = xp.asarray(graph.in_weights[e0:e1]) if weighted else None
    if order == "source":
        by_source = _stable_argsort(xp, src)
        by_shard = by_source[_stable_argsort(xp, shard[by_source])]
        src, offsets = src[by_shard], offsets[by_shard]
        weight = None if weight is None else weight[by_shard]
    cuts = range_cuts(graph.num_vertices, ranges)
    sizes = xp.asarray(np.diff(shard_edge))
    # sorted by source, a shard's edges below a cut come first: its first edge at or
    # above the cut is the shard's first edge plus their count (none below 0, all below N)
    below = [xp.zeros_like(sizes) if cut == 0 else sizes if cut >= graph.num_vertices else
             xp.bincount(shard[src < cut], minlength=s1 - s0) for cut in cuts.tolist()]
    table = xp.stack(below, axis=1) + xp.asarray(shard_edge[:-1, None] + e0)
    return src, offsets, weight, table


def page_bytes_for(edge_bytes_total, budget, page_bytes, streams):
    """Page size (bytes) for a GPU ``budget`` (bytes; None: no limit): ``page_bytes``
    when all the edges fit the budget, else small enough that ``streams`` staged pages
    use a quarter of it."""
    if budget is None or edge_bytes_total <= budget:
        return page_bytes
    return max(1, min(page_bytes, budget // (4 * streams)))


class PagePlan:
    """Which pages stay on the device and which are streamed, for a byte budget.

    ``budget``: device bytes for edge data (resident pages + staging buffers).
    ``per_edge``: bytes of one edge. Pages are ``partition``'s pages ``pages`` (a range
    of page numbers; default all): all resident when they fit, else a resident prefix
    and ``streams`` staging buffers each as large as the largest streamed page.
    ``page_edges`` is indexed by page number (every page of the partition).
    """

    def __init__(self, partition, per_edge, budget, streams, pages=None):
        self.partition = partition
        self.pages = range(partition.num_pages) if pages is None else pages
        edges = np.array([partition.page_edges(p) for p in range(partition.num_pages)],
                         dtype=np.int64).reshape(-1, 2)
        sizes = (edges[self.pages.start:self.pages.stop, 1] -
                 edges[self.pages.start:self.pages.stop, 0]) * per_edge
        self.page_edges = edges
        self.streams = 0
        self.stage_edges = 0
        if int(sizes.sum()) <= budget:
            self.resident = len(self.pages)
            return
        largest = int(sizes.max())
        if largest > budget:
            raise GpuMemoryError(f"a page of {largest:,} bytes does not fit the GPU budget of "
                                 f"{budget:,} bytes even alone")
        self.streams = max(1, min(streams, budget // largest))
        stage = self.streams * largest
        cumulative = np.cumsum(sizes)
        self.resident = int(np.searchsorted(cumulative, budget - stage, side="right"))
        self.stage_edges = largest // per_edge

    @property
    def resident_end(self) -> int:
        """The page number after the resident ones (the first of ``pages``)."""
        return self.pages.start + self.resident

    @property
    def first_edge(self) -> int:
        """The first edge of the pages (graph-wide numbering)."""
        return int(self.page_edges[self.pages.start, 0]) if len(self.pages) else 0

    @property
    def resident_edges(self) -> int:
        """The edge after the resident pages (graph-wide numbering): the resident
        pages hold the edges [first_edge, resident_edges)."""
        return int(self.page_edges[self.resident_end - 1, 1]) if self.resident else \
            self.first_edge

    @property
    def streamed_pages(self):
        """The page numbers copied in every iteration."""
        return range(self.resident_end, self.pages.stop)


class DevicePages:
    """The pages of ``graph`` (cut by ``partition``) on the current device, for a byte
    ``budget`` of edge data (resident pages plus ``streams`` staging buffers, see
    :class:`PagePlan`): the resident edges (src, destination offset, weight when
    ``weighted``), the streamed pages' edges in pinned host memory, the shard tables
    (first vertex, log2 of the replication, the edge table of :func:`page_layout`) and
    the out-degrees ``degree``. Read-only once built: runs share it, even at once (each
    keeps its own staging buffers)."""

    def __init__(self, graph, partition, *, per_edge, weighted, edge_order, ranges, budget,
                 streams, degree, pages=None):
        import cupy as cp

        self.partition, self.budget = partition, budget
        self.plan = plan = PagePlan(partition, per_edge, budget, streams, pages)
        self._place_shards(degree)
        first, split = plan.first_edge, plan.resident_edges
        end = int(plan.page_edges[plan.pages.stop - 1, 1]) if len(plan.pages) else split
        self.dtypes = (unsigned_index(graph.index_dtype), np.uint16,
                       np.float32 if weighted else None)
        self.resident = tuple(None if d is None else cp.empty(split - first, d)
                              for d in self.dtypes)
        self.pinned = None if not plan.streams else tuple(
            None if d is None else pinned_empty(end - split, d) for d in self.dtypes)
        self.shard_edge = self._lay_out(graph, weighted, edge_order, ranges)
        self.nbytes = sum(a.nbytes for a in (self.shard_start, self.shard_log_r,
                                             self.out_degree, self.shard_edge,
                                             *self.resident) if a is not None)
        log.info("GPU pages: %d resident (%d edges), %d streamed over %d streams",
                 plan.resident, split, len(plan.streamed_pages), plan.streams)

    def _place_shards(self, degree):
        """The shard tables on the device (first vertex, log2 of the replication), a
        block's shared-memory slots and the out-degrees ``degree``."""
        import cupy as cp

        partition = self.partition
        log_r = np.log2(partition.replication).astype(np.uint8)
        self.shard_start = cp.asarray(partition.shard_start)
        self.shard_log_r = cp.asarray(log_r)
        # a block's shared-memory slots: its shard's vertices times their replicas
        self.slots = int((np.diff(partition.shard_start) << log_r.astype(np.int64))
                         .max(initial=1))
        self.out_degree = cp.asarray(degree)

    def _lay_out(self, graph, weighted, edge_order, ranges):
        """Lay the plan's pages out into the resident arrays or the pinned ones; returns
        the edge tables of every shard of the partition, one under the other (on the
        device; zeros for the shards of pages not laid out here, which are not read)."""
        import cupy as cp

        partition, plan = self.partition, self.plan
        first, split = plan.first_edge, plan.resident_edges
        tables = cp.zeros((partition.num_shards, ranges + 1), cp.int64)
        for p in plan.pages:
            *arrays, table = _lay_out_page(graph, partition, p, weighted, edge_order, ranges)
            e0, e1 = (int(x) for x in plan.page_edges[p])
            resident = p < plan.resident_end
            base = first if resident else split
            for target, array in zip(self.resident if resident else self.pinned, arrays):
                if array is None:
                    continue
                if resident:
                    target[e0 - base:e1 - base] = cp.asarray(array)  # (a copy)
                elif isinstance(array, np.ndarray):
                    target[e0 - base:e1 - base] = array
                else:
                    array.get(out=target[e0 - base:e1 - base])
            tables[int(partition.page_shard[p]):int(partition.page_shard[p + 1])] = \
                cp.asarray(table)
        return tables


def _lay_out_page(graph, partition, p, weighted, edge_order, ranges):
    """:func:`page_layout` of page ``p`` on the device; on the host when its scratch
    (about 80 bytes an edge) does not fit beside the pages."""
    import cupy as cp

    options = (graph, partition, p, weighted, edge_order, ranges)
    try:
        return page_layout(cp, *options)
    except MemoryError:  # CuPy's OutOfMemoryError, or the sort's std::bad_alloc
        cp.get_default_memory_pool().free_all_blocks()
        log.info("page %d laid out on the host: no device memory for its sort", p)
        return page_layout(np, *options)
