"""What the package offers, declared where it is defined: algorithms, file readers and the
page-store writer.

An algorithm module decorates its one-call function with :func:`algorithm`; a format's
reader is decorated with :func:`reader`. The command line, ``hetgraph.<name>`` and
``__all__``, ``hetgraph.read`` and the NetworkX backend read these tables, so adding an
algorithm or a format touches only the module that defines it (the model is NetworkX's
``_dispatchable`` in ``networkx/utils/backends.py``).

This module imports nothing else of hetgraph at its import: every layer may read it.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Callable

from .errors import RegistrationError

ALGORITHMS: dict = {}  # CLI name -> Algorithm, in registration order
READERS: dict = {}     # format name -> Reader
EXTENSIONS: dict = {}  # file extension (".mtx") -> format name
WRITERS: dict = {}     # store kind ("pagestore") -> function(graph, path, **options)


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm.

    ``name``: its command-line name (``hetgraph run NAME``). ``function``: the one-call
    function, exported as ``hetgraph.<function.__name__>``. ``program``: its
    VertexProgram class (None when it has none). ``needs_source``: its second argument
    is a vertex label, given on the command line as ``--source``. ``cli``: whether the
    command line offers it. ``smallest_first``: ``--top`` lists the smallest reached
    values (distances, levels) instead of the largest. ``networkx``: the NetworkX
    functions that :mod:`hetgraph.nx_backend` answers with it.
    """

    name: str
    function: Callable
    program: type | None = None
    needs_source: bool = False
    cli: bool = True
    smallest_first: bool = False
    networkx: tuple = ()

    @property
    def iterations_option(self) -> str:
        """The keyword that bounds its iterations: ``iterations`` for the fixed-step
        simulations, ``max_iterations`` for the others."""
        parameters = inspect.signature(self.function).parameters
        return "iterations" if "iterations" in parameters else "max_iterations"


def algorithm(name, *, program=None, needs_source=False, cli=True, smallest_first=False,
              networkx=()):
    """Decorator registering an algorithm's one-call function under ``name`` (the fields
    of :class:`Algorithm`); returns the function unchanged.

    Examples
    --------
    >>> import hetgraph.algorithms  # (its modules register the built-in algorithms)
    >>> from hetgraph.registry import ALGORITHMS
    >>> ALGORITHMS["sssp"].needs_source
    True
    """
    def register(function):
        if name in ALGORITHMS and ALGORITHMS[name].function is not function:
            raise RegistrationError(f"algorithm {name!r} is already registered by "
                                    f"{ALGORITHMS[name].function.__module__}; register "
                                    f"yours under another name")
        ALGORITHMS[name] = Algorithm(name, function, program, needs_source, cli,
                                     smallest_first, tuple(networkx))
        return function
    return register


def algorithms():
    """Every registered :class:`Algorithm`, in registration order."""
    return list(ALGORITHMS.values())


@dataclass(frozen=True)
class Reader:
    """One registered format: ``function(path, **preset, **options)`` reads it."""

    name: str
    function: Callable
    extensions: tuple = ()
    preset: tuple = ()  # (keyword, value) pairs the format fixes (read_table's format=)

    def __call__(self, path, **options):
        return self.function(path, **dict(self.preset), **options)


def reader(name, *extensions, **preset):
    """Decorator registering a reader of format ``name`` for files ending in
    ``extensions`` (".mtx"; before any .gz/.bz2/.xz); ``preset``: keyword options the
    format fixes. Stack it to register one function under several names. Returns the
    function unchanged.

    Examples
    --------
    >>> import hetgraph.io  # (its modules register the built-in readers)
    >>> from hetgraph.registry import EXTENSIONS, READERS
    >>> EXTENSIONS[".mtx"], READERS["mtx"].function.__name__
    ('mtx', 'read_mtx')
    """
    def register(function):
        for ext in extensions:
            if EXTENSIONS.get(ext, name) != name:
                raise RegistrationError(f"extension {ext!r} is already the format "
                                        f"{EXTENSIONS[ext]!r}; give your reader another "
                                        f"extension, or pass format= to hg.read")
        READERS[name] = Reader(name, function, tuple(extensions), tuple(preset.items()))
        EXTENSIONS.update({ext: name for ext in extensions})
        return function
    return register


def reader_functions():
    """The distinct functions of the registered readers, in registration order."""
    return list(dict.fromkeys(r.function for r in READERS.values()))


def writer(kind):
    """Decorator registering ``function(graph, path, **options)`` as the writer of store
    ``kind``; :meth:`hetgraph.Graph.save` calls the "pagestore" one (the graph type
    cannot import the store, whose graphs are Graphs) through :func:`writer_of`."""
    def register(function):
        WRITERS[kind] = function
        return function
    return register


def writer_of(kind):
    """The writer of store ``kind``: a graph made without ``hetgraph.io`` (one loaded
    from the datasets' cache) finds none registered, so the package that registers the
    built-in writers is imported by name first (the plug-in way: this module imports
    nothing of hetgraph at its own import)."""
    if kind not in WRITERS:
        importlib.import_module("hetgraph.io")
    return WRITERS[kind]
