"""hetgraph: graph analytics on every CPU core and GPU of a machine.

Graph pages become Dask tasks placed on CPU or GPU workers by a cost model (Garaph).
``import hetgraph as hg`` is the public API. The algorithms (``hg.pagerank``,
``hg.sssp``, ...) and the file readers (``hg.read_mtx``, ...) are the ones registered in
:mod:`hetgraph.registry`.

Names are imported on first use (module ``__getattr__``): ``import hetgraph`` loads
neither Numba, pandas nor Dask, which only the graphs and the runs need.
"""

import importlib
import importlib.util

from . import datasets
from .cluster import Cluster, ClusterError
from .errors import (CheckpointError, ChecksumError, GraphError, HetGraphError,
                     InputFormatError, MissingDependencyError, OutOfCoreError,
                     StoreError, StoreVersionError,
                     UnsupportedFormatError)
from .version import __version__

# public name -> the module that defines it, imported when the name is first used
_LAZY = {
    "Graph": ".graph", "generate": ".io", "PageStore": ".io", "convert": ".io",
    "from_arrays": ".io", "from_networkx": ".io", "from_pandas": ".io", "from_scipy": ".io",
    "open_store": ".io", "read": ".io", "ProgramError": ".program",
    "VertexProgram": ".program", "Result": ".result", "run": ".scheduler.dispatcher",
}
_NAMES = [
    "datasets", "generate", "Graph", "PageStore", "HetGraphError", "InputFormatError",
    "UnsupportedFormatError", "GraphError", "StoreError", "ChecksumError", "StoreVersionError",
    "OutOfCoreError", "CheckpointError", "MissingDependencyError", "read", "from_arrays",
    "from_pandas", "from_scipy", "from_networkx", "open_store", "convert", "VertexProgram",
    "ProgramError", "Cluster", "ClusterError", "Result", "run", "__version__",
]


def _registered():
    """{name: function} of the registered readers and algorithms (imports their
    modules, which register them)."""
    from .algorithms import FUNCTIONS
    from .io import READER_FUNCTIONS

    return {f.__name__: f for f in READER_FUNCTIONS + FUNCTIONS}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name == "__all__":
        value = _NAMES + list(_registered())
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:  # hg.io, hg.cluster ...
        value = importlib.import_module(f".{name}", __name__)
    else:
        value = _registered().get(name)
        if value is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__getattr__("__all__")))
