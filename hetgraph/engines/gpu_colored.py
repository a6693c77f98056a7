"""A colored pass on one GPU (``mode="colored"``, see :mod:`.colored`): the launches of
:class:`ColoredLaunches`, made once per engine and replayed each pass as one CUDA graph.

The hybrid partition's shards run first, into a second array copied into the values
after them (Jacobi within the partition), then each color's shards from the last color
to the first, in place: one launch a color (per source range). Where the program's
constant is summed again after each color (a colored PageRank's dangling rank,
:func:`.colored.swept_of`), the iteration's first sums are one launch
(:class:`~hetgraph.kernels.gpu.swept.SweptSums`) and each color's kernel sums its own
new values and writes the constant the next color reads (the shard kernel's ``swept``
variant): no launch between the colors.

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
        self._swept_kernel = None
        self.replay = self._bound = None
        self.bind()

    def bind(self):
        """Make the launches for the engine's current program, aux and constant (a new
        run bound to the engine): the graph is kept where they are the same."""
        engine = self.engine
        terms = swept_of(engine.spec.program, engine.graph, engine.coloring)
        if terms is None or len(self.runs) != engine.coloring.count:
            self.swept = None
        elif self.swept is None:
            self.swept = SweptSums(terms, engine.values, self._most_blocks())
        else:
            self.swept.load(terms, engine.values)
        # (what a bound run may change in the launches: rebuilt only then)
        key = (engine.aux.data.ptr, engine.aux.size,
               None if self.swept is None else self.swept.launch[0].key())
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

    def _most_blocks(self) -> int:
        return max(b - a for a, b in self.runs)

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
        if s1 > s0:
            ops += self._color(len(colors), hybrid, self.hybrid_values)
            v0, v1 = (int(v) for v in engine.partition.shard_start[[s0, s1]])
            size = engine.values.itemsize
            ops.append(("copy", engine.values.data.ptr + v0 * size,
                        self.hybrid_values.data.ptr + v0 * size, (v1 - v0) * size))
        for c in range(len(colors) - 1, -1, -1):
            ops += self._color(c, colors[c], engine.values)
        return ops

    def _color(self, c, shards, written):
        """The launches (one per source range) of color ``c``'s ``shards``, writing
        their values into ``written``."""
        engine = self.engine
        s0, s1 = shards
        if s1 == s0:
            return []
        src, offsets, weight = engine.pages.resident
        constant = engine.constant if self.swept is None else self.swept.constant
        swept = {} if self.swept is None else self.swept.arguments(c)
        kernel = engine.kernel if self.swept is None else self._kernel()
        ops = []
        for k in range(engine.ranges):
            arguments = dict(
                engine.shard_arguments, src=src, offsets=offsets,
                weight=engine._no_weight if weight is None else weight,
                k_begin=np.int32(k), k_end=np.int32(k + 1), first=np.int32(k == 0),
                last=np.int32(k + 1 == engine.ranges),
                edge_base=np.int64(engine.plan.first_edge), first_shard=np.int32(s0),
                values=engine.values, new_values=written, aux=engine.aux,
                aux_per_vertex=np.int32(engine.aux.size > 1), constant_at=constant,
                counters=self.counters, go=self.go, **swept)
            ops.append(("kernel", PackedLaunch(kernel, arguments), s1 - s0,
                        engine.threads_per_block, engine.shared_bytes))
        return ops

    def _kernel(self):
        """The shard kernel's swept variant for the engine's program, compiled once."""
        if self._swept_kernel is None:
            self._swept_kernel = compile_kernel(self.engine.spec, swept=True,
                                                **self.engine.kernel_options)
            self._swept_kernel.max_dynamic_shared_size_bytes = self.engine.shared_bytes
        return self._swept_kernel
