"""The GPU push over active subgraphs (kernels/gpu/push.py, engines/subway.py).

Without a GPU: the push kernels of every incremental built-in program (and a max
relaxation) compile with nvcc for sm_90 when it is installed. On the GPU (marked gpu):
runs whose last pages stream give the CPU's answers exactly (SSSP also SciPy's) with
subgraphs on, in async-subgraph mode and off, on RMAT and a grid; the bytes each
iteration moves are those of the formula; async-subgraph needs no more iterations.
"""

import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.cc import MinLabel
from hetgraph.algorithms.common import MinRelaxation
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.errors import HetGraphError
from hetgraph.kernels.gpu.push import can_push, push_source
from hetgraph.program import ProgramSpec

NVCC = shutil.which("nvcc")


class Widest(MinRelaxation):
    """Widest paths from vertex 0: a max relaxation (not built in)."""

    dtype, reduce, needs_weights = np.float64, "max", True

    @staticmethod
    def gather(src, weight, dst):
        return min(src, weight)

    @staticmethod
    def apply(old, acc, aux):
        return max(old, acc)

    @staticmethod
    def activate(new, old):
        return new > old

    def init(self, graph):
        values = np.zeros(graph.num_vertices)
        values[0] = np.inf
        return values, values > 0


PUSHING = [ShortestPaths(0), ShortestPaths(0, np.float32), BreadthFirst(0), MinLabel(),
           MinLabel(np.int32), Widest()]


def test_only_incremental_programs_push():
    assert all(can_push(ProgramSpec(p)) for p in PUSHING)
    spec = ProgramSpec(PageRank())
    assert not can_push(spec)
    with pytest.raises(HetGraphError, match="not incremental"):
        push_source(spec, np.float32, np.int32, np.uint32, weighted=False)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize("index, weighted", [(np.int32, True), (np.int64, False)])
def test_push_kernels_compile(index, weighted, tmp_path):
    for program in PUSHING:
        source = push_source(ProgramSpec(program), np.float32, index, np.uint32,
                             weighted=weighted)
        for name in ("subgraph_push", "subgraph_push_hubs", "subgraph_flags"):
            assert f"void {name}(" in source
        path = tmp_path / "push.cu"
        path.write_text(source)
        done = subprocess.run([NVCC, "-arch=sm_90", "-std=c++17", "--ptx", "-o",
                               str(tmp_path / "push.ptx"), str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 0, (type(program).__name__, done.stderr)


# --- on the GPU ------------------------------------------------------------------------------

def _graphs():
    return {"rmat": hg.generate.rmat(13, seed=4, weights=(1.0, 9.0)),
            "grid": hg.generate.grid(120, 100, seed=2)}


def _quarter(g):
    """A GPU budget of a quarter of the graph's weighted page bytes (most pages stream)."""
    return g.num_arcs * (g.index_dtype.itemsize + 2 + 4) // 4


def _scipy_distances(g, source):
    n = g.num_vertices
    src = np.repeat(np.arange(n), np.diff(g.out_indptr))
    matrix = sp.csr_matrix((g.out_weights().astype(np.float64), (src, g.out_indices)),
                           shape=(n, n))
    return dijkstra(matrix, indices=source)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["rmat", "grid"])
@pytest.mark.parametrize("subgraph", [True, "async", False])
def test_streamed_runs_equal_the_cpu(kind, subgraph):
    g = _graphs()[kind]
    s = g.label_of(int(np.argmax(g.out_degree())))
    options = {"memory_budget": _quarter(g), "subgraph": subgraph}
    for call in (lambda **o: hg.sssp(g, s, **o), lambda **o: hg.bfs(g, s, **o),
                 lambda **o: hg.connected_components(g, algorithm="label-propagation", **o)):
        on_gpu = call(devices="gpu", gpu=options)
        np.testing.assert_array_equal(on_gpu.values, call(devices="cpu").values)
        history = on_gpu.history
        assert (history["h2d_bytes"] > 0).all()
        pushed = history["mode"] == "gpu-push"
        assert pushed.any() == (subgraph is not False)
        assert (history.loc[pushed, "f"] < hg.tuning.SUBGRAPH_ACTIVE_EDGES).all()
        assert (history.loc[~pushed, "d2h_bytes"] == 0).all()
    result = hg.sssp(g, s, devices="gpu", gpu=options)
    np.testing.assert_allclose(result.values, _scipy_distances(g, int(g.id_of(s))),
                               rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("program", [ShortestPaths, BreadthFirst])
def test_each_iteration_moves_the_formula_bytes(program):
    """h2d = sum over the active vertices of their streamed out-degree times (index +
    weight bytes), plus their offsets (one more, uint32); d2h = the active list."""
    from hetgraph.engines.gpu import GpuEngine

    g = _graphs()["grid"]
    spec = ProgramSpec(program(int(np.argmax(g.out_degree()))))
    values, flags, aux = spec.initial_state(g)
    engine = GpuEngine(spec, g, values, flags, aux, memory_budget=_quarter(g))
    subgraphs = engine.describe()["subgraph"]
    assert subgraphs is not None
    first = g.num_vertices - subgraphs["streamed_vertices"]
    src = np.repeat(np.arange(g.num_vertices), np.diff(g.out_indptr))
    streamed = np.bincount(src[g.out_indices >= first], minlength=g.num_vertices)
    edge_bytes = g.index_dtype.itemsize + (4 if spec.needs_weights else 0)
    compared = 0
    for _ in range(g.num_vertices):
        if not engine.frontier()[0]:
            break
        active = np.flatnonzero(engine.flags.get() & (streamed > 0))
        h2d, d2h = engine.h2d_bytes, engine.d2h_bytes
        mode = engine.wait(engine.launch(0.0, engine.frontier()))[0]
        if mode != "gpu-push":
            continue
        edges = int(streamed[active].sum())
        if edges <= subgraphs["chunk_edges"] and len(active) < subgraphs["chunk_edges"] // 2:
            assert engine.h2d_bytes - h2d == edges * edge_bytes + (len(active) + 1) * 4
            compared += 1
        assert engine.d2h_bytes - d2h == len(active) * g.index_dtype.itemsize
    assert compared > 10
    source = spec.program.source
    np.testing.assert_array_equal(spec.program.finalize(g, engine.result()),
                                  hg.run(program(source), g, devices="cpu").values)


@pytest.mark.gpu
def test_async_subgraphs_take_no_more_iterations():
    g = _graphs()["rmat"]
    s = g.label_of(int(np.argmax(g.out_degree())))
    budget = _quarter(g)
    sync = hg.sssp(g, s, devices="gpu", gpu={"memory_budget": budget})
    inner = hg.sssp(g, s, devices="gpu", gpu={"memory_budget": budget, "subgraph": "async"})
    np.testing.assert_array_equal(inner.values, sync.values)
    assert inner.iterations <= sync.iterations
