"""Streamed GPU iterations over the active subgraph (Subway, EuroSys'20): while few
out-edges are active, the GPU engine's streamed pages are replaced by the out-edges of
the active vertices into them, gathered on the host and pushed on the device
(:class:`ActiveSubgraphs`; the host side is :mod:`hetgraph.kernels.gpu.subgraph`, the
kernels :mod:`hetgraph.kernels.gpu.push`).

An iteration: the device lists the active vertices with out-edges into the streamed
vertices and copies the list out; the resident pages pull as always while the host cuts
the list's edges into chunks that fit the engine's staging buffers and gathers each
into pinned memory; each chunk is copied in and pushed on the copy streams (a chunk's
copy overlaps another's push and the next one's gather); then the streamed vertices'
flags are set and counted. The engine's :attr:`times` of the iteration
(:class:`~hetgraph.kernels.gpu.spans.IterationTimes`) get the generation's parts (the
device's scan and the list's copy out, timed by events; the host's offsets, chunks and
gathers) and the chunks' copies in.

In ``async`` mode (Subway's asynchronous subgraph processing, section 3.2) what is on
the device is iterated until it settles before the next subgraph is built: Subway
pushes a loaded partition again from its vertices that changed until none did, and
the vertices changed but not pushed since stay active for the next outer iteration.
Here the resident pages are always loaded, so an iteration pulls them again from the
latest values until no resident vertex changes, then lists the vertices active at its
start or changed by those pulls, with the streamed out-neighbours of theirs that have
streamed out-edges (the likeliest to change: their edges loaded too, a chunk's inner
passes carry a change further than one hop), pushes each chunk from the latest values
and again from the vertices it changed until none changes, pulls the resident pages
until they settle again, and flags the vertices whose value differs from the one they
last pushed along all their streamed out-edges (every resident in-edge was pulled from
the latest values). Pulls and passes: at most ``tuning.SUBGRAPH_INNER_PASSES`` each.
"""

from __future__ import annotations

import logging
import threading

import numba
import numpy as np

from .. import tuning
from ..kernels.gpu.device import pinned_empty
from ..kernels.gpu.launch import PackedLaunch
from ..kernels.gpu.layout import unsigned_index
from ..kernels.gpu.push import can_push, compile_push
from ..kernels.gpu.subgraph import (OFFSET_DTYPE, active_vertices, chunk_bounds, chunk_bytes,
                                    gather_chunk, subgraph_offsets, tail_starts, with_targets)

log = logging.getLogger(__name__)

SUBGRAPH_MODES = (True, False, "async")


def active_subgraphs(engine, option):
    """The :class:`ActiveSubgraphs` of ``engine`` for its ``subgraph`` option (one of
    :data:`SUBGRAPH_MODES`), or None where they do not apply: the option is False, no
    page streams, the engine owns a part of the partition (several GPUs), the program
    cannot push (:func:`can_push`), or a staging buffer cannot hold a chunk."""
    if option is False or not len(engine.plan.streamed_pages) or engine.owned is not None \
            or not can_push(engine.spec):
        return None
    subgraphs = ActiveSubgraphs(engine, asynchronous=option == "async")
    return subgraphs if subgraphs.max_vertices >= 1 else None


class SubgraphChoice:
    """Whether a streamed iteration runs over the active subgraph, by what the two ways
    took: never from ``tuning.SUBGRAPH_ACTIVE_EDGES`` of the ``arcs`` (Subway's
    threshold); below it while a subgraph iteration is predicted faster than streaming
    the pages. A subgraph iteration is predicted as a fixed part (the fastest measured
    from a frontier of at most ``large`` out-edges) plus seconds per frontier out-edge
    (from those of more than ``large``, smoothed by ``tuning.COST_SMOOTHING``); a
    streamed one as the last measured, before any as ``stream`` seconds (the pages'
    copy, see :meth:`ActiveSubgraphs._build`). Until a slope is measured, the threshold
    alone decides. An engine's first subgraph iteration pays for compiling the push and
    is not measured. While streaming is predicted faster, a subgraph iteration is tried
    again after ``tuning.SUBGRAPH_PROBE`` streamed ones under the threshold, after
    twice as many each time it loses (up to ``tuning.SUBGRAPH_PROBE_MAX``), from the
    first frontier of at most ``tuning.SUBGRAPH_PROBE_CHUNKS`` times ``large``
    out-edges then (a try's loss bounded: it re-measures the fixed part or the slope
    near ``large``, never a frontier of most of the graph's edges); a try
    replaces the part of the prediction it measures, so that one slow iteration does
    not keep the pages streaming for good (the engine, and this choice, outlive a
    run)."""

    def __init__(self, arcs, large, stream=None):
        self.limit = tuning.SUBGRAPH_ACTIVE_EDGES * arcs
        self.large = large
        self.stream = stream
        self.fixed = self.slope = None
        self.measured = self.trying = False  # (the first push was seen; the next is a try)
        self.interval = self.wait = tuning.SUBGRAPH_PROBE

    def wanted(self, degree):
        """Whether an iteration from a frontier of ``degree`` out-edges runs over the
        active subgraph."""
        if degree >= self.limit:
            return False
        if self.slope is None or self.stream is None or \
                (self.fixed or 0.0) + self.slope * degree < self.stream:
            return True
        self.wait -= 1
        self.trying = self.wait <= 0 and degree <= tuning.SUBGRAPH_PROBE_CHUNKS * self.large
        return self.trying

    def observe(self, degree, seconds, pushed):
        """Fold in an iteration from a frontier of ``degree`` out-edges that took
        ``seconds`` on the device, over the active subgraph (``pushed``) or not."""
        if not pushed:
            self.stream = seconds
            return
        if not self.measured:  # (the push's compile)
            self.measured = True
            return
        trying, self.trying = self.trying, False
        if trying:  # back off while tries lose to streaming
            lost = self.stream is not None and seconds >= self.stream
            self.interval = min(2 * self.interval, tuning.SUBGRAPH_PROBE_MAX) \
                if lost else tuning.SUBGRAPH_PROBE
            self.wait = self.interval
        if degree <= self.large:
            self.fixed = seconds if self.fixed is None or trying else min(self.fixed, seconds)
            return
        slope = max(seconds - (self.fixed or 0.0), 0.0) / degree
        self.slope = slope if self.slope is None or trying else \
            self.slope + tuning.COST_SMOOTHING * (slope - self.slope)


# page-locked host buffers that finished runs handed back, by (size, dtype): pinning
# hundreds of megabytes takes longer than a whole run of a small frontier
_PINNED: dict = {}
_PINNED_LOCK = threading.Lock()


def _pinned(size, dtype):
    """A page-locked array of ``size`` elements of ``dtype``, one handed back if any."""
    with _PINNED_LOCK:
        free = _PINNED.get((size, np.dtype(dtype).str))
        if free:
            return free.pop()
    return pinned_empty(size, dtype)


def _give_back(arrays):
    """Keep ``arrays`` (page-locked, None skipped) for :func:`_pinned`."""
    with _PINNED_LOCK:
        for array in arrays:
            if array is not None:
                _PINNED.setdefault((array.size, array.dtype.str), []).append(array)


def _streamed_out_edges(graph, first):
    """(each vertex's first out-edge into [first, N) (:func:`tail_starts`), the number of
    its out-edges there, uint32 when they fit)."""
    starts = tail_starts(graph.out_indptr, graph.out_indices, first)
    degree = graph.out_indptr[1:] - starts
    return starts, degree.astype(np.uint32) if graph.num_arcs < 2**32 else degree


class ActiveSubgraphs:
    """The active-subgraph iterations of a :class:`GpuEngine` whose last pages stream
    (one GPU, its whole partition): ``asynchronous`` iterates what is loaded until it
    settles (see the module). Counters, since it was made: ``inner_passes`` (pushes
    beyond a chunk's first) and ``resident_passes`` (pulls of the resident pages in
    async mode)."""

    def __init__(self, engine, asynchronous=False):
        self.engine, self.cupy = engine, engine.cupy
        self.asynchronous = bool(asynchronous)
        plan = engine.plan
        self.first = engine.partition.page_vertices(plan.resident_end)[0]
        self.end = engine.vertices[1]
        unsigned = unsigned_index(engine.graph.index_dtype)
        self.index_bytes = np.dtype(unsigned).itemsize
        self.edge_bytes = self.index_bytes + (4 if engine.weighted else 0)
        # a chunk's offsets go in a stage's uint16 destination offsets, seen as uint32
        self.max_edges = plan.stage_edges
        self.max_vertices = plan.stage_edges // 2 - 1
        self.inner_passes = self.resident_passes = 0
        self._built = False  # (None: could not be)
        self.choice = SubgraphChoice(engine.graph.num_arcs, self.max_edges)

    def _build(self):
        """What the iterations need beside the engine's, made by the first (a run that
        never has a small frontier pays nothing): each vertex's first streamed out-edge
        and their count (kept by the graph), the push kernels, the host buffers."""
        engine, cp = self.engine, self.cupy
        graph, stages, n = engine.graph, engine.stages, engine.graph.num_vertices
        unsigned = unsigned_index(graph.index_dtype)
        degree_dtype = engine.pages.out_degree.dtype
        self.out_indices = graph.out_indices.view(unsigned)
        self.out_weights = graph.out_weights() if engine.weighted else np.empty(0, np.float32)
        self.starts, self.tail_degree = graph.kept(
            ("streamed_out_edges", self.first), lambda: _streamed_out_edges(graph, self.first))
        self.device_tail_degree = cp.asarray(self.tail_degree.astype(degree_dtype))
        push, hubs_push, flag_pass = compile_push(engine.spec, engine.aux.dtype,
                                                  graph.index_dtype, degree_dtype,
                                                  weighted=engine.weighted)
        # the kernels' arguments in their order (packed once: None is a null pointer);
        # every launch sets those that change (aux too: a later run may bring its own)
        aux = dict(aux=None, aux_per_vertex=np.int32(0))
        self.push = PackedLaunch(push, dict(
            active=None, offsets=None, targets=None, weight=None, n=np.int64(0),
            src_values=None, target=None, marks=None, next_marks=None, changed=None,
            pushed=None, **aux, hubs=None, hub_count=None, go=None))
        self.hubs_push = PackedLaunch(hubs_push, dict(
            active=None, offsets=None, targets=None, weight=None, src_values=None,
            target=None, next_marks=None, changed=None, pushed=None, **aux, hubs=None,
            hub_count=None, go=None))
        self.flag_pass = PackedLaunch(flag_pass, dict(
            target=None, before=None, flags=engine.flags, out_degree=engine.pages.out_degree,
            v0=np.int64(0), v1=np.int64(0), counters=None, go=None))
        edges = self.max_edges
        self.device_offsets = [stage[1][:2 * (edges // 2)].view(cp.uint32) for stage in stages]
        self.host = [(_pinned(edges, unsigned),
                      _pinned(edges, np.float32) if engine.weighted else None,
                      _pinned(edges // 2, OFFSET_DTYPE)) for _ in stages]
        self.free = [None] * len(stages)  # each host buffer's last copy (an event)
        self.hubs = [(cp.empty(edges // tuning.PUSH_WARP_DEGREE + 1, cp.uint32),
                      cp.zeros(1, cp.uint32)) for _ in stages]
        self.active_host = _pinned(n, unsigned)
        self.before = cp.empty(n, engine.spec.dtype) if not engine.sync else None
        self.marks = (cp.zeros(n, cp.uint8), cp.zeros(n, cp.uint8)) \
            if self.asynchronous else (None, None)
        if self.asynchronous:
            self._build_async(n, unsigned)
        self.changed = cp.zeros(1, cp.uint64)
        self.changed_host = _pinned(1, np.uint64)
        self.parts = 4 * numba.get_num_threads()
        self.choice.stream = self.choice.stream or self._copy_seconds()
        self._built = True

    def _build_async(self, n, unsigned):
        """What async mode adds: each vertex's value as it last pushed, its flag at the
        iteration's start and whether it has no streamed out-edge; the resident pulls'
        second array and count; the list with its targets, on the host and the device,
        and the host marks that make it (:func:`with_targets`)."""
        cp, dtype = self.cupy, self.engine.spec.dtype
        self.pushed, self.spare = cp.empty(n, dtype), cp.empty(n, dtype)
        self.start_flags = cp.empty(n, cp.uint8)
        self.no_tail = self.device_tail_degree == 0
        self.pull_counts = cp.zeros(3, cp.uint64)
        self.listed_host, self.device_listed = _pinned(n, unsigned), cp.empty(n, unsigned)
        self.host_marks = np.zeros(n, np.uint8)

    def _copy_seconds(self):
        """The seconds the streamed pages' copy takes, from the time of one staging
        buffer's copy from pinned memory (a streamed iteration takes at least that)."""
        engine, cp = self.engine, self.cupy
        stream, host, device = engine.streams[0], self.host[0][0], engine.stages[0][0]
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        device.set(host, stream=stream)
        end.record(stream)
        end.synchronize()
        seconds = cp.cuda.get_elapsed_time(start, end) / 1e3
        streamed = self.engine.describe()["streamed_edges"] * self.engine.per_edge
        return seconds * streamed / max(host.nbytes, 1)

    def wanted(self, degree):
        """Whether an iteration whose frontier has ``degree`` out-edges runs over the
        active subgraph (:class:`SubgraphChoice`; in async mode its threshold alone: an
        async iteration does more than a streamed one, their seconds do not compare),
        once what it needs could be made (out of device memory, the pages stream as
        without)."""
        if self._built is None or not (degree < self.choice.limit if self.asynchronous
                                       else self.choice.wanted(degree)):
            return False
        if not self._built:
            try:
                self._build()
            except MemoryError:  # CuPy's OutOfMemoryError
                log.warning("no GPU memory for the active subgraphs; the pages stream whole")
                self._built = None
                return False
        return True

    def release(self):
        """Hand the page-locked buffers back for later runs (the engine's run is over)."""
        if self._built:
            _give_back([array for buffers in self.host for array in buffers] +
                       [self.active_host, self.changed_host,
                        getattr(self, "listed_host", None)])
            self._built = None

    def observe(self, ran, seconds):
        """Fold a finished iteration into :attr:`choice`: ``ran``, the engine's record
        of a push (its fourth item the frontier's out-edges), None for a pull of every
        page; ``seconds`` on the device."""
        self.choice.observe(0 if ran is None else ran[3], seconds, ran is not None)

    def run(self, stream):
        """One iteration on ``stream`` (the engine's counters and go of this
        iteration; :meth:`wanted` said yes): the resident pages pulled, the active
        subgraph pushed (in async mode, :meth:`_run_async`); returns
        (vertices computed, edges read, h2d bytes, d2h bytes)."""
        if self.asynchronous:
            return self._run_async(stream)
        engine, cp = self.engine, self.cupy
        times = engine.times
        times.scans.mark(stream)
        active = active_vertices(cp, engine.flags, self.device_tail_degree)  # (waits)
        count = int(active.size)
        active = active.astype(self.out_indices.dtype)
        host_active = self.active_host[:count]
        if count:
            active.get(out=host_active)
        times.scans.mark(stream)
        target, before = (engine.new_values, engine.values) if engine.sync else \
            (engine.values, self.before)
        v0, v1 = self.first, self.end
        size = target.itemsize
        copy_to = target if engine.sync else before  # the streamed vertices' start
        cp.cuda.runtime.memcpyAsync(copy_to.data.ptr + v0 * size,
                                    engine.values.data.ptr + v0 * size, (v1 - v0) * size,
                                    cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
        ready = stream.record()
        engine.run_pages(stream=stream, resident_only=True)  # (flags read above first)
        offsets, chunks = times.host(self._cut, host_active)
        for k, chunk in enumerate(chunks):
            self._chunk(k % len(self.host), chunk, host_active, offsets, active, ready,
                        engine.values, target)
        for copy_stream in engine.streams:
            stream.wait_event(copy_stream.record())
        self._flag(stream, target, before, v0, v1, engine.counters)
        resident = engine.plan.resident_edges - engine.plan.first_edge
        return (v0 - engine.vertices[0] + count, resident + int(offsets[-1]),
                chunk_bytes(chunks, self.edge_bytes), count * self.index_bytes)

    def _flag(self, stream, target, before, v0, v1, counters):
        """Flag the vertices [v0, v1) that ``activate(target, before)`` and count them
        into ``counters`` on ``stream``."""
        blocks = int(min(tuning.PUSH_MAX_BLOCKS,
                         max(1, -(-(v1 - v0) // tuning.PUSH_THREADS_PER_BLOCK))))
        self.flag_pass.update(target=target, before=before, v0=v0, v1=v1,
                              counters=counters, go=self.engine._go)
        self.flag_pass(blocks, tuning.PUSH_THREADS_PER_BLOCK, 0, stream.ptr)

    def _run_async(self, stream):
        """One async-subgraph iteration on ``stream`` (see the module): returns what
        :meth:`run` does, the list with its targets copied in counted in h2d."""
        engine, cp = self.engine, self.cupy
        (n0, n1), first = engine.vertices, self.first
        target = engine.new_values if engine.sync else engine.values
        before = engine.values if engine.sync else self.before
        inside, span = cp.cuda.runtime.memcpyDeviceToDevice, slice(n0, n1)
        for into, source in (((target if engine.sync else before), engine.values),
                             (self.pushed, before), (self.start_flags, engine.flags)):
            cp.cuda.runtime.memcpyAsync(into[span].data.ptr, source[span].data.ptr,
                                        into[span].nbytes, inside, stream.ptr)
        passes = self._settle(stream, target)
        self._flag(stream, target, before, n0, first, self.pull_counts)  # (what they changed)
        listed = self._listed(stream)
        edges, copied = self._push_listed(stream, listed, before, target)
        passes += self._settle(stream, target)
        if not self.changed_host[0]:  # settled: every out-edge of theirs was pulled
            cp.copyto(self.pushed, target, where=self.no_tail)
        cp.cuda.runtime.memsetAsync(engine.counters.data.ptr, 0, engine.counters.nbytes,
                                    stream.ptr)
        self._flag(stream, target, self.pushed, n0, n1, engine.counters)
        resident = engine.plan.resident_edges - engine.plan.first_edge
        return (first - n0 + len(listed), passes * resident + edges,
                copied + len(listed) * self.index_bytes, self._listed_out * self.index_bytes)

    def _push_listed(self, stream, listed, before, target):
        """Push the streamed out-edges of the ``listed`` vertices (host ids, copied in)
        chunk by chunk into ``target``, each until it settles; a vertex whose edges
        span chunks takes back its ``before`` value as the one it pushed (its parts may
        have sent different ones). Returns (edges pushed, bytes copied in)."""
        cp = self.cupy
        offsets, chunks = self.engine.times.host(self._cut, listed)
        ready = stream.record()
        for k, chunk in enumerate(chunks):
            self._chunk(k % len(self.host), chunk, listed, offsets, self.device_listed, ready,
                        target, target)
        for copy_stream in self.engine.streams:
            stream.wait_event(copy_stream.record())
        cut = [listed[a0] for a0, _, e0, _ in chunks if offsets[a0] < e0] + \
            [listed[a1 - 1] for _, a1, _, e1 in chunks if offsets[a1] > e1]
        if cut:
            cut = cp.asarray(np.unique(np.asarray(cut, np.int64)))
            self.pushed[cut] = before[cut]
        return int(offsets[-1]), chunk_bytes(chunks, self.edge_bytes)

    def _cut(self, listed):
        """(:func:`subgraph_offsets`, :func:`chunk_bounds`) of the streamed out-edges of
        the ``listed`` vertices (host ids)."""
        offsets = subgraph_offsets(np, self.tail_degree[listed])
        return offsets, chunk_bounds(offsets, self.max_edges, self.max_vertices)

    def _settle(self, stream, target):
        """Pull the resident pages on ``stream`` from the latest values ``target`` into
        it until a pull changes none (at least one, at most
        ``tuning.SUBGRAPH_INNER_PASSES``: ``changed_host[0]`` is then not 0); returns
        the pulls."""
        engine, cp = self.engine, self.cupy
        n0, size = engine.vertices[0], target.itemsize
        counts = self.pull_counts
        for passes in range(1, tuning.SUBGRAPH_INNER_PASSES + 1):
            cp.cuda.runtime.memsetAsync(counts.data.ptr, 0, counts.nbytes, stream.ptr)
            engine.pull_resident(stream, target, self.spare, counts)
            cp.cuda.runtime.memcpyAsync(
                target.data.ptr + n0 * size, self.spare.data.ptr + n0 * size,
                (self.first - n0) * size, cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
            cp.cuda.runtime.memcpyAsync(self.changed_host.ctypes.data, counts.data.ptr, 8,
                                        cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()
            if not self.changed_host[0]:
                break
        self.resident_passes += passes
        return passes

    def _listed(self, stream):
        """The vertices with streamed out-edges active at the iteration's start or
        flagged since, with their targets (:func:`with_targets`): host ids (pinned, of
        the index type, increasing), copied to ``device_listed`` on ``stream``; the
        first list's length in ``_listed_out`` (it was copied out)."""
        cp, engine = self.cupy, self.engine
        times = engine.times
        times.scans.mark(stream)
        active = active_vertices(cp, engine.flags | self.start_flags,
                                 self.device_tail_degree)  # (waits)
        self._listed_out = int(active.size)
        host = self.active_host[:self._listed_out]
        if self._listed_out:
            active.astype(host.dtype).get(out=host)
        times.scans.mark(stream)
        listed = times.host(with_targets, self.starts, engine.graph.out_indptr,
                            self.out_indices, self.tail_degree, host.astype(np.int64),
                            self.host_marks)
        host_listed = self.listed_host[:len(listed)]
        host_listed[:] = listed
        if len(listed):
            times.copies.mark(stream)
            self.device_listed[:len(listed)].set(host_listed, stream=stream)
            times.copies.mark(stream)
        return host_listed

    def _chunk(self, k, chunk, host_active, offsets, active, ready, sources, target):
        """Gather ``chunk`` into host buffer ``k``, copy it to stage ``k`` and push it
        from the values ``sources`` into ``target`` on copy stream ``k`` once ``ready``
        (the streamed vertices' start) is done; in async mode again until it settles."""
        engine, cp = self.engine, self.cupy
        a0, a1, e0, e1 = chunk
        stream = engine.streams[k]
        targets, weights, offsets_host = self.host[k]
        if self.free[k] is not None:
            self.free[k].synchronize()  # (its previous chunk's copy read these)
        engine.times.host(gather_chunk, self.starts, self.out_indices, self.out_weights,
                          host_active, offsets, a0, a1, e0, e1, targets,
                          self.out_weights if weights is None else weights, offsets_host,
                          self.parts)
        stage = engine.stages[k]
        stream.wait_event(ready)
        engine.times.copies.mark(stream)
        stage[0][:e1 - e0].set(targets[:e1 - e0], stream=stream)
        if weights is not None:
            stage[2][:e1 - e0].set(weights[:e1 - e0], stream=stream)
        device_offsets = self.device_offsets[k]
        device_offsets[:a1 - a0 + 1].set(offsets_host[:a1 - a0 + 1], stream=stream)
        engine.times.copies.mark(stream)
        self.free[k] = stream.record()
        edges = (active[a0:a1], device_offsets, stage[0],
                 engine._no_weight if weights is None else stage[2], e1 - e0)
        marks, next_marks = self.marks
        self._push(k, edges, a1 - a0, sources, target, None, next_marks, stream)
        if not self.asynchronous:
            return
        for _ in range(tuning.SUBGRAPH_INNER_PASSES):  # until the chunk settles
            cp.cuda.runtime.memcpyAsync(self.changed_host.ctypes.data, self.changed.data.ptr,
                                        8, cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()
            if not self.changed_host[0]:
                break
            self.inner_passes += 1
            marks, next_marks = next_marks, marks
            self.marks = marks, next_marks
            self._push(k, edges, a1 - a0, target, target, marks, next_marks, stream)

    def _push(self, k, edges, n, sources, target, marks, next_marks, stream):
        """Push the chunk ``edges`` (active, offsets, targets, weights, their count) of
        ``n`` vertices on ``stream``, the sources' values read from ``sources`` (only
        the ``marks`` ones, when given); changes marked in ``next_marks`` (when given,
        zeroed here with the changed count)."""
        cp = self.cupy
        hubs, hub_count = self.hubs[k]
        pushed = self.pushed if self.asynchronous else None
        cp.cuda.runtime.memsetAsync(hub_count.data.ptr, 0, 4, stream.ptr)
        if next_marks is not None:
            cp.cuda.runtime.memsetAsync(next_marks.data.ptr, 0, next_marks.nbytes, stream.ptr)
            cp.cuda.runtime.memsetAsync(self.changed.data.ptr, 0, 8, stream.ptr)
        threads = tuning.PUSH_THREADS_PER_BLOCK
        active, offsets, targets, weights, count = edges
        aux = self.engine.aux
        common = dict(active=active, offsets=offsets, targets=targets, weight=weights,
                      src_values=sources, target=target, next_marks=next_marks,
                      changed=self.changed, pushed=pushed, aux=aux,
                      aux_per_vertex=int(aux.size > 1),
                      hubs=hubs, hub_count=hub_count, go=self.engine._go)
        self.push.update(n=n, marks=marks, **common)
        self.push(int(min(tuning.PUSH_MAX_BLOCKS, max(1, -(-n * 32 // threads)))), threads,
                  0, stream.ptr)
        self.hubs_push.update(**common)
        self.hubs_push(int(min(tuning.PUSH_MAX_BLOCKS, max(1, -(-count // threads)))),
                       threads, 0, stream.ptr)

    def describe(self):
        """The mode and the work so far, for logs and benchmarks."""
        return {"mode": "async" if self.asynchronous else "sync",
                "streamed_vertices": self.end - self.first, "inner_passes": self.inner_passes,
                "resident_passes": self.resident_passes, "chunk_edges": self.max_edges}
