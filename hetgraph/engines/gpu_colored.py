"""A colored pass on one GPU (``mode="colored"``, see :mod:`.colored`): the launches of
:class:`ColoredLaunches`, made once per engine and replayed each pass as one CUDA graph.

The hybrid partition's shards run first, into a second array copied into the values
after them (Jacobi within the partition), then each color's shards from the last color
to the first, in place: one launch a color (per source range). Where the program's
constant is summed again after each color (a colored PageRank's dangling rank,
:func:`.colored.swept_of`), the iteration's first sums are one launch
(:class:`~hetgraph.kernels.gpu.swept.SweptSums`), each color's kernel sums its own new
values a block at a time and every block of the next color's launch adds those sums
into the constant it reads (the shard kernel's ``swept`` variant): no launch between
the colors, no block waiting for the others.

A hub's shard holds one vertex with more in-edges than its color's other shards (a
color's shards are cut at :func:`~hetgraph.partition.shard_edge_bound` of its in-edges,
and a vertex's in-edges stay one shard's), so a color's launch lasted as long as one
block gathering its largest hub, the GPU idle beside it. Where a color has such shards
(``tuning.GPU_COLORED_SPLIT``), its launch runs jobs (:func:`split_jobs`): each such
shard cut into parts of at most the bound, a block each, the part that finishes last
adding the parts' sums in part order (the shard kernel's ``split`` variant). A shard
holding a vertex of the swept constant stays whole (its sum stays one block's).

Every launch's arguments are fixed for the engine: they read the iteration's counters,
its go flag and (without swept sums) its constant from arrays of this pass, which
:meth:`ColoredLaunches.run` fills before the pass and copies out after it; a new run
bound to the engine keeps them (its aux is copied into the engine's), so the graph is
captured once (:class:`~hetgraph.kernels.gpu.replay.GraphReplay`).
"""

from __future__ import annotations

import numpy as np

from .. import tuning
from ..kernels.gpu.launch import PackedLaunch
from ..kernels.gpu.replay import GraphReplay
from ..kernels.gpu.source import compile_kernel
from ..kernels.gpu.swept import SweptSums
from ..partition import shard_edge_bound
from .colored import swept_of


class ColoredLaunches:
    """The colored pass of ``engine`` (a :class:`~.gpu.GpuEngine` whose pages are all
    resident on its device, in source order ranges) over the shards ``runs`` of each
    color [(first shard, end shard)], the hybrid partition's last (as
    :func:`.colored.color_shards` gives them). :meth:`bind` makes the launches for the
    engine's program; :meth:`run` queues a pass."""

    def __init__(self, engine, runs):
        cp = engine.cupy
        self.engine = engine
        self.runs = runs
        self.hybrid_values = cp.empty_like(engine.values)
        self.counters = cp.zeros(3, cp.uint64)  # (the engine's slot layout)
        self.go = cp.ones(1, cp.uint64)
        self.swept = None
        self.split = None  # (SplitJobs of the launches, or None: a block a shard)
        self._split_for = None  # ((the swept vertices it was made for,))
        self._kernels = {}  # {(swept, split): the shard kernel's variant}
        self.replay = self._bound = None
        self.bind()

    def bind(self):
        """Make the launches for the engine's current program, aux and constant (a new
        run bound to the engine): the graph is kept where they are the same."""
        engine = self.engine
        terms = swept_of(engine.spec.program, engine.graph, engine.coloring)
        if terms is not None and len(self.runs) != engine.coloring.count:
            terms = None
        self._split(None if terms is None else terms[0])
        if terms is None:
            self.swept = None
        elif self.swept is None or self.swept.blocks < self._most_blocks():
            self.swept = SweptSums(terms, engine.values, self._most_blocks())
        else:
            self.swept.load(terms, engine.values)
        # (what a bound run may change in the launches: rebuilt only then)
        key = (engine.aux.data.ptr, engine.aux.size,
               None if self.swept is None else self.swept.launch[0].key(),
               None if self.split is None else self.split.jobs.data.ptr)
        if self.replay is None:
            self.replay = GraphReplay(engine.cupy, self._operations(),
                                      tuning.GPU_COLORED_GRAPH)
        elif key != self._bound:
            self.replay.set(self._operations())
        self._bound = key

    def run(self, stream):
        """Queue a pass on ``stream``: the engine's go flag and (without swept sums)
        its iteration constant into this pass's arrays, the pass, and its counters
        into the engine's slot."""
        engine, rt = self.engine, self.engine.cupy.cuda.runtime
        copy = rt.memcpyDeviceToDevice
        rt.memcpyAsync(self.go.data.ptr, engine._go_pointer, self.go.nbytes, copy,
                       stream.ptr)
        if self.swept is None and engine._constant_at is not engine.constant:
            rt.memcpyAsync(engine.constant.data.ptr, engine._constant_at.data.ptr,
                           engine.constant.nbytes, copy, stream.ptr)
            engine._constant_value = None  # (the engine's constant no longer holds it)
        self.replay.run(stream)
        rt.memcpyAsync(engine._counters_pointer, self.counters.data.ptr,
                       self.counters.nbytes, copy, stream.ptr)

    @property
    def passes(self) -> int:
        """The colors a pass launches (those with a shard)."""
        return sum(b > a for a, b in self.runs)

    @property
    def blocks(self) -> list:
        """The blocks of each run's launch (a run's shards, or its jobs where split)."""
        if self.split is None:
            return [b - a for a, b in self.runs]
        return np.diff(self.split.at).tolist()

    @property
    def split_shards(self) -> int:
        """The shards the launches cut into parts (0: a block a shard)."""
        return 0 if self.split is None else len(self.split.done)

    def _most_blocks(self) -> int:
        return max(self.blocks)

    def _split(self, kept):
        """Set :attr:`split` for a run whose swept constant's vertices are ``kept``
        (ids, whose shards stay whole; None: no swept constant): the device side of
        :func:`split_jobs`, kept where the jobs are the same (the graph's launches
        stay), None where no shard is cut."""
        engine = self.engine
        if not tuning.GPU_COLORED_SPLIT:
            self.split = self._split_for = None
            return
        if self._split_for is not None and self._split_for[0] is kept:  # (the graph's)
            return
        self._split_for = (kept,)
        shard_start = engine.partition.shard_start
        whole = np.zeros(len(shard_start) - 1, bool)
        if kept is not None and len(kept):
            whole[np.searchsorted(shard_start, kept, side="right") - 1] = True
        jobs, at, base = split_jobs(shard_start, engine.graph.in_indptr, self.runs, whole)
        if len(base) == 1:  # (no shard cut: a block a shard, the plain launches)
            self.split = None
        elif self.split is None or not self.split.same(jobs, base):
            self.split = SplitJobs(engine.cupy, jobs, at, base, engine.values.dtype)

    def _operations(self):
        """The pass as :class:`GraphReplay` operations (see the module docstring)."""
        engine = self.engine
        *colors, hybrid = self.runs
        ops = [("zero", self.counters.data.ptr, self.counters.nbytes)]
        if self.swept is not None:
            launch, blocks, threads = self.swept.launch
            if blocks:
                ops.append(("kernel", launch, blocks, threads, 0))
        s0, s1 = hybrid
        prior = None  # (the swept sums the next launch adds: see SweptSums.arguments)
        if s1 > s0:
            launches, prior = self._color(len(colors), hybrid, self.hybrid_values, prior)
            ops += launches
            v0, v1 = (int(v) for v in engine.partition.shard_start[[s0, s1]])
            size = engine.values.itemsize
            ops.append(("copy", engine.values.data.ptr + v0 * size,
                        self.hybrid_values.data.ptr + v0 * size, (v1 - v0) * size))
        for c in range(len(colors) - 1, -1, -1):
            launches, prior = self._color(c, colors[c], engine.values, prior)
            ops += launches
        return ops

    def _color(self, c, shards, written, prior):
        """The launches (one per source range) of color ``c``'s ``shards``, writing
        their values into ``written``, after a launch whose swept sums are ``prior``
        (see :meth:`SweptSums.arguments`); returns (the launches, the ``prior`` of the
        launch after)."""
        engine = self.engine
        s0, s1 = shards
        if s1 == s0:
            return [], prior
        src, offsets, weight = engine.pages.resident
        constant = engine.constant if self.swept is None else self.swept.constant
        split = {} if self.split is None else self.split.arguments(c)
        kernel = self._kernel()
        blocks = self.blocks[c]
        ops = []
        for k in range(engine.ranges):
            swept = {}
            if self.swept is not None:
                summing = k + 1 == engine.ranges and self.swept.sums(c)
                swept, prior = self.swept.arguments(c, blocks, summing, prior)
            arguments = dict(
                engine.shard_arguments, src=src, offsets=offsets,
                weight=engine._no_weight if weight is None else weight,
                k_begin=np.int32(k), k_end=np.int32(k + 1), first=np.int32(k == 0),
                last=np.int32(k + 1 == engine.ranges),
                edge_base=np.int64(engine.plan.first_edge), first_shard=np.int32(s0),
                values=engine.values, new_values=written, aux=engine.aux,
                aux_per_vertex=np.int32(engine.aux.size > 1), constant_at=constant,
                counters=self.counters, go=self.go, **swept, **split)
            ops.append(("kernel", PackedLaunch(kernel, arguments), blocks,
                        engine.threads_per_block, engine.shared_bytes))
        return ops, prior

    def _kernel(self):
        """The shard kernel for the launches: the engine's, or its swept and split
        variant for the engine's program (each compiled once)."""
        key = (self.swept is not None, self.split is not None)
        if key == (False, False):
            return self.engine.kernel
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = compile_kernel(
                self.engine.spec, swept=key[0], split=key[1], **self.engine.kernel_options)
            kernel.max_dynamic_shared_size_bytes = self.engine.shared_bytes
        return kernel


def split_jobs(shard_start, in_indptr, runs, whole=None):
    """The jobs of each run's launch [(first shard, end shard)] over the shards that
    begin at ``shard_start`` (plus N) of a graph with in-edge offsets ``in_indptr``: a
    shard with more in-edges than the run's bound (:func:`shard_edge_bound` of the
    run's in-edges: a hub alone in its shard) is cut into ceil(edges / bound) parts,
    unless ``whole`` (a bool per shard) holds it; every other shard is one job. Returns
    (jobs, at, base): ``jobs`` int32 rows (shard after the run's first, part, parts,
    split shard or -1) in shard order, run r's ``jobs[at[r]:at[r + 1]]``; ``base``
    int64, each split shard's first place in the parts' scratch (parts x its vertices
    each), its total last."""
    rows, at, sizes = [], [0], []
    for s0, s1 in runs:
        starts = np.asarray(shard_start[s0:s1 + 1], np.int64)
        edges = np.diff(np.asarray(in_indptr, np.int64)[starts])
        bound = shard_edge_bound(int(edges.sum()))
        parts = np.maximum(1, -(-edges // bound))
        if whole is not None:
            parts[whole[s0:s1]] = 1
        cut = parts > 1
        split = np.full(s1 - s0, -1, np.int64)
        split[cut] = len(sizes) + np.arange(int(cut.sum()))
        sizes.extend((parts[cut] * np.diff(starts)[cut]).tolist())
        ends = np.cumsum(parts)
        shard = np.repeat(np.arange(s1 - s0), parts)
        rows.append(np.stack([shard, np.arange(len(shard)) - (ends - parts)[shard],
                              parts[shard], split[shard]], axis=1))
        at.append(at[-1] + len(shard))
    jobs = np.concatenate(rows) if rows else np.zeros((0, 4), np.int64)
    base = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=base[1:])
    return jobs.astype(np.int32), np.asarray(at, np.int64), base


class SplitJobs:
    """The device side of :func:`split_jobs` (``jobs``, ``at``, ``base``) for values of
    ``dtype``: the jobs, the parts' scratch and each split shard's count of the parts
    done (zero between launches: the last part resets it)."""

    def __init__(self, cupy, jobs, at, base, dtype):
        self.at, self._host = at, (jobs, base)
        self.jobs = cupy.asarray(jobs.reshape(-1, 4))
        self.values = cupy.empty(max(int(base[-1]), 1), dtype)
        self.base = cupy.asarray(base)
        self.done = cupy.zeros(len(base) - 1, cupy.uint32)

    def same(self, jobs, base) -> bool:
        """Whether these are the jobs and scratch of ``jobs`` and ``base``."""
        return np.array_equal(jobs, self._host[0]) and np.array_equal(base, self._host[1])

    def arguments(self, run):
        """The shard kernel's split arguments (``split_*``) for run ``run``'s launch."""
        a, b = (int(x) for x in self.at[run:run + 2])
        return dict(split_jobs=self.jobs[a:b], split_values=self.values,
                    split_base=self.base, split_done=self.done)
