"""Small real graphs bundled with hetgraph (see README.md in this folder for sources)."""

from __future__ import annotations

import os

from ..errors import GraphError

_HERE = os.path.dirname(__file__)

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
    from ..io.readers import read

    return read(path(name), format=DATASETS[name][1], name=name)
