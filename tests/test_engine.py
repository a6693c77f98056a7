"""The CPU engine itself: edge-range partitioning with replica merging (property
tests against a direct computation), the cost model's switch, run options, Result."""

import itertools

import numba
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph.order import degree_skew
from hetgraph.kernels import cpu
from hetgraph.program import ProgramSpec
from hetgraph.result import row_dict
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.engines.base import Engine
from hetgraph import tuning
from hetgraph.engines.cpu import CpuEngine, mode_limits, pull_threads
from hetgraph.engines.cpu_modes import choose_cpu_mode, notify_fraction, push_factor
from hetgraph.tuning import PUSH_EDGE_COST, SERIAL_EDGES, SPARSE_EDGES
from hetgraph.scheduler.state import VertexState
from conftest import examples

pytestmark = pytest.mark.usefixtures("dispatcher_only")  # (the engines' own runs)


class SumOfSources(hg.VertexProgram):
    """new = old + sum of weighted in-neighbour values; integer-valued so sums are exact."""

    dtype = np.int64
    reduce = "add"
    needs_weights = True

    @staticmethod
    def gather(src, weight, dst):
        return src * 2 * weight + dst

    @staticmethod
    def apply(old, acc, aux):
        return old + acc + aux

    @staticmethod
    def activate(new, old):
        return new % 3 == 0

    def init(self, graph):
        return np.arange(graph.num_vertices) % 5, None

    def aux(self, graph):
        return np.arange(graph.num_vertices, dtype=np.int32)


class SettledSum(SumOfSources):
    """SumOfSources whose multiples of 4 are settled: a pull keeps them as they are."""

    @staticmethod
    def settled(value):
        return value % 4 == 0


@st.composite
def graphs_and_vertex_lists(draw):
    n = draw(st.integers(1, 40))
    m = draw(st.integers(0, 200))
    hub = draw(st.booleans())
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    if hub:  # one vertex with most in-edges: it spans many edge ranges
        dst = [d if i % 4 else 0 for i, d in enumerate(dst)]
    weights = draw(st.lists(st.integers(1, 3), min_size=m, max_size=m))
    g = hg.from_arrays(np.array(src, np.int64), np.array(dst, np.int64),
                       weight=np.array(weights, np.float64), num_vertices=n, dedup=None)
    subset = draw(st.lists(st.integers(0, n - 1), unique=True))
    return g, np.array(sorted(subset), np.int64), draw(st.integers(1, 64))


def expected_step(g, values, aux, vertices, settled=False):
    new = values.copy()
    flags = np.zeros(g.num_vertices, np.uint8)
    for v in vertices:
        if settled and values[v] % 4 == 0:  # kept; its flag is activate(old, old)
            flags[v] = values[v] % 3 == 0
            continue
        lo, hi = g.in_indptr[v], g.in_indptr[v + 1]
        acc = sum(values[u] * 2 * int(w) + values[v] for u, w in
                  zip(g.in_indices[lo:hi], g.in_weights[lo:hi]))
        new[v] = values[v] + acc + aux[v]
        flags[v] = new[v] % 3 == 0
    return new, flags


@examples(150)
@given(graphs_and_vertex_lists())
@pytest.mark.parametrize("program, sync", [(SumOfSources, True), (SettledSum, True),
                                           (SettledSum, False)])
@pytest.mark.parametrize("parallel", [False, True])
def test_edge_ranges_and_replica_merge_equal_a_direct_computation(program, sync, parallel,
                                                                  case):
    """Every vertex cut by the edge ranges is combined from its replicas, the ranges run
    one after the other or claimed by helper threads; in a sync pass a settled one (SettledSum)
    is kept by the range that owns it and skipped by the others, an async pass computes
    it."""
    g, subset, parts = case
    spec = ProgramSpec(program())
    values, _, aux = spec.initial_state(g)
    kernel = cpu.compile_program(spec, aux.dtype)
    v0 = g.num_vertices // 3
    # empty list = every vertex from v0 on (a pull, a page's pull)
    cases = [(np.empty(0, np.int64), g.in_indptr, 0), (np.empty(0, np.int64),
                                                       g.in_indptr[v0:], v0)]
    if len(subset):  # notify-pull never runs an empty list
        cases.append((subset, cpu.edge_prefix(g.in_indptr, subset), 0))
    for vertices, prefix, first in cases:
        listed = vertices if len(vertices) else np.arange(first, g.num_vertices)
        new = values.copy()
        flags = np.full(g.num_vertices, 7, np.uint8)
        activated, degree = kernel.step(kernel.edges(g), g.out_indptr, values, new, flags,
                                        aux, 0.0, vertices, prefix, first, parts,
                                        sync, parallel)
        want_values, want_flags = expected_step(g, values, aux, listed,
                                                settled=program is SettledSum and sync)
        np.testing.assert_array_equal(new[listed], want_values[listed])
        np.testing.assert_array_equal(flags[listed], want_flags[listed])
        assert activated == int(want_flags[listed].sum())
        assert degree == int(g.out_degree()[listed][want_flags[listed] == 1].sum())
        untouched = np.setdiff1d(np.arange(g.num_vertices), listed)
        assert np.all(flags[untouched] == 7) and np.all(new[untouched] == values[untouched])


@examples(80)
@given(graphs_and_vertex_lists(), st.integers(0, 2**31))
@pytest.mark.parametrize("parallel", [False, True])
def test_a_sync_bfs_pull_that_stops_at_a_settled_vertex_gives_every_level(parallel, case,
                                                                        seed):
    """BFS's sync pull stops reading a vertex's in-edges once it is settled (reached):
    every level it computes from the levels below d is the full minimum a direct
    computation takes, at every d, the edges cut in ranges or not."""
    g, subset, parts = case
    source = int(np.random.default_rng(seed).integers(g.num_vertices))
    spec = ProgramSpec(BreadthFirst(source))
    kernel = cpu.compile_program(spec, np.dtype(np.float32))
    aux = np.zeros(1, np.float32)
    levels = csgraph.shortest_path(g.to_scipy(), indices=source, unweighted=True)
    unreached = np.iinfo(np.int32).max
    src = np.repeat(np.arange(g.num_vertices), np.diff(g.out_indptr))
    for d in range(1, int(np.nanmax(np.where(np.isinf(levels), 0, levels))) + 2):
        values = np.where(levels < d, levels, unreached).astype(np.int32)
        want = values.copy()  # an unreached vertex takes 1 + its smallest in-neighbour
        reached = values[src] < unreached
        np.minimum.at(want, g.out_indices[reached], values[src[reached]] + 1)
        cases = [(cpu.ALL_VERTICES, g.in_indptr)]  # every vertex, and a notify-pull's list
        if len(subset):
            cases.append((subset, cpu.edge_prefix(g.in_indptr, subset)))
        for vertices, prefix in cases:
            listed = vertices if len(vertices) else np.arange(g.num_vertices)
            new = values.copy()
            flags = np.zeros(g.num_vertices, np.uint8)
            activated, _ = kernel.step(kernel.edges(g), g.out_indptr, values, new, flags,
                                       aux, 0.0, vertices, prefix, 0, parts, True, parallel)
            np.testing.assert_array_equal(new[listed], want[listed])
            assert activated == int((want[listed] < values[listed]).sum())


@examples(60)
@given(st.integers(1, 300), st.integers(0, 1000), st.integers(0, 2**31))
def test_notify_marks_exactly_the_out_neighbours(n, m, seed):
    g = hg.generate.erdos_renyi(max(n, 2), m=min(m, max(n, 2) * (max(n, 2) - 1)), seed=seed)
    rng = np.random.default_rng(seed)
    flags = (rng.random(g.num_vertices) < 0.2).astype(np.uint8)
    active = np.flatnonzero(flags)
    count, degree = cpu.frontier_size(flags, g.out_indptr)
    assert count == len(active) and degree == g.out_degree()[active].sum()
    marks = np.zeros_like(flags)
    cpu.notify(flags, g.out_indptr, g.out_indices, 0, 0, g.num_vertices, marks, True, 3)
    assert not flags.any()
    expected = set(active.tolist())
    for u in active:
        expected.update(g.out_indices[g.out_indptr[u]:g.out_indptr[u + 1]].tolist())
    kept = marks.copy()
    assert cpu.active_ids(marks).tolist() == sorted(expected)
    assert np.array_equal(marks, kept)
    assert cpu.compact(marks, 4).tolist() == sorted(expected)
    assert not marks.any()


@examples(80)
@given(st.integers(0, 200), st.floats(0.0, 1.0), st.integers(0, 2**31), st.integers(0, 7))
def test_active_ids_are_the_set_flags_in_order(n, density, seed, offset):
    rng = np.random.default_rng(seed)
    flags = (rng.random(n + offset) < density).astype(np.uint8) * rng.integers(1, 256, n + offset,
                                                                               dtype=np.uint8)
    flags = flags[offset:]  # any start address and length, not only whole 8-byte words
    ids = cpu.active_ids(flags)
    assert ids.dtype == np.int64 and ids.tolist() == np.flatnonzero(flags).tolist()


@examples(60)
@given(st.integers(0, 300), st.floats(0.0, 1.0), st.sampled_from(["int32", "float64"]),
       st.integers(0, 2**31))
def test_replace_value_changes_exactly_the_equal_elements(n, share, dtype, seed):
    rng = np.random.default_rng(seed)
    old = np.iinfo(np.int32).max if dtype == "int32" else np.inf
    values = rng.integers(-5, 5, n).astype(dtype)
    values[rng.random(n) < share] = old
    expected = np.where(values == old, -1, values).astype(dtype)
    cpu.replace_value(values, old, -1)
    assert values.dtype == dtype and np.array_equal(values, expected)


@examples(80)
@given(st.integers(0, 300), st.sampled_from([0.0, 0.05, 0.5, 0.95, 1.0]), st.booleans(),
       st.integers(0, 2**31), st.integers(0, 7))
def test_frontier_size_counts_the_set_flags_and_their_out_degrees(n, density, ones, seed,
                                                                  offset):
    """Whole words of 1 flags take a shortcut; other nonzero flags count the same."""
    rng = np.random.default_rng(seed)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 40, n))]).astype(np.int64)
    flags = (rng.random(n + offset) < density).astype(np.uint8)
    if not ones:
        flags *= rng.integers(1, 256, n + offset, dtype=np.uint8)
    flags = flags[offset:]  # any start address and length
    active = np.flatnonzero(flags)
    assert cpu.frontier_size(flags, indptr) == \
        (len(active), int(np.diff(indptr)[active].sum()))


@examples(60)
@given(st.integers(0, 300), st.floats(0.0, 1.0), st.sampled_from(["int32", "int64"]),
       st.integers(0, 2**31))
def test_edge_prefix_is_the_running_in_degree_of_the_vertices(n, share, dtype, seed):
    rng = np.random.default_rng(seed)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 40, n))]).astype(np.int64)
    vertices = np.flatnonzero(rng.random(n) < share).astype(dtype)
    prefix = cpu.edge_prefix(indptr, vertices)
    degrees = [indptr[v + 1] - indptr[v] for v in vertices.tolist()]
    assert prefix.dtype == np.int64 and prefix.tolist() == [0] + np.cumsum(degrees).tolist()


def test_warm_up_compiles_once_per_kind_of_arrays(monkeypatch):
    """A run's engine warms the kernel up (a pass over no vertex) only for arrays of a
    kind it has not seen: read-only edges (a store's, mapped) are another Numba type."""
    g = hg.generate.grid(6, 6, seed=1)
    kernel = cpu.compile_program(ProgramSpec(BreadthFirst(0)), np.float32)
    passes = []
    step = kernel.step
    monkeypatch.setattr(kernel, "step", lambda *a, **k: passes.append(1) or step(*a, **k))
    monkeypatch.setattr(kernel, "_warmed", set())  # (the kernel is the process's)
    values, flags = np.zeros(g.num_vertices, np.int32), np.zeros(g.num_vertices, np.uint8)
    aux = np.zeros(1, np.float32)
    kernel.warm_up(kernel.edges(g), values, flags, aux, graph=g)
    pull = kernel._passes.pull
    compiled = [len(f.overloads) for f in (pull.gather_range, pull.merge)]
    kernel.step(kernel.edges(g), g.out_indptr, values, values.copy(), flags, aux, 0.0,
                cpu.ALL_VERTICES, g.in_indptr, 0, 2, True)  # two ranges and their merge:
    assert [len(f.overloads) for f in (pull.gather_range, pull.merge)] == compiled
    before = len(passes)  # compiled by the warm-up, not by the first real pass
    kernel.warm_up(kernel.edges(g), values.copy(), flags.copy(), aux, graph=g)
    assert len(passes) == before
    indptr, indices, weights, base = kernel.edges(g)
    frozen = indices.copy()
    frozen.flags.writeable = False
    kernel.warm_up((indptr, frozen, weights, base), values, flags, aux)
    assert len(passes) == before + 1
    compiled = [len(f.overloads) for f in (pull.gather_range, pull.merge)]
    kernel.warm_up(kernel.edges(g), values, flags, aux, graph=g, parallel=True)
    assert len(passes) == before + 2  # (its helper threads started)
    kernel.step(kernel.edges(g), g.out_indptr, values, values.copy(), flags, aux, 0.0,
                cpu.ALL_VERTICES, g.in_indptr, 0, 2, True, True)
    # ranges on helper threads run the same compiled range: no compile of their own
    assert [len(f.overloads) for f in (pull.gather_range, pull.merge)] == compiled


@pytest.mark.parametrize("threads, partitions, parallel", [
    (1, None, False), (2, None, False), (2, 2, True), (1, 2, False)])
def test_an_engine_runs_passes_in_parallel_only_when_it_cuts_them(threads, partitions,
                                                                 parallel):
    """Helper threads are for engines with more than one thread that cut their passes:
    graphs of SERIAL_EDGES edges or partitions=."""
    g = hg.generate.grid(6, 6, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True),
                       np.zeros(1, np.float32), threads=threads, partitions=partitions)
    assert g.num_arcs < SERIAL_EDGES and engine.parallel is parallel


# --- cost model ----------------------------------------------------------------------------

def test_frontier_gathers_a_small_frontier_and_keeps_the_host_flags():
    """A segment may end right after asking for the frontier (the cost model moved the
    run): the host flags must still hold it. The id list gathered there is the one the
    sparse iteration then uses."""

    g = hg.generate.grid(30, 30, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    flags[[5, 77, 400]] = 1
    kept = flags.copy()
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True),
                       np.zeros(1, np.float32), threads=2)
    frontier = engine.frontier()
    assert frontier == (4, int(g.out_degree()[np.flatnonzero(kept)].sum()))
    assert np.array_equal(flags, kept) and engine.frontier() == frontier
    before = values.copy()
    mode, computed, _, _ = engine.iterate(0.0, frontier)
    # a push computes the out-neighbours whose level it lowers (5, 77 and 400 are
    # unreached: their edges lower none); BFS does not notify itself
    lowered = {int(v) for u in np.flatnonzero(kept)
               for v in g.out_indices[g.out_indptr[u]:g.out_indptr[u + 1]]
               if BreadthFirst.gather(before[u], 1.0, before[v]) < before[v]}
    assert mode == "push" and computed == len(lowered) == 2  # BFS is incremental


def test_notify_pull_is_chosen_when_f_is_at_most_one_over_two_rho():
    assert notify_fraction(30, 100) == 0.3
    assert notify_fraction(5, 0) == 0.0
    assert choose_cpu_mode(0.5) == "notify-pull"
    assert choose_cpu_mode(0.5001) == "pull"
    assert choose_cpu_mode(0.05, rho=10) == "notify-pull"
    assert choose_cpu_mode(0.06, rho=10) == "pull"


def test_the_in_degree_skew_moves_the_switch():
    # in-degrees 3, 1, 1, 1 over 6 arcs: an edge's destination has (9 + 3) / 6 in-edges
    g = hg.from_arrays([1, 2, 3, 0, 0, 0], [0, 0, 0, 1, 2, 3])
    assert degree_skew(g.in_degree()) == 2.0
    assert degree_skew(np.zeros(3)) == 1.0
    # notify-pull costs f + min(f * skew, 1) pulls (times rho)
    assert choose_cpu_mode(0.2, skew=4.0) == "notify-pull"
    assert choose_cpu_mode(0.21, skew=4.0) == "pull"
    assert choose_cpu_mode(0.001, skew=1300.0) == "pull"  # the hubs' in-edges: all of them
    assert choose_cpu_mode(0.0005, skew=1300.0) == "notify-pull"
    assert choose_cpu_mode(0.9, cpu_mode="notify-pull") == "notify-pull"  # the run's own
    # a BFS on RMAT, made not incremental (no push): every auto iteration follows the
    # rule with the graph's skew, and some frontier below Garaph's f = 1/2 pulls
    g = hg.generate.rmat(12, seed=2)
    skew = degree_skew(g.in_degree())
    program = BreadthFirst(int(np.argmax(g.out_degree())))
    program.incremental = False
    history = hg.run(program, g).history
    for f, mode in zip(history["f"], history["mode"]):
        assert mode == choose_cpu_mode(f, 1.0, skew)
    assert ((history["f"] < 0.5) & (history["mode"] == "pull")).any()


def test_incremental_programs_push_small_frontiers():
    # push costs PUSH_EDGE_COST * threads pull passes per unit of f, in one thread
    assert push_factor(False, 4) == 0.0 and push_factor(True, 4) == 4 * PUSH_EDGE_COST
    push = push_factor(True, 2)  # 4 pull passes per unit of f
    # at skew 1 a notified vertex pulls one edge: notify-pull's 2f beats push's 4f
    assert choose_cpu_mode(0.01, push=push) == "notify-pull"
    assert choose_cpu_mode(0.01, skew=50.0, push=push) == "push"  # 0.04 < 0.51
    # hubs: notify-pull would pull every edge, so push up to f = 1 / push, then pull
    assert choose_cpu_mode(1 / push, skew=1e4, push=push) == "push"
    assert choose_cpu_mode(1.001 / push, skew=1e4, push=push) == "pull"
    assert choose_cpu_mode(0.6, skew=50.0, push=push) == "pull"
    assert choose_cpu_mode(0.01, rho=10.0, skew=50.0, push=push) == "push"  # both pay rho
    # a small frontier's notify-pull runs in one thread, as a push: on 16 threads (push
    # 32 f pulls) a grid's (skew 4: 5 f pulls on 16 threads) pushes while it is sparse
    push = push_factor(True, 16)
    assert choose_cpu_mode(0.01, skew=4.0, push=push) == "notify-pull"
    assert choose_cpu_mode(0.01, skew=4.0, push=push, sparse=0.01, threads=16) == "push"
    assert choose_cpu_mode(0.011, skew=4.0, push=push, sparse=0.01,
                           threads=16) == "notify-pull"
    assert choose_cpu_mode(0.01, skew=4.0, sparse=0.01, threads=16) == "notify-pull"
    # BFS on RMAT (incremental): every auto iteration follows the rule with push, against
    # a pull on the threads that its pass keeps busy (one below SERIAL_EDGES); the hub's
    # level pushes, the middle pulls
    g = hg.generate.rmat(12, seed=2)
    skew = degree_skew(g.in_degree())
    assert pull_threads(g.num_arcs, 4) == 1 and pull_threads(SERIAL_EDGES, 4) == 4
    assert pull_threads(g.num_arcs, 4, partitions=2) == 2
    threads = pull_threads(g.num_arcs, numba.config.NUMBA_NUM_THREADS)
    push = push_factor(True, threads)
    source = int(np.argmax(g.out_degree()))
    history = hg.bfs(g, source).history
    for f, mode in zip(history["f"], history["mode"]):
        assert mode == choose_cpu_mode(f, 1.0, skew, push, sparse=notify_fraction(
            SPARSE_EDGES, g.num_arcs), threads=threads)
    assert {"push", "pull"} <= set(history["mode"])
    # a push from the source: its out-neighbours were computed, along its out-edges
    first = history.iloc[0]
    assert first["mode"] == "push" and first["edges"] == g.out_degree()[source]
    assert first["computed"] == len(set(g.out_indices[g.out_indptr[source]:
                                                      g.out_indptr[source + 1]].tolist()))


def test_rho_moves_the_switch():
    from hetgraph.algorithms.sssp import ShortestPaths

    g = hg.generate.grid(40, 40, seed=1)
    program = ShortestPaths(0)
    program.incremental = False  # pull or notify-pull only
    program.priority = None  # (priority buckets need an incremental program)
    in_memory = hg.run(program, g, max_iterations=g.num_vertices).history
    out_of_core = hg.run(program, g, max_iterations=g.num_vertices, rho=10.0).history
    # random reads cost rho times more: notify-pull pays off only for sparser frontiers
    assert (out_of_core["mode"] == "pull").sum() > (in_memory["mode"] == "pull").sum()
    skew = degree_skew(g.in_degree())
    assert np.all((out_of_core["mode"] == "pull") ==
                  (10.0 * (out_of_core["f"] + np.minimum(out_of_core["f"] * skew, 1)) > 1))


# --- run and Result ------------------------------------------------------------------------

def test_result_is_keyed_by_original_labels():
    g = hg.from_pandas(__import__("pandas").DataFrame(
        {"src": ["a", "b", "c"], "dst": ["b", "c", "d"], "w": [1.0, 2.0, 4.0]}),
        source="src", target="dst", weight="w")
    r = hg.sssp(g, "a")
    assert r["d"] == 7.0 and r["a"] == 0.0
    frame = r.to_pandas()
    assert list(frame.columns) == ["vertex", "value"]
    assert dict(zip(frame.vertex, frame.value)) == {"a": 0.0, "b": 1.0, "c": 3.0, "d": 7.0}
    assert r.to_series()["c"] == 3.0
    assert list(r.history.columns) == [
        "iteration", "placement", "mode", "f", "rho", "alpha", "active", "computed", "edges",
        "activated", "cpu_pages", "gpu_pages", "cpu_edges", "gpu_edges", "cpu_seconds",
        "gpu_seconds", "read_bytes", "h2d_bytes", "d2h_bytes", "generation_seconds",
        "transfer_seconds", "seconds", "overhead", "priority"]
    assert r.iterations == len(r.history) == 4 and r.converged
    assert "ShortestPaths" in repr(r)


def test_history_counts_work():
    g = hg.generate.rmat(9, seed=2)
    r = hg.pagerank(g, tol=None, max_iterations=3)
    h = r.history
    assert h["mode"].tolist() == ["pull"] * 3
    assert np.all(h["f"] == 1.0) and np.all(h["edges"] == g.num_arcs)
    assert np.all(h["computed"] == g.num_vertices) and np.all(h["seconds"] > 0)
    s = hg.sssp(g, g.label_of(0), cpu_mode="notify-pull").history
    assert s["computed"].iloc[0] == g.out_degree()[0]

def test_history_rows_leave_the_garbage_collectors_view():
    """A long run's rows, whatever made them (bursts, single iterations), are tuples of
    numbers and strings, which a collection stops tracking: thousands of them never
    bring on a full collection of the process's objects."""
    import gc

    g = hg.generate.grid(60, 60, seed=1)
    for burst in (True, False):
        with pytest.MonkeyPatch.context() as patched:
            if not burst:
                _without_bursts(patched)
            rows = hg.bfs(g, 0)._rows
        gc.collect()
        assert len(rows) == 119 and all(type(row) is tuple for row in rows)
        assert not any(gc.is_tracked(row) for row in rows)



@examples(60)
@given(st.integers(1, 3000), st.floats(1.0, 200.0), st.sampled_from([0.0, 2.0, 4.0, 64.0]),
       st.sampled_from([1.0, 1.5]), st.sampled_from(["auto", "pull", "push"]),
       st.sampled_from([1, 2, 16]), st.integers(0, 3000))
def test_mode_limits_are_the_ends_of_each_modes_degrees(arcs, skew, push, rho, cpu_mode,
                                                        threads, sparse_edges):
    """Every frontier degree's mode is the first mode whose limit it does not pass,
    wherever the sparse notify-pulls end."""
    limits = mode_limits(arcs, rho, skew, push, cpu_mode, sparse_edges / arcs, threads)
    ends = sorted((end, mode) for mode, end in limits.items())
    assert ends[-1][0] == arcs
    for degree in range(arcs + 1):
        expected = next(mode for end, mode in ends if degree <= end)
        assert choose_cpu_mode(notify_fraction(degree, arcs), rho, skew, push, cpu_mode,
                               sparse_edges / arcs, threads) == expected


def _without_bursts(monkeypatch):
    monkeypatch.setattr(cpu.CpuKernel, "bursts", property(lambda self: False))


COUNTS = ["iteration", "placement", "mode", "f", "rho", "alpha", "active", "computed", "edges",
          "activated", "cpu_pages", "gpu_pages", "cpu_edges", "gpu_edges", "gpu_seconds",
          "read_bytes"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("case", ["bfs-grid", "sssp-rmat", "sssp-grid", "cc-power",
                                  "widest-rmat"])
def test_bursts_give_the_rows_and_answers_of_single_iterations(case, mode, monkeypatch,
                                                             data):
    """A CPU run's push and sparse notify-pull iterations run in bursts (many in one
    compiled call); its values and every row's counts are those of the iterations run
    one by one, and its rows' times add up."""
    from hetgraph.algorithms.common import MinRelaxation

    class Widest(MinRelaxation):  # not built in: max of min, through the public API
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

    algorithm, name = case.split("-")
    g = {"grid": lambda: hg.generate.grid(40, 30, seed=3),
         "rmat": lambda: hg.generate.rmat(11, seed=5),
         "power": lambda: hg.read(data("power.graph"))}[name]()
    call = {"bfs": lambda: hg.bfs(g, 0, mode=mode, devices="cpu"),
            "sssp": lambda: hg.sssp(g, 0, mode=mode, devices="cpu"),
            "cc": lambda: hg.connected_components(g, algorithm="label-propagation",
                                                 mode=mode, devices="cpu"),
            "widest": lambda: hg.run(Widest(), g, mode=mode, devices="cpu")}[algorithm]
    ran = []  # iterations each burst ran
    burst = cpu.CpuKernel.burst

    def spy(*args, **kwargs):
        stats, *rest = burst(*args, **kwargs)
        ran.append(len(stats))
        return (stats, *rest)

    with monkeypatch.context() as patched:
        patched.setattr(cpu.CpuKernel, "burst", spy)
        bursts = call()
    with monkeypatch.context() as patched:
        _without_bursts(patched)
        single = call()
    np.testing.assert_array_equal(bursts.values, single.values)
    h, k = bursts.history, single.history
    assert bursts.converged and single.converged and len(h) == len(k)
    assert h[COUNTS].equals(k[COUNTS])
    # every push and notify-pull (sparse, on these graphs) ran in a burst, most with others
    assert sum(ran) == h["mode"].isin(["push", "notify-pull"]).sum() and max(ran) > 1
    assert (h["cpu_seconds"] > 0).all() and (h["seconds"] >= h["cpu_seconds"]).all()
    assert np.allclose(h["overhead"], h["seconds"] - h["cpu_seconds"])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_activating_on_change_gives_what_activate_gives(mode):
    """A push that takes every changed vertex as active (activates_on_change) gives the
    values and rows of the same program that calls activate."""
    from hetgraph.algorithms.sssp import ShortestPaths

    class Called(ShortestPaths):
        activates_on_change = False

    g = hg.generate.grid(40, 30, seed=3)
    runs = [hg.run(program, g, mode=mode, devices="cpu", cpu_mode="push",
                   max_iterations=g.num_vertices)
            for program in (ShortestPaths(0), Called(0))]
    assert ProgramSpec(ShortestPaths(0)).activates_on_change
    assert not ProgramSpec(Called(0)).activates_on_change
    np.testing.assert_array_equal(runs[0].values, runs[1].values)
    assert runs[0].history[COUNTS].equals(runs[1].history[COUNTS])


def test_a_burst_keeps_to_its_limits():
    """A burst stops at its rows, its frontier degree and size limits and its time;
    no time limit (inf) is none."""
    g = hg.generate.grid(20, 20, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    kernel = cpu.compile_program(spec, np.float32)

    def burst(**limits):
        values, flags, _ = spec.initial_state(g)
        options = {"max_degree": cpu.NO_LIMIT, "max_sparse": cpu.NO_LIMIT, "rows": 1000,
                   "seconds": float("inf"), **limits}
        return kernel.burst(g, np.array([0]), 2, True, values=values,
                            new_values=values.copy(), flags=flags, marks=np.zeros_like(flags),
                            seen=kernel.push_scratch(g.num_vertices),
                            aux=np.zeros(1, np.float32),
                            sync=True, **options)[0]

    assert len(burst()) == 39 and burst()[-1, 4] == 0  # to the far corner; then none
    assert len(burst(rows=5)) == 5
    assert burst(max_degree=20)[:, 1].max() <= 20 and len(burst(max_degree=20)) < 39
    stats = burst(max_sparse=30)
    assert (stats[:, 0] + stats[:, 1]).max() <= 30 and len(stats) < 39
    assert len(burst(seconds=0.0)) == 0


@pytest.mark.parametrize("push", [True, False])
@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("buckets", [True, False])
def test_bursts_keep_every_active_vertex(push, sync, buckets):
    """Bursts of one to nine iterations, one after the other, each from the frontier the
    last returned, delta-stepping SSSP (``buckets``) or BFS: their frontier is exactly
    the vertices flagged active (with buckets the waiting ones included, which a push or
    a notify-pull reaches without improving them), the rows count them, ``deferred`` is
    all zeros and a push's bits all clear between bursts, and the
    values end at Dijkstra's."""
    from hetgraph.algorithms.sssp import ShortestPaths

    g = hg.generate.grid(30, 30, seed=5)
    spec = ProgramSpec(ShortestPaths(0) if buckets else BreadthFirst(0))
    kernel = cpu.compile_program(spec, np.float32)
    values, flags, _ = spec.initial_state(g)
    new_values = values.copy() if sync else values
    deferred, marks = np.zeros_like(flags), np.zeros_like(flags)
    seen = kernel.push_scratch(g.num_vertices)
    frontier, degree = np.array([0]), int(g.out_degree()[0])
    waited = False
    for rows in itertools.cycle(range(1, 10)):
        lowest = values[frontier].min()  # (SSSP's priority: its value)
        stats, fronts, frontier, degree = kernel.burst(
            g, frontier, degree, push, cpu.NO_LIMIT, cpu.NO_LIMIT, rows, float("inf"),
            values, new_values, flags, marks, seen, np.zeros(1, np.float32), sync,
            delta=60.0 if buckets else 0.0, deferred=deferred)
        assert sorted(frontier) == np.flatnonzero(flags).tolist()
        assert degree == g.out_degree()[frontier].sum()
        assert stats[-1, 4] == len(frontier) and not deferred.any() and not marks.any()
        assert not seen.any()  # as a push must leave them
        if buckets:  # a burst starts from the lowest bucket of its whole frontier
            assert fronts[0] == lowest and np.all(np.diff(fronts // 60.0) >= 0)
        else:
            assert np.isnan(fronts).all()
        waited |= bool((stats[:, 3] < stats[:, 1]).any())  # pushed less than the frontier
        if not len(frontier):
            break
    assert waited or not (push and buckets)  # (a notify-pull's edges are in-edges)
    np.testing.assert_array_equal(values, csgraph.dijkstra(g.to_scipy(), indices=0,
                                                           unweighted=not buckets))


@examples(40)
@given(st.integers(2, 300), st.floats(0.0, 8.0), st.integers(0, 2**31),
       st.floats(0.01, 300.0), st.sampled_from(["sync", "async"]),
       st.sampled_from(["auto", "push", "notify-pull"]))
def test_sssp_with_any_bucket_width_is_dijkstra(n, degree, seed, delta, mode, cpu_mode):
    """Random directed graphs with weights 0-10 (zero included), any bucket width, any
    engine: Dijkstra's distances."""
    g = hg.generate.erdos_renyi(n, m=min(int(n * degree), n * (n - 1)), seed=seed,
                                weights=(0.0, 10.0))
    r = hg.sssp(g, 0, delta=delta, mode=mode, cpu_mode=cpu_mode, devices="cpu")
    assert r.converged
    np.testing.assert_array_equal(r.values, csgraph.dijkstra(g.to_scipy(), indices=0))


@pytest.mark.parametrize("name", ["grid", "rmat"])
def test_a_sync_push_goes_through_the_iterates_of_a_sync_pull(name):
    """Sync: an iteration sees the values of the one before, whatever the mode. A push
    writes its values in place (all its gathers read before any vertex applies) and
    activates the same vertices, iteration by iteration, as a pull."""
    g = hg.generate.grid(30, 30, seed=2) if name == "grid" else \
        hg.generate.rmat(10, seed=3, weights=(1.0, 9.0))
    pulled, pushed = (hg.sssp(g, 0, delta=np.inf, mode="sync", cpu_mode=cpu_mode,
                              devices="cpu") for cpu_mode in ("pull", "push"))
    assert set(pushed.history["mode"]) == {"push"}
    assert pushed.history["activated"].tolist() == pulled.history["activated"].tolist()
    np.testing.assert_array_equal(pushed.values, pulled.values)


def test_bursts_stop_at_the_iteration_limit_and_at_a_mode_change():
    g = hg.generate.grid(50, 50, seed=1)
    r = hg.bfs(g, 0, max_iterations=7, devices="cpu")
    assert r.iterations == 7 and not r.converged
    assert r.history["iteration"].tolist() == list(range(1, 8))
    rmat = hg.generate.rmat(12, seed=1)  # BFS grows to pulls, shrinks back to pushes
    modes = hg.bfs(rmat, int(np.argmax(rmat.out_degree())), devices="cpu").history["mode"]
    assert "pull" in set(modes) and modes.iloc[0] == modes.iloc[-1] == "push"


def test_a_program_with_a_priority_has_its_own_kernel():
    """The buckets' code is compiled only with a priority: a program whose other
    functions are the same shares no kernel with it."""
    from hetgraph.algorithms.sssp import ShortestPaths

    plain = ShortestPaths(0)
    plain.priority = None
    with_priority = cpu.compile_program(ProgramSpec(ShortestPaths(0)))
    assert cpu.compile_program(ProgramSpec(plain)) is not with_priority
    assert cpu.compile_program(ProgramSpec(ShortestPaths(5))) is with_priority


def test_program_compiles_once_per_process():
    g = hg.generate.grid(5, 5)
    hg.bfs(g, 0)
    assert hg.bfs(g, 3).compile_seconds < 0.5


def test_zero_iterations_and_edgeless_graphs():
    g = hg.generate.grid(4, 4)
    r = hg.sssp(g, 0, max_iterations=0)
    assert r.iterations == 0 and not r.converged and r.values[0] == 0
    assert np.isinf(r.values[1:]).all()
    empty = hg.from_arrays(np.array([], np.int64), np.array([], np.int64), num_vertices=5)
    cc = hg.connected_components(empty)
    assert cc.converged and cc.values.tolist() == [0, 1, 2, 3, 4]
    pr = hg.pagerank(empty)
    np.testing.assert_allclose(pr.values, 0.2)


def test_async_with_one_thread_is_deterministic():
    g = hg.generate.rmat(10, seed=6)
    first = hg.pagerank(g, mode="async", threads=1, tol=1e-10)
    second = hg.pagerank(g, mode="async", threads=1, tol=1e-10)
    np.testing.assert_array_equal(first.values, second.values)
    assert first.mode == "async"


def test_sync_sums_agree_across_threads_and_partitions():
    g = hg.generate.rmat(11, seed=8)
    base = hg.pagerank(g, tol=None, max_iterations=10, threads=1, partitions=1).values
    for threads, parts in ((2, 2), (2, 13), (1, 64)):
        other = hg.pagerank(g, tol=None, max_iterations=10, threads=threads,
                            partitions=parts).values
        np.testing.assert_allclose(other, base, rtol=1e-13)


def test_run_from_a_page_store(tmp_path):
    g = hg.generate.grid(10, 10, seed=3)
    g.save(tmp_path / "store")
    store = hg.PageStore(tmp_path / "store")
    np.testing.assert_array_equal(hg.sssp(store.load(), 0).values,
                                  hg.run(hg.algorithms.ShortestPaths(0), store).values)


# --- segments: iterations queued ahead of the one waited for ---------------------------------

class QueuedCpu(Engine):
    """A CPU engine behind the GPU's launch / wait / discard: an iteration computes at
    launch, but its frontier is seen only once waited for, and a chained launch after
    one that activated nothing computes nothing (the GPU kernel returns at once)."""

    queued = 3
    read_bytes = 0
    front = float("nan")

    def __init__(self, engine):
        self.engine = engine
        self.seen = engine.frontier()
        self.discarded, self.in_flight, self.most_in_flight = [], 0, 0
        self.last_activated = None

    @property
    def values(self):
        return self.engine.values

    def frontier(self):
        return self.seen

    def launch(self, constant, frontier):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.last_activated == 0:
            return "skipped"
        result = self.engine.iterate(constant, self.engine.frontier())
        self.last_activated = result[3]
        return result + (1e-6,), self.engine.frontier()

    def wait(self, ticket):
        self.in_flight -= 1
        result, self.seen = ticket
        return result

    def discard(self, tickets):
        assert set(tickets) == {"skipped"}
        self.in_flight -= len(tickets)
        self.discarded += tickets


def segment(program, g, queued, first=1, last=10**6, choose=None, slice_seconds=1e9):
    """run_iterations on the CPU engine, behind QueuedCpu when ``queued``; returns (rows,
    status, engine)."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks
    from hetgraph.scheduler.costmodel import CostModel

    spec = ProgramSpec(program)
    values, flags, aux = spec.initial_state(g)
    aux = np.zeros(1, np.float32) if aux is None else aux
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True), aux, threads=2)
    engine = QueuedCpu(engine) if queued else engine
    run = SimpleNamespace(spec=spec, graph=g, rho=1.0)
    choose = choose or (lambda f, ran=1: ("cpu", 1.0))
    rows, status = tasks.run_iterations(run, engine, "cpu", first, last, choose, 1,
                                        CostModel(), slice_seconds)
    return [row_dict(row) for row in rows], status, engine


COLUMNS = ["iteration", "mode", "f", "active", "computed", "edges", "activated"]


class Passes(Engine):
    """An engine whose passes do nothing for ``seconds`` each (a GPU's, for its rows) and
    activate one vertex until ``passes`` ran."""

    read_bytes = 0
    values = np.zeros(1)
    front = float("nan")

    def __init__(self, seconds, passes):
        self.seconds, self.left = seconds, passes
        self.now = 0.0  # the fake clock's seconds: each pass takes exactly ``seconds``

    def clock(self):
        return self.now

    def frontier(self):
        return (1, 1)

    def iterate(self, constant, frontier):
        self.now += self.seconds
        self.left -= 1
        return "gpu-pull", 1, 1000, int(self.left > 0)


@pytest.mark.parametrize("passes", [3, 40])
def test_a_segment_folds_its_gpu_rows_into_the_model_in_batches(passes, monkeypatch):
    """Every GPU row but the first (the segment's start, a move's cost) counts once, in
    a batch per CHOOSE_SECONDS (the rest when the segment ends): one update per row
    cost more host time than a short pass."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks
    from hetgraph.scheduler.costmodel import CostModel

    monkeypatch.setattr(tuning, "CHOOSE_SECONDS", 1e-3)
    model = CostModel()
    calls, observe = [], model.observe
    monkeypatch.setattr(model, "observe", lambda *a: (calls.append(a), observe(*a)))
    run = SimpleNamespace(spec=ProgramSpec(BreadthFirst(0)), graph=hg.generate.grid(4, 4),
                          rho=1.0)
    engine = Passes(100e-6, passes)
    # (the segment's clock is the engine's: a pass held back by a busy machine is no longer)
    monkeypatch.setattr(tasks, "time", SimpleNamespace(perf_counter=engine.clock))
    rows, status = tasks.run_iterations(run, engine, "gpu", 1, 10**6,
                                        lambda f, ran=1: ("gpu", 1.0), 1, model, 1e9)
    assert status == "converged" and len(rows) == passes
    assert {c[:2] for c in calls} == {("gpu", "pull")}
    assert sum(c[2] for c in calls) == 1000 * (passes - 1)  # every row's edges, once
    assert sum(c[3] for c in calls) == pytest.approx(sum(row_dict(r)["seconds"] for r in rows[1:]))
    assert len(calls) <= max(1, passes // 4)  # rows of 100 us, 1 ms a batch


def test_queued_iterations_give_the_rows_of_one_at_a_time():
    g = hg.generate.grid(12, 15, seed=3)
    plain, status, engine = segment(BreadthFirst(0), g, queued=False)
    queued, queued_status, fake = segment(BreadthFirst(0), g, queued=True)
    assert status == queued_status == "converged" and len(plain) > 5
    assert [[r[c] for c in COLUMNS] for r in queued] == [[r[c] for c in COLUMNS] for r in plain]
    np.testing.assert_array_equal(fake.engine.values, engine.values)
    # the two launched after the iteration that activated nothing were discarded
    assert fake.discarded == ["skipped", "skipped"] and fake.most_in_flight == 3
    assert fake.in_flight == 0 and plain[-1]["activated"] == 0


class TimedQueuedCpu(QueuedCpu):
    """QueuedCpu whose iteration i took i ms to generate and 2i ms to copy in, added to
    the engine's totals when waited for (as the GPU engine reads its events then)."""

    generation_seconds = transfer_seconds = 0.0

    def launch(self, constant, frontier):
        self.launches = getattr(self, "launches", 0) + 1
        return super().launch(constant, frontier), self.launches

    def wait(self, ticket):
        ticket, i = ticket
        self.generation_seconds += i * 1e-3
        self.transfer_seconds += 2 * i * 1e-3
        return super().wait(ticket)

    def discard(self, tickets):
        super().discard([ticket for ticket, _ in tickets])


def test_a_rows_generation_and_transfer_seconds_are_its_own_iterations():
    """Three iterations in flight: each row takes what the engine's totals gained while
    its own iteration was waited for, not those of the iterations launched before."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks

    g = hg.generate.grid(12, 15, seed=3)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, aux = spec.initial_state(g)
    engine = TimedQueuedCpu(CpuEngine(spec, g, VertexState(values, flags, sync=True),
                                      np.zeros(1, np.float32), threads=2))
    run = SimpleNamespace(spec=spec, graph=g, rho=1.0)
    rows, status = tasks.run_iterations(run, engine, "cpu", 1, 10**6,
                                        lambda f, ran=1: ("cpu", 1.0), 1, None, 1e9)
    rows = [row_dict(row) for row in rows]
    assert status == "converged" and engine.most_in_flight == 3 and len(rows) > 5
    assert [r["generation_seconds"] for r in rows] == \
        pytest.approx([i * 1e-3 for i in range(1, len(rows) + 1)])
    assert [r["transfer_seconds"] for r in rows] == \
        pytest.approx([2 * i * 1e-3 for i in range(1, len(rows) + 1)])


def test_queued_iterations_stop_at_the_limit_the_slice_and_a_move():
    g = hg.generate.grid(12, 15, seed=3)
    rows, status, fake = segment(BreadthFirst(0), g, queued=True, first=3, last=7)
    assert status == "limit" and [r["iteration"] for r in rows] == [3, 4, 5, 6, 7]
    rows, status, fake = segment(BreadthFirst(0), g, queued=True, slice_seconds=0.0)
    assert status == "slice" and len(rows) == 3 and fake.in_flight == 0  # drained
    seen = []

    def choose(f, ran=1):  # moves at its fourth call; it sees the frontier of 2 back
        seen.append(f)
        return ("cpu" if len(seen) < 4 else "gpu"), 1.0
    rows, status, fake = segment(BreadthFirst(0), g, queued=True, choose=choose)
    assert status == "moved" and fake.in_flight == 0
    assert len(rows) == 4  # iterations 1-4 were launched before the move: all finished
    fs = [r["f"] for r in rows]
    assert seen == [fs[0], fs[0], fs[1]] + [fs[2]]  # iterations 2, 3 (none finished), 4, 5


def test_a_segment_with_the_cost_model_asks_it_between_bursts(monkeypatch):
    """With the cost model, a CPU segment runs bursts between its questions, and each
    question counts the iterations since the last (the bursts'); its rows are those of
    single iterations."""
    g = hg.generate.grid(30, 30, seed=1)
    monkeypatch.setattr(tuning, "CHOOSE_SECONDS", 1e-5)  # bursts of a few iterations
    asked = []

    def choose(f, ran=1):
        asked.append(ran)
        return "cpu", 0.5

    rows, status, _ = segment(BreadthFirst(0), g, queued=False, choose=choose)
    assert status == "converged" and max(asked) > 1
    assert sum(asked) <= len(rows) - 1  # the first is placed by the driver; the last
    # burst's iterations are asked about by no one
    after = next(i for i, r in enumerate(rows) if r["alpha"] == 0.5)
    assert all(r["alpha"] == 0.5 for r in rows[after:])
    with monkeypatch.context() as patched:
        _without_bursts(patched)
        single, _, _ = segment(BreadthFirst(0), g, queued=False, choose=choose)
    assert [[r[c] for c in COLUMNS] for r in rows] == \
        [[r[c] for c in COLUMNS] for r in single]


def test_a_converged_test_keeps_one_iteration_in_flight():
    g = hg.generate.rmat(9, seed=2)
    rows, status, fake = segment(PageRank(tol=1e-6), g, queued=True)
    assert status == "converged" and fake.most_in_flight == 1 and not fake.discarded
    plain, _, _ = segment(PageRank(tol=1e-6), g, queued=False)
    assert len(rows) == len(plain)


def test_calibration_paces_gpu_passes_as_a_segment():
    """A GPU's calibration keeps at most ``depth`` passes in flight, as a segment, and
    waits for every pass it launched."""
    from hetgraph.scheduler import tasks

    class Engine:
        def __init__(self):
            self.in_flight, self.most, self.launched, self.waited = 0, 0, 0, []

        def launch(self, constant, chained=True):
            assert not chained
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.launched += 1
            return self.launched

        def wait(self, ticket):
            self.in_flight -= 1
            self.waited.append(ticket)

    for depth, passes in ((3, 16), (3, 2), (1, 5)):
        engine = Engine()
        tasks._paced_passes(engine, depth, passes)
        assert engine.waited == list(range(1, passes + 1)) and engine.in_flight == 0
        assert engine.most == min(depth, passes)


def test_cpu_calibration_times_the_first_iterations_on_a_copy():
    """The CPU's calibration times the run's first iterations as a segment times them
    (not the first, which gathers the frontier), on a copy of the state; a run that
    starts with a pull gets none (its pull is calibrated)."""
    from hetgraph.scheduler import tasks

    g = hg.generate.grid(40, 40, seed=1)
    for program, rows_expected in ((BreadthFirst(0), True), (PageRank(tol=None), False)):
        spec = ProgramSpec(program)
        values, flags, aux = spec.initial_state(g)
        state = VertexState(values, flags, sync=True)
        before = state.values.copy(), state.flags.copy()
        run = tasks.RunSpec("calibration-test", spec, g,
                            np.zeros(1, np.float32) if aux is None else aux, True, False,
                            np.array([[0, g.num_vertices]]), None, 1, None, "notify-pull"
                            if rows_expected else "auto", 1.0, {})
        try:
            report = tasks.calibrate(run, state, "cpu", [0], 0)
        finally:
            tasks.drop_contexts(run.run_id)
        np.testing.assert_array_equal(state.values, before[0])
        np.testing.assert_array_equal(state.flags, before[1])
        assert report.kind == "cpu" and report.seconds > 0 and report.edges == g.num_arcs
        active = np.flatnonzero(flags)  # the state's frontier: the first iteration's
        assert report.frontier == (len(active), int(g.out_degree()[active].sum()))
        if not rows_expected:
            assert report.rows == []
            continue
        # BFS from a corner: iterations 2.. of CALIBRATION_ITERATIONS, frontiers of 2,
        # 3, 4 vertices on the diagonals
        assert len(report.rows) == tuning.CALIBRATION_ITERATIONS - 1
        for number, row in enumerate(map(row_dict, report.rows), start=2):
            assert row["iteration"] == number and row["mode"] == "notify-pull"
            assert row["active"] == number and row["seconds"] > 0


@given(st.integers(1, 5000))
def test_calibration_pages_spread_evenly_from_first_to_last(num_pages):
    from hetgraph.scheduler.tasks import calibration_pages
    from hetgraph.tuning import CALIBRATION_PAGES

    pages = calibration_pages(num_pages)
    assert pages == sorted(set(pages)) and len(pages) == min(num_pages, CALIBRATION_PAGES)
    assert pages[0] == 0 and pages[-1] == num_pages - 1
    if len(pages) > 1:  # gaps within one page of the even spacing
        even = (num_pages - 1) / (CALIBRATION_PAGES - 1)
        assert all(abs((b - a) - even) <= 1 for a, b in zip(pages, pages[1:]))


def test_cpu_calibration_pulls_pages_spread_over_the_graph():
    """The CPU's rate is timed over the pages calibration_pages picks (first, last and
    between), not one: their edges are the report's."""
    from hetgraph.scheduler import tasks

    g = hg.generate.grid(40, 40, seed=1)
    spec = ProgramSpec(PageRank(tol=None))
    values, flags, aux = spec.initial_state(g)
    bounds = np.linspace(0, g.num_vertices, 11).astype(np.int64)
    pages = np.stack([bounds[:-1], bounds[1:]], axis=1)  # 10 pages of 160 vertices
    run = tasks.RunSpec("calibration-pages", spec, g, aux, True, False, pages, None, 1,
                        None, "auto", 1.0, {})
    chosen = tasks.calibration_pages(len(pages))
    try:
        report = tasks.calibrate(run, VertexState(values, flags, sync=True), "cpu", chosen, 0)
    finally:
        tasks.drop_contexts(run.run_id)
    indptr = g.in_indptr
    assert chosen == [0, 3, 6, 9] and report.pages == chosen
    assert report.edges == sum(int(indptr[b] - indptr[a]) for a, b in pages[chosen])
    assert 0 < report.edges < g.num_arcs and report.seconds > 0


@pytest.mark.parametrize("bursts", [True, False])
def test_cpu_calibration_times_first_iterations_of_small_frontiers_only(bursts,
                                                                        monkeypatch):
    """The CPU's calibration times no iteration whose frontier has more than
    CALIBRATION_EDGES out-edges (in a burst or one at a time), and none at all when the
    first has: BFS from a grid's corner, frontiers of 2, 6, 10, 14 out-edges."""
    from hetgraph.scheduler import tasks

    if not bursts:
        monkeypatch.setattr(CpuEngine, "bursts", property(lambda self: False))
    g = hg.generate.grid(40, 40, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, aux = spec.initial_state(g)
    for limit, timed in ((10, [2, 3]), (13, [2, 3]), (14, [2, 3, 4]), (1, [])):
        monkeypatch.setattr(tuning, "CALIBRATION_EDGES", limit)
        run = tasks.RunSpec(f"calibration-edges-{limit}", spec, g, np.zeros(1, np.float32),
                            True, False, np.array([[0, g.num_vertices]]), None, 1, None,
                            "notify-pull", 1.0, {})
        try:
            report = tasks.calibrate(run, VertexState(values, flags, sync=True), "cpu", [0], 0)
        finally:
            tasks.drop_contexts(run.run_id)
        rows = [row_dict(r) for r in report.rows]
        assert [r["iteration"] for r in rows] == timed
        assert all(r["active"] * 4 - 2 <= limit for r in rows)  # (2, 6, 10, 14 edges)


def test_cpu_calibration_times_its_takeover_of_a_changed_state(monkeypatch):
    """A move to the CPU starts from a state changed elsewhere: a sparse frontier's ids
    are gathered from the flags (a pass over every vertex), part of what a move costs;
    a run that pulls gathers none."""
    import time

    from hetgraph.scheduler import tasks

    active_ids = cpu.active_ids

    def slow(flags):
        time.sleep(3e-3)
        return active_ids(flags)

    monkeypatch.setattr(cpu, "active_ids", slow)
    g = hg.generate.grid(40, 40, seed=1)
    for program, gathers in ((BreadthFirst(0), True), (PageRank(tol=None), False)):
        spec = ProgramSpec(program)
        values, flags, aux = spec.initial_state(g)
        run = tasks.RunSpec("calibration-takeover", spec, g,
                            np.zeros(1, np.float32) if aux is None else aux, True, False,
                            np.array([[0, g.num_vertices]]), None, 1, None, "auto", 1.0, {})
        try:
            report = tasks.calibrate(run, VertexState(values, flags, sync=True), "cpu", [0], 0)
        finally:
            tasks.drop_contexts(run.run_id)
        assert (report.takeover >= 3e-3) == gathers


def test_cpu_calibration_times_its_iterations_however_slow(monkeypatch):
    """Slow iterations (the first makes a push's scratch arrays: over 1 ms on a 1M-vertex
    grid) still give the calibration its rows (one at a time here, without bursts)."""
    import time

    from hetgraph.scheduler import tasks

    iterate = CpuEngine.iterate

    def slow(self, constant, frontier):
        time.sleep(2e-3)
        return iterate(self, constant, frontier)

    monkeypatch.setattr(CpuEngine, "iterate", slow)
    _without_bursts(monkeypatch)
    g = hg.generate.grid(40, 40, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    run = tasks.RunSpec("calibration-slow", spec, g, np.zeros(1, np.float32), True, False,
                        np.array([[0, g.num_vertices]]), None, 1, None, "push", 1.0, {})
    try:
        report = tasks.calibrate(run, VertexState(values, flags, sync=True), "cpu", [0], 0)
    finally:
        tasks.drop_contexts(run.run_id)
    rows = [row_dict(row) for row in report.rows]
    assert [row["mode"] for row in rows] == ["push"] * (tuning.CALIBRATION_ITERATIONS - 1)
    assert all(row["seconds"] >= 2e-3 for row in rows)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_weighted_change_is_the_weighted_l1_distance(dtype):
    rng = np.random.default_rng(3)
    values, previous = rng.random(1001).astype(dtype), rng.random(1001).astype(dtype)
    weights = rng.random(1001)
    want = float(np.abs(values.astype(np.float64) - previous) @ weights)
    assert cpu.weighted_change(values, previous, weights) == pytest.approx(want, rel=1e-12)


def test_a_sync_pull_keeps_the_values_before_it_and_the_whole_cut():
    """A sync pull leaves the values it started from in ``previous`` (a convergence
    test then copies nothing), a notify-pull or async run says it keeps none, and the
    whole graph's cut is made once (the same tuple every pull)."""
    g = hg.generate.rmat(10, seed=4)
    spec = ProgramSpec(PageRank())
    values, flags, aux = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True), aux, threads=1)
    frontier = engine.frontier()
    assert engine.keeps_previous(frontier)
    before = engine.values.copy()
    engine.iterate(spec.program.iteration_constant(g, before), frontier)
    np.testing.assert_array_equal(engine.previous, before)
    assert not np.array_equal(engine.values, before)
    assert engine._whole_cut(1) is engine._whole_cut(1)
    assert not engine.keeps_previous((1, 1))  # (a notify-pull)
    values, flags, aux = spec.initial_state(g)
    async_engine = CpuEngine(spec, g, VertexState(values, flags, sync=False), aux, threads=1)
    assert not async_engine.keeps_previous(async_engine.frontier())


def test_pull_ranges_keep_their_edges():
    """A parallel pull has a range a thread at least, and up to PULL_PARTS_PER_THREAD a
    thread only while each range keeps PULL_PART_EDGES edges (short ranges wait for the
    GIL in turn); below SERIAL_EDGES, or on one thread, one range; partitions= wins."""
    from hetgraph import tuning
    from hetgraph.engines.cpu import parts_of

    per, size = tuning.PULL_PARTS_PER_THREAD, tuning.PULL_PART_EDGES
    assert parts_of(SERIAL_EDGES - 1, 16) == 1 and parts_of(10 * size, 1) == 1
    assert parts_of(SERIAL_EDGES, 16) == 16  # (short ranges, but one a thread)
    assert parts_of(32 * size, 16) == 32
    assert parts_of(1000 * size, 16) == 16 * per
    assert parts_of(size, 16, partitions=3) == 3
    assert pull_threads(32 * size, 16) == 16


class _TestsOnDevice:
    """An engine that makes convergence tests on its device, three iterations queued."""

    tests_change, queued = True, 3

    def __init__(self, n):
        self.values = np.zeros(n)


def test_a_convergence_test_on_the_device_keeps_iterations_queued():
    from hetgraph.scheduler.tasks import device_test, queue_depth

    g = hg.generate.rmat(8, seed=1)
    program = PageRank(tol=1e-7)
    program.derived(g)
    spec, engine = ProgramSpec(program), _TestsOnDevice(g.num_vertices)
    weights, limit = device_test(spec, engine, g)
    # PageRank's change: the L1 change of the ranks (internal values times rank_of)
    np.testing.assert_allclose(weights * program._scale, 1.0, rtol=1e-15)
    assert limit == g.num_vertices * 1e-7
    rng = np.random.default_rng(1)
    for step in (1e-12, 1e-9, 1e-6):
        previous = rng.random(g.num_vertices)
        values = previous + step * rng.random(g.num_vertices)
        assert (np.abs(values - previous) @ weights < limit) == \
            program.converged(g, previous, values)
    assert queue_depth(spec, engine, (weights, limit)) == 2  # (a third: its values)
    # no test on the device: one in flight where a test is made, the engine's without
    assert device_test(spec, CpuEngine.__new__(CpuEngine), g) is None
    assert queue_depth(spec, engine, None) == 1
    assert queue_depth(ProgramSpec(BreadthFirst(0)), engine, None) == 3
    # a colored PageRank rescales its values before an iteration: tested on the host
    colored = PageRank(tol=1e-7, rescale=True)
    colored.derived(g)
    assert device_test(ProgramSpec(colored), engine, g) is None
