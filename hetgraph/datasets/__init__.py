"""Small real graphs bundled with hetgraph (see README.md in this folder for sources).

A bundled graph is parsed from its file once; its arrays are then kept in hetgraph's
cache directory (:mod:`hetgraph.cachedir`) as a signed ``.npz`` without pickles, keyed
by the file's bytes and the sources of the code that builds a graph, so that a later
process loads them instead of parsing the file again."""

from __future__ import annotations

import glob
import hashlib
import io
import logging
import os

import numpy as np

from ..cachedir import private_store
from ..errors import GraphError

log = logging.getLogger("hetgraph.datasets")

_HERE = os.path.dirname(__file__)
_PACKAGE = os.path.dirname(_HERE)
_ARRAYS = ("in_indptr", "in_indices", "in_weights", "out_indptr", "out_indices", "labels")

#: name -> (file, reader format, description)
DATASETS = {
    "wiki-vote": ("wiki-Vote.txt.gz", "snap",
                  "Wikipedia adminship votes (SNAP), directed, 7,115 vertices, 103,689 edges"),
    "power": ("power.graph", "metis",
              "US Western power grid, undirected, 4,941 vertices, 6,594 edges"),
}


def names():
    """Names of the bundled graphs."""
    return sorted(DATASETS)


def path(name) -> str:
    """Filesystem path of a bundled graph's file."""
    if name not in DATASETS:
        raise GraphError(f"no bundled graph named {name!r}; choose one of {names()}")
    return os.path.join(_HERE, DATASETS[name][0])


def load(name):
    """Load a bundled graph by name (see :func:`names`).

    Examples
    --------
    >>> import hetgraph as hg
    >>> hg.datasets.load("wiki-vote").num_edges
    103689
    """
    file = path(name)
    store = private_store()
    kept_name = f"dataset-{name}-{_digest(file)}.npz" if store is not None else None
    graph = None if store is None else _kept(store, kept_name, name)
    if graph is None:
        from ..io.readers import read

        graph = read(file, format=DATASETS[name][1], name=name)
        if store is not None:
            _keep(store, kept_name, graph)
    return graph


def _digest(file) -> str:
    """What a bundled graph's arrays depend on: its file, the code that reads and
    builds graphs (``io/``, ``graph.py``, ``csr.py``) and NumPy's version."""
    digest = hashlib.sha256(np.__version__.encode())
    sources = sorted(glob.glob(os.path.join(_PACKAGE, "io", "*.py"))) + \
        [os.path.join(_PACKAGE, "graph.py"), os.path.join(_PACKAGE, "csr.py"), file]
    for source in sources:
        with open(source, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _kept(store, kept_name, name):
    """The graph kept as ``kept_name``, or None (not kept, or not readable)."""
    from ..graph import Graph

    payload = store.load(kept_name)
    if payload is None:
        return None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as kept:
            arrays = {k: kept[k] if k in kept else None for k in _ARRAYS}
            directed = bool(kept["directed"])
    except (OSError, ValueError, KeyError) as exc:  # signed, yet not what _keep wrote
        log.warning("hetgraph cache: %s does not load (%s); reading %s again",
                    kept_name, exc, name)
        return None
    return Graph(*(arrays[k] for k in _ARRAYS[:5]), directed=directed,
                 labels=arrays["labels"], name=name)


def _keep(store, kept_name, graph):
    """Keep ``graph``'s arrays as ``kept_name`` (a cache that cannot be written is
    skipped: the next process parses the file again)."""
    arrays = {k: getattr(graph, k) for k in _ARRAYS if getattr(graph, k) is not None}
    buffer = io.BytesIO()
    np.savez(buffer, directed=np.bool_(graph.directed), **arrays)
    try:
        store.save(kept_name, buffer.getvalue())
    except OSError as exc:
        log.warning("hetgraph cache: cannot keep %s (%s)", kept_name, exc)
