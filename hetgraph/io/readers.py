"""``read``: pick the reader from ``format`` or the file's extension."""

from __future__ import annotations

import os

from ..errors import UnsupportedFormatError
from .tables import read_npz, read_table
from .textformats import existing_file, read_dimacs, read_edgelist, read_metis, read_mtx

READERS = {
    "snap": read_edgelist, "edgelist": read_edgelist, "tsv": read_edgelist,
    "mtx": read_mtx, "dimacs": read_dimacs, "metis": read_metis,
    "npz": read_npz, "npy": read_npz,
    "parquet": lambda path, **kw: read_table(path, format="parquet", **kw),
    "csv": lambda path, **kw: read_table(path, format="csv", **kw),
}

EXTENSIONS = {
    ".txt": "snap", ".tsv": "snap", ".el": "snap", ".edges": "snap", ".edgelist": "snap",
    ".snap": "snap", ".mtx": "mtx", ".gr": "dimacs", ".graph": "metis", ".metis": "metis",
    ".npz": "npz", ".npy": "npy", ".parquet": "parquet", ".csv": "csv",
}

COMPRESSION = (".gz", ".bz2", ".xz")


def detect_format(path) -> str:
    """Format name for ``path`` from its extension (compression suffix ignored)."""
    base = os.fspath(path).lower()
    for suffix in COMPRESSION:
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    ext = os.path.splitext(base)[1]
    if ext not in EXTENSIONS:
        raise UnsupportedFormatError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            f"pass format= one of {sorted(READERS)}")
    return EXTENSIONS[ext]


def read(path, format=None, **options):
    """Read a graph file. ``format``: None (from the extension) or one of "snap",
    "edgelist", "tsv", "mtx", "dimacs", "metis", "npz", "npy", "parquet", "csv".
    Other keyword options go to the format's reader (see read_edgelist, read_mtx, ...)."""
    if format is None and isinstance(path, (str, os.PathLike)):
        existing_file(path)  # a missing file says so before its extension is judged
    fmt = format or detect_format(path)
    if fmt not in READERS:
        raise UnsupportedFormatError(f"{path}: format {fmt!r} is not supported; "
                                     f"use one of {sorted(READERS)}")
    return READERS[fmt](path, **options)
