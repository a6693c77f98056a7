"""Helpers shared by the built-in algorithms: resolving vertices, checking weights."""

from __future__ import annotations

import numpy as np

from ..errors import GraphError


def vertex_id(graph, label, what="source"):
    """Dense id of the vertex with original ``label``; GraphError if there is none."""
    if label is None:
        raise GraphError(f"{what} vertex is required; pass the original label of a vertex")
    try:
        return int(graph.id_of(label))
    except GraphError as exc:
        raise GraphError(f"{what}: {exc}") from None


def in_weight_sums(graph):
    """Sum of the in-edge weights of every vertex (in-degree when unweighted), float64."""
    if not graph.weighted:
        return graph.in_degree().astype(np.float64)
    return np.add.reduceat(np.append(graph.in_weights.astype(np.float64), 0.0),
                           graph.in_indptr[:-1]) * (graph.in_degree() > 0)


def out_weight_sums(graph):
    """Sum of the out-edge weights of every vertex (out-degree when unweighted), float64."""
    if not graph.weighted:
        return graph.out_degree().astype(np.float64)
    return np.bincount(graph.in_indices, weights=graph.in_weights,
                       minlength=graph.num_vertices)


def check_nonnegative_weights(graph, algorithm):
    """GraphError naming the first negative or NaN edge weight, if any."""
    if not graph.weighted or graph.num_arcs == 0:
        return
    bad = ~(graph.in_weights >= 0)
    if bad.any():
        e = int(np.argmax(bad))
        dst = int(np.searchsorted(graph.in_indptr, e, side="right") - 1)
        src = int(graph.in_indices[e])
        raise GraphError(f"{algorithm} needs non-negative edge weights; edge "
                         f"{graph.label_of(src)!r} -> {graph.label_of(dst)!r} has weight "
                         f"{graph.in_weights[e]}; use weights >= 0")
