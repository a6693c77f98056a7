"""``read``: the reader of a format named or told by the file's extension, from the
registered readers (:func:`hetgraph.registry.reader`)."""

from __future__ import annotations

import os

from ..errors import UnsupportedFormatError
from ..registry import EXTENSIONS, READERS
from .text import existing_file

COMPRESSION = (".gz", ".bz2", ".xz")


def detect_format(path) -> str:
    """Format name for ``path`` from its extension (a compression suffix is ignored).

    Raises
    ------
    UnsupportedFormatError
        When no registered reader claims the extension.

    Examples
    --------
    >>> from hetgraph.io import detect_format
    >>> detect_format("roads.gr.gz"), detect_format("web.mtx")
    ('dimacs', 'mtx')
    """
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
    """Read a graph file with the reader of its format.

    Parameters
    ----------
    path : str or os.PathLike
        The file; .gz, .bz2 and .xz text files are decompressed.
    format : str, optional
        A registered format: "snap", "edgelist", "tsv", "mtx", "dimacs", "metis", "npz",
        "npy", "parquet", "csv" (``hetgraph.registry.READERS``). None (default): from
        the extension (:func:`detect_format`).
    **options
        Go to the format's reader (:func:`read_edgelist`, :func:`read_mtx`, ...).

    Returns
    -------
    Graph

    Raises
    ------
    InputFormatError
        When the file is missing or malformed (the message names the line).
    UnsupportedFormatError
        When the format is unknown or the extension tells none.

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.read(hg.datasets.path("wiki-vote"))
    >>> g.num_vertices, g.num_edges
    (7115, 103689)
    """
    if format is None and isinstance(path, (str, os.PathLike)):
        existing_file(path)  # a missing file says so before its extension is judged
    fmt = format or detect_format(path)
    if fmt not in READERS:
        raise UnsupportedFormatError(f"{path}: format {fmt!r} is not supported; "
                                     f"use one of {sorted(READERS)}")
    return READERS[fmt](path, **options)
