"""hetgraph: graph analytics on every CPU core and GPU of a machine.

Graph pages become Dask tasks placed on CPU or GPU workers by a cost model (Garaph).
``import hetgraph as hg`` is the public API. The algorithms (``hg.pagerank``,
``hg.sssp``, ...) and the file readers (``hg.read_mtx``, ...) are the ones registered in
:mod:`hetgraph.registry`.
"""

from . import datasets
from .errors import (CheckpointError, ChecksumError, GraphError, HetGraphError,
                     InputFormatError, MissingDependencyError, OutOfCoreError,
                     StoreError, StoreVersionError,
                     UnsupportedFormatError)
from .cluster import Cluster, ClusterError
from .algorithms import FUNCTIONS as _ALGORITHM_FUNCTIONS
from .graph import Graph
from .io import READER_FUNCTIONS as _READER_FUNCTIONS
from .io import generate
from .io import (PageStore, convert, from_arrays, from_networkx, from_pandas, from_scipy,
                 open_store, read)
from .program import ProgramError, VertexProgram
from .result import Result
from .scheduler.dispatcher import run
from .version import __version__

globals().update({f.__name__: f for f in _READER_FUNCTIONS + _ALGORITHM_FUNCTIONS})

__all__ = [
    "datasets", "generate", "Graph", "PageStore", "HetGraphError", "InputFormatError",
    "UnsupportedFormatError", "GraphError", "StoreError", "ChecksumError", "StoreVersionError",
    "OutOfCoreError", "CheckpointError", "MissingDependencyError",
    "read", *(f.__name__ for f in _READER_FUNCTIONS),
    "from_arrays", "from_pandas", "from_scipy", "from_networkx", "open_store", "convert",
    "VertexProgram", "ProgramError", "Cluster", "ClusterError", "Result", "run",
    *(f.__name__ for f in _ALGORITHM_FUNCTIONS), "__version__",
]
