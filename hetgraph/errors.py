"""Errors hetgraph raises. Every one is a :class:`HetGraphError`.

Messages say what was wrong, where (file, line, record, page) and what to do.
"""


class HetGraphError(Exception):
    """Base class of every error hetgraph raises."""


class InputFormatError(HetGraphError, ValueError):
    """An input file or object is malformed (bad token, column count, header...)."""

    def __init__(self, what, *, source=None, line=None, fix=None):
        self.what, self.source, self.line, self.fix = what, source, line, fix
        where = ""
        if source is not None:
            where = f"{source}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        message = where + what
        if fix:
            message += f". {fix}"
        super().__init__(message)


class UnsupportedFormatError(HetGraphError, ValueError):
    """The file format cannot be recognised or is not supported."""


class GraphError(HetGraphError, ValueError):
    """A graph or an argument about it is invalid (bad vertex, option, dtype)."""


class RegistrationError(HetGraphError, ValueError):
    """An algorithm name or a file extension is registered a second time."""


class StoreError(HetGraphError, OSError):
    """The on-disk page store is missing, damaged or cannot be written."""


class ChecksumError(StoreError):
    """A data block of the page store does not match its recorded checksum."""


class StoreVersionError(StoreError):
    """The page store was written in a format version this hetgraph cannot read."""


class OutOfCoreError(StoreError):
    """A run from a page store larger than host memory cannot do what was asked (a
    memory budget too small for one page, an operation that needs the whole graph)."""


class CheckpointError(HetGraphError, OSError):
    """A checkpoint cannot be written, read, or does not belong to this run."""


class MissingDependencyError(HetGraphError, ImportError):
    """An optional package a feature needs is not installed (the message names the
    extra to install)."""


class ResourceLimitError(HetGraphError, MemoryError):
    """An input needs more than a limit allows (memory available, inflation of compressed
    data, line length); the message names the size, the limit and how to raise it."""
