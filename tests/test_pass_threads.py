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


def test_passes_from_several_threads_share_the_helpers():
    """Passes started at once from four threads (a cluster's workers) each get every
    part's result, in order; the helpers are reused from pass to pass: 200 passes of
    2 helpers each make at most 2 more, and every helper made is alive."""
    from hetgraph.kernels.cpu import threads

    made = threads._COUNT[0]

    def pass_of(k, out):
        for r in range(50):
            out.append(run_parts(lambda t: (k, r, t), 6, 3) == [(k, r, t) for t in range(6)])

    outs = [[] for _ in range(4)]
    callers = [threading.Thread(target=pass_of, args=(k, outs[k])) for k in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert all(len(out) == 50 and all(out) for out in outs)
    assert threads._COUNT[0] <= max(made, 2)
    alive = [t for t in threading.enumerate() if t.name == "hetgraph-pass"]
    assert len(alive) == threads._COUNT[0]


def _two_threads_meet():
    """Whether two parts of one pass ran at once on two threads (each waits up to 20 s
    for the other)."""
    meet = threading.Barrier(2, timeout=20)
    try:
        run_parts(lambda t: meet.wait(), 2, 2)
    except threading.BrokenBarrierError:
        return False
    return True


def _in_child(queue):
    queue.put(_two_threads_meet())


def test_a_forked_child_makes_its_own_helpers():
    """After a fork the parent's helper threads are gone: a pass in the child still
    gets a helper (it makes its own) rather than waiting for one that never comes."""
    import multiprocessing

    assert _two_threads_meet()  # (the parent has a helper now)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5)


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
    results = {}
    for parts, parallel, openmp in ((1, False, False), (8, False, False), (8, True, False),
                                    (8, True, True)):
        new, flags = np.zeros_like(x), np.zeros(g.num_vertices, np.uint8)
        activated, degree = kernel.step(kernel.edges(g), g.out_indptr, x, new, flags, aux,
                                        0.25, cpu.ALL_VERTICES, g.in_indptr, 0, parts,
                                        True, parallel, openmp=openmp)
        np.testing.assert_allclose(new, want, rtol=1e-6)  # (float32 weights)
        assert activated == g.num_vertices and degree == g.num_arcs and flags.all()
        results[parallel, openmp] = new
    # the same ranges on OpenMP's threads or the helpers: bitwise the same sums
    assert np.array_equal(results[True, True], results[True, False])


@pytest.mark.parametrize("openmp", [False, True])
def test_parallel_pull_of_listed_vertices_equals_the_least_in_neighbour(openmp, monkeypatch):
    """A notify-pull's pass over listed vertices (minimum label over in-neighbours),
    cut into 6 ranges run by the helpers or on OpenMP's threads: each listed vertex
    gets the least label among itself and its in-neighbours, the others stay."""
    from hetgraph.algorithms.cc import MinLabel

    g = hg.generate.rmat(11, seed=4)
    spec = ProgramSpec(MinLabel())
    labels = np.random.default_rng(6).permutation(g.num_vertices).astype(np.int64)
    vertices = np.flatnonzero(np.random.default_rng(7).random(g.num_vertices) < 0.3)
    kernel = cpu.compile_program(spec, np.dtype(np.float32))
    pull, parallel_calls = kernel._passes.pull, []

    def gather_all(*args):  # (the parallel loop, counted)
        parallel_calls.append(1)
        return pull.gather_all(*args)
    monkeypatch.setattr(kernel, "_passes", kernel._passes._replace(
        pull=pull._replace(gather_all=gather_all)))
    new, flags = labels.copy(), np.zeros(g.num_vertices, np.uint8)
    kernel.step(kernel.edges(g), g.out_indptr, labels, new, flags, np.zeros(1, np.float32),
                0.0, vertices, cpu.edge_prefix(g.in_indptr, vertices), 0, 6, True, True,
                openmp=openmp)
    csc = sp.csr_matrix(g.to_scipy()).tocsc()
    want = labels.copy()
    for v in vertices:
        sources = csc.indices[csc.indptr[v]:csc.indptr[v + 1]]
        want[v] = min(labels[v], labels[sources].min()) if len(sources) else labels[v]
    assert np.array_equal(new[vertices], want[vertices])
    assert np.array_equal(flags[vertices] != 0, want[vertices] != labels[vertices])
    assert len(parallel_calls) == openmp


def test_spread_choice_follows_the_faster_way_and_probes_the_other(monkeypatch):
    """Each way once, then the faster by seconds an edge; the slower is tried after
    SPREAD_PROBE passes, then after twice as many while it stays slower; a change of
    speed, seen at a try, turns the choice and resets the interval."""
    from hetgraph import tuning
    from hetgraph.engines.cpu_modes import SpreadChoice

    monkeypatch.setattr(tuning, "SPREAD_PROBE", 2)
    monkeypatch.setattr(tuning, "SPREAD_PROBE_MAX", 4)
    monkeypatch.setattr(tuning, "SPREAD_WEIGHT", 1.0)  # the last pass's rate alone
    choice = SpreadChoice()
    speed = {True: 2.0, False: 1.0}  # seconds a pass: alone is faster

    def run(passes):
        ways = []
        for _ in range(passes):
            way = choice.way()
            choice.record(way, speed[way], 100)
            ways.append(way)
        return "".join("S" if way else "a" for way in ways)

    assert run(2) == "Sa"  # each way once
    # tries after 2, then 4 passes (confirmed slower), then 4 (the most)
    assert run(12) == "aS" + "aaaS" + "aaaS" + "aa"
    speed[True] = 0.5  # the other work ended: spread is faster, seen at the next try
    assert run(4) == "aSSa"  # spread from the try on; alone tried after SPREAD_PROBE
    assert run(3) == "SSS"  # (alone confirmed slower: the next try after 4)


def test_one_slow_first_spread_pass_is_forgotten_at_the_first_try(monkeypatch):
    """A first spread pass 30x slow (threads starting, pages first touched) sends the
    choice alone; the first try of spreading, SPREAD_PROBE passes on, measures it
    faster and spreading resumes there, not after hundreds of passes of averaging."""
    from hetgraph import tuning
    from hetgraph.engines.cpu_modes import SpreadChoice

    monkeypatch.setattr(tuning, "SPREAD_PROBE", 8)
    monkeypatch.setattr(tuning, "SPREAD_WEIGHT", 0.3)
    choice = SpreadChoice()
    speed = {True: 1.4, False: 4.5}  # milliseconds a pass: spread is faster
    ways = []
    for i in range(40):
        way = choice.way()
        choice.record(way, 42.0 if i == 0 else speed[way], 100)
        ways.append("S" if way else "a")
    ways = "".join(ways)
    assert ways[:17] == "Sa" + "a" * 7 + "S" * 8  # the try, 8 passes on, turns it
    assert ways[17:] == "a" + "S" * 15 + "a" + "S" * 6  # alone tried, after 16 passes


def test_passes_of_other_sizes_learn_apart():
    """Notify-pulls over a few vertices, whose spread passes are dear, run alone; the
    whole pulls of the same engine still spread (the choice is kept by powers of 4
    edges)."""
    from hetgraph.engines.cpu_modes import SpreadBySize

    sizes = SpreadBySize()
    seconds = {(200_000, "helpers"): 3.0, (200_000, "alone"): 1.0,  # small: alone faster
               (4_000_000, "helpers"): 1.5, (4_000_000, "alone"): 10.0}
    for _ in range(3):
        for edges in (200_000, 4_000_000):
            way = sizes.way(edges)
            sizes.record(way, seconds[edges, way], edges)
    assert sizes.way(4_000_000) == "helpers" and sizes.way(250_000) == "alone"


def test_spread_passes_learn_openmp_or_the_helpers_by_speed(monkeypatch):
    """With OpenMP allowed: spread or alone is learnt first, then among spread passes
    OpenMP or the helpers, each way tried again after SPREAD_PROBE passes; without,
    a spread pass always takes the helpers."""
    from hetgraph import tuning
    from hetgraph.engines.cpu_modes import SpreadBySize

    monkeypatch.setattr(tuning, "SPREAD_PROBE", 2)
    monkeypatch.setattr(tuning, "SPREAD_PROBE_MAX", 4)
    monkeypatch.setattr(tuning, "SPREAD_WEIGHT", 1.0)
    seconds = {"alone": 10.0, "helpers": 3.0, "openmp": 1.0}

    def run(sizes, passes):
        ways = []
        for _ in range(passes):
            way = sizes.way(1000)
            sizes.record(way, seconds[way], 1000)
            ways.append(way[0])
        return "".join(ways)

    sizes = SpreadBySize(openmp=True)
    assert run(sizes, 4) == "haoa"  # helpers (spread), alone, OpenMP, a try of alone
    ways = run(sizes, 40)
    assert set(ways) == {"o", "h", "a"}  # tries of the other ways between
    assert ways.count("o") >= 2 * ways.count("h") and ways.count("o") >= 2 * ways.count("a")
    seconds["helpers"] = 0.5  # the helpers turn faster: seen at their next try
    run(sizes, 10)
    ways = run(sizes, 40)
    assert ways.count("h") >= 2 * ways.count("o") and ways.count("h") >= 2 * ways.count("a")
    assert "o" not in run(SpreadBySize(openmp=False), 20)


def test_an_engine_spreads_on_openmp_where_it_is_faster(monkeypatch):
    """An engine on 2 threads with OpenMP allowed from 2: once OpenMP's passes were the
    faster spread way, its pulls run there (kernel.step told openmp=True), and PageRank
    still equals SciPy's product."""
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.scheduler.state import VertexState
    from hetgraph import tuning

    monkeypatch.setattr(tuning, "OPENMP_MIN_THREADS", 2)
    g = hg.generate.grid(300, 300, seed=2)
    spec = ProgramSpec(PageRank(tol=None))
    values, flags, aux = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True), aux, threads=2)
    step, calls = engine.kernel.step, []

    def spy(*args, **kwargs):
        calls.append((args[-1], kwargs["openmp"]))
        return step(*args, **kwargs)
    monkeypatch.setattr(engine.kernel, "step", spy)
    spread, team = engine.spread.choices(g.num_arcs)
    spread.rates = {True: 1e-12, False: 1.0}
    team.rates = {True: 1e-12, False: 1.0}  # OpenMP's passes were faster
    before = values.copy()
    engine.iterate(spec.program.iteration_constant(g, values), engine.frontier())
    assert calls == [(True, True)]
    want = (spec.program.iteration_constant(g, before) +
            sp.csr_matrix(g.to_scipy()).T.tocsr() @ before) * aux
    np.testing.assert_allclose(engine.values, want, rtol=1e-6)


def test_an_engine_on_a_busy_machine_pulls_alone(monkeypatch):
    """A graph over SERIAL_EDGES on 2 threads: when spread passes are slower, the engine's
    later pulls run alone (parts=1), and PageRank still equals SciPy's."""
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.scheduler.state import VertexState
    from hetgraph import tuning

    g = hg.generate.grid(300, 300, seed=2)
    assert g.num_arcs >= tuning.SERIAL_EDGES
    spec = ProgramSpec(PageRank(tol=None))
    values, flags, aux = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True), aux, threads=2)
    step = engine.kernel.step
    calls = []

    def slow_when_spread(*args, **kwargs):
        calls.append(args[-1])
        return step(*args, **kwargs)
    monkeypatch.setattr(engine.kernel, "step", slow_when_spread)
    engine.spread.choices(g.num_arcs)[0].rates = {True: 1.0, False: 1e-12}  # spread: slower
    before = values.copy()
    engine.iterate(spec.program.iteration_constant(g, values), engine.frontier())
    assert calls == [False]
    want = (spec.program.iteration_constant(g, before) +
            sp.csr_matrix(g.to_scipy()).T.tocsr() @ before) * aux
    np.testing.assert_allclose(engine.values, want, rtol=1e-6)


def test_a_pull_that_stops_is_cut_by_capped_in_degrees():
    """Hand-checked: in-degrees 10, 0, 1, 2, 20, 3 cost 9, 1, 2, 3, 9, 4 with a cap of
    8 (28 in all); two ranges of 14 split before vertex 4 (running costs 9, 10, 12,
    15), at a vertex boundary: no vertex is cut."""
    from hetgraph.kernels.cpu.pull import cut_by_cost

    in_indptr = np.concatenate(([0], np.cumsum([10, 0, 1, 2, 20, 3])))
    vertices, prefix, v0, bounds, owned, head, tail, has_tail, ahead = cut_by_cost(
        in_indptr, 2, 8, np.float64)
    assert owned.tolist() == [0, 4, 6] and bounds.tolist() == [0, 13, 36]
    assert len(vertices) == 0 and prefix is in_indptr and v0 == 0 and ahead == 0
    assert len(head) == len(tail) == len(has_tail) == 2


@pytest.mark.parametrize("threads, partitions", [(2, None), (2, 7), (1, 5)])
def test_bfs_pulls_cut_by_cost_equal_scipy(threads, partitions, monkeypatch):
    """BFS (a sync pull that stops at a settled vertex) on a reordered RMAT graph whose
    dense iterations pull: its pulls are cut by capped in-degrees, and its levels equal
    SciPy's breadth-first levels."""
    from scipy.sparse import csgraph
    from hetgraph.engines import cpu as cpu_engine

    monkeypatch.setattr(hg.tuning, "SERIAL_EDGES", 1000)  # (ranges on a small graph)
    cuts = []
    real = cpu_engine.cut_by_cost
    monkeypatch.setattr(cpu_engine, "cut_by_cost",
                        lambda *args: cuts.append(args[1]) or real(*args))
    g = hg.generate.rmat(14, seed=3).reorder("auto")
    source = g.label_of(int(np.argmax(g.out_degree())))
    result = hg.bfs(g, source, devices="cpu", threads=threads, partitions=partitions)
    assert "pull" in set(result.history["mode"]) and cuts
    want = csgraph.shortest_path(g.to_scipy(), unweighted=True,
                                 indices=g.id_of(source))
    want[~np.isfinite(want)] = -1  # (hetgraph's level of an unreached vertex)
    assert np.array_equal(np.asarray(result.values), want)
