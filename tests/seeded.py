"""A user program whose initial state its parameters alone say, for tests of what
warm calls and checkpoints tell apart (test_warm_calls.py, test_checkpoint.py import
it), and its oracle."""

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from hetgraph.algorithms.bfs import BreadthFirst


class FromSeeds(BreadthFirst):
    """BFS levels from every vertex of ``seeds``: a set of ids, or a 0/1 mask of every
    vertex (an array the calibration key describes by a sample of its elements, or
    an array-like such as a pandas Series)."""

    def __init__(self, seeds):
        self.seeds = seeds

    def init(self, graph, xp=np):
        ids = np.flatnonzero(np.asarray(self.seeds)) if hasattr(self.seeds, "__array__") \
            else np.array(sorted(self.seeds), np.int64)
        values = np.full(graph.num_vertices, np.iinfo(np.int32).max, np.int32)
        active = np.zeros(graph.num_vertices, np.uint8)
        values[ids], active[ids] = 0, 1
        return values, active


def levels_from(graph, ids):
    """BFS levels from the dense ids ``ids`` by SciPy, -1 where unreached (the oracle)."""
    if not len(ids):
        return np.full(graph.num_vertices, -1)
    targets = np.repeat(np.arange(graph.num_vertices), np.diff(graph.in_indptr))
    matrix = sp.coo_matrix((np.ones(graph.num_arcs), (graph.in_indices, targets)),
                           shape=(graph.num_vertices,) * 2).tocsr()
    levels = csgraph.shortest_path(matrix, unweighted=True, indices=list(ids)).min(axis=0)
    return np.where(np.isinf(levels), -1, levels)
