"""The helper threads of a parallel pass (hetgraph.kernels.cpu.threads): every part runs
once, results in part order, errors re-raised, and a pull claimed by several threads
equals SciPy's sparse product."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import hetgraph as hg
from hetgraph.kernels import cpu
from hetgraph.kernels.cpu.threads import run_parts
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.program import ProgramSpec


@pytest.mark.parametrize("count, threads", [(1, 1), (1, 4), (7, 1), (7, 2), (64, 3)])
def test_every_part_runs_once_in_order(count, threads):
    seen, lock = [], threading.Lock()

    def work(t):
        with lock:
            seen.append(t)
        return t * t

    assert run_parts(work, count, threads) == [t * t for t in range(count)]
    assert sorted(seen) == list(range(count))


def test_an_error_in_a_part_reaches_the_caller():
    def work(t):
        if t == 3:
            raise ValueError("part 3")
        return t

    with pytest.raises(ValueError, match="part 3"):
        run_parts(work, 8, 2)
    assert run_parts(lambda t: t, 4, 2) == [0, 1, 2, 3]  # the helpers still serve


def test_parallel_pull_equals_scipy_on_shuffled_ids():
    """One PageRank step (x' = (c + A^T x) * aux) over a grid with shuffled ids, its edges
    cut into 8 ranges claimed by 2 threads, against SciPy's CSR product."""
    grid = hg.generate.grid(40, 30, seed=3)
    perm = np.random.default_rng(3).permutation(grid.num_vertices)
    from hetgraph.order import renumber
    g = renumber(grid, perm)
    spec = ProgramSpec(PageRank(tol=None))
    x = np.random.default_rng(4).random(g.num_vertices)
    aux = np.random.default_rng(5).random(g.num_vertices)
    kernel = cpu.compile_program(spec, aux.dtype)
    want = (0.25 + sp.csr_matrix(g.to_scipy()).T.tocsr() @ x) * aux
    for parts, parallel in ((1, False), (8, False), (8, True)):
        new, flags = np.zeros_like(x), np.zeros(g.num_vertices, np.uint8)
        activated, degree = kernel.step(kernel.edges(g), g.out_indptr, x, new, flags, aux,
                                        0.25, cpu.ALL_VERTICES, g.in_indptr, 0, parts,
                                        True, parallel)
        np.testing.assert_allclose(new, want, rtol=1e-6)  # (float32 weights)
        assert activated == g.num_vertices and degree == g.num_arcs and flags.all()
