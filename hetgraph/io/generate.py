"""Synthetic graphs, deterministic for a seed: RMAT / Graph500 Kronecker, 2D grid
(road-like, random weights), Erdos-Renyi."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .. import tuning
from ..csr import index_dtype
from ..errors import GraphError
from .build import build_graph


_DRAW_BLOCK = 1 << 15  # values drawn by one NumPy call: 256 KiB, copied out of the cache

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True, inline="always")
def _splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, parallel=True)
def _rmat_edges(seed, scale, t_ab, t_a, t_abc, perm, src, dst):
    """Kronecker descent with 16 random bits per level from a counter-based generator
    (splitmix64 of seed, edge, word): deterministic whatever the thread count."""
    base = _splitmix64(np.uint64(seed))
    for e in numba.prange(src.shape[0]):
        u = 0
        v = 0
        word = np.uint64(0)
        for level in range(scale):
            if level % 4 == 0:
                word = _splitmix64(base ^ (np.uint64(e) * np.uint64(8) + np.uint64(level // 4)))
            r = (word >> np.uint64(16 * (level % 4))) & np.uint64(0xFFFF)
            bit_u = 1 if r >= t_ab else 0
            if bit_u:
                bit_v = 1 if r >= t_abc else 0
            else:
                bit_v = 1 if r >= t_a else 0
            u = (u << 1) | bit_u
            v = (v << 1) | bit_v
        src[e] = perm[u]
        dst[e] = perm[v]


def _uniform(rng, low, high, size):
    """``rng.uniform(low, high, size=size)``, the same values, drawn in parallel: part k
    of ``tuning.DRAW_PART`` values comes from a copy of ``rng``'s PCG64 advanced past
    the parts before it (one draw a value), on the Numba thread count of Python threads
    (NumPy draws without the GIL). ``rng`` itself is not advanced."""
    cuts = list(range(0, size, tuning.DRAW_PART)) + [size]
    out = np.empty(size)

    def draw(k):
        part = np.random.PCG64()
        part.state = rng.bit_generator.state
        part.advance(cuts[k])
        generator = np.random.Generator(part)
        for at in range(cuts[k], cuts[k + 1], _DRAW_BLOCK):  # each block copied from cache
            end = min(at + _DRAW_BLOCK, cuts[k + 1])
            out[at:end] = generator.uniform(low, high, size=end - at)

    with ThreadPoolExecutor(numba.get_num_threads()) as pool:
        list(pool.map(draw, range(len(cuts) - 1)))
    return out


def rmat(scale, edge_factor=16, a=0.57, b=0.19, c=0.19, *, seed=1, permute=True,
         directed=True, self_loops=False, dedup="first", weights=None, name=None):
    """RMAT / Graph500 Kronecker graph: 2**scale vertices, edge_factor * 2**scale
    generated edges (duplicates and self-loops then removed by default). Deterministic
    for ``seed``, whatever the thread count.

    Parameters
    ----------
    scale : int
        log2 of the vertex count, 1..40.
    edge_factor : float
        Generated edges per vertex. Default 16.
    a, b, c : float
        Quadrant probabilities, d = 1 - a - b - c (Graph500's default .57, .19, .19).
    seed : int
        Default 1.
    permute : bool
        Relabel vertices by a random permutation (Graph500). Default True.
    directed : bool
        Default True.
    self_loops : bool
        Keep u -> u edges. Default False.
    dedup : {"first", "min", "max", "sum"} or None
        How parallel edges combine; None keeps them. Default "first".
    weights : (float, float), optional
        (low, high) of uniform edge weights; None (default): unweighted.
    name : str, optional
        Default "rmat-<scale>".

    Returns
    -------
    Graph

    Raises
    ------
    GraphError
        When ``scale`` is out of range or the probabilities leave d < 0.

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.generate.rmat(10)
    >>> g.num_vertices, g.num_edges
    (1024, 12181)
    """
    if not 1 <= scale <= 40:
        raise GraphError(f"rmat scale={scale} is out of range; use 1..40")
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise GraphError(f"rmat probabilities a={a}, b={b}, c={c} leave d={d:.3f} < 0")
    n = 1 << scale
    m = int(edge_factor * n)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n) if permute else np.arange(n)
    src = np.empty(m, index_dtype(n))
    dst = np.empty(m, index_dtype(n))
    to16 = lambda p: np.uint64(min(int(round(p * 65536)), 65536))  # noqa: E731
    _rmat_edges(seed, scale, to16(a + b), to16(a), to16(a + b + c), perm, src, dst)
    w = None if weights is None else _uniform(rng, weights[0], weights[1], m)
    return build_graph(src, dst, w, directed=directed, num_vertices=n, self_loops=self_loops,
                       dedup=dedup, source="rmat", name=name or f"rmat-{scale}")


def grid(rows, cols, *, weights=(1.0, 100.0), seed=1, name=None):
    """Undirected 2D grid (4-neighbour), road-like: long paths, degree <= 4.

    Parameters
    ----------
    rows, cols : int
        Vertex (i, j) has id i * cols + j.
    weights : (float, float) or None
        (low, high) of uniform edge weights (default (1, 100)); None: unweighted.
    seed : int
        Default 1.
    name : str, optional
        Default "grid-<rows>x<cols>".

    Returns
    -------
    Graph
        rows * cols vertices, rows * (cols - 1) + (rows - 1) * cols edges.

    Raises
    ------
    GraphError
        When ``rows`` or ``cols`` is below 1.

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.generate.grid(3, 4)
    >>> g.num_vertices, g.num_edges, g.directed
    (12, 17, False)
    """
    if rows < 1 or cols < 1:
        raise GraphError(f"grid needs rows, cols >= 1 (got {rows} x {cols})")
    ids = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    src = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    dst = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    rng = np.random.default_rng(seed)
    w = None if weights is None else rng.uniform(weights[0], weights[1], size=len(src))
    return build_graph(src, dst, w, directed=False, num_vertices=rows * cols, source="grid",
                       name=name or f"grid-{rows}x{cols}")


def erdos_renyi(n, p=None, *, m=None, directed=True, seed=1, weights=None, name=None):
    """G(n, p) or G(n, m) random graph without self-loops or parallel edges, sampled
    in O(m) memory.

    Parameters
    ----------
    n : int
        Vertices.
    p : float, optional
        Edge probability; give ``p`` or ``m``.
    m : int, optional
        Exact edge count.
    directed : bool
        Default True.
    seed : int
        Default 1.
    weights : (float, float), optional
        (low, high) of uniform edge weights; None (default): unweighted.
    name : str, optional
        Default "er-<n>".

    Returns
    -------
    Graph

    Raises
    ------
    GraphError
        When neither or both of ``p`` and ``m`` are given, or they are out of range.

    Examples
    --------
    >>> import hetgraph as hg
    >>> g = hg.generate.erdos_renyi(100, m=500)
    >>> g.num_vertices, g.num_edges
    (100, 500)
    """
    if (p is None) == (m is None):
        raise GraphError("erdos_renyi needs exactly one of p= or m=")
    pairs = n * (n - 1) if directed else n * (n - 1) // 2
    rng = np.random.default_rng(seed)
    if m is None:
        if not 0 <= p <= 1:
            raise GraphError(f"erdos_renyi p={p} is not a probability")
        m = int(rng.binomial(pairs, p))
    if m > pairs:
        raise GraphError(f"erdos_renyi m={m} exceeds the {pairs} possible edges")
    keys = np.empty(0, np.int64)
    while len(keys) < m:
        draw = rng.integers(0, pairs, size=int((m - len(keys)) * 1.1) + 16)
        keys = np.unique(np.concatenate([keys, draw]))
    keys = rng.permutation(keys)[:m]
    if directed:
        src, dst = keys // (n - 1), keys % (n - 1)
        dst = dst + (dst >= src)
    else:  # unrank the pair index over the upper triangle
        i = (n - 2 - np.floor(np.sqrt(-8.0 * keys + 4.0 * n * (n - 1) - 7) / 2.0 - 0.5)).astype(np.int64)
        start = i * (2 * n - i - 1) // 2
        src, dst = i, keys - start + i + 1
    w = None if weights is None else _uniform(rng, weights[0], weights[1], m)
    return build_graph(src, dst, w, directed=directed, num_vertices=n, source="erdos_renyi",
                       name=name or f"er-{n}")
