"""Several GPUs of this process running one program (:class:`MultiGpuEngine`): each owns
a contiguous range of the partition's pages, which only it lays out and computes, and
after every iteration copies the values it computed to the others, GPU to GPU.

Every GPU writes only its own vertices' values and flags; the first holds all the
values (the run's state), the others the values their pages read (every source below
the highest their edges name). In sync mode a GPU launches its resident pages in runs
(``tuning.MULTI_GPU_RUNS``), those of most vertices first, and copies each run's new
values to the others while its next run computes, on a copy stream for each peer (one
stream would send to the peers one after the other); the rest (async mode, streamed
pages) are copied on the stream that computed them once its pass ends. Every GPU's
next work waits for the copies into it.
The activated counts cross the same way, and each GPU sums them on the device: a
chained iteration's kernels return at once when the whole previous iteration activated
nothing, so several iterations stay in flight and the host never waits between them.
"""

from __future__ import annotations

import numpy as np

from .. import tuning
from ..errors import GraphError
from .base import Engine
from .gpu import GpuEngine


def _summed(name, doc):
    """A property: the attribute ``name`` summed over a MultiGpuEngine's engines."""
    return property(lambda self: sum(getattr(e, name) for e in self.engines), doc=doc)


def page_ranges(page_work, shares):
    """Contiguous ranges of page numbers, one a share in ``shares`` (positive numbers, a
    GPU's relative speed), holding about those shares of the work ``page_work`` (of
    every page: its edges and vertices); each range has a page at least."""
    pages, parts = len(page_work), len(shares)
    if pages < parts:
        raise GraphError(f"{pages} pages cannot be shared by {parts} GPUs; use smaller "
                         f"pages (gpu={{'page_bytes': ...}})")
    cumulative = np.cumsum(np.asarray(page_work, np.float64))
    targets = np.cumsum(shares, dtype=np.float64)[:-1] / float(np.sum(shares)) * \
        cumulative[-1]
    bounds = [0]
    for k, target in enumerate(targets.tolist(), start=1):
        cut = int(np.searchsorted(cumulative, target, side="left")) + 1  # (its page: left)
        bounds.append(min(max(cut, bounds[-1] + 1), pages - (parts - k)))
    bounds.append(pages)
    return [range(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def pass_work(edges, vertices):
    """The relative cost of a pull pass over ``edges`` edges into ``vertices``
    destination vertices (numbers or arrays): a vertex costs about
    ``tuning.GPU_VERTEX_EDGES`` edges (its sum's write and flag), so that a range of a
    few hubs and one of many small vertices take the same time."""
    return np.asarray(edges, np.float64) + \
        tuning.GPU_VERTEX_EDGES * np.asarray(vertices, np.float64)


def _run_count(value_bytes):
    """Runs a GPU's pass is launched in for ``value_bytes`` of its own values: one per
    ``tuning.MULTI_GPU_RUN_BYTES`` (rounded up), at most ``tuning.MULTI_GPU_RUNS``."""
    return int(min(tuning.MULTI_GPU_RUNS,
                   max(1, -(-value_bytes // tuning.MULTI_GPU_RUN_BYTES))))


def _read_end(graph, partition, pages):
    """One past the highest source vertex the in-edges of ``partition``'s ``pages`` (a
    range) read: values of vertices from there on are never read by those pages (in
    degree order, the vertices of no out-edge, often half of a power-law graph's)."""
    e0, e1 = partition.page_edges(pages.start)[0], partition.page_edges(pages.stop - 1)[1]
    return int(graph.in_indices[e0:e1].max()) + 1 if e1 > e0 else 0


class _Events:
    """CUDA events waited for together (the state's copies from every GPU)."""

    def __init__(self, events):
        self.events = events

    def synchronize(self):
        for event in self.events:
            event.synchronize()


class MultiGpuEngine(Engine):
    """A program on the GPUs ``devices`` (CUDA device numbers) of this process, sharing
    ``partition``'s pages by ``shares`` (default equal; see :func:`page_ranges`);
    ``values``, ``flags`` and ``aux``: the initial state, host arrays or arrays on a GPU
    of this process (``values`` None: zeros, loaded later with :meth:`load`). The other
    options are :class:`GpuEngine`'s, for every GPU. Up to ``queued`` iterations are in
    flight (the least of the GPUs'): a chained one reads the previous one's activated
    count summed over the GPUs on each device (see :meth:`launch`)."""

    mode = "gpu-pull"

    def __init__(self, spec, graph, values, flags, aux, devices, *, partition, sync=True,
                 shares=None, **options):
        import cupy as cp

        self.cupy, self.spec, self.graph = cp, spec, graph
        self.devices = [int(d) for d in devices]
        shares = [1.0] * len(self.devices) if shares is None else list(shares)
        edges, vertices = np.array([(e1 - e0, v1 - v0) for (e0, e1), (v0, v1) in (
            (partition.page_edges(p), partition.page_vertices(p))
            for p in range(partition.num_pages))], np.int64).reshape(-1, 2).T
        page_work = pass_work(edges, vertices)
        self.engines, self.compile_seconds = [], 0.0
        owned = page_ranges(page_work, shares)
        self._read_ends = [graph.num_vertices] + [_read_end(graph, partition, pages)
                                                  for pages in owned[1:]]
        for device, pages in zip(self.devices, owned):
            with cp.cuda.Device(device):
                n = graph.num_vertices
                engine = GpuEngine(spec, graph, cp.zeros(n, spec.dtype), cp.zeros(n, cp.uint8),
                                   aux, sync=sync, partition=partition,
                                   pages=pages, **options)
                if values is not None:
                    engine.load(values, flags, [(0, n)])
            self.engines.append(engine)
            self.compile_seconds += engine.compile_seconds
        self.partition = partition
        self.queued = min(engine.queued for engine in self.engines)
        self._enable_peer_access()
        self._split_passes(sync)
        self._targets = [None] * len(self.engines)  # the arrays written this iteration
        # per GPU, the iteration constant's copy when it comes from another GPU, each
        # GPU's activated count of every counter slot, and their sum a chained launch
        # reads as its go
        self._constants = [self._on(d, lambda: cp.zeros(1, cp.float64)) for d in self.devices]
        slots = len(self.engines[0]._slots)
        self._counts = [self._on(d, lambda: cp.zeros((slots, len(self.devices)), cp.uint64))
                        for d in self.devices]
        self._go_sums = [self._on(d, lambda: cp.zeros(slots, cp.uint64)) for d in self.devices]
        self._last_slot = None  # the slot of the launch a chained one follows
        self._frontier, self.front = None, float("nan")

    def _split_passes(self, sync):
        """In sync mode, have every GPU launch its resident pages in runs whose values
        its copy stream sends as soon as they are computed (:meth:`_send_run`), those of
        most vertices first (:meth:`_launch_order`); note per GPU the vertices whose
        values go after its whole pass (all of them in async mode, where a pass writes
        the values it reads)."""
        cp = self.cupy
        # (GPU j's streams copying its runs' values, one to each other GPU i: [j][i])
        self._copy_streams = [{i: self._on(d, lambda: cp.cuda.Stream(non_blocking=True))
                               for i in range(len(self.devices)) if i != j}
                              for j, d in enumerate(self.devices)] if sync else []
        self._unsent = []
        for i, engine in enumerate(self.engines):
            v0, v1 = engine.vertices
            if sync:
                runs = engine.resident_runs(_run_count((v1 - v0) * self.spec.dtype.itemsize))
                engine.split_resident_runs(self._launch_order(runs),
                                           lambda s0, s1, main, i=i:
                                           self._send_run(i, s0, s1, main))
                v0 = int(self.partition.shard_start[runs[-1][1]]) if runs else v0
            self._unsent.append((v0, v1))

    def _launch_order(self, runs):
        """``runs`` (of about equal edges) launched those of most vertices first: the
        copy of a run's values overlaps the runs after it, and the last one's, which
        the next iteration waits for, is the smallest (in degree order the first run
        holds the hubs, the last one most of the vertices)."""
        starts = self.partition.shard_start
        return sorted(runs, key=lambda run: -int(starts[run[1]] - starts[run[0]]))

    def _on(self, device, make):
        with self.cupy.cuda.Device(device):
            return make()

    def _enable_peer_access(self):
        runtime = self.cupy.cuda.runtime
        for a in self.devices:
            for b in self.devices:
                if a != b and runtime.deviceCanAccessPeer(a, b):
                    with self.cupy.cuda.Device(a):
                        try:
                            runtime.deviceEnablePeerAccess(b)
                        except runtime.CUDARuntimeError:  # already enabled
                            pass

    @property
    def values(self):
        """The current values on the first GPU (complete once its copies arrived)."""
        return self.engines[0].values

    # iteration ------------------------------------------------------------------------------
    def frontier(self):
        """(active vertices, their out-degree sum) over every GPU's own vertices."""
        if self._frontier is None:
            counts = [self._on(d, e.frontier) for d, e in zip(self.devices, self.engines)]
            self._frontier = tuple(int(x) for x in np.sum(counts, axis=0))
        return self._frontier

    def reset_frontier(self, counted=None):
        """See :meth:`GpuEngine.reset_frontier`; without ``counted``, every GPU counts
        its own vertices' part."""
        for device, engine in zip(self.devices, self.engines):
            self._on(device, lambda e=engine: e.reset_frontier(None if counted is None
                                                               else (0, 0)))
        self._frontier = None if counted is None else (int(counted[0]), int(counted[1]))
        self.front = float("nan")
        self._last_slot = None

    def iterate(self, constant, frontier=None):
        return self.wait(self.launch(constant, chained=False))[:4]

    def launch(self, constant, frontier=None, chained=True):
        """Queue one pull pass on every GPU over its own pages, then the copies of the
        values and activated counts each computed to the others, and on every GPU the
        counts' sum; returns the tickets :meth:`wait` and :meth:`discard` take.
        ``chained``: the kernels return at once when the iteration launched before
        activated no vertex on any GPU (see :meth:`GpuEngine.launch`)."""
        last = self._last_slot if chained else None
        # (every copy of the constant queued before any GPU's pass, which it would wait for)
        constants = [self._constant_on(i, constant) for i in range(len(self.devices))]
        self._targets = [engine.new_values.data.ptr for engine in self.engines]
        tickets = []
        for i, (device, engine) in enumerate(zip(self.devices, self.engines)):
            with self.cupy.cuda.Device(device):
                go = None if last is None else self._go_sums[i][last:last + 1]
                tickets.append(engine.launch(constants[i], chained=go is not None, go=go))
        slot = tickets[0]  # (every GPU takes its counter slots in the same turn)
        self._exchange(slot)
        self._sum_counts(slot)
        self._last_slot = slot if chained else None
        self._frontier = None
        return tickets

    def _constant_on(self, i, constant):
        """The iteration ``constant`` where GPU ``i`` reads it: a number as it is; a 0-d
        device array from another GPU copied into GPU ``i``'s buffer, in stream order."""
        cp = self.cupy
        if not isinstance(constant, cp.ndarray) or constant.device.id == self.devices[i]:
            return constant
        target = self._constants[i]
        source_stream = self._on(constant.device.id, cp.cuda.get_current_stream)
        cp.cuda.runtime.memcpyPeerAsync(target.data.ptr, self.devices[i], constant.data.ptr,
                                        constant.device.id, 8, source_stream.ptr)
        copied = self._on(constant.device.id, source_stream.record)
        self._on(self.devices[i], lambda: cp.cuda.get_current_stream().wait_event(copied))
        return target

    def _exchange(self, slot):
        """Copy each GPU's activated count of counter ``slot``, and the new values its
        runs did not send, to every GPU, on the stream that computed them; every GPU's
        stream then waits for those copies and for the runs' copies into it."""
        cp = self.cupy
        runtime = cp.cuda.runtime
        done, incoming = [], [[] for _ in self.devices]  # (events all / GPU i wait for)
        for j, (device, engine) in enumerate(zip(self.devices, self.engines)):
            count = engine._slot_pointers[slot]  # (its first element: vertices activated)
            with cp.cuda.Device(device):
                stream = cp.cuda.get_current_stream()
                for other_device, other, counts in zip(self.devices, self.engines,
                                                       self._counts):
                    into = counts[slot, j:j + 1].data.ptr
                    if other is engine:
                        runtime.memcpyAsync(into, count, 8, runtime.memcpyDeviceToDevice,
                                            stream.ptr)
                    else:
                        runtime.memcpyPeerAsync(into, other_device, count, device, 8,
                                                stream.ptr)
                self._send(j, *self._unsent[j], stream)
                done.append(stream.record())
                for i, copies in (self._copy_streams[j].items() if self._copy_streams
                                  else ()):
                    incoming[i].append(copies.record())
        for device, events in zip(self.devices, incoming):
            with cp.cuda.Device(device):
                stream = cp.cuda.get_current_stream()
                for event in done + events:
                    stream.wait_event(event)

    def _send_run(self, j, first_shard, end_shard, main):
        """GPU ``j`` queued the kernels of shards [first_shard, end_shard) on ``main``:
        copy their vertices' new values to each other GPU on its copy stream to it,
        after them."""
        computed = main.record()
        starts = self.partition.shard_start
        v0, v1 = int(starts[first_shard]), int(starts[end_shard])
        for i, copies in self._copy_streams[j].items():
            copies.wait_event(computed)
            self._copy(j, i, v0, v1, copies)

    def _send(self, j, v0, v1, stream):
        """Copy GPU ``j``'s values written this iteration of vertices [v0, v1) into the
        arrays every other GPU writes this iteration (read by all in the next), on
        ``stream``."""
        for i in range(len(self.devices)):
            if i != j:
                self._copy(j, i, v0, v1, stream)

    def _copy(self, j, i, v0, v1, stream):
        """Copy the values of vertices [v0, v1) written this iteration from GPU ``j``'s
        array into GPU ``i``'s, on ``stream`` (GPU ``j``'s): to the first GPU all of
        them (it holds the whole state: :attr:`values`), to the others those their
        pages read."""
        v1 = min(v1, self._read_ends[i])
        if v1 <= v0:
            return
        size = self.engines[j].values.itemsize
        self.cupy.cuda.runtime.memcpyPeerAsync(
            self._targets[i] + v0 * size, self.devices[i], self._targets[j] + v0 * size,
            self.devices[j], (v1 - v0) * size, stream.ptr)

    def _sum_counts(self, slot):
        """On every GPU, in stream order after the copies, the activated counts of counter
        ``slot`` summed into its go (read by the next chained launch)."""
        for device, counts, sums in zip(self.devices, self._counts, self._go_sums):
            with self.cupy.cuda.Device(device):
                counts[slot:slot + 1].sum(axis=1, out=sums[slot:slot + 1])

    def discard(self, tickets):
        """Undo launched iterations that followed one activating nothing, on every GPU
        (see :meth:`GpuEngine.discard`)."""
        for i, (device, engine) in enumerate(zip(self.devices, self.engines)):
            self._on(device, lambda e=engine, i=i: e.discard([t[i] for t in tickets]))
        self._last_slot = None

    def wait(self, tickets):
        """Wait for a launched iteration on every GPU; returns (mode, vertices computed,
        edges read, vertices activated, seconds of the slowest GPU)."""
        seconds, counts, fronts = 0.0, [], []
        for device, engine, ticket in zip(self.devices, self.engines, tickets):
            with self.cupy.cuda.Device(device):
                seconds = max(seconds, engine.wait(ticket)[4])
                counts.append(engine.frontier())
            fronts.append(engine.front)
        if self.spec.priority is not None:
            self.front = min(fronts, key=lambda f: np.inf if np.isnan(f) else f)
        self._frontier = tuple(int(x) for x in np.sum(counts, axis=0))
        return (self.mode, self.graph.num_vertices, self.graph.num_arcs, self._frontier[0],
                seconds)

    # state ------------------------------------------------------------------------------------
    def load(self, values, flags, ranges):
        """Copy host ``values`` and ``flags`` of the vertex ``ranges`` to every GPU."""
        for device, engine in zip(self.devices, self.engines):
            self._on(device, lambda e=engine: e.load(values, flags, ranges))

    def store(self, values, flags, ranges, written=True, wait=True):
        """Copy into the host arrays each GPU's own values and flags within ``ranges``
        (see :meth:`GpuEngine.store`); without ``wait``, returns what to synchronize."""
        events = []
        for device, engine in zip(self.devices, self.engines):
            v0, v1 = engine.vertices
            own = [(max(a, v0), min(b, v1)) for a, b in ranges if min(b, v1) > max(a, v0)]
            if own:
                events.append(self._on(device, lambda e=engine, r=own: e.store(
                    values, flags, r, written=written, wait=False)))
        stored = _Events(events)
        if not wait:
            return stored
        stored.synchronize()
        return None

    def result(self):
        """The current values as a host NumPy array (each GPU's own vertices)."""
        values = np.empty(self.graph.num_vertices, self.spec.dtype)
        flags = np.empty(self.graph.num_vertices, np.uint8)
        self.store(values, flags, [(0, self.graph.num_vertices)], written=False)
        return values

    def close(self):
        for device, engine in zip(self.devices, self.engines):
            self._on(device, engine.close)

    @property
    def reusable(self):
        """Whether :meth:`bind` may take the engines to another run (see
        :attr:`GpuEngine.reusable`)."""
        return all(engine.reusable for engine in self.engines)

    def bind(self, spec, graph, state, aux):
        """See :meth:`GpuEngine.bind`, on every GPU."""
        self.spec, self.graph = spec, graph
        for device, engine in zip(self.devices, self.engines):
            self._on(device, lambda e=engine: e.bind(spec, graph, state, aux))
        self._frontier, self.front, self._last_slot = None, float("nan"), None

    def unbind(self):
        """See :meth:`Engine.unbind`."""
        self.spec = self.graph = None
        for device, engine in zip(self.devices, self.engines):
            self._on(device, engine.unbind)

    # what the GPUs' engines counted, summed (no active subgraph: a one-GPU engine's)
    h2d_bytes = _summed("h2d_bytes", "The graph's bytes copied to the GPUs so far.")
    d2h_bytes = _summed("d2h_bytes", "The graph's bytes copied back from the GPUs so far.")
    transfer_seconds = _summed("transfer_seconds",
                               "Device seconds of those copies to the GPUs, each GPU's.")
    generation_seconds = _summed("generation_seconds", "Seconds of active subgraphs made.")

    def describe(self):
        """Each GPU's pages and placement."""
        return {"gpus": [dict(device=d, owned_pages=[e.owned.start, e.owned.stop],
                              vertices=list(e.vertices), **e.describe())
                         for d, e in zip(self.devices, self.engines)]}
