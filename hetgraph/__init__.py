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

# public name -> the module that defines it, imported when the name is first used
_LAZY = {
    **dict.fromkeys(("HetGraphError", "InputFormatError", "UnsupportedFormatError",
                     "GraphError", "StoreError", "ChecksumError", "StoreVersionError",
                     "OutOfCoreError", "CheckpointError", "MissingDependencyError",
                     "ResourceLimitError", "RegistrationError"),
                    ".errors"),
    **dict.fromkeys(("generate", "PageStore", "read", "from_arrays", "from_pandas",
                     "from_scipy", "from_networkx", "open_store", "convert"), ".io"),
    "Graph": ".graph", "VertexProgram": ".program", "ProgramError": ".program",
    "Cluster": ".cluster", "ClusterError": ".cluster", "Result": ".result",
    "run": ".scheduler.dispatcher", "__version__": ".version",
}


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
        value = ["datasets", *_LAZY, *_registered()]
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
