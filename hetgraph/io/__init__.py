"""Input and output: readers, generators, validation, partitioning, the page store."""

from .build import build_graph
from .partition import Page, Partition, partition, replication_factor
from .readers import detect_format, read
from .store import PageStore, convert, open_store, save
from .tables import from_arrays, from_networkx, from_pandas, from_scipy, read_npz, read_table
from .textformats import read_dimacs, read_edgelist, read_metis, read_mtx

__all__ = [
    "build_graph", "Page", "Partition", "partition", "replication_factor", "detect_format",
    "read", "PageStore", "convert", "open_store", "save", "from_arrays", "from_networkx", "from_pandas",
    "from_scipy", "read_npz", "read_table", "read_dimacs", "read_edgelist", "read_metis",
    "read_mtx",
]
