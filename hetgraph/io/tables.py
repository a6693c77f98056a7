"""In-memory and columnar inputs: NumPy arrays (.npy/.npz), Parquet and CSV tables
(pyarrow, read by record batch), pandas DataFrames, scipy.sparse matrices, NetworkX graphs."""

from __future__ import annotations

import os

import numpy as np

from ..errors import GraphError, InputFormatError
from .build import build_graph, factorize_arrow, factorize_labels
from .textformats import existing_file


def from_arrays(src, dst, weight=None, *, directed=True, num_vertices=None, labels=None,
                relabel=False, self_loops=True, dedup="first", name=None):
    """Graph from edge arrays of dense integer ids (``relabel=True`` compacts them).

    ``num_vertices`` defaults to max id + 1; ``labels`` gives each id's original label.
    """
    return build_graph(src, dst, weight, directed=directed, num_vertices=num_vertices,
                       labels=labels, relabel=relabel,
                       self_loops=self_loops, dedup=dedup, name=name)


def _edges_from_columns(src, dst, weight, where, **options):
    """Build from label columns: integers are used as ids, anything else is factorized."""
    src, dst = np.asarray(src), np.asarray(dst)
    for col, arr in (("source", src), ("target", dst)):
        if arr.dtype.kind == "f":
            if np.isnan(arr).any():
                i = int(np.argmax(np.isnan(arr)))
                raise InputFormatError(f"{col} column is missing in record {i}", source=where,
                                       fix="Drop or fill rows with missing vertex ids")
            raise InputFormatError(f"{col} column holds floats ({arr.dtype}), not vertex ids",
                                   source=where, fix="Cast the id columns to integers or strings")
    if weight is not None:
        weight = np.asarray(weight, dtype=np.float64)
    if src.dtype.kind in "iu" and dst.dtype.kind in "iu":
        return build_graph(src, dst, weight, source=where, **options)
    options.pop("relabel", None)
    s, d, labels = factorize_labels(src, dst)
    return build_graph(s, d, weight, labels=labels, source=where, **options)


def from_pandas(df, source="src", target="dst", weight=None, *, directed=True,
                self_loops=True, dedup="first", name=None):
    """Graph from a pandas DataFrame with id columns ``source`` and ``target`` (any
    integer or hashable labels) and an optional ``weight`` column name."""
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
    return _edges_from_columns(df[source].to_numpy(), df[target].to_numpy(), w, "DataFrame",
                               directed=directed, relabel=True, self_loops=self_loops,
                               dedup=dedup, name=name)


def from_scipy(matrix, *, directed=True, weighted=None, self_loops=True, dedup="first",
               name=None):
    """Graph from a square scipy.sparse matrix: entry A[u, v] is the edge u -> v.

    ``weighted``: None keeps values as weights unless they are all 1 (or boolean).
    ``directed=False`` reads the upper triangle (incl. diagonal) as undirected edges.
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


def from_networkx(graph, *, weight="weight", name=None):
    """Graph from a NetworkX (Di)Graph; node objects become labels. ``weight``: the edge
    attribute to read (edges without it weigh 1), or None for unweighted."""
    import networkx as nx

    nodes = list(graph)
    if not nodes:
        raise GraphError("the NetworkX graph has no nodes")
    weighted = weight is not None and any(weight in d for _, _, d in graph.edges(data=True))
    matrix = nx.to_scipy_sparse_array(graph, nodelist=nodes, weight=weight if weighted else None,
                                      format="coo")
    directed = graph.is_directed()
    src, dst, data = matrix.row, matrix.col, matrix.data
    if not directed:
        keep = src <= dst
        src, dst, data = src[keep], dst[keep], data[keep]
    labels = np.empty(len(nodes), dtype=object)
    labels[:] = nodes
    if all(isinstance(x, (int, np.integer)) for x in nodes):
        labels = labels.astype(np.int64)
    return build_graph(src, dst, data.astype(np.float64) if weighted else None,
                       directed=directed, labels=labels, source="networkx graph",
                       name=name or graph.name or None)


_NPZ_NAMES = (("src", "dst"), ("source", "target"), ("row", "col"))


def read_npz(path, *, directed=True, relabel=False, self_loops=True, dedup="first", name=None):
    """Read edges from .npz (arrays src/dst, source/target or row/col, optional weight and
    num_vertices) or .npy (an (M, 2) integer or (M, 3) array)."""
    source = existing_file(path)
    weight = num_vertices = None
    try:
        data = np.load(source, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputFormatError(f"not a readable NumPy file ({exc})", source=source,
                               fix="Write it with numpy.save / numpy.savez") from exc
    if isinstance(data, np.ndarray):
        if data.ndim != 2 or data.shape[1] not in (2, 3):
            raise InputFormatError(f"array has shape {data.shape}; expected (M, 2) or (M, 3)",
                                   source=source, fix="Save an edge array with 2 or 3 columns")
        src, dst = data[:, 0], data[:, 1]
        if data.shape[1] == 3:
            weight = data[:, 2]
        if data.dtype.kind == "f":
            if not (np.all(src == np.floor(src)) and np.all(dst == np.floor(dst))):
                raise InputFormatError("id columns hold non-integer values", source=source,
                                       fix="Save integer ids")
            src, dst = src.astype(np.int64), dst.astype(np.int64)
    else:
        with data:
            names = next((pair for pair in _NPZ_NAMES if set(pair) <= set(data.files)), None)
            if names is None:
                raise InputFormatError(f"no edge arrays among {data.files}", source=source,
                                       fix="Name them src and dst (optional weight, num_vertices)")
            src, dst = data[names[0]], data[names[1]]
            weight = data["weight"] if "weight" in data.files else None
            if "num_vertices" in data.files:
                num_vertices = int(data["num_vertices"])
    if src.dtype.kind not in "iu":
        raise InputFormatError(f"id arrays have dtype {src.dtype}, not integers", source=source,
                               fix="Save integer ids")
    return build_graph(src, dst, weight, directed=directed, num_vertices=num_vertices,
                       relabel=relabel, self_loops=self_loops, dedup=dedup, source=source,
                       name=name)


def read_table(path, *, format=None, source=None, target=None, weight=None, directed=True,
               self_loops=True, dedup="first", name=None):
    """Read a Parquet or CSV (with a header row) table through pyarrow, batch by batch.

    ``source``/``target``/``weight``: column names; defaults are the first two columns
    and, for weight, none. Integer ids are kept as labels; strings are factorized.
    """
    import pyarrow as pa

    where = existing_file(path)
    fmt = format or ("parquet" if ".parquet" in os.fspath(path) else "csv")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pfile = pq.ParquetFile(where)
            names = pfile.schema_arrow.names
            batches = lambda cols: pfile.iter_batches(columns=cols)  # noqa: E731
        else:
            import pyarrow.csv as pacsv

            reader = pacsv.open_csv(where)
            names = reader.schema.names
            batches = lambda cols: (b.select(cols) for b in reader)  # noqa: E731
        cols = [source or names[0], target or (names[1] if len(names) > 1 else None)]
        if weight:
            cols.append(weight)
        missing = [c for c in cols if c not in names]
        if missing:
            raise InputFormatError(f"no column {missing[0]!r} (columns: {names[:10]})",
                                   source=where, fix="Pass source=, target=, weight= names")
        parts = [batch for batch in batches(cols)]
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputFormatError(f"cannot read the {fmt} table ({exc})", source=where,
                               fix=f"Check that the file is valid {fmt}") from exc
    if not parts or sum(len(b) for b in parts) == 0:
        raise InputFormatError("table has no rows", source=where, fix="Give at least one edge")
    table = pa.Table.from_batches(parts)
    for c in cols:
        if table.column(c).null_count:
            i = int(np.argmax(table.column(c).is_null().to_numpy(zero_copy_only=False)))
            raise InputFormatError(f"column {c!r} is empty in record {i + 1}", source=where,
                                   fix="Drop or fill rows with missing values")
    w = table.column(weight).to_numpy() if weight else None
    options = dict(directed=directed, self_loops=self_loops, dedup=dedup, name=name)
    s, d = table.column(cols[0]), table.column(cols[1])
    if pa.types.is_integer(s.type) and pa.types.is_integer(d.type):
        return _edges_from_columns(s.to_numpy(), d.to_numpy(), w, where, relabel=True, **options)
    if pa.types.is_floating(s.type) or pa.types.is_floating(d.type):
        raise InputFormatError(f"id columns have types {s.type} and {d.type}, not vertex ids",
                               source=where, fix="Store ids as integers or strings")
    src, dst, labels = factorize_arrow(s, d)
    return build_graph(src, dst, w, labels=labels, source=where, **options)
