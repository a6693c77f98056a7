"""Graph: CSC (in-edges, optional float32 weights) + CSR (out-edges, no weights).

Vertices are dense ids 0..N-1; ``labels`` keeps the original label of each id (None
means the label is the id). Index arrays are int32 while N < 2**31, pointers int64.

The graph type sits below the readers, builders and the page store of
:mod:`hetgraph.io`, which import it; it imports none of them. Its methods call the
modules that take the graph they are given (:mod:`hetgraph.csr`, :mod:`hetgraph.order`,
:mod:`hetgraph.partition`) and reach the page store's writer through
:mod:`hetgraph.registry` (the store's graphs are Graphs).
"""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pandas as pd

from . import registry, tuning
from .csr import symmetric_union, transpose
from .errors import GraphError
from .order import degree_skew
from .order import reorder as reordered
from .partition import partition as partitioned

_PARTITIONS_LOCK = threading.Lock()  # runs in several threads share a graph's partitions


class Graph:
    """A directed or undirected graph in CSC + CSR form.

    Build one with ``hetgraph.read``, ``from_*`` or ``generate``; undirected graphs
    store each edge in both directions. ``in_indptr``/``in_indices``/``in_weights``
    are the CSC (in-edges of v at ``in_indices[in_indptr[v]:in_indptr[v+1]]``, sorted by
    source); ``out_indptr``/``out_indices`` the CSR (targets sorted per source). Its
    arrays must not change once it is built: runs keep its partitions, its pages on a
    GPU and their calibrations.
    """

    def __init__(self, in_indptr, in_indices, in_weights, out_indptr, out_indices, *,
                 directed=True, labels=None, name=None):
        self.in_indptr = in_indptr
        self.in_indices = in_indices
        self.in_weights = in_weights
        self.out_indptr = out_indptr
        self.out_indices = out_indices
        self.directed = bool(directed)
        self.labels = None if labels is None else np.asarray(labels)
        self.name = name
        self.store = None  # the PageStore this graph was opened from, if any
        self._label_index = None
        self._undirected = None
        self._out_weights = None
        self._in_skew = None
        self._out_weight_sums = None
        self._kept: dict = {}  # see kept
        self._partitions: dict = {}  # options -> Partition, the newest last
        # names this graph's structure for what runs keep of it (its pages on a GPU, a
        # cluster's calibrations); pickled with it, so a worker process knows it again
        self.token = uuid.uuid4().hex

    # sizes ------------------------------------------------------------------
    @property
    def num_vertices(self) -> int:
        return len(self.in_indptr) - 1

    @property
    def num_arcs(self) -> int:
        """Stored directed edges (each undirected edge counts twice, loops once)."""
        return len(self.in_indices)

    @property
    def num_edges(self) -> int:
        """Edges as NetworkX counts them: arcs if directed, else undirected edges."""
        if self.directed:
            return self.num_arcs
        return (self.num_arcs + self.num_self_loops) // 2

    @property
    def num_self_loops(self) -> int:
        dst = np.repeat(np.arange(self.num_vertices, dtype=self.in_indices.dtype),
                        np.diff(self.in_indptr))
        return int(np.count_nonzero(dst == self.in_indices))

    @property
    def weighted(self) -> bool:
        return self.in_weights is not None

    @property
    def index_dtype(self) -> np.dtype:
        return self.in_indices.dtype

    def in_degree(self) -> np.ndarray:
        """In-degree of every vertex (int64 array of length N)."""
        return np.diff(self.in_indptr)

    def out_degree(self) -> np.ndarray:
        """Out-degree of every vertex (int64 array of length N)."""
        return np.diff(self.out_indptr)

    def in_degree_skew(self) -> float:
        """sum(d_in^2) / |E|, the in-degree of an average edge's destination
        (:func:`hetgraph.order.degree_skew`); computed once and kept by this graph."""
        if self._in_skew is None:
            self._in_skew = degree_skew(self.in_degree())
        return self._in_skew

    def out_weight_sums(self) -> np.ndarray:
        """Sum of the out-edge weights of every vertex (its out-degree when unweighted),
        float64; computed once and kept by this graph (a pass over every edge, which
        every PageRank call would otherwise pay)."""
        if self._out_weight_sums is None:
            if not self.weighted:
                sums = self.out_degree().astype(np.float64)
            else:
                sums = np.zeros(self.num_vertices)
                for _, sources, weights in self.in_edge_blocks():
                    sums += np.bincount(sources, weights=weights, minlength=self.num_vertices)
            sums.flags.writeable = False
            self._out_weight_sums = sums
        return self._out_weight_sums

    def kept(self, key, compute):
        """``compute()`` the first time ``key`` is asked for, the same value afterwards:
        what runs derive from the graph's arrays (which do not change) and need again."""
        if key not in self._kept:
            self._kept[key] = compute()
        return self._kept[key]

    def first_negative_weight(self):
        """(CSC position, source id, weight) of the first edge whose weight is negative
        or NaN, None when there is none (or no weight); computed once and kept by this
        graph (a pass over every weight, which every sssp call would otherwise pay)."""
        def first():
            for e0, sources, weights in (self.in_edge_blocks() if self.weighted else ()):
                bad = ~(weights >= 0)
                if bad.any():
                    e = int(np.argmax(bad))
                    return e0 + e, int(sources[e]), weights[e]
            return None

        return self.kept("first_negative_weight", first)

    def max_weight(self) -> float:
        """The largest edge weight (1 when unweighted, 0 without edges); computed once
        and kept by this graph."""
        def largest():
            if not self.weighted:
                return 1.0 if self.num_arcs else 0.0
            return max((float(w.max()) for _, _, w in self.in_edge_blocks() if len(w)),
                       default=0.0)

        return self.kept("max_weight", largest)

    @property
    def nbytes(self) -> int:
        """Bytes held by the graph's arrays (CSC, CSR, weights, labels)."""
        arrays = [self.in_indptr, self.in_indices, self.in_weights, self.out_indptr,
                  self.out_indices]
        total = sum(a.nbytes for a in arrays if a is not None)
        if self.labels is not None:
            total += self.labels.nbytes
            if self.labels.dtype == object:
                total += sum(len(str(x)) for x in self.labels)
        return total

    def out_weights(self):
        """Weights of the CSR's out-edges (float32, aligned with ``out_indices``), None
        when unweighted. Built on first use and kept by this graph (4 bytes per edge)."""
        if self.weighted and self._out_weights is None:
            self._out_weights = transpose(self.in_indptr, self.in_indices, self.in_weights,
                                          self.num_vertices)[2]
        return self._out_weights

    def in_edge_blocks(self):
        """(first edge, sources, weights or None) of consecutive runs of in-edges, in CSC
        order, each holding all the in-edges of its vertices: the whole graph here, one
        per page for a graph read from its store."""
        yield 0, self.in_indices, self.in_weights

    # labels -------------------------------------------------------------------
    def label_of(self, ids) -> np.ndarray:
        """Original labels of dense ids (the ids themselves when there are no labels)."""
        ids = np.asarray(ids)
        if ids.ndim == 0:
            return int(ids) if self.labels is None else self.labels[int(ids)]
        return ids if self.labels is None else self.labels[ids]

    def id_of(self, labels) -> np.ndarray:
        """Dense ids of original labels; raises GraphError naming an unknown label. A
        tuple is one label when the labels are objects (NetworkX nodes such as (row,
        col)), else a sequence of labels."""
        objects = self.labels is not None and self.labels.dtype == object
        scalar = np.ndim(labels) == 0 or (objects and isinstance(labels, tuple))
        if objects:  # one object per label (np.asarray would split tuples)
            items = [labels] if scalar else list(labels)
            wanted = np.empty(len(items), object)
            for i, item in enumerate(items):
                wanted[i] = item
        else:
            wanted = np.atleast_1d(np.asarray(labels, dtype=object if scalar and
                                              isinstance(labels, str) else None))
        if self.labels is None:
            if wanted.dtype.kind not in "iu":
                raise GraphError(f"vertex {wanted[0]!r} is not an integer id of this graph")
            ids = wanted.astype(np.int64)
            bad = (ids < 0) | (ids >= self.num_vertices)
        else:
            if self._label_index is None:
                self._label_index = pd.Index(self.labels, tupleize_cols=False)
            if scalar:  # a hash lookup: get_indexer costs far more for one label
                try:
                    found = self._label_index.get_loc(wanted[0])
                except (KeyError, TypeError, pd.errors.InvalidIndexError):
                    found = -1
                ids = np.array([found if isinstance(found, (int, np.integer)) else -1])
            else:
                ids = self._label_index.get_indexer(wanted)
            bad = ids < 0
        if bad.any():
            first = wanted[np.argmax(bad)]
            first = first.item() if isinstance(first, np.generic) else first
            raise GraphError(f"vertex {first!r} is not in the graph "
                             f"({self.num_vertices} vertices); check the label or id")
        return ids[0] if scalar else ids

    # conversions --------------------------------------------------------------
    def to_scipy(self):
        """scipy.sparse CSR matrix A with A[u, v] = weight (1.0 if unweighted) for u->v."""
        import scipy.sparse as sp

        data = (self.in_weights if self.weighted
                else np.ones(self.num_arcs, dtype=np.float32))
        csc = sp.csc_matrix((data, self.in_indices, self.in_indptr),
                            shape=(self.num_vertices,) * 2)
        return csc.tocsr()

    def edges(self):
        """(src, dst, weight or None) arrays of every stored arc, sorted by dst then src."""
        dst = np.repeat(np.arange(self.num_vertices, dtype=np.int64), self.in_degree())
        return self.in_indices.astype(np.int64), dst, self.in_weights

    def to_undirected(self) -> "Graph":
        """The undirected graph with an edge u-v wherever u->v or v->u (self if already
        undirected); weights of both directions are combined by min. Built once and kept
        by this graph (it costs about as much memory again)."""
        if not self.directed:
            return self
        if self._undirected is None:
            ptr, idx, weights = symmetric_union(self.in_indptr, self.in_indices,
                                                self.in_weights, self.out_indptr,
                                                self.out_indices, self.out_weights())
            # symmetric: the out-edges are the in-edges (targets sorted per source)
            self._undirected = self.with_arrays(ptr, idx, weights, ptr.copy(), idx.copy(),
                                                directed=False)
        return self._undirected

    def with_arrays(self, in_indptr, in_indices, in_weights, out_indptr, out_indices, *,
                    directed=None, labels=None):
        """A new in-memory Graph of these CSC and CSR arrays with this graph's direction,
        labels and name unless ``directed`` or ``labels`` is given: what the modules
        that renumber or symmetrize a graph build (they do not import this module)."""
        return Graph(in_indptr, in_indices, in_weights, out_indptr, out_indices,
                     directed=self.directed if directed is None else directed,
                     labels=self.labels if labels is None else labels, name=self.name)

    def reorder(self, order="degree") -> "Graph":
        """This graph with its dense ids renumbered for cache locality; results of runs
        on it keep the original labels.

        Parameters
        ----------
        order : {"degree", "rcm", "color", "auto", "none"}
            "degree" (default): by decreasing out-degree, equal degrees by their
            lowest-numbered out-neighbour. "rcm": reverse Cuthill-McKee (neighbours get
            nearby ids). "color": color by color, the graph of a ``mode="colored"``
            run (:mod:`hetgraph.coloring`). "auto": degree order when a few hubs carry most arcs, else
            RCM's where the ids have little locality, else this graph. "none": this
            graph. See :mod:`hetgraph.order`.

        Returns
        -------
        Graph
            A new graph (or this one for "none" and an "auto" that keeps the order).

        Raises
        ------
        GraphError
            On an unknown ``order``.
        OutOfCoreError
            On a graph read page by page from its store.

        Examples
        --------
        >>> import hetgraph as hg
        >>> g = hg.datasets.load("wiki-vote")
        >>> r = g.reorder("degree")
        >>> bool(r.out_degree()[0] == g.out_degree().max()), r.num_edges == g.num_edges
        (True, True)
        """
        return reordered(self, order)

    def partition(self, **options):
        """Shards and pages of this graph, kept for later calls with the same options.

        Parameters
        ----------
        **options
            ``page_bytes`` (default ``tuning.PAGE_BYTES``, 32 MiB), ``vertex_bytes``,
            ``shared_bytes``, ``replication``, ``shard_vertices``, ``max_shard_edges``:
            see :func:`hetgraph.partition.partition`.

        Returns
        -------
        Partition
            The same object for the same options while it is among the last
            ``tuning.PARTITIONS_KEPT`` (every GPU or hybrid run needs one).

        Raises
        ------
        GraphError
            When a size is out of range.

        Examples
        --------
        >>> import hetgraph as hg
        >>> g = hg.datasets.load("wiki-vote")
        >>> part = g.partition(page_bytes=128 << 10)
        >>> part.num_pages > 1, g.partition(page_bytes=128 << 10) is part
        (True, True)
        """
        key = tuple(sorted(options.items()))
        with _PARTITIONS_LOCK:
            kept = self._partitions.pop(key, None)
        if kept is None:
            kept = partitioned(self, **options)
        with _PARTITIONS_LOCK:
            self._partitions.pop(key, None)
            self._partitions[key] = kept
            while len(self._partitions) > tuning.PARTITIONS_KEPT:
                del self._partitions[next(iter(self._partitions))]
        return kept

    def save(self, path, stripes=None, **options):
        """Write this graph as a page store at ``path``.

        Parameters
        ----------
        path : str or os.PathLike
            The store's directory (its parent must exist).
        stripes : list of paths, optional
            Directories (one per disk) to spread the data blocks over; default
            ``path/data``.
        **options
            ``page_bytes`` (default ``tuning.PAGE_BYTES``, 32 MiB), ``overwrite``
            (default False), ``fsync`` (default False) and the options of
            :meth:`partition`; see :func:`hetgraph.io.store.save`.

        Returns
        -------
        PageStore
            The written store, opened (``store.stored_graph()`` runs out of core).

        Raises
        ------
        StoreError
            When ``path`` exists (without ``overwrite=True``) or a write fails; nothing
            is left behind.

        Examples
        --------
        >>> import tempfile, os
        >>> import hetgraph as hg
        >>> g = hg.datasets.load("wiki-vote")
        >>> store = g.save(os.path.join(tempfile.mkdtemp(), "wiki"))
        >>> store.load().num_edges == g.num_edges
        True
        """
        return registry.writer_of("pagestore")(self, path, stripes=stripes, **options)

    def summary(self) -> str:
        kind = "directed" if self.directed else "undirected"
        w = "weighted" if self.weighted else "unweighted"
        name = f"{self.name}: " if self.name else ""
        return (f"{name}{kind} {w} graph, {self.num_vertices:,} vertices, "
                f"{self.num_edges:,} edges ({self.num_arcs:,} arcs), "
                f"{self.nbytes / 2**20:.1f} MiB, {self.index_dtype} indices")

    def __repr__(self):
        return f"<hetgraph.Graph {self.summary()}>"
