"""Low-level parsing of text files, whatever their format: opening (existence check,
.gz/.bz2/.xz), cutting into byte blocks at line ends, and the Numba kernels that parse a
block's edge or adjacency lines, run on a thread pool.

It knows lines, tokens, numbers and comment bytes, not formats: the readers of
:mod:`hetgraph.io.textformats` call it with each format's columns and tags. A file is
read in blocks of ``tuning.BLOCK_BYTES`` (32 MiB) and never becomes Python objects per
edge. The kernels return an error code and the line and byte offset of the first bad
token, which :func:`raise_parse_error` turns into an
:class:`~hetgraph.errors.InputFormatError` naming the file, line and token.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .. import tuning
from ..errors import InputFormatError
from .limits import DECOMPRESSION_ERRORS, damaged, decompressing, line_too_long

# error codes returned by the kernels
OK = 0
BAD_ID = 1
NEGATIVE_ID = 2
ID_OVERFLOW = 3
BAD_WEIGHT = 4
NAN_WEIGHT = 5
INF_WEIGHT = 6
TOO_FEW_COLUMNS = 7
TOO_MANY_COLUMNS = 8
COLUMNS_CHANGE = 9
BAD_TAG = 10
EMPTY_FIELD = 11

# float64 values of this magnitude or more round to inf as float32 (half an ulp above
# float32's largest); float32's largest itself, however written, is a weight
FLOAT32_INF_FROM = 2.0**128 - 2.0**103

_MESSAGES = {
    BAD_ID: ("vertex id {tok!r} is not a non-negative integer",
             "Vertex ids must be integers; for names pass ids='str' (or fix the line)"),
    NEGATIVE_ID: ("vertex id {tok!r} is negative",
                  "Vertex ids must be >= 0; pass ids='str' to keep them as labels"),
    ID_OVERFLOW: ("vertex id {tok!r} does not fit in a 64-bit integer",
                  "Pass ids='str' to keep such ids as labels"),
    BAD_WEIGHT: ("edge weight {tok!r} is not a number", "Fix or remove the weight column"),
    NAN_WEIGHT: ("edge weight {tok!r} is NaN", "Every weight must be a finite number"),
    INF_WEIGHT: ("edge weight {tok!r} is infinite or beyond float32 range",
                 "Every weight must be a finite float32"),
    TOO_FEW_COLUMNS: ("line has fewer columns than an edge needs ({need})",
                      "Each edge line is 'source target [weight]'"),
    TOO_MANY_COLUMNS: ("line has more columns than 'source target [weight]'",
                       "Remove the extra columns or convert the file first"),
    COLUMNS_CHANGE: ("line does not have the {need} columns of the earlier lines or of "
                     "weighted=True",
                     "A weight column must be on every line or on none"),
    BAD_TAG: ("line does not start with the expected tag {tag!r}",
              "Every data line of this format starts with that tag"),
    EMPTY_FIELD: ("line has an empty field (a comma with nothing before or after it)",
                  "Fill the field or remove the extra comma"),
}


@numba.njit(cache=True, nogil=True, inline="always")
def _is_delim(c):
    return c == 32 or c == 9 or c == 44 or c == 13  # space, tab, comma, CR


@numba.njit(cache=True, nogil=True)
def _parse_uint(buf, i, end):
    """Parse an unsigned decimal at buf[i:end]. Returns (value, error code)."""
    if i < end and buf[i] == 43:  # '+'
        i += 1
    if i < end and buf[i] == 45:  # '-'
        if i + 1 < end and 48 <= buf[i + 1] <= 57:
            return 0, NEGATIVE_ID
        return 0, BAD_ID
    if i >= end:
        return 0, BAD_ID
    v = 0
    limit = (2**63 - 1) // 10
    while i < end:
        d = buf[i] - 48
        if d < 0 or d > 9:
            return 0, BAD_ID
        if v > limit or (v == limit and d > 7):
            return 0, ID_OVERFLOW
        v = v * 10 + d
        i += 1
    return v, OK


@numba.njit(cache=True, nogil=True)
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@numba.njit(cache=True, nogil=True)
def _parse_float(buf, i, end):
    """Parse a finite decimal float at buf[i:end]. Returns (value, error code)."""
    sign = 1.0
    if i < end and (buf[i] == 43 or buf[i] == 45):
        if buf[i] == 45:
            sign = -1.0
        i += 1
    if i < end:
        c = _lower(buf[i])
        if c == 110:  # 'n'an
            if end - i == 3 and _lower(buf[i + 1]) == 97 and _lower(buf[i + 2]) == 110:
                return 0.0, NAN_WEIGHT
            return 0.0, BAD_WEIGHT
        if c == 105:  # 'i'nf
            if end - i >= 3 and _lower(buf[i + 1]) == 110 and _lower(buf[i + 2]) == 102:
                return 0.0, INF_WEIGHT
            return 0.0, BAD_WEIGHT
    mant = 0.0
    exp10 = 0
    digits = 0
    while i < end and 48 <= buf[i] <= 57:
        mant = mant * 10.0 + (buf[i] - 48)
        digits += 1
        i += 1
    if i < end and buf[i] == 46:  # '.'
        i += 1
        while i < end and 48 <= buf[i] <= 57:
            mant = mant * 10.0 + (buf[i] - 48)
            exp10 -= 1
            digits += 1
            i += 1
    if digits == 0:
        return 0.0, BAD_WEIGHT
    if i < end and (buf[i] == 101 or buf[i] == 69):  # e / E
        i += 1
        esign = 1
        if i < end and (buf[i] == 43 or buf[i] == 45):
            if buf[i] == 45:
                esign = -1
            i += 1
        if i >= end:
            return 0.0, BAD_WEIGHT
        e = 0
        while i < end and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            i += 1
        exp10 += esign * e
    if i != end:
        return 0.0, BAD_WEIGHT
    if mant == 0.0:
        return 0.0, OK
    if exp10 > 400:
        return 0.0, INF_WEIGHT
    if exp10 < -400:
        return 0.0, OK
    value = sign * mant * 10.0 ** exp10
    if not np.isfinite(value) or abs(value) >= FLOAT32_INF_FROM:
        return 0.0, INF_WEIGHT
    return value, OK


@numba.njit(cache=True, nogil=True)
def _line_start(buf, i, comments):
    """For the line starting at ``i``: (end of line, first non-blank byte, kind) with
    kind 0 data, 1 blank, 2 comment."""
    n = buf.shape[0]
    eol = i
    while eol < n and buf[eol] != 10:
        eol += 1
    j = i
    while j < eol and (buf[j] == 32 or buf[j] == 9 or buf[j] == 13):
        j += 1
    if j == eol:
        return eol, j, 1
    for c in comments:
        if buf[j] == c:
            return eol, j, 2
    return eol, j, 0


@numba.njit(cache=True, nogil=True, inline="always")
def _next_token(buf, j, eol):
    """(start, end, commas skipped before it) of the next token at or after ``j``;
    start == eol when none is left."""
    commas = 0
    while j < eol and _is_delim(buf[j]):
        if buf[j] == 44:
            commas += 1
        j += 1
    t = j
    while j < eol and not _is_delim(buf[j]):
        j += 1
    return t, j, commas


@numba.njit(cache=True, nogil=True)
def parse_edge_block(buf, comments, tag, expect_cols, src, dst, weight):
    """Parse edge lines 'u v [w]' from a block of whole lines.

    ``comments``: bytes that start a comment line. ``tag``: -1, or a byte every data
    line must start with (DIMACS 'a'). ``expect_cols``: 0 decides 2 or 3 from the first
    data line; 2 or 3 fixes it. Returns (edges, ncols, err, err_line, err_pos), lines
    counted from 1 within the block.
    """
    n = buf.shape[0]
    i = 0
    line = 0
    m = 0
    ncols = expect_cols
    while i < n:
        line += 1
        eol, j, kind = _line_start(buf, i, comments)
        if kind != 0:
            i = eol + 1
            continue
        if tag >= 0:
            if buf[j] != tag or (j + 1 < eol and not _is_delim(buf[j + 1])):
                return m, ncols, BAD_TAG, line, j
            j += 1
        col = 0
        w = 1.0
        u = 0
        v = 0
        while True:
            t, j, commas = _next_token(buf, j, eol)
            # ",," or a comma first or last: a field left empty, not a separator
            if commas > 1 or (commas == 1 and (col == 0 or t >= eol)):
                return m, ncols, EMPTY_FIELD, line, t
            if t >= eol:
                break
            if col < 2:
                val, err = _parse_uint(buf, t, j)
                if err != OK:
                    return m, ncols, err, line, t
                if col == 0:
                    u = val
                else:
                    v = val
            elif col == 2:
                w, err = _parse_float(buf, t, j)
                if err != OK:
                    return m, ncols, err, line, t
            else:
                return m, ncols, TOO_MANY_COLUMNS, line, t
            col += 1
        if col < 2:
            return m, ncols, TOO_FEW_COLUMNS, line, i
        if ncols == 0:
            ncols = col
        elif col != ncols:
            return m, ncols, COLUMNS_CHANGE, line, i
        src[m] = u
        dst[m] = v
        weight[m] = w
        m += 1
        i = eol + 1
    return m, ncols, OK, line, 0


@numba.njit(cache=True, nogil=True)
def parse_adjacency_block(buf, comments, skip_per_vertex, edge_weights, first_vertex,
                          src, dst, weight):
    """Parse METIS adjacency lines: line k (comments excluded) lists the neighbours of
    vertex ``first_vertex + k``. ``skip_per_vertex`` leading integers (vertex size and
    weights) are skipped; ``edge_weights`` means each neighbour is followed by a weight.
    Returns (edges, vertices, err, err_line, err_pos)."""
    n = buf.shape[0]
    i = 0
    line = 0
    m = 0
    vertex = first_vertex
    while i < n:
        line += 1
        eol, j, kind = _line_start(buf, i, comments)
        if kind == 2:  # blank lines are vertices without neighbours
            i = eol + 1
            continue
        tok = 0
        while True:
            t, j, _ = _next_token(buf, j, eol)
            if t >= eol:
                break
            k = tok - skip_per_vertex
            if k < 0:
                val, err = _parse_uint(buf, t, j)
                if err != OK:
                    return m, vertex - first_vertex, err, line, t
            elif edge_weights and k % 2 == 1:
                wv, err = _parse_float(buf, t, j)
                if err != OK:
                    return m, vertex - first_vertex, err, line, t
                weight[m - 1] = wv
            else:
                val, err = _parse_uint(buf, t, j)
                if err != OK:
                    return m, vertex - first_vertex, err, line, t
                src[m] = val
                dst[m] = vertex
                weight[m] = 1.0
                m += 1
            tok += 1
        if tok < skip_per_vertex or (edge_weights and (tok - skip_per_vertex) % 2 == 1):
            return m, vertex - first_vertex, TOO_FEW_COLUMNS, line, i
        vertex += 1
        i = eol + 1
    return m, vertex - first_vertex, OK, line, 0


_KINDS = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))


def _not_regular(path, mode):
    """The InputFormatError of a path that is not a regular file (by its ``mode``)."""
    if stat.S_ISDIR(mode):
        return InputFormatError("is a directory, not a graph file", source=path,
                                fix="Give a file, or open a page store with hetgraph.open_store")
    kind = next((name for test, name in _KINDS if test(mode)), "special file")
    return InputFormatError(f"is a {kind}, not a regular file", source=path,
                            fix="Give a graph file (copy a stream to a file first)")


def existing_file(path):
    """``path`` as a string; InputFormatError when it is missing or not a regular file
    (a directory, FIFO or device would be read forever or block)."""
    path = os.fspath(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputFormatError("file not found", source=path,
                               fix="Check the path (relative paths start at the working "
                                   "directory)") from None
    except OSError as exc:
        raise _unopenable(path, exc) from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    return path


def _unopenable(path, exc):
    if isinstance(exc, PermissionError):
        return InputFormatError("cannot be read (permission denied)", source=path,
                                fix="Give yourself read permission on it (chmod u+r)")
    return InputFormatError(f"cannot be opened ({exc.strerror or exc})", source=path,
                            fix="Check the path and the file")


def open_regular(path):
    """Open ``path`` for reading bytes, refusing (InputFormatError) anything but a
    regular file: checked on the opened descriptor, which a FIFO does not block."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _unopenable(path, exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def open_binary(path):
    """Open ``path`` for reading bytes, decompressing .gz, .bz2 and .xz by extension,
    within the limits of :class:`~hetgraph.io.limits.GuardedStream`."""
    path = os.fspath(path)
    raw = open_regular(path)
    try:
        return decompressing(raw, path)
    except BaseException:
        raw.close()
        raise


def iter_line_blocks(stream, source, block_bytes=None):
    """Yield (block as uint8 array, lines before it, newlines in it) cut at line ends;
    ResourceLimitError for a line longer than ``tuning.MAX_LINE_BYTES``."""
    block_bytes = block_bytes or tuning.BLOCK_BYTES
    carry = b""
    lines_before = 0
    while True:
        try:
            chunk = stream.read(block_bytes)
        except DECOMPRESSION_ERRORS as exc:
            raise damaged(exc, source, lines_before + carry.count(b"\n") + 1) from exc
        if not chunk:
            break
        chunk = carry + chunk
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            if len(chunk) > tuning.MAX_LINE_BYTES:
                raise line_too_long(source, lines_before + 1)
            carry = chunk
            continue
        block, carry = chunk[:cut], chunk[cut:]
        newlines = block.count(b"\n")
        yield np.frombuffer(block, dtype=np.uint8), lines_before, newlines
        lines_before += newlines
        if len(carry) > tuning.MAX_LINE_BYTES:
            raise line_too_long(source, lines_before + 1)
    if carry:
        yield np.frombuffer(carry, dtype=np.uint8), lines_before, carry.count(b"\n")


def parse_in_parallel(blocks, parse_one, threads=None):
    """Apply ``parse_one(block, lines_before, newlines)`` to every block on a thread
    pool (the kernels release the GIL) and return the results in file order; an error
    is raised for the earliest bad block. At most ``2 * threads`` blocks are in flight."""
    threads = threads or numba.get_num_threads()
    results = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending = deque()
        for item in blocks:
            pending.append(pool.submit(parse_one, *item))
            while len(pending) >= 2 * threads:
                results.append(pending.popleft().result())
        while pending:
            results.append(pending.popleft().result())
    return results


def raise_parse_error(block, err, line, pos, source, lines_before, **fmt):
    """Raise the InputFormatError for a kernel error code at byte ``pos`` of ``block``."""
    end = pos
    while end < len(block) and block[end] not in (9, 10, 13, 32, 44):
        end += 1
    token = bytes(block[pos:end]).decode("utf-8", "replace")[:60]
    what, fix = _MESSAGES[err]
    raise InputFormatError(what.format(tok=token, **fmt), source=source,
                           line=lines_before + line, fix=fix)
