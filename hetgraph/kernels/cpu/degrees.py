"""PageRank's per-vertex scale from the out-weights, in one compiled pass over fresh
memory (the NumPy expression takes six, each faulting in a new array). Serial: a
parallel function costs more to load from the compile cache than this pass takes."""

from __future__ import annotations

import numba
import numpy as np


def damped_inverse(out_weight, damping, dtype):
    """(dangling, scale, rank_of) for ``out_weight`` (a vertex's out-edge weight sum or
    out-degree; 0 for a dangling vertex): ``scale`` = damping / out_weight (damping when
    dangling) in ``dtype``, ``rank_of`` = 1 / scale in float64 (from the float64
    scale), ``dangling`` the dangling vertices as a slice when they are consecutive,
    else an int64 index array."""
    n = len(out_weight)
    scale = np.empty(n, dtype)
    rank_of = np.empty(n, np.float64)
    count, first, last = _damped_inverse(out_weight, float(damping), scale, rank_of)
    if count == 0:
        return slice(0, 0), scale, rank_of
    if last - first + 1 == count:
        return slice(int(first), int(last) + 1), scale, rank_of
    return np.flatnonzero(out_weight == 0), scale, rank_of


@numba.njit(nogil=True, cache=True)
def _damped_inverse(out_weight, damping, scale, rank_of):
    """Fills ``scale`` and ``rank_of`` (see :func:`damped_inverse`); returns the
    dangling vertices' count, first and last."""
    count, first, last = 0, -1, -1
    for v in range(len(out_weight)):
        w = out_weight[v]
        s = damping / w if w > 0 else damping
        scale[v] = s
        rank_of[v] = 1.0 / s
        if w == 0:
            if count == 0:
                first = v
            count += 1
            last = v
    return count, first, last
