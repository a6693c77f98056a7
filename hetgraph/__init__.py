"""hetgraph: graph analytics on every CPU core and GPU of a machine.

Graph pages become Dask tasks placed on CPU or GPU workers by a cost model (Garaph).
See DESIGN.md for the layout; ``import hetgraph as hg`` is the public API.
"""

from . import datasets
from .errors import (CheckpointError, ChecksumError, GraphError, HetGraphError,
                     InputFormatError, MissingDependencyError, OutOfCoreError,
                     StoreError, StoreVersionError,
                     UnsupportedFormatError)
from .cluster import Cluster, ClusterError
from .algorithms import bfs, circuit, connected_components, heat, nn, pagerank, sssp
from .graph import Graph
from .io import generate
from .io import (PageStore, convert, from_arrays, from_networkx, from_pandas, from_scipy, open_store,
                 read, read_dimacs, read_edgelist, read_metis, read_mtx, read_npz, read_table)
from .program import ProgramError, VertexProgram
from .result import Result
from .scheduler.dispatcher import run
from .version import __version__

__all__ = [
    "datasets", "generate", "Graph", "PageStore", "HetGraphError", "InputFormatError",
    "UnsupportedFormatError", "GraphError", "StoreError", "ChecksumError", "StoreVersionError",
    "OutOfCoreError", "CheckpointError", "MissingDependencyError",
    "read", "read_edgelist", "read_mtx", "read_dimacs", "read_metis", "read_npz", "read_table",
    "from_arrays", "from_pandas", "from_scipy", "from_networkx", "open_store", "convert",
    "VertexProgram", "ProgramError", "Cluster", "ClusterError", "Result", "run", "pagerank", "sssp", "bfs",
    "connected_components", "nn", "heat", "circuit", "__version__",
]
