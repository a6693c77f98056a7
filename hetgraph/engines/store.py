"""The CPU engine out of core: a graph read from its page store page by page.

Only per-vertex arrays stay in memory (values, flags, the CSC and CSR pointers, aux);
every pass reads the pages it needs through a :class:`~hetgraph.io.pagecache.PageCache`
bounded by the run's host memory budget (shared with a GPU engine of the run in this
process, :mod:`hetgraph.engines.store_gpu`), with the next pages read (one I/O thread per
stripe) while the current ones compute:

- pull: every page's in-edges (sources, and weights when the program needs them);
- notify-pull: the out-edges of the pages holding active vertices, then the in-edges of
  the pages holding the vertices they notified, and nothing else.

Garaph 4.2: notify-pull is chosen when f <= 1/(2*rho) (corrected for the in-degree skew,
:func:`hetgraph.engines.cpu_modes.choose_cpu_mode`), with rho = k, the store's
sequential over random read speed ratio, measured by the dispatcher. Out of core a
notify-pull reads whole blocks, not edges: a small frontier spread over every page
reads every page's out-edges, then the in-edges of about every page, more than a pull.
So the choice is then checked against the pages each mode would read now
(:func:`store_mode`): the bytes the cache does not hold, at the disk's measured speed,
against each mode's compute at the pull's measured speed.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import OutOfCoreError
from ..io.pagecache import shared_cache
from ..kernels import cpu
from .cpu import CpuEngine, chunk_count
from .cpu_modes import choose_cpu_mode, notify_fraction

NOTIFY_BLOCKS = ("out_dst",)


def pages_hit(notifications, page_edges, num_arcs):
    """The chance that each page (of ``page_edges`` in-edges) is pulled by a notify-pull
    whose frontier has ``notifications`` out-edges, spread over the destinations as the
    in-edges are: 1 - exp(-notifications * page_edges / num_arcs)."""
    return -np.expm1(-float(notifications) * page_edges / max(num_arcs, 1))


def store_mode(chosen, f, skew, reads, seconds_per_byte, seconds_per_edge, num_arcs):
    """The mode of an out-of-core iteration: ``chosen`` (Garaph's rule) unless it is
    "notify-pull" and a pull would take less: ``reads`` = (bytes a pull reads, bytes a
    notify-pull reads) from the disk. With the disk's ``seconds_per_byte`` and the
    pull's ``seconds_per_edge`` measured (else None: the bytes alone decide), each mode
    takes the longer of its reads and its compute (the reads overlap the compute): a
    pull |E| edges, a notify-pull (f + min(f skew, 1)) |E|."""
    if chosen != "notify-pull":
        return chosen
    pull_read, notify_read = reads
    if seconds_per_byte is None or seconds_per_edge is None:
        return "pull" if notify_read > pull_read else chosen
    pull = max(pull_read * seconds_per_byte, num_arcs * seconds_per_edge)
    notify = max(notify_read * seconds_per_byte,
                 (f + min(f * skew, 1.0)) * num_arcs * seconds_per_edge)
    return "pull" if notify > pull else chosen


def resident_bytes(graph, state, aux):
    """Host bytes an out-of-core run keeps whatever its budget: the pointers of the CSC
    and CSR, the vertex state and the aux array."""
    return vertex_bytes(graph, state.values.dtype, state.sync, aux)


def vertex_bytes(graph, dtype, sync, aux):
    """:func:`resident_bytes` of a state of values of ``dtype`` (two arrays when
    ``sync``), flags and marks."""
    n = graph.num_vertices
    return (graph.in_indptr.nbytes + graph.out_indptr.nbytes + aux.nbytes +
            n * np.dtype(dtype).itemsize * (2 if sync else 1) + 2 * n)


class StoreEngine(CpuEngine):
    """:class:`CpuEngine` on a :class:`~hetgraph.io.store.StoredGraph`.

    ``budget``: host memory bytes for the whole run; what the vertex arrays leave of it
    (see :func:`resident_bytes`) bounds the page cache. Other options as CpuEngine.
    """

    def __init__(self, spec, graph, state, aux, *, budget, **options):
        store = graph.store
        resident = resident_bytes(graph, state, aux)
        if int(budget) <= resident:
            raise OutOfCoreError(
                f"{store.path}: host_budget={int(budget):,} bytes does not even hold the "
                f"run's vertex arrays ({resident:,} bytes); raise it")
        self.cache = shared_cache(store, int(budget) - resident)
        pages = store.manifest["pages"]
        self.page_vertices = store.page_vertices()
        self.edge_start = np.array([p["edge_start"] for p in pages], np.int64)
        self.out_edge_start = np.array([p["out_edge_start"] for p in pages], np.int64)
        self.page_in_edges = np.array([p["edge_stop"] - p["edge_start"] for p in pages],
                                      np.int64)
        self.pull_blocks = ("src", "weight") if spec.needs_weights and store.weighted \
            else ("src",)
        self.seconds_per_edge = None  # a pull's compute, measured by each pull
        try:
            super().__init__(spec, graph, state, aux, **options)
        except BaseException:
            self.cache.release()  # (shared: not left to the next run)
            raise

    bursts = False  # its iterations read pages from the store: one at a time

    def _warm_up(self):
        nothing = np.empty(0, self.graph.index_dtype)
        edges = (self.graph.in_indptr, *self.kernel.page_edges(nothing, None), 0)
        self.kernel.warm_up(edges, self.state.values, self.state.flags, self.aux,
                            parallel=self.parallel)

    @property
    def read_bytes(self) -> int:
        return self.cache.owner_read_bytes[self]  # (its own reads: the cache is shared)

    def _edges(self, page, arrays):
        """What the kernel reads for ``page`` from its blocks' arrays."""
        weights = arrays[1] if len(arrays) > 1 else None
        return (self.graph.in_indptr, *self.kernel.page_edges(arrays[0], weights),
                self.edge_start[page])

    def iterate(self, constant, frontier):
        """One iteration, pull or notify-pull (:func:`choose_cpu_mode`, then
        :func:`store_mode`); returns (mode, vertices computed, edges read, vertices
        activated)."""
        active, degree = frontier
        f = notify_fraction(degree, self.graph.num_arcs)
        chosen = choose_cpu_mode(f, self.rho, self.skew, cpu_mode=self.cpu_mode)
        notifying = self._notifying() if chosen == "notify-pull" else None
        if chosen == "notify-pull" and self.cpu_mode == "auto":
            chosen = store_mode(chosen, f, self.skew, self.reads(notifying, degree),
                                self.cache.seconds_per_byte, self.seconds_per_edge,
                                self.graph.num_arcs)
        if chosen == "pull":
            every = range(len(self.page_vertices))
            edges, counted = self._pull(every, float(constant), ahead=every)
            self.state.swap()
            computed = self.graph.num_vertices
        else:
            computed, edges, counted = self._notify_pull(float(constant), notifying)
        self.reset_frontier(counted)
        return chosen, computed, edges, counted[0]

    def _notifying(self):
        """The pages holding an active vertex."""
        starts = self.page_vertices[:, 0]
        if self.graph.num_vertices == 0:
            return np.empty(0, np.int64)
        nonempty = self.page_vertices[:, 1] > starts
        return np.flatnonzero(np.maximum.reduceat(self.state.flags, starts) * nonempty)

    def reads(self, notifying, degree):
        """(bytes a pull reads from the disk now, bytes a notify-pull from the pages
        ``notifying`` with ``degree`` out-edges is expected to read): the pull blocks of
        every page the cache lacks; the notify blocks of the notifying pages it lacks,
        then the pull blocks of the pages expected to be notified (:func:`pages_hit`),
        those it holds counted too as far as the notify's reads may replace them."""
        cache, everything = self.cache, range(len(self.page_vertices))
        missing = cache.missing_bytes(everything, self.pull_blocks)
        notify = int(cache.missing_bytes(notifying, NOTIFY_BLOCKS).sum())
        hit = pages_hit(degree, self.page_in_edges, self.graph.num_arcs)
        held = cache.cached_of(everything, self.pull_blocks)
        replaced = min(max(notify - cache.free_bytes, 0), float(hit @ held))
        return int(missing.sum()), notify + int(hit @ missing + replaced)

    def pull_pages(self, ranges, constant):
        """Pull the pages that make up the vertex ``ranges`` (each one page or several
        adjacent ones); returns (edges read, vertices activated)."""
        starts = self.page_vertices[:, 0]
        pages = [p for a, b in ranges
                 for p in range(np.searchsorted(starts, a), np.searchsorted(starts, b))]
        self.reset_frontier()
        edges, counted = self._pull(pages, float(constant))
        return edges, counted[0]

    def _pull(self, pages, constant, ahead=None):
        """Pull ``pages``; returns (edges read, (vertices activated, their out-degree
        sum)). ``ahead``: the pages the next pass is expected to pull, read ahead of it
        (see :meth:`~hetgraph.io.pagecache.PageCache.plan`)."""
        self.cache.plan(pages, self.pull_blocks, owner=self, ahead=ahead)
        edges = activated = degree = 0
        seconds = 0.0  # in the kernel, not waiting for reads
        # (a sync pull's pages are independent: any order gives the same values)
        for p in self.cache.in_turn(pages, self.pull_blocks) if self.state.sync else pages:
            arrays = self.cache.get(p, self.pull_blocks, owner=self)
            v0, v1 = self.page_vertices[p]
            prefix = self.graph.in_indptr[v0:v1 + 1]
            edges += int(prefix[-1] - prefix[0])
            start = time.perf_counter()
            counted = self._step(constant, cpu.ALL_VERTICES, prefix, v0,
                                 self._edges(p, arrays))
            seconds += time.perf_counter() - start
            activated, degree = activated + counted[0], degree + counted[1]
        if edges:
            self.seconds_per_edge = seconds / edges
        return edges, (activated, degree)

    def _notify_pull(self, constant, notifying):
        """Notify from the pages ``notifying`` (those with active vertices), pull the
        pages with notified ones; returns (vertices computed, edges read, (vertices
        activated, their out-degree sum))."""
        graph, state = self.graph, self.state
        if graph.num_vertices == 0:
            return 0, 0, (0, 0)
        starts = self.page_vertices[:, 0]
        self.cache.plan(notifying, NOTIFY_BLOCKS, owner=self)
        for p in notifying:
            (out_dst,) = self.cache.get(p, NOTIFY_BLOCKS, owner=self)
            v0, v1 = (int(v) for v in self.page_vertices[p])
            cpu.notify(state.flags, graph.out_indptr, out_dst, self.out_edge_start[p], v0,
                       v1, state.marks, self.spec.notify_self, chunk_count(v1 - v0,
                                                                           self.threads))
        vertices = cpu.compact(state.marks, self.chunks)
        cuts = np.append(np.searchsorted(vertices, starts), len(vertices))
        pulled = np.flatnonzero(np.diff(cuts))
        self.cache.plan(pulled, self.pull_blocks, same_pass=True, owner=self)
        edges = activated = degree = 0
        for p in pulled:
            arrays = self.cache.get(p, self.pull_blocks, owner=self)
            ids = vertices[cuts[p]:cuts[p + 1]]
            prefix = cpu.edge_prefix(graph.in_indptr, ids)
            edges += int(prefix[-1])
            counted = self._step(constant, ids, prefix, 0, self._edges(p, arrays))
            activated, degree = activated + counted[0], degree + counted[1]
        if state.sync:
            cpu.commit(state.values, state.new_values, vertices)
        return len(vertices), edges, (activated, degree)

    def close(self):
        """Let go of the page cache (the last engine sharing it stops its I/O threads and
        drops its pages)."""
        self.cache.release()
