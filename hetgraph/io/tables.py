"""Columnar and array files: NumPy edge arrays (.npy/.npz) and Parquet or CSV tables with
a header row (read through pyarrow, record batch by record batch).

What separates them from :mod:`hetgraph.io.textformats`: their columns are typed by the
file (no text parsing of ours); objects already in memory are :mod:`hetgraph.io.objects`.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import InputFormatError
from ..registry import reader
from .build import build_from_columns, build_graph, factorize_arrow
from .text import existing_file, open_regular


_NPZ_NAMES = (("src", "dst"), ("source", "target"), ("row", "col"))


@reader("npy", ".npy")
@reader("npz", ".npz")
def read_npz(path, *, directed=True, relabel=False, self_loops=True, dedup="first", name=None):
    """Read edges from .npz (arrays src/dst, source/target or row/col, optional weight and
    num_vertices) or .npy (an (M, 2) integer or (M, 3) array).

    Parameters
    ----------
    path : str or os.PathLike
    directed, relabel, self_loops, dedup, name
        As in :func:`hetgraph.from_arrays` (ids are used as they are by default).

    Returns
    -------
    Graph

    Raises
    ------
    InputFormatError
        When the file is missing or unreadable, or its arrays are not integer edges.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import hetgraph as hg
    >>> path = os.path.join(tempfile.mkdtemp(), "edges.npz")
    >>> np.savez(path, src=np.array([0, 1]), dst=np.array([1, 2]))
    >>> hg.read_npz(path).num_edges
    2
    """
    source = existing_file(path)
    with open_regular(source) as f:
        try:
            data = np.load(f, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise InputFormatError(f"not a readable NumPy file ({exc})", source=source,
                                   fix="Write it with numpy.save / numpy.savez") from exc
        if isinstance(data, np.ndarray):
            src, dst, weight, num_vertices = _npy_edges(data, source)
        else:
            with data:
                src, dst, weight, num_vertices = _npz_edges(data, source)
    if src.dtype.kind not in "iu":
        raise InputFormatError(f"id arrays have dtype {src.dtype}, not integers", source=source,
                               fix="Save integer ids")
    return build_graph(src, dst, weight, directed=directed, num_vertices=num_vertices,
                       relabel=relabel, self_loops=self_loops, dedup=dedup, source=source,
                       name=name)


def _npy_edges(data, source):
    """(src, dst, weight, None) of an (M, 2) or (M, 3) array."""
    if data.ndim != 2 or data.shape[1] not in (2, 3):
        raise InputFormatError(f"array has shape {data.shape}; expected (M, 2) or (M, 3)",
                               source=source, fix="Save an edge array with 2 or 3 columns")
    src, dst = data[:, 0], data[:, 1]
    weight = data[:, 2] if data.shape[1] == 3 else None
    if data.dtype.kind == "f":
        if not (np.all(src == np.floor(src)) and np.all(dst == np.floor(dst))):
            raise InputFormatError("id columns hold non-integer values", source=source,
                                   fix="Save integer ids")
        src, dst = src.astype(np.int64), dst.astype(np.int64)
    return src, dst, weight, None


def _npz_edges(data, source):
    """(src, dst, weight or None, num_vertices or None) of an .npz archive."""
    names = next((pair for pair in _NPZ_NAMES if set(pair) <= set(data.files)), None)
    if names is None:
        raise InputFormatError(f"no edge arrays among {data.files}", source=source,
                               fix="Name them src and dst (optional weight, num_vertices)")
    weight = data["weight"] if "weight" in data.files else None
    num_vertices = None
    if "num_vertices" in data.files:
        count = data["num_vertices"]
        if count.shape != () or count.dtype.kind not in "iu" and not (
                count.dtype.kind == "f" and float(count).is_integer()):
            raise InputFormatError(f"num_vertices is {count.tolist()!r} ({count.dtype}), "
                                   "not a whole number", source=source,
                                   fix="Save num_vertices as one integer")
        num_vertices = int(count)
    return data[names[0]], data[names[1]], weight, num_vertices


@reader("csv", ".csv", format="csv")
@reader("parquet", ".parquet", format="parquet")
def read_table(path, *, format=None, source=None, target=None, weight=None, directed=True,
               self_loops=True, dedup="first", name=None):
    """Read a Parquet or CSV table (with a header row) of edges through pyarrow, record
    batch by record batch.

    Parameters
    ----------
    path : str or os.PathLike
    format : {"parquet", "csv"}, optional
        Default: "parquet" when the name says so, else "csv".
    source, target : str, optional
        Id columns; default the first two. Integer ids are kept as labels, strings are
        factorized (labels in first-seen order).
    weight : str, optional
        Weight column; None (default): unweighted.
    directed, self_loops, dedup, name
        As in :func:`hetgraph.from_arrays`.

    Returns
    -------
    Graph

    Raises
    ------
    InputFormatError
        When the file is unreadable, a column is missing or empty, or ids are floats.

    Examples
    --------
    >>> import os, tempfile
    >>> import hetgraph as hg
    >>> path = os.path.join(tempfile.mkdtemp(), "edges.csv")
    >>> with open(path, "w") as f:
    ...     for line in ["from,to,km", "a,b,2.5", "b,c,1.0"]:
    ...         print(line, file=f)
    >>> g = hg.read_table(path, weight="km")
    >>> g.labels.tolist(), g.weighted
    (['a', 'b', 'c'], True)
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
        return build_from_columns(s.to_numpy(), d.to_numpy(), w, where, relabel=True, **options)
    if pa.types.is_floating(s.type) or pa.types.is_floating(d.type):
        raise InputFormatError(f"id columns have types {s.type} and {d.type}, not vertex ids",
                               source=where, fix="Store ids as integers or strings")
    src, dst, labels = factorize_arrow(s, d)
    return build_graph(src, dst, w, labels=labels, source=where, **options)
