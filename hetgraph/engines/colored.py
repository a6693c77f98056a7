"""Colored execution (``mode="colored"``, Frog's asynchronous model): an iteration is one
pass per color of the graph's hybrid coloring (:mod:`hetgraph.coloring`): the hybrid
partition first, then the colors from the last to the first.

A color's vertices are pairwise not adjacent, so its pass writes their values in place
while it reads only values no one writes during it: each pass sees the values the
passes before it wrote in this iteration (Gauss-Seidel by color), and the answer does
not depend on the threads. The hybrid partition may hold adjacent vertices: its pass
reads the values before it and writes a second array, copied into the values once it
is done (Jacobi within the partition; Frog uses atomics there), so that reruns on the
CPU are bitwise identical too (the GPU's shard kernel adds a vertex's gathered values
in any order: its sums may differ in the last bits from run to run, as a sync GPU
run's do). The order is the hubs' first: the hybrid partition and the later colors
hold the vertices with most neighbours (each level's pass colors them last), whose
values feed the most others (power-law PageRank converges in fewer iterations so than
in color order: docs/tuning.md, "Colored execution").

For a program whose values change only through its in-neighbours' (incremental, no
iteration constant: BFS, SSSP, components), a CPU pass computes only its color's
vertices that a change marked since their last pass (the out-neighbours of the vertices
each pass changed), or the whole color when they are many: a thin wave's iteration reads
its wave's edges, not the graph's.

:class:`ColorSweep` runs the passes on the CPU engine; :func:`color_shards` gives the
GPU engine each color's shards (one launch a color).
"""

from __future__ import annotations

import numpy as np

from .. import tuning
from ..kernels import cpu
from ..kernels.cpu import direct
from ..kernels.cpu.pull import cut_at_vertices

MODE = "colored"  # an iteration's mode in the history (the GPU's: "gpu-colored")


class ColorSweep:
    """The passes of a colored iteration over a graph in memory. ``coloring``: a
    :class:`hetgraph.coloring.Coloring` of ``graph``; its colors are vertex ranges where
    it is contiguous (a color-major graph), else sorted id lists. ``sparse``: a pass
    computes only its color's vertices that an in-neighbour's change since their last
    pass marked (a program whose values change only through its in-neighbours': an
    incremental one that reads no iteration constant), all of them when they are at
    least ``tuning.COLORED_SPARSE_SHARE`` of the color; its passes are the first
    level's colors and one Jacobi pass over the rest (a sparse pass costs its marks'
    calls however few vertices it has, and the later levels' colors have few).
    ``alone(edges)``: whether a pass over that many in-edges runs in one range (the
    engine's rule; None: none does), whose passes :meth:`iterate` may run together in
    one call."""

    def __init__(self, coloring, graph, sparse=False, alone=None):
        self.coloring = coloring
        self.contiguous = contiguous = coloring.contiguous  # (a pass over N colors: once)
        last = coloring.level if sparse else coloring.count - 1  # (the Jacobi pass's)
        self.passes = [_vertices_of(coloring, contiguous, graph.in_indptr, c, c + 1)
                       for c in range(last)]
        self.passes.append(_vertices_of(coloring, contiguous, graph.in_indptr, last,
                                        coloring.count))
        self.scratch = None  # the hybrid pass's written values (made by the first)
        self.sparse = sparse
        self.pending = None  # uint8 marks of the vertices to compute (None: from flags)
        self.whole_left = 0  # the next passes that compute their whole color
        self.cycle = sum(len(prefix) > 1 for _, prefix, _ in self.passes)  # (non-empty)
        self.bounds = np.asarray(coloring.bounds, np.int64)  # (of a contiguous coloring)
        alone = alone or (lambda edges: False)
        #: whether every pass runs in one range: the iteration is one call of its sweep
        self.whole = all(alone(int(prefix[-1] - prefix[0])) for _, prefix, _ in self.passes)
        self.runs = _runs(self.passes[:-1], self.bounds, alone)
        #: the constant summed again after each pass (:func:`swept_of`; None: one an
        #: iteration), set for each run by the engine
        self.swept = None
        self._cuts = {}  # {(a pass's prefix id, parts, dtype): its cut} (see cut_of)
        self._whole = {id(prefix) for _, prefix, _ in self.passes}

    @property
    def fusible(self) -> bool:
        """Whether :meth:`iterate` may run its passes as one call, given that each pass
        would run in one range: its colors are vertex ranges and every pass computes
        its whole color."""
        return self.contiguous and not self.sparse

    def reset(self):
        """Forget the marks: the next iteration marks the out-neighbours of the state's
        active vertices (a new run, or a state changed elsewhere)."""
        self.pending = None
        self.whole_left = 0

    def iterate(self, step, state, graph, chunks, constant, sweep=None, together=False):
        """One colored iteration: ``step(vertices, prefix, v0, written, constant)``
        computes the ``vertices`` (ids, or the range from ``v0`` when empty; in-degree
        running total ``prefix``) into ``written`` (None: in place) with the iteration
        ``constant`` and returns (vertices activated, their out-degree sum); ``state``:
        the run's, on ``graph``; ``chunks``: of the marking's parallel loop.
        ``sweep(bounds, scratch, constant, first)``: the passes of the colors
        ``bounds`` delimit in one call (color ``first`` the first pair's), the last
        pair's into ``scratch`` first (the CPU kernel's ``colors``), used when given and
        :attr:`fusible`: for the whole iteration where every pass runs in one range or
        ``together`` asks for it, else for each run of consecutive colors that do
        (:func:`_runs`). With
        :attr:`swept` the passes' constant is its own, summed again after each pass
        (``constant`` unused). Returns (vertices computed, edges read, vertices
        activated, their out-degree sum)."""
        fused = sweep is not None and self.fusible
        swept = self.swept
        if swept is not None:
            constant = direct.swept_entry(state.values, swept, -1, constant)
        if fused and (self.whole or together):
            on, out = sweep(self.bounds, self._scratch(state), constant, 0)
            return graph.num_vertices, graph.num_arcs, int(on), int(out)
        totals = np.zeros(4, np.int64)
        *colors, hybrid = self.passes
        if len(hybrid[1]) > 1:
            totals += self._pass(step, state, graph, chunks, hybrid, self._scratch(state),
                                 constant)
            constant = self._after(state, len(colors), constant)
        if not fused:
            for c in range(len(colors) - 1, -1, -1):
                totals += self._pass(step, state, graph, chunks, colors[c], None, constant)
                constant = self._after(state, c, constant)
            return tuple(int(t) for t in totals)
        for c, bounds, computed, edges in self.runs:
            if bounds is None:
                totals += self._pass(step, state, graph, chunks, colors[c], None, constant)
                constant = self._after(state, c, constant)
            else:  # (its empty last pair: no hybrid pass, nothing copied)
                totals += (computed, edges, *sweep(bounds, self._scratch(state), constant,
                                                   c))
                constant = constant if swept is None else direct.swept_total(swept)
        return tuple(int(t) for t in totals)

    def cut_of(self, vertices, prefix, v0, parts, dtype):
        """The cut of a pass into ``parts`` ranges at vertex boundaries
        (:func:`~hetgraph.kernels.cpu.pull.cut_at_vertices` of its ``vertices``,
        ``prefix``, ``v0``, replicas of ``dtype``: a vertex sums its in-edges in one
        range, so the values are the same however many ranges a pass runs in, or
        whether the iteration runs in one call), kept for a whole color's pass (every
        iteration cuts the same ranges); a sparse pass's marked vertices get a new one."""
        if id(prefix) not in self._whole:
            return cut_at_vertices(vertices, prefix, v0, parts, dtype)
        key = (id(prefix), parts, dtype)
        cut = self._cuts.get(key)
        if cut is None:
            cut = self._cuts[key] = cut_at_vertices(vertices, prefix, v0, parts, dtype)
        return cut

    def _after(self, state, c, constant):
        """The constant of the pass after color ``c``'s (see :attr:`swept`)."""
        if self.swept is None:
            return constant
        return direct.swept_entry(state.values, self.swept, c, constant)

    def _scratch(self, state):
        """The hybrid pass's written values: an array like the state's, made once."""
        if self.scratch is None or self.scratch.dtype != state.values.dtype:
            self.scratch = np.empty_like(state.values)
        return self.scratch

    def _pass(self, step, state, graph, chunks, color, scratch, constant):
        """One color's pass with the iteration ``constant`` (into ``scratch``, then
        copied, for the hybrid partition); returns its (computed, edges, activated,
        out-degree sum)."""
        vertices, prefix, v0 = color
        if len(prefix) == 1:
            return 0, 0, 0, 0
        if self.sparse:
            vertices, prefix, v0 = self._marked(state, graph, chunks, color)
        count = len(prefix) - 1
        on, out = step(vertices, prefix, v0, scratch, constant) if count else (0, 0)
        if scratch is not None:
            where = slice(v0, v0 + count) if len(vertices) == 0 else vertices
            state.values[where] = scratch[where]
        if self.sparse and on:
            self._mark(state, graph, chunks, vertices, v0, v0 + count, out)
        return count, int(prefix[-1] - prefix[0]), on, out

    def _mark(self, state, graph, chunks, vertices, v0, v1, degree):
        """Mark the out-neighbours of the changed (flagged) ``vertices`` (or v0..v1-1),
        whose out-degrees sum to ``degree``; a wave of more than
        ``tuning.COLORED_SPARSE_SHARE`` of the arcs is not marked: every color's next pass
        computes it whole instead (marking would cost more than the pass saves)."""
        if degree > tuning.COLORED_SPARSE_SHARE * graph.num_arcs:
            self.whole_left = self.cycle
        else:
            cpu.mark_changed(state.flags, graph.out_indptr, graph.out_indices, vertices, v0,
                             v1, self.pending, chunks, degree >= tuning.SERIAL_EDGES)

    def _marked(self, state, graph, chunks, color):
        """(vertices, prefix, v0) of ``color``'s marked vertices, or the whole color when
        they are many or a large wave left it unmarked (:meth:`_mark`); its marks and
        flags cleared (the pass sets the flags of the vertices it changes)."""
        if self.pending is None:
            n = len(state.flags)
            self.pending = np.zeros(n, np.uint8)
            self._mark(state, graph, chunks, cpu.ALL_VERTICES, 0, n,
                       cpu.frontier_size(state.flags, graph.out_indptr)[1])
        vertices, prefix, v0 = color
        where = slice(v0, v0 + len(prefix) - 1) if len(vertices) == 0 else vertices
        whole = self.whole_left > 0
        self.whole_left -= whole
        marked = vertices if whole else (cpu.active_ids(self.pending[where]) + v0
                                         if len(vertices) == 0 else
                                         vertices[self.pending[vertices] != 0])
        self.pending[where] = 0
        state.flags[where] = 0
        if whole or len(marked) >= tuning.COLORED_SPARSE_SHARE * (len(prefix) - 1):
            return color
        if len(marked) == 0:
            return marked, np.zeros(1, np.int64), 0
        return marked, cpu.edge_prefix(graph.in_indptr, marked), 0

    def describe(self) -> dict:
        """The coloring's :meth:`Coloring.describe`, with this sweep's passes an
        iteration."""
        return {**self.coloring.describe(), "passes_per_iteration": self.cycle}


def _runs(colors, bounds, alone):
    """The passes of ``colors`` (all but the hybrid partition's, contiguous) in sweep
    order, last to first: (color, None, 0, 0) for a pass of its own, or (first color,
    sweep bounds, vertices, edges) for a run of consecutive colors whose passes each
    run in one range (``alone``): their bounds and the last repeated (an empty hybrid
    pair)."""
    out, run = [], []

    def close():
        if run:
            lo, hi = run[-1], run[0]
            edges = int(colors[hi][1][-1] - colors[lo][1][0])
            out.append((lo, np.append(bounds[lo:hi + 2], bounds[hi + 1]),
                        int(bounds[hi + 1] - bounds[lo]), edges))
            run.clear()

    for c in range(len(colors) - 1, -1, -1):
        edges = int(colors[c][1][-1] - colors[c][1][0])
        if alone(edges):
            run.append(c)
        else:
            close()
            out.append((c, None, 0, 0))
    close()
    return out


def swept_of(program, graph, coloring, empty=False):
    """The ``swept`` of a colored run of ``program`` on ``graph`` (its ``coloring``) as
    the compiled passes take it (:func:`hetgraph.kernels.cpu.direct.swept_pass`: the
    constant summed again after each pass, so that the later passes see the values
    the earlier ones wrote), from the program's optional ``swept_constant(graph)``
    hook: (offset, factor, vertices: ids or a slice) of a constant offset + factor *
    (sum of the values over the vertices); None without one (one constant an
    iteration), or where it has no vertex unless ``empty`` (the iteration's constant
    is then every pass's; the direct path's compiled call takes a ``swept`` always).
    Its sums (each color's and their total) are one run's."""
    hook = getattr(program, "swept_constant", None)
    terms = None if hook is None else hook(graph)
    if terms is None:
        return None
    offset, factor, vertices = terms
    ids, at = _grouped(graph, coloring, vertices)
    if not (empty or len(ids)):
        return None
    return ids, at, np.zeros(coloring.count + 1), float(offset), float(factor)


def _grouped(graph, coloring, vertices):
    """``coloring.grouped`` of ``vertices`` (ids or a slice), kept by ``graph`` for its
    last coloring and vertices (the same objects: a program's kept arrays), so that a
    call pays for the grouping once (a run's first iteration waited for it)."""
    kept = graph.kept(_GROUPED, dict)
    if kept.get("coloring") is not coloring or kept.get("vertices") is not vertices:
        ids = np.arange(len(coloring.colors), dtype=np.int64)[vertices]
        kept.update(coloring=coloring, vertices=vertices, grouped=coloring.grouped(ids))
    return kept["grouped"]


_GROUPED = "colored-swept"  # (its key in Graph.kept)


NO_SWEPT = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), 0.0, 0.0)


def _vertices_of(coloring, contiguous, in_indptr, c, end):
    """(vertices, in-degree running total, v0) of the pass over colors ``c`` ..
    ``end`` - 1: their range from v0 (vertices empty) where the coloring is
    ``contiguous``, else their sorted ids."""
    b0, b1 = int(coloring.bounds[c]), int(coloring.bounds[end])
    if contiguous:
        return cpu.ALL_VERTICES, np.ascontiguousarray(in_indptr[b0:b1 + 1], np.int64), b0
    vertices = np.sort(coloring.order[b0:b1])
    return vertices, cpu.edge_prefix(in_indptr, vertices), 0


def color_shards(shard_start, coloring, sparse=False):
    """[(first shard, end shard)] of each color (in color order, the hybrid partition
    last) of a contiguous ``coloring`` over a partition whose shards begin at
    ``shard_start`` (plus N); ``sparse``: the later levels' colors and the hybrid
    partition as one, last (an incremental program's passes, as :class:`ColorSweep`
    runs them). None when the coloring is not contiguous or a color does not begin at
    a shard's start (a partition not cut at its colors)."""
    if coloring is None or not coloring.contiguous:
        return None
    bounds = np.asarray(coloring.bounds, np.int64)
    if sparse:
        bounds = np.append(bounds[:coloring.level + 1], bounds[-1])
    at = np.searchsorted(shard_start, bounds)
    if np.any(at >= len(shard_start)) or np.any(shard_start[at] != bounds):
        return None
    return [(int(a), int(b)) for a, b in zip(at[:-1], at[1:])]
