"""The text graph formats, one reader each: SNAP/TSV edge lists, Matrix Market, DIMACS
.gr and METIS adjacency files (plain, .gz, .bz2 or .xz).

This module knows each format's header, comments and columns; the parsing of the lines
themselves (blocks, Numba kernels, error positions) is :mod:`hetgraph.io.text`'s.
Formats that declare a vertex count (Matrix Market, DIMACS, METIS) number vertices from
1; their original 1-based ids are kept as labels.
"""

from __future__ import annotations

import io
import re

import numpy as np

from ..errors import InputFormatError
from ..registry import reader
from .build import build_graph, factorize_arrow, symmetrize
from .limits import require_memory
from .text import (OK, existing_file, iter_line_blocks, open_binary, parse_adjacency_block,
                   parse_edge_block, parse_in_parallel, raise_parse_error)


def _comment_bytes(comments):
    return np.frombuffer(comments.encode("ascii"), dtype=np.uint8)


def _parse_edges(stream, source, comments, tag=-1, expect_cols=0, lines_before=0):
    """Parse every edge line of ``stream`` (blocks in parallel). Returns
    (src, dst, weight, ncols, lines). The first data block fixes the column count."""
    comment_arr = _comment_bytes(comments)
    state = {"ncols": expect_cols}

    def parse_one(block, before, newlines):
        before += lines_before
        s = np.empty(newlines + 1, np.int64)
        d = np.empty(newlines + 1, np.int64)
        w = np.empty(newlines + 1, np.float32)
        m, ncols, err, line, pos = parse_edge_block(block, comment_arr, tag, state["ncols"],
                                                    s, d, w)
        if err != OK:
            raise_parse_error(block, err, line, pos, source, before, need=ncols or 2,
                              tag=chr(tag) if tag >= 0 else "")
        return s[:m], d[:m], w[:m], ncols, before + line

    blocks = iter_line_blocks(stream, source)
    parts = []
    for item in blocks:  # serially until a data line fixes the column count
        parts.append(parse_one(*item))
        state["ncols"] = parts[-1][3]
        if state["ncols"]:
            break
    parts += parse_in_parallel(blocks, parse_one)
    if not parts:
        return (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32),
                expect_cols, lines_before)
    cat = lambda k: np.concatenate([p[k] for p in parts])  # noqa: E731
    return cat(0), cat(1), cat(2), state["ncols"], parts[-1][4]


def _require_edges(src, source):
    if len(src) == 0:
        raise InputFormatError("no edges found (the file is empty or only comments)",
                               source=source, fix="Give a file with at least one edge line")


@reader("tsv")
@reader("edgelist")
@reader("snap", ".txt", ".tsv", ".el", ".edges", ".edgelist", ".snap")
def read_edgelist(path, *, directed=True, weighted=None, comments="#%", ids="int",
                  relabel=True, self_loops=True, dedup="first", name=None):
    """Read a SNAP-style edge list: 'source target [weight]' per line.

    Columns are separated by spaces, tabs or commas; blank lines and comment lines are
    skipped; .gz/.bz2/.xz files are decompressed.

    Parameters
    ----------
    path : str or os.PathLike
    directed : bool
        False stores every edge in both directions. Default True. An edge listed both
        ways (u v and v u) is then one edge: its weights combine by ``dedup``, so both
        directions get the same weight.
    weighted : bool, optional
        None (default) takes a third column as weights when the first edge line has
        one; True requires it; False ignores it.
    comments : str
        Characters that start a comment line. Default "#%".
    ids : {"int", "str"}
        "int" (default): non-negative integer ids; "str": any tokens (names), kept as
        labels.
    relabel : bool
        Compact integer ids to 0..N-1 and keep them as labels. Default True.
    self_loops : bool
        False drops u -> u edges. Default True.
    dedup : {"first", "min", "max", "sum"} or None
        How the weights of parallel edges combine; None keeps them. Default "first".
    name : str, optional

    Returns
    -------
    Graph

    Raises
    ------
    InputFormatError
        When the file is missing or a line is malformed (the message names the file,
        line and token).

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.read_edgelist(hg.datasets.path("wiki-vote"))
    >>> g.num_vertices, g.num_edges
    (7115, 103689)
    """
    source = existing_file(path)
    if ids == "str":
        src, dst, w, labels = _read_str_edges(source, comments, weighted)
        return build_graph(src, dst, w, directed=directed, labels=labels,
                           self_loops=self_loops, dedup=dedup, source=source, name=name)
    if ids != "int":
        raise InputFormatError(f"ids={ids!r} is not supported", source=source,
                               fix="Use ids='int' or ids='str'")
    with open_binary(source) as stream:
        src, dst, w, ncols, lines = _parse_edges(stream, source, comments,
                                                 expect_cols=3 if weighted else 0)
    _require_edges(src, source)
    use_weights = ncols == 3 and weighted is not False
    return build_graph(src, dst, w if use_weights else None, directed=directed,
                       relabel=relabel, self_loops=self_loops, dedup=dedup, source=source,
                       name=name)


def _read_str_edges(source, comments, weighted):
    """Edge list with arbitrary tokens as ids, parsed by pyarrow in blocks."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    skip = re.compile(rb"(?m)^[ \t]*(?:[" + re.escape(comments.encode()) + rb"].*)?\r?\n")
    src_parts, dst_parts, w_parts = [], [], []
    ncols = None
    with open_binary(source) as stream:
        for block, before, _ in iter_line_blocks(stream, source):
            text = skip.sub(b"", bytes(block))
            if not text.strip():
                continue
            first = text.split(b"\n", 1)[0]
            delim = "\t" if b"\t" in first else ("," if b"," in first else " ")
            cols = len([t for t in re.split(rb"[\t, ]+", first.strip()) if t])
            ncols = ncols or cols
            try:
                table = pacsv.read_csv(
                    io.BytesIO(text),
                    read_options=pacsv.ReadOptions(column_names=[f"c{i}" for i in range(ncols)]),
                    parse_options=pacsv.ParseOptions(delimiter=delim),
                    convert_options=pacsv.ConvertOptions(
                        column_types={"c0": pa.string(), "c1": pa.string(), "c2": pa.float64()}))
            except (pa.ArrowInvalid, ValueError) as exc:
                raise InputFormatError(f"cannot parse edge lines ({exc})", source=source,
                                       line=before + 1,
                                       fix="Each line must be 'source target [weight]'") from exc
            src_parts.append(table.column("c0"))
            dst_parts.append(table.column("c1"))
            if ncols >= 3:
                w_parts.append(table.column("c2"))
    if not src_parts:
        _require_edges([], source)
    src, dst, labels = factorize_arrow(src_parts, dst_parts)
    w = None
    if w_parts and weighted is not False:
        w = pa.chunked_array(w_parts).to_numpy()
        if np.isnan(w).any():
            raise InputFormatError(f"edge {int(np.argmax(np.isnan(w)))} has no weight or a NaN weight",
                                   source=source,
                                   fix="A weight column must be on every line and finite")
    elif weighted:
        raise InputFormatError("weighted=True but the lines have no weight column", source=source,
                               fix="Add a third column or pass weighted=None")
    return src, dst, w, labels


def _header_lines(stream, source, is_comment):
    """Read comment lines and the first header line. Returns (header, comments, lines)."""
    banner = []
    lines = 0
    for raw in stream:
        lines += 1
        text = raw.decode("utf-8", "replace").strip()
        if not text or is_comment(text):
            banner.append(text)
            continue
        return text, banner, lines
    raise InputFormatError("file is empty or has no header line", source=source,
                           fix="Check the file and its format")


def _declared_ints(text, count, source, line, what):
    parts = text.split()
    try:
        values = [int(p) for p in parts[:count]]
    except ValueError:
        values = []
    if len(parts) < count or len(values) < count or min(values) < 0:
        raise InputFormatError(f"header {text!r} is not {what}", source=source, line=line,
                               fix="Fix the header line")
    return values, parts[count:]


def _check_declared(src, dst, n, count, what, source, last_line):
    """Entries must number ``count`` (as the header says) and name vertices 1..n."""
    if len(src) != count:
        raise InputFormatError(f"{what} declares {count} {'entries' if what == 'size line' else 'arcs'}"
                               f" but the file has {len(src)}", source=source, line=last_line,
                               fix="The file may be truncated; fix the count or the data")
    _require_edges(src, source)
    _check_declared_ids(src, dst, n, source)


def _check_declared_ids(src, dst, n, source):
    for arr in (src, dst):
        bad = (arr < 1) | (arr > n)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputFormatError(
                f"entry {i + 1} names vertex {arr[i]}, outside the declared 1..{n}",
                source=source, fix="Fix the entry or the declared vertex count")


@reader("mtx", ".mtx")
def read_mtx(path, *, directed=None, weighted=None, self_loops=True, dedup="first",
             name=None):
    """Read a Matrix Market coordinate file: entry (i, j, v) is the edge i -> j.

    General and symmetric matrices of pattern, real or integer entries; vertices are
    1..N, kept as labels.

    Parameters
    ----------
    path : str or os.PathLike
    directed : bool, optional
        None (default): directed for a general matrix, undirected for a symmetric one.
        A symmetric matrix holding both (i, j) and (j, i) gives both directions one
        weight, combined by ``dedup``.
    weighted : bool, optional
        None (default) keeps real and integer values as weights; False drops them.
    self_loops : bool
        False drops u -> u edges. Default True.
    dedup, name
        As in :func:`read_edgelist`.

    Returns
    -------
    Graph

    Raises
    ------
    InputFormatError
        When the file is missing or a line is malformed (the message names the file,
        line and token).

    Examples
    --------
    >>> import os, tempfile
    >>> import hetgraph as hg
    >>> path = os.path.join(tempfile.mkdtemp(), "g.mtx")
    >>> with open(path, "w") as f:
    ...     for line in ["%%MatrixMarket matrix coordinate real general", "3 3 2",
    ...                  "1 2 0.5", "2 3 1.5"]:
    ...         print(line, file=f)
    >>> g = hg.read_mtx(path)
    >>> g.num_edges, g.weighted, g.labels.tolist()
    (2, True, [1, 2, 3])
    """
    source = existing_file(path)
    with open_binary(source) as stream:
        first = stream.readline().decode("utf-8", "replace").strip()
        m = re.match(r"%%MatrixMarket\s+matrix\s+(\w+)\s+(\w+)\s+(\w+)\s*$", first, re.I)
        if not m:
            raise InputFormatError(
                f"first line {first[:60]!r} is not a Matrix Market banner", source=source,
                line=1, fix="It must read '%%MatrixMarket matrix coordinate <field> <symmetry>'")
        layout, field, symmetry = (g.lower() for g in m.groups())
        if layout != "coordinate":
            raise InputFormatError(f"'{layout}' (dense) matrices are not graphs", source=source,
                                   line=1, fix="Convert it to coordinate format")
        if field not in ("pattern", "real", "integer", "double"):
            raise InputFormatError(f"field '{field}' is not supported", source=source, line=1,
                                   fix="Use pattern, real or integer")
        if symmetry not in ("general", "symmetric"):
            raise InputFormatError(f"symmetry '{symmetry}' is not supported", source=source,
                                   line=1, fix="Use general or symmetric")
        header, _, lines = _header_lines(stream, source, lambda t: t.startswith("%"))
        lines += 1
        (rows, cols, nnz), rest = _declared_ints(header, 3, source, lines,
                                                 "'rows columns entries'")
        if rest:
            raise InputFormatError(f"size line {header!r} has extra fields", source=source,
                                   line=lines, fix="It must be 'rows columns entries'")
        if rows != cols:
            raise InputFormatError(f"matrix is {rows} x {cols}; an adjacency matrix is square",
                                   source=source, line=lines,
                                   fix="Use a square matrix (bipartite graphs: embed it)")
        require_memory(rows, nnz, f"{source}, line {lines}", "the size line declares")
        expect = 2 if field == "pattern" else 3
        src, dst, w, _, last = _parse_edges(stream, source, "%", expect_cols=expect,
                                            lines_before=lines)
    _check_declared(src, dst, rows, nnz, "size line", source, last)
    if directed is None:
        directed = symmetry == "general"
    if symmetry == "symmetric" and directed:
        src, dst, w = symmetrize(src, dst, w)
    use_w = field != "pattern" and weighted is not False
    return build_graph(src - 1, dst - 1, w if use_w else None, directed=directed,
                       labels=np.arange(1, rows + 1, dtype=np.int64),
                       self_loops=self_loops, dedup=dedup, source=source, name=name)


@reader("dimacs", ".gr")
def read_dimacs(path, *, directed=True, self_loops=True, dedup="min", name=None):
    """Read a DIMACS shortest-path file (.gr): 'p sp N M', then 'a u v w' arc lines
    ('c' lines are comments).

    Parameters
    ----------
    path : str or os.PathLike
    directed : bool
        Default True.
    self_loops : bool
        False drops u -> u edges. Default True.
    dedup : {"first", "min", "max", "sum"} or None
        Parallel arcs keep the shortest by default ("min").
    name : str, optional

    Returns
    -------
    Graph
        Vertices 1..N kept as labels, weights the arc lengths.

    Raises
    ------
    InputFormatError
        When the file is missing or a line is malformed (the message names the file,
        line and token).

    Examples
    --------
    >>> import os, tempfile
    >>> import hetgraph as hg
    >>> path = os.path.join(tempfile.mkdtemp(), "roads.gr")
    >>> with open(path, "w") as f:
    ...     for line in ["p sp 3 2", "a 1 2 7", "a 2 3 5"]:
    ...         print(line, file=f)
    >>> hg.sssp(hg.read_dimacs(path), 1).values.tolist()
    [0.0, 7.0, 12.0]
    """
    source = existing_file(path)
    with open_binary(source) as stream:
        header, _, lines = _header_lines(stream, source, lambda t: t.startswith("c"))
        parts = header.split()
        if len(parts) != 4 or parts[0] != "p":
            raise InputFormatError(f"expected the problem line 'p sp N M', got {header[:60]!r}",
                                   source=source, line=lines,
                                   fix="Put 'p sp <vertices> <arcs>' before the arcs")
        (n, m), _ = _declared_ints(" ".join(parts[2:]), 2, source, lines, "'p sp N M'")
        require_memory(n, m, f"{source}, line {lines}", "the problem line declares")
        src, dst, w, _, last = _parse_edges(stream, source, "c", tag=ord("a"), expect_cols=3,
                                            lines_before=lines)
    _check_declared(src, dst, n, m, "problem line", source, last)
    return build_graph(src - 1, dst - 1, w, directed=directed,
                       labels=np.arange(1, n + 1, dtype=np.int64), self_loops=self_loops,
                       dedup=dedup, source=source, name=name)


@reader("metis", ".graph", ".metis")
def read_metis(path, *, weighted=None, name=None):
    """Read a METIS/Chaco adjacency file: header 'N M [fmt [ncon]]', then line k lists
    the 1-based neighbours of vertex k ('%' lines are comments).

    Parameters
    ----------
    path : str or os.PathLike
    weighted : bool, optional
        None (default) keeps the edge weights when ``fmt`` declares them; False drops
        them.
    name : str, optional

    Returns
    -------
    Graph
        Undirected, vertices 1..N kept as labels.

    Raises
    ------
    InputFormatError
        When the file is missing or a line is malformed (the message names the file,
        line and token).

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.read_metis(hg.datasets.path("power"))
    >>> g.directed, g.num_vertices, g.num_edges
    (False, 4941, 6594)
    """
    source = existing_file(path)
    with open_binary(source) as stream:
        header, _, lines = _header_lines(stream, source, lambda t: t.startswith("%"))
        (n, m), rest = _declared_ints(header, 2, source, lines, "'vertices edges [fmt]'")
        require_memory(n, 2 * m, f"{source}, line {lines}", "the header declares")
        fmt = rest[0].zfill(3) if rest else "000"
        if not re.fullmatch(r"[01]{3}", fmt):
            raise InputFormatError(f"fmt field {rest[0]!r} is not supported", source=source,
                                   line=lines, fix="Use fmt 0, 1, 10, 11, 100, 101, 110 or 111")
        ncon = int(rest[1]) if len(rest) > 1 else 1
        skip = (fmt[0] == "1") + (ncon if fmt[1] == "1" else 0)
        edge_w = fmt[2] == "1"
        comment_arr = _comment_bytes("%")
        srcs, dsts, ws = [], [], []
        vertices = 0
        for block, before, newlines in iter_line_blocks(stream, source):
            cap = int(np.count_nonzero(block == 32) + np.count_nonzero(block == 9)) + newlines + 1
            s, d = np.empty(cap, np.int64), np.empty(cap, np.int64)
            w = np.empty(cap, np.float32)
            k, got, err, line, pos = parse_adjacency_block(block, comment_arr, skip, edge_w,
                                                           vertices + 1, s, d, w)
            if err != OK:
                raise_parse_error(block, err, line, pos, source, before + lines,
                                  need="a weight after each neighbour", tag="")
            vertices += got
            srcs.append(s[:k])
            dsts.append(d[:k])
            ws.append(w[:k])
    src, dst, w = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(ws)
    if vertices != n:
        raise InputFormatError(f"header declares {n} vertices but the file has {vertices} "
                               "adjacency lines", source=source,
                               fix="Each vertex needs a line (empty for an isolated vertex)")
    loops = int(np.count_nonzero(src == dst))
    if len(src) not in (2 * m, 2 * m - loops):
        raise InputFormatError(f"header declares {m} edges but the adjacency lists hold "
                               f"{len(src)} entries (expected {2 * m})", source=source,
                               fix="Each edge must appear in the lists of both endpoints")
    _check_declared_ids(src, dst, n, source)
    use_w = edge_w and weighted is not False
    keep = src <= dst
    return build_graph(src[keep] - 1, dst[keep] - 1, w[keep] if use_w else None,
                       directed=False, labels=np.arange(1, n + 1, dtype=np.int64),
                       source=source, name=name)
