"""Colored execution (``mode="colored"``, Frog's asynchronous model): an iteration is one
pass per color of the graph's hybrid coloring (:mod:`hetgraph.coloring`), in order.

A color's vertices are pairwise not adjacent, so its pass writes their values in place
while it reads only values no one writes during it: each pass sees the values the
colors before it wrote in this iteration (Gauss-Seidel by color), and the answer does
not depend on the threads. The hybrid partition, last, may hold adjacent vertices: its
pass reads the values before it and writes a second array, copied into the values once
it is done (Jacobi within the partition; Frog uses atomics there), so that reruns on
the CPU are bitwise identical too (the GPU's shard kernel adds a vertex's gathered
values in any order: its sums may differ in the last bits from run to run, as a sync
GPU run's do).

:class:`ColorSweep` runs the passes on the CPU engine; :func:`color_shards` gives the
GPU engine each color's shards (one launch a color).
"""

from __future__ import annotations

import numpy as np

from ..kernels import cpu

MODE = "colored"  # an iteration's mode in the history (the GPU's: "gpu-colored")


class ColorSweep:
    """The passes of a colored iteration over a graph in memory. ``coloring``: a
    :class:`hetgraph.coloring.Coloring` of ``graph``; its colors are vertex ranges where
    it is contiguous (a color-major graph), else sorted id lists."""

    def __init__(self, coloring, graph):
        self.coloring = coloring
        contiguous = coloring.contiguous
        self.passes = [_vertices_of(coloring, contiguous, graph.in_indptr, c)
                       for c in range(coloring.count)]
        self.scratch = None  # the hybrid pass's written values (made by the first)

    def iterate(self, step, values):
        """One colored iteration: ``step(vertices, prefix, v0, written)`` computes the
        ``vertices`` (ids, or the range from ``v0`` when empty; in-degree running total
        ``prefix``) into ``written`` (None: in place) and returns (vertices activated,
        their out-degree sum); ``values``: the state's. Returns the same for the
        iteration, summed over its passes."""
        activated = degree = 0
        *colors, hybrid = self.passes
        for vertices, prefix, v0 in colors:
            if len(prefix) > 1:
                on, out = step(vertices, prefix, v0, None)
                activated, degree = activated + on, degree + out
        vertices, prefix, v0 = hybrid
        if len(prefix) > 1:
            if self.scratch is None or self.scratch.dtype != values.dtype:
                self.scratch = np.empty_like(values)
            on, out = step(vertices, prefix, v0, self.scratch)
            activated, degree = activated + on, degree + out
            where = slice(v0, v0 + len(prefix) - 1) if len(vertices) == 0 else vertices
            values[where] = self.scratch[where]
        return activated, degree

    def describe(self) -> dict:
        """The coloring's :meth:`Coloring.describe`."""
        return self.coloring.describe()


def _vertices_of(coloring, contiguous, in_indptr, c):
    """(vertices, in-degree running total, v0) of color ``c``'s pass: its range from v0
    (vertices empty) where the coloring is ``contiguous``, else its sorted ids."""
    b0, b1 = int(coloring.bounds[c]), int(coloring.bounds[c + 1])
    if contiguous:
        return cpu.ALL_VERTICES, np.ascontiguousarray(in_indptr[b0:b1 + 1], np.int64), b0
    vertices = coloring.order[b0:b1]
    return vertices, cpu.edge_prefix(in_indptr, vertices), 0


def color_shards(shard_start, coloring):
    """[(first shard, end shard)] of each color (the hybrid partition last) of a
    contiguous ``coloring`` over a partition whose shards begin at ``shard_start``
    (plus N); None when the coloring is not contiguous or a color does not begin at a
    shard's start (a partition not cut at its colors)."""
    if coloring is None or not coloring.contiguous:
        return None
    bounds = np.asarray(coloring.bounds, np.int64)
    at = np.searchsorted(shard_start, bounds)
    if np.any(at >= len(shard_start)) or np.any(shard_start[at] != bounds):
        return None
    return [(int(a), int(b)) for a, b in zip(at[:-1], at[1:])]
