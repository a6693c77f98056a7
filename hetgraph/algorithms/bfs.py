"""Breadth-first search levels: the number of edges on a shortest path from the source.

    level'[v] = min(level[v], min_{u -> v} level[u] + 1),  level[source] = 0

Reported levels are int32; -1 marks vertices the source cannot reach.
"""

from __future__ import annotations

import time

import numpy as np

from .. import tuning
from ..scheduler import direct
from ..scheduler.entry import run
from ..io.store import as_graph
from ..kernels.arrays import replace_value
from ..registry import algorithm
from .common import MinRelaxation, single_source_state, vertex_id

UNREACHED = np.iinfo(np.int32).max
NOT_REACHED = -1  # (what the result reports; a plain int: see direct.levels)


class BreadthFirst(MinRelaxation):
    """BFS program from dense vertex id ``source`` (UNREACHED until reached)."""

    dtype = np.int32

    def __init__(self, source):
        self.source = source

    @staticmethod
    def gather(src, weight, dst):
        return src + 1 if src < UNREACHED else src

    @staticmethod
    def settled(value):  # in a sync run a level once reached is the shortest
        return value < UNREACHED

    def init(self, graph, xp=np):
        return single_source_state(graph.num_vertices, self.source, UNREACHED, np.int32, xp)

    def finalize(self, graph, values, xp=np):
        replace_value(values, UNREACHED, -1)  # (the run's own array: no copy)
        return values


@algorithm("bfs", program=BreadthFirst, needs_source=True, smallest_first=True,
           networkx=("single_source_shortest_path_length", "bfs_layers"))
def bfs(graph, source, **options):
    """Breadth-first level of every vertex from ``source``: the number of edges on a
    shortest path, following edge direction (u -> v).

    Parameters
    ----------
    graph : Graph or PageStore
    source
        Original label of the source vertex.
    **options
        Go to :func:`hetgraph.run` (``devices``, ``mode``, ``cluster``, ``checkpoint``,
        ``progress``, ...). ``max_iterations`` defaults to N.

    Returns
    -------
    Result
        ``values``: int32 levels, -1 where unreachable.

    Raises
    ------
    GraphError
        When ``source`` is not a vertex.

    Examples
    --------
    >>> import hetgraph as hg
    >>> levels = hg.bfs(hg.datasets.load("wiki-vote"), 30)
    >>> int(levels.values.max()), int((levels.values >= 0).sum())
    (5, 2316)
    """
    start = time.perf_counter()
    found = direct.small_levels(graph, source, options, np.int32, NOT_REACHED,
                                BreadthFirst.__name__, start)
    if found is not None:  # (the common call: its checks made once per graph)
        return found
    graph = as_graph(graph, options.get("host_budget"))
    program = BreadthFirst(vertex_id(graph, source))
    # (max_iterations given: the dispatcher's)
    if direct.applies(graph, options, tuning.DIRECT_LEVELS_ARCS):
        return direct.levels(graph, program.source, np.empty(graph.num_vertices, np.int32),
                             NOT_REACHED, program.name, start)
    options.setdefault("max_iterations", max(graph.num_vertices, 1))
    return run(program, graph, **options)
