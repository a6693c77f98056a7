"""Frog's hybrid coloring (Frog, TPDS, sections 3.2-3.3): a few colors for most vertices,
the rest in one "hybrid" partition.

A pass over the vertices and their edges fills an n x |V| conflict table: each vertex
takes the first of the colors 0..n-2 that no neighbour colored before it forbids, or
goes to the hybrid partition n-1, and forbids its color to its neighbours (a hybrid
vertex forbids nothing). The neighbours are those a pull pass links: a vertex reads its
in-neighbours and is read by its out-neighbours, so the pass marks both of a directed
graph. O(|V| + |E|) time and n |V| bytes.

On a power-law graph that first level leaves most edges in the hybrid partition (the
hubs, adjacent to one another). Frog updates that partition in place with atomics;
hetgraph's is a Jacobi pass (reruns bitwise equal), where Gauss-Seidel gains nothing.
So the same pass colors the hybrid partition again, among its own vertices, with
n - 1 further colors, up to ``levels`` times (the hybrid partition is then what the
last level leaves): the colored share of the first n - 1 colors is Frog's,
:attr:`Coloring.first_share`.

:func:`verify` then checks every arc: no two vertices of one of the first n-1 colors
may be adjacent (Frog's own heuristic, over the out-edges alone, leaves such pairs on a
directed graph), and :func:`repair` moves the later vertex of each such pair to a later
color none of its neighbours has, or to the hybrid partition. Vertices of one of the
first n-1 colors can then be updated together in place, each seeing only values that
no one writes during its color's pass (a self-loop is no conflict: a vertex reads
itself before it writes itself).

This module takes the graph it is given (its CSR and CSC) and imports nothing of
:mod:`hetgraph.graph`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from . import tuning
from .errors import GraphError

MAX_COLORS = 64  # a pass per color: more would cost more passes than they save
KEPT = "hybrid-coloring"  # the key under which a graph keeps its coloring (Graph.kept)
_UNCOLORED = 255  # a vertex no level has colored yet (beyond MAX_COLORS)


@dataclass(frozen=True)
class Coloring:
    """A hybrid coloring of a graph's N vertices.

    ``colors``: uint8 color of every vertex, 0 .. ``count`` - 1, the last the hybrid
    partition; ``order``: the vertex ids sorted by color (stably: ids increase within a
    color); ``bounds``: int64, ``count`` + 1 offsets into ``order``, color c's vertices
    at ``order[bounds[c]:bounds[c + 1]]``; ``level``: the colors each level of
    :func:`hybrid_coloring` adds (Frog's n - 1; ``count`` - 1 for one level).
    """

    colors: np.ndarray
    count: int
    order: np.ndarray
    bounds: np.ndarray
    level: int

    @property
    def first_share(self) -> float:
        """The share of the vertices in the first level's colors (Frog's n - 1 colors;
        1 without vertices)."""
        n = len(self.colors)
        return float(self.bounds[self.level]) / n if n else 1.0

    @property
    def hybrid(self) -> int:
        """The hybrid partition's color: the last."""
        return self.count - 1

    @property
    def sizes(self) -> np.ndarray:
        """Vertices of each color (int64, ``count`` of them)."""
        return np.diff(self.bounds)

    @property
    def colored_share(self) -> float:
        """The share of the vertices in the first ``count`` - 1 colors (1 without
        vertices)."""
        n = len(self.colors)
        return float(self.bounds[-2]) / n if n else 1.0

    @property
    def contiguous(self) -> bool:
        """Whether each color is a run of consecutive ids (a color-major order: the
        colors are vertex ranges, cut at :attr:`cuts`)."""
        return bool(np.all(self.colors[:-1] <= self.colors[1:]))

    @property
    def cuts(self) -> tuple:
        """The first vertex of every color and N, as ints: where a color-major graph's
        shards and pages begin (only where :attr:`contiguous`)."""
        return tuple(int(b) for b in self.bounds)

    def grouped(self, ids) -> tuple:
        """(``ids`` ordered by color, then id, as int64; ``at``: int64, ``count`` + 1
        offsets, color c's at [at[c], at[c + 1])) of the distinct vertex ids ``ids``."""
        ids = np.sort(np.asarray(ids, np.int64))
        colors = self.colors[ids]
        at = np.zeros(self.count + 1, np.int64)
        np.cumsum(np.bincount(colors, minlength=self.count), out=at[1:])
        return ids[np.argsort(colors, kind="stable")], at

    def renamed(self, perm) -> "Coloring":
        """The same coloring of the graph renumbered by ``perm`` (new id -> old id)."""
        return from_colors(self.colors[perm], self.count, self.level)

    def describe(self) -> dict:
        """Colors, vertices per color, the colored share, Frog's share (the first
        level's) and the passes of a colored iteration (one per color that has
        vertices), for logs, run events and benchmarks (plain numbers)."""
        return {"colors": self.count, "color_sizes": [int(s) for s in self.sizes],
                "colored_share": round(self.colored_share, 6),
                "first_share": round(self.first_share, 6),
                "passes_per_iteration": int(np.count_nonzero(self.sizes))}


def from_colors(colors, count, level=None) -> Coloring:
    """The :class:`Coloring` of a color per vertex (0 .. ``count`` - 1, the last the
    hybrid partition); ``level``: the colors a level added (default ``count`` - 1)."""
    colors = np.ascontiguousarray(colors, np.uint8)
    sizes = np.bincount(colors, minlength=count).astype(np.int64)
    if len(sizes) > count:
        raise GraphError(f"a color is {int(colors.max())}, beyond the {count} colors; "
                         f"colors run from 0 to {count - 1}")
    bounds = np.zeros(count + 1, np.int64)
    np.cumsum(sizes, out=bounds[1:])
    order = np.argsort(colors, kind="stable").astype(np.int64)
    return Coloring(colors, int(count), order, bounds,
                    int(count) - 1 if level is None else int(level))


def check_count(count):
    """GraphError unless ``count`` is a number of colors, 2 .. :data:`MAX_COLORS`."""
    if not isinstance(count, (int, np.integer)) or not 2 <= count <= MAX_COLORS:
        raise GraphError(f"colors={count!r} must be an integer from 2 to {MAX_COLORS} "
                         f"(the last is the hybrid partition)")


def _neighbour_arrays(graph):
    """(out_indptr, out_indices, in_indptr, in_indices) of the arcs the coloring must
    separate: the CSC is left empty where it equals the CSR (an undirected graph)."""
    none = np.zeros(1, np.int64), np.zeros(0, graph.index_dtype)
    return (graph.out_indptr, graph.out_indices,
            *((graph.in_indptr, graph.in_indices) if graph.directed else none))


def hybrid_coloring(graph, colors=None, levels=None) -> Coloring:
    """Frog's hybrid coloring of ``graph`` (in memory) with ``colors`` colors a level,
    the last the hybrid partition (default ``tuning.FROG_COLORS``, 5): the one pass of
    the conflict table, repeated on the hybrid partition's vertices up to ``levels``
    times (default ``tuning.FROG_LEVELS``; fewer once it is empty), then
    :func:`verify`, and :func:`repair` of what it finds (the pass marks the arcs both
    ways: nothing, unless the pass is wrong), so that no two vertices of one color
    but the last are adjacent. ``count`` is ``levels`` x (``colors`` - 1) + 1 at
    most.

    Raises
    ------
    GraphError
        When ``colors`` is not an integer in 2 .. 64, ``levels`` not one from 1 with
        at most 64 colors in all, or the graph is read out of core.
    """
    count = tuning.FROG_COLORS if colors is None else colors
    levels = tuning.FROG_LEVELS if levels is None else levels
    check_count(count)
    if not isinstance(levels, (int, np.integer)) or not \
            1 <= levels <= (MAX_COLORS - 1) // (count - 1):
        raise GraphError(f"levels={levels!r} must be an integer from 1 to "
                         f"{(MAX_COLORS - 1) // (count - 1)} with colors={count} (at "
                         f"most {MAX_COLORS} colors in all)")
    if graph.in_indices is None:
        raise GraphError("a hybrid coloring needs the graph's edges in memory; open the "
                         "store with hg.open_store or raise host_budget")
    assigned, total = _levels(_neighbour_arrays(graph), graph.num_vertices, count, levels)
    if verify(graph, assigned, total):
        repair(graph, assigned, total)
    return from_colors(assigned, total, count - 1)


def _levels(arrays, n, count, levels):
    """(uint8 colors, colors in all) of :func:`hybrid_coloring`'s levels over the
    neighbour ``arrays``: each colors the vertices left so far with ``count`` - 1 new
    colors; the hybrid partition (those left at the end) gets the last color."""
    width = count - 1
    table = np.zeros((n, width), np.uint8)  # + the colors: n x |V| a level
    assigned = np.full(n, _UNCOLORED, np.uint8)
    done = 0
    while done < levels:
        left = _conflict_table_pass(*arrays, table, assigned, done * width)
        done += 1
        if left == 0:
            break
        table[:] = 0
    total = done * width + 1
    assigned[assigned == _UNCOLORED] = total - 1
    return assigned, total


def coloring_of(graph) -> Coloring:
    """The coloring ``graph`` keeps (a color-major graph's, see
    :func:`hetgraph.order.color_major`), else its :func:`hybrid_coloring`, made once and
    kept by the graph."""
    return graph.kept(KEPT, lambda: hybrid_coloring(graph))


def frog_pass(graph, colors=None) -> np.ndarray:
    """The color of every vertex by Frog's pass as the paper gives it: each source
    takes its first free color and forbids it to its out-neighbours only, so that on a
    directed graph an in-neighbour colored earlier may share it (what :func:`verify`
    finds and :func:`repair` fixes). uint8, the last color the hybrid partition."""
    count = tuning.FROG_COLORS if colors is None else colors
    check_count(count)
    table = np.zeros((graph.num_vertices, count - 1), np.uint8)
    assigned = np.full(graph.num_vertices, _UNCOLORED, np.uint8)
    _conflict_table_pass(graph.out_indptr, graph.out_indices, np.zeros(1, np.int64),
                         np.zeros(0, graph.index_dtype), table, assigned, 0)
    assigned[assigned == _UNCOLORED] = count - 1
    return assigned


@numba.njit(cache=True, nogil=True)
def _conflict_table_pass(out_ptr, out_idx, in_ptr, in_idx, table, colors, base):
    """Color the vertices not yet colored (``colors`` 255) in id order: table[v, i] = 1
    once a neighbour of v took color ``base`` + i; v takes the first i with
    table[v, i] = 0, else stays uncolored (this level's hybrid partition: it forbids
    nothing), and marks i in the rows of its out-neighbours and (unless ``in_ptr`` is
    empty) in-neighbours. Returns the vertices left uncolored."""
    n, width = table.shape
    both = in_ptr.shape[0] > 1
    left = 0
    for v in range(n):
        if colors[v] != 255:
            continue
        c = width
        for i in range(width):
            if table[v, i] == 0:
                c = i
                break
        if c == width:
            left += 1
            continue
        colors[v] = base + c
        for e in range(out_ptr[v], out_ptr[v + 1]):
            table[out_idx[e], c] = 1
        if both:
            for e in range(in_ptr[v], in_ptr[v + 1]):
                table[in_idx[e], c] = 1
    return left


def verify(graph, colors, count) -> int:
    """The arcs u -> v (u != v) whose ends share one of the first ``count`` - 1 colors
    of ``colors`` (a color per vertex): 0 proves that each such color's vertices can
    be updated together in place."""
    return int(_violations(graph.in_indptr, graph.in_indices,
                           np.ascontiguousarray(colors, np.uint8), count - 1))


@numba.njit(cache=True, nogil=True, parallel=True)
def _violations(ptr, idx, colors, hybrid):
    """Arcs idx[e] -> v of the CSC (ptr, idx), not loops, whose ends share a color
    below ``hybrid`` (counted per vertex, then summed: a shared counter would race)."""
    n = ptr.shape[0] - 1
    found = np.zeros(n, np.int64)
    for v in numba.prange(n):
        c = colors[v]
        if c < hybrid:
            for e in range(ptr[v], ptr[v + 1]):
                u = idx[e]
                if u != v and colors[u] == c:
                    found[v] += 1
    return found.sum()


def repair(graph, colors, count) -> int:
    """Fix ``colors`` (uint8, a color per vertex, changed in place) so that
    :func:`verify` finds nothing: in id order, a vertex sharing one of the first
    ``count`` - 1 colors with a neighbour of lower id moves to the first later color
    that none of its neighbours has, else to the hybrid partition. One pass: a lower
    id's color is final when a higher one looks at it, and a move avoids every
    neighbour's color. Returns the vertices moved."""
    if colors.dtype != np.uint8 or not colors.flags.writeable:
        raise GraphError("repair changes the colors in place: give a writeable uint8 array")
    return int(_repair(*_neighbour_arrays(graph), colors, count - 1))


@numba.njit(cache=True, nogil=True)
def _shares_lower(ptr, idx, colors, v, c):
    """Whether an arc of (ptr, idx) at v reaches a lower id than v of color c."""
    for e in range(ptr[v], ptr[v + 1]):
        u = idx[e]
        if u < v and colors[u] == c:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _mark_taken(ptr, idx, colors, v, taken):
    """taken[c] = True for the color c of every neighbour of v along (ptr, idx)."""
    for e in range(ptr[v], ptr[v + 1]):
        u = idx[e]
        if u != v:
            taken[colors[u]] = True


@numba.njit(cache=True, nogil=True)
def _repair(out_ptr, out_idx, in_ptr, in_idx, colors, hybrid):
    """See :func:`repair` (``in_ptr`` empty: the CSR is symmetric)."""
    both = in_ptr.shape[0] > 1
    taken = np.zeros(hybrid + 1, np.bool_)
    moved = 0
    for v in range(colors.shape[0]):
        c = colors[v]
        if c >= hybrid:
            continue
        if not (_shares_lower(out_ptr, out_idx, colors, v, c) or
                (both and _shares_lower(in_ptr, in_idx, colors, v, c))):
            continue
        taken[:] = False
        _mark_taken(out_ptr, out_idx, colors, v, taken)
        if both:
            _mark_taken(in_ptr, in_idx, colors, v, taken)
        new = hybrid
        for k in range(c + 1, hybrid):
            if not taken[k]:
                new = k
                break
        colors[v] = new
        moved += 1
    return moved
