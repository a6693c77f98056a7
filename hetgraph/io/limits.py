"""Limits on what reading an input may take: the memory the sizes it declares need, the
bytes a compressed file inflates to, the bytes of one line.

Each limit is checked before the allocation or the read it guards, so a hostile or
mistaken input (a header declaring 10^12 vertices, a decompression bomb, a file of
spaces without a newline) gives a :class:`~hetgraph.errors.ResourceLimitError` naming
the size and the limit instead of exhausting memory. The limits are the ``tuning``
constants of its "input limits" section, read when a check runs.
"""

from __future__ import annotations

import bz2
import lzma
import zlib

from .. import tuning
from ..errors import InputFormatError, ResourceLimitError

GiB = float(1 << 30)
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


def available_memory() -> int:
    """Bytes of host memory available now (psutil)."""
    import psutil

    return int(psutil.virtual_memory().available)


def require_memory(vertices, arcs, where, what):
    """ResourceLimitError unless a graph of ``vertices`` and ``arcs`` can fit in the
    memory available now: ``where`` names the input, ``what`` how it gave the sizes."""
    need = vertices * tuning.GRAPH_VERTEX_BYTES + arcs * tuning.GRAPH_ARC_BYTES
    have = available_memory()
    if need > have:
        raise ResourceLimitError(
            f"{where}: {what} {vertices:,} vertices and {arcs:,} arcs: the graph needs at "
            f"least {need / GiB:,.1f} GiB, more than the {have / GiB:,.1f} GiB available. "
            "Check the sizes (a damaged header or a stray id), or use a machine with more "
            "memory")


def damaged(exc, source, line):
    """The InputFormatError of compressed data that ``exc`` says is damaged."""
    return InputFormatError(f"compressed data is truncated or corrupt ({exc})",
                            source=source, line=line, fix="Re-download or re-compress the file")


def line_too_long(source, line):
    """The ResourceLimitError of a line longer than ``tuning.MAX_LINE_BYTES``."""
    return ResourceLimitError(
        f"{source}, line {line}: line longer than {tuning.MAX_LINE_BYTES:,} bytes "
        "(tuning.MAX_LINE_BYTES); the file is damaged or not text, or raise the limit")


class GuardedStream:
    """A binary stream (decompressing or not) whose reads stop at the limits: a
    compressed stream may inflate at most ``tuning.MAX_INFLATION`` times the compressed
    bytes read (plus ``tuning.INFLATION_ALLOWANCE``), a line read by :meth:`readline`
    is at most ``tuning.MAX_LINE_BYTES``; damaged compressed data gives an
    InputFormatError. ``raw`` is the file under a decompressing ``stream`` (None when
    ``stream`` is the file itself)."""

    def __init__(self, stream, raw, source):
        self.stream, self.raw, self.source = stream, raw, source
        self.inflated = 0
        self.lines = 0  # lines read by readline

    def _counted(self, data):
        if self.raw is not None:
            self.inflated += len(data)
            if self.inflated > tuning.INFLATION_ALLOWANCE:
                compressed = max(self.raw.tell(), 1)
                if self.inflated > tuning.MAX_INFLATION * compressed + tuning.INFLATION_ALLOWANCE:
                    raise ResourceLimitError(
                        f"{self.source}: compressed data inflates to more than "
                        f"{tuning.MAX_INFLATION} times its size (a decompression bomb?); "
                        "raise tuning.MAX_INFLATION if the file is genuine")
        return data

    def read(self, size=-1):
        """Up to ``size`` bytes; damaged data raises what the decompressor raises (the
        caller, who counts lines, names it: :func:`damaged`)."""
        return self._counted(self.stream.read(size))

    def readline(self):
        """One line, at most ``tuning.MAX_LINE_BYTES`` long (else ResourceLimitError)."""
        limit = tuning.MAX_LINE_BYTES
        try:
            line = self._counted(self.stream.readline(limit + 1))
        except DECOMPRESSION_ERRORS as exc:
            raise damaged(exc, self.source, self.lines + 1) from exc
        self.lines += 1
        if len(line) > limit:
            raise line_too_long(self.source, self.lines)
        return line

    def __iter__(self):
        while True:
            line = self.readline()
            if not line:
                return
            yield line

    def close(self):
        self.stream.close()
        if self.raw is not None:
            self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_MAGIC = {".gz": b"\x1f\x8b", ".bz2": b"BZh", ".xz": b"\xfd7zXZ\x00"}
_NAMES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}


def decompressing(raw, source):
    """A GuardedStream over the open binary file ``raw``, decompressed as the name
    ``source`` says (.gz, .bz2, .xz); InputFormatError when the data is another
    compression than its name says."""
    suffix = next((s for s in _MAGIC if source.endswith(s)), None)
    if suffix is None:
        return GuardedStream(raw, None, source)
    head = raw.read(6)
    raw.seek(0)
    if head and not _MAGIC[suffix].startswith(head[:len(_MAGIC[suffix])]):
        actual = next((s for s, magic in _MAGIC.items() if head.startswith(magic)), None)
        said = f" (it starts like {actual} data: rename it)" if actual else ""
        raise InputFormatError(f"not {_NAMES[suffix]} data as its name says{said}",
                               source=source,
                               fix="Give the file the extension of its compression")
    if suffix == ".gz":
        import gzip

        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    elif suffix == ".bz2":
        stream = bz2.BZ2File(raw, "rb")
    else:
        stream = lzma.LZMAFile(raw, "rb")
    return GuardedStream(stream, raw, source)
