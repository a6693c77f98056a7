"""Helpers shared by the built-in algorithms: resolving vertices, checking weights."""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..program import VertexProgram
from ..scheduler.direct import small_id


def vertex_id(graph, label, what="source"):
    """Dense id of the vertex with original ``label``; GraphError if there is none."""
    if label is None:
        raise GraphError(f"{what} vertex is required; pass the original label of a vertex")
    found = small_id(graph, label)
    if found is not None:
        return found
    try:
        return int(graph.id_of(label))
    except GraphError as exc:
        raise GraphError(f"{what}: {exc}") from None


def in_weight_sums(graph):
    """Sum of the in-edge weights of every vertex (in-degree when unweighted), float64."""
    if not graph.weighted:
        return graph.in_degree().astype(np.float64)
    sums = np.zeros(graph.num_vertices)
    starts = graph.in_indptr[:-1]
    for e0, _, weights in graph.in_edge_blocks():  # blocks hold whole vertices
        lo, hi = np.searchsorted(starts, [e0, e0 + len(weights)])
        ptr = graph.in_indptr[lo:hi + 1] - e0
        run = np.add.reduceat(np.append(weights.astype(np.float64), 0.0), ptr[:-1])
        sums[lo:hi] = run * (np.diff(ptr) > 0)
    return sums


def check_nonnegative_weights(graph, algorithm):
    """GraphError naming the first negative or NaN edge weight, if any."""
    found = graph.first_negative_weight()
    if found is None:
        return
    e, src, weight = found
    dst = int(np.searchsorted(graph.in_indptr, e, side="right") - 1)
    raise GraphError(f"{algorithm} needs non-negative edge weights; edge "
                     f"{graph.label_of(src)!r} -> {graph.label_of(dst)!r} "
                     f"has weight {weight}; use weights >= 0")


class MinRelaxation(VertexProgram):
    """Base of the fixed-point min programs (sssp, bfs, cc): a vertex keeps the smaller
    of its value and what it gathered, and propagates only decreases."""

    reduce = "min"
    incremental = True
    activates_on_change = True  # a value changed by min decreased: new < old
    init_side_effects = False  # (init returns its arrays and sets nothing)

    @staticmethod
    def apply(old, acc, aux):
        return acc if acc < old else old

    @staticmethod
    def activate(new, old):
        return new < old


class WeightedInputs(VertexProgram):
    """Base of the simulations (nn, heat, circuit): gather the weighted sum of the
    in-neighbours' values; a vertex is active while its value changes."""

    reduce = "add"
    needs_weights = True
    notify_self = True  # apply reads the old value

    @staticmethod
    def gather(src, weight, dst):
        return weight * src

    @staticmethod
    def activate(new, old):
        return new != old


def single_source_state(num_vertices, source, unreached, dtype, xp=np):
    """(values, active) with every vertex at ``unreached``, the source at 0 and active,
    arrays of the module ``xp``."""
    values = xp.full(num_vertices, unreached, dtype)
    values[source] = 0
    active = xp.zeros(num_vertices, bool)
    active[source] = True
    return values, active
