"""NumPy model of colored PageRank's sweep orders (issue 55): the iterations each order
takes at tol 1e-9, by the stopping test (the L1 change of the ranks below N * tol) and
to the L1 error that sync's answer has when it stops, against a reference to 1e-15.

Usage: python bench/frog_model.py [rmat-16|wiki-vote|grid-300]

Each graph in color-major order (``graph.reorder("color")``), as bench/frog.py runs it.
An iteration as hetgraph's colored one (docs/tuning.md, "Colored execution"): the
ranks scaled to sum 1 where a vertex is dangling, then the passes in the order given,
each color in place over the values the passes before it wrote, the hybrid partition
in place too (its vertices read the values from before its pass: Jacobi within it, as
the engine's scratch array gives), the constant (1 - d) / N + (the dangling rank) / N
summed again after each pass. It reproduces hetgraph's counts for the order as built
(RMAT-16 7 / 7, wiki-Vote 9 / 8)."""

import os
import sys

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import hetgraph as hg  # noqa: E402
from hetgraph.coloring import coloring_of  # noqa: E402

DAMPING = 0.85
TOL = 1e-9


def setup(g):
    """(rows of in-edges as a CSR matrix, x = rank * scale's scale, dangling ids)."""
    n = g.num_vertices
    w = np.asarray(g.in_weights if g.weighted else np.ones(g.num_arcs), float)
    rows = sp.csr_matrix((w, g.in_indices, g.in_indptr), shape=(n, n))
    out = np.asarray(rows.sum(axis=0)).ravel()
    scale = np.where(out > 0, DAMPING / np.where(out > 0, out, 1), DAMPING)
    return rows, scale, np.flatnonzero(out == 0)


def exact(rows, scale, dangling):
    """The ranks by the power iteration until their L1 change is below 1e-15."""
    n = len(scale)
    x = np.full(n, 1.0 / n) * scale
    for _ in range(5000):
        rank = (1 - DAMPING) / n + x[dangling].sum() / n + rows @ x
        done = np.abs(rank - x / scale).sum() < 1e-15
        x = rank * scale
        if done:
            break
    return x / scale / (x / scale).sum()


def sync(rows, scale, dangling, reference, tol, limit=200):
    """(iterations to the stopping test, the L1 error after each) of sync's sweep."""
    n = len(scale)
    x, errors = np.full(n, 1.0 / n) * scale, []
    for it in range(1, limit + 1):
        rank = (1 - DAMPING) / n + x[dangling].sum() / n + rows @ x
        change = np.abs(rank - x / scale).sum()
        x = rank * scale
        errors.append(np.abs(x / scale - reference).sum())
        if change < n * tol:
            return it, errors
    return limit, errors


def colored(rows, scale, dangling, reference, passes, tol, limit=200, final=False):
    """As :func:`sync`, of the colored sweep over ``passes`` ((first, end) vertex
    ranges in sweep order); ``final``: the ranks scaled to sum 1 before the error."""
    n = len(scale)
    x, errors, parts = np.full(n, 1.0 / n) * scale, [], {}
    for it in range(1, limit + 1):
        if len(dangling):
            x *= 1.0 / (x / scale).sum()
        previous = x.copy()
        constant = (1 - DAMPING) / n + x[dangling].sum() / n
        for lo, hi in passes:
            if hi > lo:
                part = parts.setdefault((lo, hi), rows[lo:hi])
                x[lo:hi] = (constant + part @ x) * scale[lo:hi]
                constant = (1 - DAMPING) / n + x[dangling].sum() / n
        change = np.abs(x / scale - previous / scale).sum()
        rank = x / scale
        errors.append(np.abs((rank / rank.sum() if final else rank) - reference).sum())
        if change < n * tol:
            return it, errors
    return limit, errors


def orders(coloring):
    """{name: passes} of the sweep orders compared."""
    b, k, level = [int(v) for v in coloring.bounds], coloring.count, coloring.level
    hybrid = (b[k - 1], b[k])
    colors = [(b[c], b[c + 1]) for c in range(k - 1)]
    later, first = colors[level:][::-1], colors[:level][::-1]
    levels = [colors[i:i + level] for i in range(0, len(colors), level)]
    return {
        "as built: hybrid partition, colors last to first": [hybrid] + colors[::-1],
        "hybrid partition last": colors[::-1] + [hybrid],
        "hybrid partition first and again last": [hybrid] + colors[::-1] + [hybrid],
        "hybrid partition twice first": [hybrid, hybrid] + colors[::-1],
        "hubs last: colors first to last, hybrid partition": colors + [hybrid],
        "later levels, hybrid partition, first level": later + [hybrid] + first,
        "levels last to first, each first to last": [hybrid] + [
            p for group in levels[::-1] for p in group],
    }


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "rmat-16"
    build = {"rmat-16": lambda: hg.generate.rmat(16, seed=1),
             "wiki-vote": lambda: hg.datasets.load("wiki-vote"),
             "grid-300": lambda: hg.generate.grid(300, 300)}[name]
    g = build().reorder("color")
    rows, scale, dangling = setup(g)
    reference = exact(rows, scale, dangling)
    stop, errors = sync(rows, scale, dangling, reference, TOL)
    target = errors[-1]
    print(f"{name}: sync {stop} iterations, error {target:.2e}")
    for label, passes in orders(coloring_of(g)).items():
        for final in (False, True):
            it, errs = colored(rows, scale, dangling, reference, passes, TOL, final=final)
            _, run = colored(rows, scale, dangling, reference, passes, -1.0,
                             limit=max(stop + 2, it), final=final)
            reached = next((i + 1 for i, e in enumerate(run) if e <= target), None)
            print(f"  {label}{', scaled to 1 at the end' if final else ''}: stopping "
                  f"test {it} (error {errs[-1]:.2e}), to sync's error {reached}")


if __name__ == "__main__":
    main()
