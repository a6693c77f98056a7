"""Shared fixtures: the real graphs in ../shared/data, small oracle helpers, and the
Hypothesis profiles and settings of the property tests."""

import heapq
import os
import pathlib
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("HETGRAPH_DATA", os.path.join(ROOT, "..", "shared", "data"))

# file, reader options, |V|, |E| (undirected counted once), directed -- from data/README.md
REAL_GRAPHS = {
    "wiki-Vote.txt": ({}, 7115, 103689, True),
    "power.graph": ({}, 4941, 6594, False),
    "astro-ph.graph": ({}, 16706, 121251, False),
    "PGPgiantcompo.graph": ({}, 10680, 24316, False),
    "MIT8.edgelist": ({"directed": False}, 6440, 251252, False),
}


# Hypothesis's profiles (pytest --hypothesis-profile=NAME): "ci" runs a quarter of each
# property test's examples (.ci/run); the default profile runs them all.
HYPOTHESIS_DEFAULT_EXAMPLES = 100
CI_EXAMPLES = 25
FEWEST_EXAMPLES = 10
settings.register_profile("ci", max_examples=CI_EXAMPLES)


def examples(count, **options):
    """Hypothesis settings of a property test: ``count`` examples under the default
    profile, scaled by the loaded profile's max_examples against Hypothesis's default
    of 100 (the "ci" profile: a quarter, never fewer than ``FEWEST_EXAMPLES``); no
    deadline (a first example may compile). ``options``: more Hypothesis settings."""
    share = settings.default.max_examples / HYPOTHESIS_DEFAULT_EXAMPLES
    scaled = max(min(count, FEWEST_EXAMPLES), round(count * share))
    return settings(max_examples=scaled, deadline=None, **options)


@pytest.fixture
def dispatcher_only(monkeypatch):
    """Built-in algorithms go through the dispatcher, whatever the graph's size (the
    direct path, hetgraph.scheduler.direct, off): for tests of the engines and their
    history on small graphs."""
    from hetgraph import tuning

    monkeypatch.setattr(tuning, "DIRECT_ARCS", -1)
    monkeypatch.setattr(tuning, "DIRECT_LEVELS_ARCS", -1)
    monkeypatch.setattr(tuning, "DIRECT_PAGERANK_ARCS", -1)
    monkeypatch.setattr(tuning, "CC_TRAVERSE_DEGREE", -1)  # (components' traversal)


@pytest.fixture
def socket_dir():
    """A new private directory with a short path, removed after the test: a Unix
    socket's path holds 107 bytes at most, and pytest's tmp_path may be longer (under
    pytest-xdist, a folder a worker)."""
    directory = tempfile.mkdtemp(prefix="hg-")
    yield pathlib.Path(directory)
    shutil.rmtree(directory, ignore_errors=True)


def data_path(name):
    path = os.path.join(DATA, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is not present (../shared/data)")
    return path


@pytest.fixture
def data():
    return data_path


def edge_set(graph):
    """Set of (source label, target label, weight or None) of every stored arc."""
    src, dst, w = graph.edges()
    ls, ld = graph.label_of(src).tolist(), graph.label_of(dst).tolist()
    ws = [None] * len(ls) if w is None else np.asarray(w, np.float64).tolist()
    return set(zip(ls, ld, ws))


def power_pagerank(graph, iterations, damping=0.85):
    """SciPy's PageRank of ``graph`` after ``iterations`` power iterations from uniform
    ranks, the dangling vertices' rank spread over all: the independent oracle."""
    import scipy.sparse as sp

    n = graph.num_vertices
    matrix = graph.to_scipy().astype(np.float64)  # A[u, v] = w for u -> v
    out = np.asarray(matrix.sum(axis=1)).ravel()
    dangling = out == 0
    walk = sp.diags(np.where(dangling, 0, 1 / np.where(dangling, 1, out))) @ matrix
    ranks = np.full(n, 1 / n)
    for _ in range(iterations):
        ranks = (1 - damping) / n + damping * (walk.T @ ranks + ranks[dangling].sum() / n)
    return ranks


def widest_paths(graph, source):
    """Oracle: the widest-path widths from ``source`` (float64; the source inf, the
    unreached 0) by a bottleneck Dijkstra (min and max are exact: a float32 graph's
    widths cast back to float32 are what a float32 run must give)."""
    width = np.zeros(graph.num_vertices)
    width[source] = np.inf
    weights = graph.out_weights().astype(np.float64)
    done = np.zeros(graph.num_vertices, bool)
    heap = [(-np.inf, source)]
    while heap:
        _, u = heapq.heappop(heap)
        if done[u]:
            continue
        done[u] = True
        for e in range(graph.out_indptr[u], graph.out_indptr[u + 1]):
            v, through = graph.out_indices[e], min(width[u], weights[e])
            if through > width[v]:
                width[v] = through
                heapq.heappush(heap, (-float(through), int(v)))
    return width


def assert_csr_matches_csc(graph):
    """The CSR must hold exactly the CSC's arcs, targets sorted within each source."""
    import scipy.sparse as sp

    n = graph.num_vertices
    ones = np.ones(graph.num_arcs)
    csc = sp.csc_matrix((ones, graph.in_indices, graph.in_indptr), shape=(n, n))
    csr = sp.csr_matrix((ones, graph.out_indices, graph.out_indptr), shape=(n, n))
    assert (csc.tocsr() != csr).nnz == 0
    for v in range(0, n, max(1, n // 200)):
        row = graph.out_indices[graph.out_indptr[v]:graph.out_indptr[v + 1]]
        assert np.all(np.diff(row) >= 0)


def disk_full_after(monkeypatch, calls):
    """Make the page store writer fail with ENOSPC at its ``calls``-th block."""
    from hetgraph.io import store

    real_write = store._Writer.write
    count = {"n": 0}

    def write(self, page, block, array, fsync=False):
        count["n"] += 1
        if count["n"] == calls:
            raise OSError(28, "No space left on device")
        return real_write(self, page, block, array, fsync)

    monkeypatch.setattr(store._Writer, "write", write)


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked gpu where the GPU engine cannot run (no CuPy or no device)."""
    from hetgraph.kernels.gpu import device as gpu

    ok, reason = gpu.availability()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
