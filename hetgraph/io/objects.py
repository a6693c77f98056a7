"""Graphs from objects already in memory: NumPy edge arrays, pandas DataFrames,
scipy.sparse matrices and NetworkX graphs.

Nothing here reads a file (files: :mod:`hetgraph.io.textformats` for text,
:mod:`hetgraph.io.tables` for columnar and array files).
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError, InputFormatError
from .build import build_from_columns, build_graph


def from_arrays(src, dst, weight=None, *, directed=True, num_vertices=None, labels=None,
                relabel=False, self_loops=True, dedup="first", name=None):
    """Graph from edge arrays of integer vertex ids.

    Parameters
    ----------
    src, dst : array_like of int
        Source and target id of every edge (ids >= 0).
    weight : array_like of float, optional
        Weight of every edge (stored as float32); None (default): unweighted.
    directed : bool
        False stores every edge in both directions. Default True. An edge given both
        ways is then one edge: its weights combine by ``dedup`` (both directions get
        the same weight).
    num_vertices : int, optional
        Vertex count; default max id + 1.
    labels : array_like, optional
        Original label of each id.
    relabel : bool
        True compacts the ids to 0..N-1 and keeps the old ids as labels. Default False.
    self_loops : bool
        False drops u -> u edges. Default True.
    dedup : {"first", "min", "max", "sum"} or None
        How the weights of parallel edges combine; None keeps parallel edges.
        Default "first".
    name : str, optional
        The graph's name.

    Returns
    -------
    Graph

    Raises
    ------
    GraphError
        On arrays of different lengths, negative ids, ids beyond ``num_vertices`` or
        weights that are not finite float32.

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.from_arrays([0, 1, 2], [1, 2, 0], weight=[1.0, 2.0, 3.0])
    >>> g.num_vertices, g.num_edges, g.weighted
    (3, 3, True)
    """
    return build_graph(src, dst, weight, directed=directed, num_vertices=num_vertices,
                       labels=labels, relabel=relabel,
                       self_loops=self_loops, dedup=dedup, name=name)


def from_pandas(df, source="src", target="dst", weight=None, *, directed=True,
                self_loops=True, dedup="first", name=None):
    """Graph from the edge rows of a pandas DataFrame.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per edge.
    source, target : str
        Names of the id columns (default "src" and "dst"): integers or any hashable
        labels, kept as the graph's labels.
    weight : str, optional
        Name of the weight column; None (default): unweighted.
    directed, self_loops, dedup, name
        As in :func:`from_arrays`.

    Returns
    -------
    Graph

    Raises
    ------
    InputFormatError
        When a column is missing, or an id is missing (NaN) or a float.

    Examples
    --------
    >>> import pandas as pd
    >>> import hetgraph as hg
    >>> df = pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"], "w": [0.5, 2.0]})
    >>> g = hg.from_pandas(df, weight="w")
    >>> g.num_vertices, list(g.labels)
    (3, ['a', 'b', 'c'])
    """
    missing = [c for c in (source, target, weight) if c is not None and c not in df.columns]
    if missing:
        raise InputFormatError(f"DataFrame has no column {missing[0]!r} "
                               f"(columns: {list(df.columns)[:10]})", source="DataFrame",
                               fix="Pass source=, target=, weight= with existing column names")
    for col in (source, target):
        if df[col].isna().any():
            i = int(np.argmax(df[col].isna().to_numpy()))
            raise InputFormatError(f"column {col!r} is missing in record {i}", source="DataFrame",
                                   fix="Drop or fill rows with missing vertex ids")
    w = None if weight is None else df[weight].to_numpy(dtype=np.float64, na_value=np.nan)
    return build_from_columns(df[source].to_numpy(), df[target].to_numpy(), w, "DataFrame",
                              directed=directed, relabel=True, self_loops=self_loops,
                              dedup=dedup, name=name)


def from_scipy(matrix, *, directed=True, weighted=None, self_loops=True, dedup="first",
               name=None):
    """Graph from a square scipy.sparse adjacency matrix: entry A[u, v] is the edge
    u -> v.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array
        N x N.
    directed : bool
        False reads the upper triangle (diagonal included) as undirected edges.
        Default True.
    weighted : bool, optional
        None (default) keeps the values as weights unless they are all 1 (or boolean).
    self_loops, dedup, name
        As in :func:`from_arrays`.

    Returns
    -------
    Graph
        N vertices, ids the row numbers.

    Raises
    ------
    GraphError
        When ``matrix`` is not sparse or not square.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> import hetgraph as hg
    >>> g = hg.from_scipy(sp.csr_matrix([[0, 2.5], [0, 0]]))
    >>> g.num_edges, g.weighted
    (1, True)
    """
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise GraphError(f"from_scipy expects a scipy.sparse matrix, got {type(matrix).__name__}")
    if matrix.shape[0] != matrix.shape[1]:
        raise GraphError(f"adjacency matrix is {matrix.shape[0]} x {matrix.shape[1]}; "
                         "it must be square")
    coo = sp.coo_matrix(matrix)
    src, dst, data = coo.row, coo.col, coo.data
    if not directed:
        keep = src <= dst
        src, dst, data = src[keep], dst[keep], data[keep]
    if weighted is None:
        weighted = data.dtype != np.bool_ and not np.all(data == 1)
    return build_graph(src, dst, data.astype(np.float64) if weighted else None,
                       directed=directed, num_vertices=matrix.shape[0], self_loops=self_loops,
                       dedup=dedup, source="scipy matrix", name=name)


def from_networkx(graph, *, weight="weight", dedup="sum", name=None):
    """Graph from a NetworkX graph (Graph, DiGraph, MultiGraph or MultiDiGraph); its
    nodes become the labels, in the graph's node order.

    Parameters
    ----------
    graph : networkx.Graph
        Direction follows the graph.
    weight : str or None
        Edge attribute read as the weight (edges without it weigh 1); None, or an
        attribute no edge has: unweighted. Default "weight".
    dedup : {"sum", "min", "max", "first"}
        How the weights of a multigraph's parallel edges combine. Default "sum", as in
        NetworkX's adjacency matrix (``to_scipy_sparse_array``, which ``pagerank``
        reads): parallel edges then weigh their count even when unweighted. "min" is
        what NetworkX's shortest-path searches read.
    name : str, optional
        The graph's name; default ``graph.name``.

    Returns
    -------
    Graph
        Labels are int64 when every node is an int that fits, else the node objects.

    Raises
    ------
    GraphError
        When the graph has no nodes.

    Examples
    --------
    >>> import networkx as nx
    >>> import hetgraph as hg
    >>> g = hg.from_networkx(nx.path_graph(4))
    >>> g.directed, g.num_edges
    (False, 3)
    >>> hg.from_networkx(nx.MultiDiGraph([(0, 1), (0, 1)])).edges()[2].tolist()
    [2.0]
    """
    nodes = list(graph)
    if not nodes:
        raise GraphError("the NetworkX graph has no nodes")
    index = {node: i for i, node in enumerate(nodes)}
    # one float64 table (dense ids are exact in it): far faster than a column per field
    table = np.array([(index[u], index[v], w) for u, v, w in
                      graph.edges(data=weight, default=1)], np.float64).reshape(-1, 3)
    src, dst, data = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2]
    directed = graph.is_directed()
    weighted = weight is not None and any(weight in d for *_, d in graph.edges(data=True))
    if dedup == "sum" and graph.is_multigraph():
        weighted = weighted or _has_parallel_edges(src, dst, directed)
    return build_graph(src, dst, data if weighted else None,
                       directed=directed, labels=_node_labels(nodes), dedup=dedup,
                       source="networkx graph", name=name or graph.name or None)


def _has_parallel_edges(src, dst, directed):
    if not directed:  # (u, v) and (v, u) are one edge
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    return len(np.unique(np.stack([src, dst]), axis=1)[0]) < len(src)


def _node_labels(nodes):
    """The nodes as labels: int64 when all are ints within its range, else objects."""
    labels = np.empty(len(nodes), dtype=object)
    labels[:] = nodes
    if all(isinstance(x, (int, np.integer)) for x in nodes) and \
            -2**63 <= min(nodes) and max(nodes) < 2**63:
        labels = labels.astype(np.int64)
    return labels
