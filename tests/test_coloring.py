"""Frog's hybrid coloring (hetgraph.coloring), the color-major order, partitions cut at
colors, and mode="colored" on the CPU against independent oracles: NetworkX's induced
subgraphs for the coloring, SciPy (Dijkstra, BFS, components) and NetworkX's PageRank
for the answers."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
from hypothesis import given
from hypothesis import strategies as st

import hetgraph as hg
from conftest import REAL_GRAPHS, data_path, edge_set, examples
from hetgraph import coloring as hc
from hetgraph import tuning
from hetgraph.engines.colored import ColorSweep, color_shards
from hetgraph.errors import GraphError, OutOfCoreError
from hetgraph.order import color_major

arcs = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=250)


def build(rows, directed):
    src = np.array([r[0] for r in rows])
    dst = np.array([r[1] for r in rows])
    return hg.from_arrays(src, dst, directed=directed)


def adjacent_pairs(graph):
    """Set of frozensets {u, v} (u != v) joined by an arc either way (the oracle: the
    graph's own edge list, not its CSC/CSR kernels)."""
    src, dst, _ = graph.edges()
    return {frozenset((int(a), int(b))) for a, b in zip(src, dst) if a != b}


def assert_proper(graph, coloring):
    """No two adjacent vertices share one of the first count-1 colors (checked on the
    NetworkX subgraph each such color induces), and the order and bounds list every
    vertex by color."""
    G = nx.Graph()
    G.add_nodes_from(range(graph.num_vertices))
    G.add_edges_from(tuple(p) for p in adjacent_pairs(graph))
    for c in range(coloring.count - 1):
        members = np.flatnonzero(coloring.colors == c).tolist()
        assert G.subgraph(members).number_of_edges() == 0, f"color {c}"
    assert sorted(coloring.order.tolist()) == list(range(graph.num_vertices))
    for c in range(coloring.count):
        part = coloring.order[coloring.bounds[c]:coloring.bounds[c + 1]]
        assert np.all(coloring.colors[part] == c) and np.all(np.diff(part) > 0)


def assert_hybrid_is_forced(graph, coloring):
    """Every vertex a level left uncolored has a neighbour of each of that level's
    colors (else the pass would have given it the first such color): a vertex of a
    later level, or of the hybrid partition, one of every color of each level before."""
    seen = {}
    for pair in adjacent_pairs(graph):
        u, v = tuple(pair)
        seen.setdefault(u, set()).add(int(coloring.colors[v]))
        seen.setdefault(v, set()).add(int(coloring.colors[u]))
    width = coloring.level
    for v in range(graph.num_vertices):
        c = int(coloring.colors[v])
        level = (coloring.count - 1) // width if c == coloring.hybrid else c // width
        assert set(range(level * width)) <= seen.get(v, set()), v


# --- the coloring ---------------------------------------------------------------------------

@examples(60)
@given(rows=arcs, directed=st.booleans(), count=st.integers(2, 7),
       levels=st.integers(1, 4))
def test_hybrid_coloring_is_proper_on_random_graphs(rows, directed, count, levels):
    g = build(rows, directed)
    coloring = hc.hybrid_coloring(g, count, levels)
    # levels of count - 1 colors each, fewer once the hybrid partition is empty
    assert coloring.level == count - 1 and (coloring.count - 1) % (count - 1) == 0
    assert coloring.count <= levels * (count - 1) + 1 and coloring.colors.max() < coloring.count
    assert coloring.count == levels * (count - 1) + 1 or coloring.sizes[-1] == 0
    assert hc.verify(g, coloring.colors, coloring.count) == 0
    assert_proper(g, coloring)
    assert_hybrid_is_forced(g, coloring)
    # a vertex without a neighbour of lower id takes color 0 (the first free)
    pairs = adjacent_pairs(g)
    lonely = [v for v in range(g.num_vertices)
              if not any(min(p) < v and v in p for p in pairs)]
    assert np.all(coloring.colors[lonely] == 0)


@examples(60)
@given(rows=arcs, count=st.integers(2, 7))
def test_verify_counts_the_arcs_frog_leaves_and_repair_fixes_them(rows, count):
    g = build(rows, directed=True)
    before = hc.frog_pass(g, count)
    hybrid = count - 1
    src, dst, _ = g.edges()
    bad = int(np.sum((before[src] == before[dst]) & (before[src] < hybrid) & (src != dst)))
    assert hc.verify(g, before, count) == bad
    after = before.copy()
    moved = hc.repair(g, after, count)
    assert hc.verify(g, after, count) == 0
    assert_proper(g, hc.from_colors(after, count))
    changed = after != before
    assert moved == int(changed.sum()) and (bad == 0) == (moved == 0)
    assert np.all(after[changed] > before[changed])  # to a later color or the hybrid one


def test_frog_figure_three_example():
    """A path 0-1-2 with 3 colors (2 + hybrid) and a triangle 3-4-5: the path takes
    colors 0, 1, 0, the triangle 0, 1 and the hybrid partition."""
    g = hg.from_arrays([0, 1, 3, 4, 5], [1, 2, 4, 5, 3], directed=False)
    coloring = hc.hybrid_coloring(g, 3, levels=1)
    assert coloring.colors.tolist() == [0, 1, 0, 0, 1, 2]
    assert coloring.sizes.tolist() == [3, 2, 1]
    assert coloring.colored_share == pytest.approx(5 / 6)
    assert coloring.describe()["passes_per_iteration"] == 3
    # a second level colors the hybrid vertex 5 alone: the first of its two colors,
    # and leaves the hybrid partition empty (no third level)
    deeper = hc.hybrid_coloring(g, 3, levels=3)
    assert deeper.colors.tolist() == [0, 1, 0, 0, 1, 2] and deeper.count == 5
    assert deeper.sizes.tolist() == [3, 2, 1, 0, 0]
    assert deeper.colored_share == 1.0 and deeper.first_share == pytest.approx(5 / 6)
    assert deeper.describe()["passes_per_iteration"] == 3


def test_self_loops_are_no_conflict():
    g = hg.from_arrays([0, 0, 1], [0, 1, 1])
    coloring = hc.hybrid_coloring(g, 3)
    assert coloring.colors.tolist() == [0, 1]
    assert hc.verify(g, coloring.colors, 3) == 0


@pytest.mark.parametrize("name", sorted(REAL_GRAPHS))
def test_real_graphs_most_vertices_in_the_first_colors(name):
    g = hg.read(data_path(name), **REAL_GRAPHS[name][0])
    frog = hc.hybrid_coloring(g, levels=1)
    assert frog.count == tuning.FROG_COLORS
    coloring = hc.hybrid_coloring(g)
    for each in (frog, coloring):
        assert hc.verify(g, each.colors, each.count) == 0
        assert_proper(g, each)
        assert_hybrid_is_forced(g, each)
    # Frog: about 80% in four colors; wiki-Vote 84%, astro-ph 70%, MIT8's dense
    # friendships (78 a vertex) 46%
    assert frog.colored_share > 0.4 and coloring.first_share == frog.colored_share
    # the levels' pass colors the same first level, and more of the hybrid partition
    np.testing.assert_array_equal(coloring.colors[coloring.colors < frog.hybrid],
                                  frog.colors[coloring.colors < frog.hybrid])
    assert coloring.colored_share > frog.colored_share or frog.sizes[-1] == 0


@pytest.mark.parametrize("name", ["power", "wiki-vote"])
def test_bundled_datasets_color_properly(name):
    g = hg.datasets.load(name)
    coloring = hc.coloring_of(g)
    assert coloring is hc.coloring_of(g)  # kept by the graph
    assert hc.verify(g, coloring.colors, coloring.count) == 0


def test_bad_color_counts_and_colors_are_refused():
    g = hg.generate.grid(3, 3)
    for bad in (1, 0, 65, 2.5, "5"):
        with pytest.raises(GraphError, match="colors="):
            hc.hybrid_coloring(g, bad)
    for bad in (0, 17, 1.0):  # (5 colors a level: 16 levels make 65 colors)
        with pytest.raises(GraphError, match="levels="):
            hc.hybrid_coloring(g, 5, bad)
    with pytest.raises(GraphError, match="beyond the 3 colors"):
        hc.from_colors(np.array([0, 3, 1], np.uint8), 3)
    with pytest.raises(GraphError, match="writeable uint8"):
        hc.repair(g, np.zeros(9, np.int64), 3)


# --- the color-major order and its partitions ------------------------------------------------

@examples(40)
@given(rows=arcs, directed=st.booleans())
def test_color_order_keeps_the_graph_and_its_labels(rows, directed):
    g = build(rows, directed)
    r = g.reorder("color")
    assert edge_set(r) == edge_set(g)
    coloring = hc.coloring_of(r)
    assert coloring.contiguous and np.all(np.diff(coloring.colors.astype(int)) >= 0)
    assert hc.verify(r, coloring.colors, coloring.count) == 0
    # the colors of the vertices are those of the coloring of the graph given
    before = hc.hybrid_coloring(g)
    np.testing.assert_array_equal(coloring.colors, before.colors[g.id_of(r.labels)])


@pytest.mark.parametrize("options", [{}, {"page_bytes": 4096},
                                     {"shard_vertices": 100, "page_bytes": 2048},
                                     {"max_shard_edges": None, "page_bytes": 1 << 14}])
def test_partition_cuts_fall_on_color_bounds(options):
    g = color_major(hg.read(data_path("wiki-Vote.txt")))
    coloring = hc.coloring_of(g)
    part = g.partition(cuts=coloring.cuts, **options)
    plain = g.partition(**options)
    page_starts = part.shard_start[part.page_shard]
    for cut in coloring.cuts:
        assert cut in part.shard_start and cut in page_starts
    assert part.shard_start[0] == 0 and part.shard_start[-1] == g.num_vertices
    assert np.all(np.diff(part.shard_start) > 0) and len(part.replication) == part.num_shards
    assert part.options["cuts"] == coloring.cuts and "cuts" not in plain.options
    shards = color_shards(part.shard_start, coloring)
    assert [part.shard_start[a] for a, _ in shards] == list(coloring.cuts[:-1])
    # an incremental program's passes: the first level's colors, then the rest as one
    level = coloring.level
    sparse = color_shards(part.shard_start, coloring, sparse=True)
    assert coloring.count > level + 1 and sparse[:level] == shards[:level]
    assert sparse[level] == (shards[level][0], shards[-1][1]) and len(sparse) == level + 1
    # each run between cuts is cut as the graph alone would be: under the least bound
    # (wiki-Vote's is the least too), no more shards than the plain partition plus one
    # a cut
    assert part.num_shards <= plain.num_shards + len(coloring.cuts)
    assert color_shards(plain.shard_start, coloring) is None or \
        set(coloring.cuts) <= set(plain.shard_start.tolist())


def test_each_color_is_cut_under_its_own_edge_bound(monkeypatch):
    """With cuts, a run's shards hold at most ``shard_edge_bound`` of the run's own
    in-edges (a vertex with more alone): a GPU launches a color's shards together, and
    a small color cut under the whole graph's bound would run in a few blocks."""
    from hetgraph.partition import shard_edge_bound

    monkeypatch.setattr(tuning, "TARGET_SHARDS", 64)
    monkeypatch.setattr(tuning, "MIN_SHARD_EDGES", 16)
    g = color_major(hg.read(data_path("wiki-Vote.txt")))
    coloring = hc.coloring_of(g)
    part = g.partition(cuts=coloring.cuts)
    whole = shard_edge_bound(g.num_arcs)  # 1,620 in-edges
    starts, ptr = part.shard_start, g.in_indptr
    for v0, v1 in zip(coloring.cuts[:-1], coloring.cuts[1:]):
        shards = starts[(starts >= v0) & (starts <= v1)]
        edges, vertices = np.diff(ptr[shards]), np.diff(shards)
        bound = shard_edge_bound(int(ptr[v1] - ptr[v0]))
        assert np.all((edges <= bound) | (vertices == 1)), (v0, v1)
        if v1 > v0:
            assert bound <= whole
    # a small color (color 5: 136 vertices, 5,812 in-edges) gets a bound of 90
    # in-edges, not the graph's 1,620: 83 shards, not 4
    v0, v1 = coloring.cuts[5], coloring.cuts[6]
    edges = int(ptr[v1] - ptr[v0])
    assert shard_edge_bound(edges) < whole / 10
    assert np.count_nonzero((starts >= v0) & (starts < v1)) >= 10 * -(-edges // whole)


def test_color_shards_needs_a_contiguous_coloring():
    g = hg.generate.grid(10, 10)
    coloring = hc.hybrid_coloring(g)
    assert not coloring.contiguous
    assert color_shards(np.arange(101), coloring) is None
    assert color_shards(np.arange(101), hc.coloring_of(g.reorder("color"))) is not None


def test_bad_cuts_are_refused():
    g = hg.generate.grid(3, 3)
    with pytest.raises(GraphError, match="cuts="):
        g.partition(cuts=(0, 12))


# --- mode="colored" on the CPU ----------------------------------------------------------------

def graphs():
    wiki = hg.read(data_path("wiki-Vote.txt"))
    return {"wiki": wiki, "wiki-color": wiki.reorder("color"),
            "grid-color": hg.generate.grid(30, 40, seed=2).reorder("color"),
            "rmat": hg.generate.rmat(11, seed=3, weights=(1.0, 9.0)).reorder("color"),
            "power": hg.read(data_path("power.graph"))}


NAMES = ["wiki", "wiki-color", "grid-color", "rmat", "power"]


@pytest.mark.parametrize("threads", [None, 1])
@pytest.mark.parametrize("name", NAMES)
def test_colored_sssp_bfs_cc_equal_scipy(name, threads):
    g = graphs()[name]
    s = g.label_of(int(np.argmax(g.out_degree())))
    sp = g.to_scipy()
    want = csgraph.dijkstra(sp, directed=True, indices=g.id_of(s))
    r = hg.sssp(g, s, devices="cpu", mode="colored", threads=threads)
    assert r.converged and set(r.history["mode"]) == {"colored"}
    np.testing.assert_array_equal(r.values, want)
    hops = csgraph.shortest_path(sp, directed=True, unweighted=True, indices=g.id_of(s))
    levels = hg.bfs(g, s, devices="cpu", mode="colored", threads=threads).values
    np.testing.assert_array_equal(levels, np.where(np.isinf(hops), -1, hops))
    labels = hg.connected_components(g, algorithm="label-propagation", devices="cpu",
                                     mode="colored", threads=threads).values
    _, parts = csgraph.connected_components(sp, directed=True, connection="weak")
    # same partition: labels map one to one onto SciPy's components
    pairs = set(zip(labels.tolist(), parts.tolist()))
    assert len(pairs) == len(set(labels.tolist())) == len(set(parts.tolist()))


@pytest.mark.parametrize("name", NAMES)
def test_colored_equals_sync_exactly(name, dispatcher_only):  # (sync's iterations)
    g = graphs()[name]
    s = g.label_of(0)
    for call in (lambda **o: hg.bfs(g, s, **o), lambda **o: hg.sssp(g, s, **o),
                 lambda **o: hg.connected_components(g, algorithm="label-propagation",
                                                     **o)):
        sync = call(devices="cpu", mode="sync")
        colored = call(devices="cpu", mode="colored")
        np.testing.assert_array_equal(colored.values, sync.values)
        assert colored.iterations <= sync.iterations


@pytest.mark.parametrize("name", NAMES)
def test_colored_pagerank_reaches_networkx_fixed_point(name):
    g = graphs()[name]
    G = nx.DiGraph() if g.directed else nx.Graph()
    G.add_nodes_from(range(g.num_vertices))
    src, dst, w = g.edges()
    G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(),
                                  (np.ones(len(src)) if w is None else w).tolist()))
    ref = nx.pagerank(G, tol=1e-12, max_iter=1000)
    ref = np.array([ref[i] for i in range(g.num_vertices)])
    tol = 1e-10
    r = hg.pagerank(g, devices="cpu", mode="colored", tol=tol, max_iterations=1000)
    assert r.converged
    sync = hg.pagerank(g, devices="cpu", mode="sync", tol=tol, max_iterations=1000)
    n = g.num_vertices
    assert np.abs(r.values - ref).sum() < n * tol * 100
    assert np.abs(r.values - sync.values).sum() < n * tol * 100


@pytest.mark.parametrize("threads", [None, 1])
def test_colored_reruns_are_bitwise_identical(threads):
    g = graphs()["wiki-color"]
    runs = [hg.pagerank(g, devices="cpu", mode="colored", threads=threads, tol=None,
                        max_iterations=12).values for _ in range(3)]
    for other in runs[1:]:
        assert other.tobytes() == runs[0].tobytes()
    # and whatever the thread count or partitions: a pass is cut at vertex boundaries
    for options in ({"threads": 1}, {"threads": 2, "partitions": 5}):
        other = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=12,
                            **options).values
        assert other.tobytes() == runs[0].tobytes()


@pytest.mark.parametrize("spread", [False, True])
def test_colored_pass_is_gauss_seidel_by_color(spread, monkeypatch):
    """A colored PageRank iteration equals NumPy's sweep: the ranks scaled to sum 1,
    then the hybrid partition over the values before it, then each color from the last
    to the first in place over the values of the passes before it, each pass's
    constant from the dangling rank the passes before it left; in one compiled call
    (the direct path), or (``spread``) the larger colors' passes cut over two threads,
    the others in runs of one call."""
    if spread:
        monkeypatch.setattr(tuning, "SERIAL_EDGES", 2000)
    g = graphs()["wiki-color"]
    coloring = hc.coloring_of(g)
    n, d = g.num_vertices, 0.85
    out = g.out_degree().astype(float)
    aux = np.where(out > 0, d / np.maximum(out, 1), d)
    x = np.full(n, 1.0 / n) * aux
    ptr, src = g.in_indptr, g.in_indices
    for _ in range(3):
        x /= (x / aux).sum()
        for k in range(coloring.count - 1, -1, -1):
            c = (1 - d) / n + x[out == 0].sum() / n
            read = x.copy() if k == coloring.hybrid else x
            for v in range(coloring.bounds[k], coloring.bounds[k + 1]):
                x[v] = (c + read[src[ptr[v]:ptr[v + 1]]].sum()) * aux[v]
    r = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=3,
                    threads=2 if spread else None)
    np.testing.assert_allclose(r.values, x / aux, rtol=1e-12)
    sync = hg.pagerank(g, devices="cpu", mode="sync", tol=None, max_iterations=3)
    assert not np.allclose(sync.values, r.values, rtol=1e-6)  # (sync is another sweep)


@pytest.mark.parametrize("name", ["wiki-color", "grid-color", "rmat"])
def test_colored_passes_in_one_call_equal_pass_by_pass(name, monkeypatch, dispatcher_only):
    """Where each pass runs in one range (a small graph), the CPU engine runs a colored
    iteration's passes in one compiled call: bitwise the values and the counts of the
    passes run one by one, the hybrid partition included."""
    from hetgraph.kernels.cpu.kernel import CpuKernel

    g = graphs()[name]
    assert hc.coloring_of(g).contiguous and g.num_arcs < tuning.SERIAL_EDGES
    calls = []
    colors = CpuKernel.colors
    monkeypatch.setattr(CpuKernel, "colors", lambda self, *a: calls.append(1) or
                        colors(self, *a))

    def run():
        return hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=6,
                           dtype=np.float64)

    fused = run()
    assert len(calls) >= 6
    assert_equal_pass_by_pass(run, fused, calls, monkeypatch)


def assert_equal_pass_by_pass(run, together, calls, monkeypatch):
    """``together`` (a result of ``run()``) equals ``run()`` with every pass on its own
    (``ColorSweep.fusible`` off: no call recorded in ``calls``), bitwise: the values and
    the counts of every iteration."""
    monkeypatch.setattr(ColorSweep, "fusible", property(lambda self: False))
    before = len(calls)
    apart = run()
    assert len(calls) == before
    assert together.values.tobytes() == apart.values.tobytes()
    for column in ("activated", "edges", "computed"):
        assert together.history[column].tolist() == apart.history[column].tolist()


@pytest.mark.parametrize("name", ["wiki-color", "rmat"])
def test_colored_runs_of_one_range_passes_in_one_call_equal_pass_by_pass(name, monkeypatch):
    """Where some passes run in several ranges and others in one, each run of
    consecutive one-range colors is one compiled call (between the others' passes), or
    the whole iteration is (the engine tries both): bitwise the values and counts of
    the passes run one by one."""
    from hetgraph.kernels.cpu.kernel import CpuKernel

    g = graphs()[name]
    coloring = hc.coloring_of(g)
    edges = np.diff(g.in_indptr[coloring.bounds])
    monkeypatch.setattr(tuning, "SERIAL_EDGES", int(np.sort(edges)[-3]))  # (3 spread)
    calls = []
    colors = CpuKernel.colors
    monkeypatch.setattr(CpuKernel, "colors", lambda self, *a: calls.append(a[6].copy()) or
                        colors(self, *a))

    def run():
        return hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=5,
                           threads=2)

    runs = run()
    apart = [bounds for bounds in calls if len(bounds) < coloring.count + 1]
    # each run's colors: consecutive ones, an empty pair last (no hybrid pass); the
    # engine also tries whole iterations in one call (every color's bounds)
    assert apart and all(bounds[-1] == bounds[-2] for bounds in apart)
    whole = [bounds for bounds in calls if len(bounds) == coloring.count + 1]
    assert whole and all(np.array_equal(bounds, coloring.bounds) for bounds in whole)
    assert len(apart) + len(whole) == len(calls)
    swept = {int(b) for bounds in apart for b in bounds[:-2]}
    assert swept and swept < set(coloring.cuts[:-2])
    assert_equal_pass_by_pass(run, runs, calls, monkeypatch)


def test_color_sweep_on_id_lists_equals_ranges():
    """A graph not in color order runs its colors as id lists: the same values as the
    color-major graph's ranges, label by label."""
    g = graphs()["wiki"]
    r = g.reorder("color")
    assert not hc.coloring_of(g).contiguous and hc.coloring_of(r).contiguous
    a = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=6)
    b = hg.pagerank(r, devices="cpu", mode="colored", tol=None, max_iterations=6)
    np.testing.assert_allclose(a.to_series().sort_index().values,
                               b.to_series().sort_index().values, rtol=1e-12)
    sweep = ColorSweep(hc.coloring_of(g), g)
    assert sum(len(p) - 1 for _, p, _ in sweep.passes) == g.num_vertices
    # a sparse sweep: the first level's colors, then one pass over the later levels'
    # colors and the hybrid partition (ids sorted, or a range)
    for graph in (g, r):
        coloring = hc.coloring_of(graph)
        assert coloring.count > coloring.level + 1  # (wiki-Vote: several levels)
        sparse = ColorSweep(coloring, graph, sparse=True)
        assert len(sparse.passes) == coloring.level + 1
        assert sparse.describe()["passes_per_iteration"] == coloring.level + 1
        vertices, prefix, v0 = sparse.passes[-1]
        later = np.flatnonzero(coloring.colors >= coloring.level)
        if len(vertices):
            np.testing.assert_array_equal(vertices, later)
        else:
            np.testing.assert_array_equal(np.arange(v0, v0 + len(prefix) - 1), later)
        assert prefix[-1] - prefix[0] == np.diff(graph.in_indptr)[later].sum()


def test_colored_history_and_description():
    g = graphs()["grid-color"]
    sync = hg.bfs(g, 0, devices="cpu")
    colored = hg.bfs(g, 0, devices="cpu", mode="colored")
    assert colored.mode == "colored" and set(colored.history["mode"]) == {"colored"}
    assert colored.iterations * 1.5 <= sync.iterations  # a grid's BFS: two colors
    # BFS's passes read only the in-edges of the vertices a change marked: a wave's,
    # each vertex at most a few times; PageRank's (an iteration constant) every arc
    edges = colored.history["edges"]
    assert (edges < g.num_arcs / 4).all() and edges.sum() <= 3 * g.num_arcs
    pagerank = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=3)
    assert (pagerank.history["edges"] == g.num_arcs).all()
    description = hc.coloring_of(g).describe()
    assert description["colors"] == 5 and description["colored_share"] == 1.0
    assert description["passes_per_iteration"] == 2  # a grid has two colors


def test_a_colored_pagerank_iteration_keeps_the_values_it_started_from():
    """A colored CPU engine asked to keep the values before a PageRank iteration (a
    convergence test then copies nothing) holds exactly them after it, in one array
    kept from iteration to iteration; a sparse sweep (BFS) keeps none."""
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler.state import VertexState

    g = hg.datasets.load("wiki-vote").reorder("color")
    spec = ProgramSpec(PageRank(rescale=True))
    values, flags, aux = spec.initial_state(g, np)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=False), aux, threads=1,
                       coloring=hc.coloring_of(g))
    kept = None
    for _ in range(3):
        constant = spec.program.iteration_constant(g, engine.values)
        assert engine.keeps_previous(engine.frontier())
        before = engine.values.copy()
        engine.iterate(constant, engine.frontier())
        np.testing.assert_array_equal(engine.previous, before)
        assert not np.array_equal(engine.values, before)
        assert kept is None or engine.previous is kept
        kept = engine.previous
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g, np)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=False),
                       np.zeros(1, np.float32), threads=1, coloring=hc.coloring_of(g))
    assert not engine.keeps_previous(engine.frontier())


def test_colored_cpu_engine_describes_its_coloring():
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler.state import VertexState

    g = graphs()["grid-color"]
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g, np)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=False),
                       np.zeros(1, np.float32), threads=1, coloring=hc.coloring_of(g))
    assert not engine.bursts
    assert engine.describe()["mode"] == "colored"
    assert engine.describe()["passes_per_iteration"] == 2
    mode, computed, edges, activated = engine.iterate(0.0, engine.frontier())
    # the first iteration's first pass (color 1, the last: the hybrid partition is
    # empty) computes the source's out-neighbours alone, from their in-edges; the second
    # (color 0) their out-neighbours: the source, unchanged, and the next level
    def out(vertices):
        return np.unique(np.concatenate([g.out_indices[g.out_indptr[v]:g.out_indptr[v + 1]]
                                         for v in vertices]))

    def in_edges(vertices):
        return int((g.in_indptr[vertices + 1] - g.in_indptr[vertices]).sum())

    first = out([0])
    second = out(first)
    assert hc.coloring_of(g).colors[0] == 0 and set(hc.coloring_of(g).colors[first]) == {1}
    assert (mode, computed, edges) == ("colored", len(first) + len(second),
                                       in_edges(first) + in_edges(second))
    level_two = set(second.tolist()) - {0}
    assert activated == len(first) + len(level_two)
    assert set(np.flatnonzero(flags)) == set(first.tolist()) | level_two


def test_colored_mode_errors(tmp_path):
    g = hg.generate.grid(5, 5)
    with pytest.raises(GraphError, match="'sync', 'async' or 'colored'"):
        hg.bfs(g, 0, devices="cpu", mode="coloured")
    from test_outofcore import _budget

    store = hg.generate.grid(60, 60).save(tmp_path / "store", page_bytes=8 << 10,
                                          shared_bytes=4096)
    with pytest.raises(OutOfCoreError, match="mode='colored'"):
        hg.bfs(store, 0, devices="cpu", mode="colored", host_budget=_budget(store, 0.2))


def test_colored_run_events_show_the_coloring_on_the_dashboard():
    pytest.importorskip("bokeh")
    from hetgraph import dashboard
    from test_dashboard import settle

    g = graphs()["wiki-color"]
    with hg.Cluster(gpus=0) as cluster:
        result = hg.bfs(g, 30, cluster=cluster, mode="colored")
        settle(cluster)
        start, rows, end = dashboard.latest_run(cluster._cluster.scheduler)
    assert start["coloring"] == hc.coloring_of(g).describe()
    assert {r["mode"] for r in rows} == {"colored"} and len(rows) == result.iterations
    title = dashboard.run_title(start, rows, end)
    # eight levels of four colors: wiki-Vote's hybrid partition keeps 13 vertices
    assert ", colored: 33 colors (99.8% in the first 32), 33 passes an iteration:" in title
    assert dashboard._coloring_text({"colors": "5", "colored_share": 0.5,
                                     "passes_per_iteration": 2}) == ""


def exact_pagerank(g, d=0.85):
    """SciPy's float64 power iteration (NetworkX's formula: dangling rank spread
    uniformly) until the L1 change is below 1e-15."""
    import scipy.sparse as sp

    n = g.num_vertices
    out = g.out_weight_sums()
    per = np.where(out == 0, 0.0, 1.0 / np.where(out == 0, 1.0, out))
    weights = per[g.in_indices] * (1.0 if g.in_weights is None else g.in_weights)
    matrix = sp.csr_matrix((weights, g.in_indices, g.in_indptr), shape=(n, n))
    rank = np.full(n, 1.0 / n)
    for _ in range(5000):
        new = (1 - d) / n + d * (matrix @ rank + rank[out == 0].sum() / n)
        if np.abs(new - rank).sum() < 1e-15:
            break
        rank = new
    return new


@pytest.mark.parametrize("name, colored, sync", [("wiki-color", 10, 15), ("grid-color", 10, 18),
                                                 ("rmat", 10, 12)])
def test_colored_pagerank_is_closer_to_the_exact_ranks_in_fewer_iterations(name, colored,
                                                                          sync):
    """Hubs first and the hybrid partition colored again (power-law graphs), colored
    PageRank after ``colored`` iterations is closer (L1) to SciPy's exact ranks than sync
    after ``sync``: 1.5x fewer on wiki-Vote and a grid, 1.2x on a small weighted RMAT."""
    g = graphs()[name]
    exact = exact_pagerank(g)

    def error(mode, iterations):
        return np.abs(hg.pagerank(g, devices="cpu", mode=mode, tol=None,
                                  max_iterations=iterations).values - exact).sum()

    assert error("colored", colored) < error("sync", sync)


def test_colored_pagerank_sums_the_dangling_rank_after_each_color():
    """Each color's pass reads the dangling rank the passes before it left (the
    constant summed again after each pass): on wiki-Vote (14% of the vertices
    dangling) colored PageRank is closer to SciPy's exact ranks after 8 iterations than
    sync's answer at tol 1e-9 (13 iterations; with one constant an iteration colored
    needs 9), and stops after at most 9; the ranks sum to 1 within N * tol."""
    g = graphs()["wiki-color"]
    exact = exact_pagerank(g)
    sync = hg.pagerank(g, devices="cpu", tol=1e-9, max_iterations=1000)
    colored = hg.pagerank(g, devices="cpu", mode="colored", tol=1e-9, max_iterations=1000)
    eight = hg.pagerank(g, devices="cpu", mode="colored", tol=None, max_iterations=8)
    assert sync.iterations == 13 and colored.converged and colored.iterations <= 9
    assert np.abs(eight.values - exact).sum() < np.abs(sync.values - exact).sum()
    assert abs(colored.values.sum() - 1.0) < g.num_vertices * 1e-9


@pytest.mark.parametrize("name", ["star", "rmat", "grid-color"])
def test_colored_pagerank_converges_with_many_or_no_dangling_vertices(name):
    """A star whose leaves are all dangling (every vertex but one), a weighted RMAT
    (a quarter dangling) and a grid (none): colored PageRank converges to SciPy's exact
    ranks (L1 within 10 N * tol), its ranks summing to 1 within N * tol, the engine's
    passes one by one bitwise its one-call sweep's (the direct path's)."""
    star = hg.from_arrays(np.zeros(49, np.int64), np.arange(1, 50), directed=True)
    g = star.reorder("color") if name == "star" else graphs()[name]
    tol = 1e-10
    exact = exact_pagerank(g)
    colored = hg.pagerank(g, devices="cpu", mode="colored", tol=tol, max_iterations=1000)
    assert colored.converged
    assert np.abs(colored.values - exact).sum() < 10 * g.num_vertices * tol
    assert abs(colored.values.sum() - 1.0) < g.num_vertices * tol
    engine = hg.pagerank(g, devices="cpu", mode="colored", tol=tol, max_iterations=1000,
                         progress=True)  # (an option only the dispatcher takes)
    assert engine.values.tobytes() == colored.values.tobytes()


def test_colored_pagerank_rescales_and_needs_no_more_iterations():
    """Rescaled to sum 1 before every sweep where vertices are dangling (a grid has
    none: its sweep converges to ranks summing to 1), colored PageRank takes 1/1.25 of
    sync's iterations on wiki-Vote (unscaled: 44 against 13 to tol 1e-9) and under
    1/1.5 of them on a grid; its ranks sum to 1."""
    from hetgraph.algorithms.pagerank import _program

    for name, fewer, dangling in (("wiki-color", 1.25, True), ("grid-color", 1.5, False)):
        g = graphs()[name]
        sync = hg.pagerank(g, devices="cpu", tol=1e-9, max_iterations=1000)
        colored = hg.pagerank(g, devices="cpu", mode="colored", tol=1e-9,
                              max_iterations=1000)
        assert colored.iterations * fewer <= sync.iterations, name
        assert abs(colored.values.sum() - 1.0) < 1e-6
        program = _program(g, 0.85, 1e-6, np.float64, True, None, None, None, True)
        values = program.init(g)[0] * 2  # (ranks summing to 2)
        program.iteration_constant(g, values)
        total = (values / program._scale).sum()
        assert total == pytest.approx(1.0 if dangling else 2.0), name
    assert _program(g, 0.85, 1e-6, np.float64, True, None, None, None, True).rescale
    assert not _program(g, 0.85, 1e-6, np.float64, True, None, None, None).rescale


def test_a_calibration_is_kept_apart_for_sync_async_and_colored_runs():
    """An auto run finds the cost model's calibration of an earlier run by its key: a
    colored run's passes cost otherwise than an async run's, so the key tells them apart."""
    from types import SimpleNamespace

    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import dispatcher

    g = hg.generate.grid(5, 5)
    options = dict(threads=None, partitions=None, cpu_mode="auto", rho=1.0, page_bytes=None,
                   gpu={})

    def key(sync, coloring):
        return dispatcher._calibration_key(
            SimpleNamespace(cpu_workers=["c"], gpu_workers=["g"]),
            ProgramSpec(BreadthFirst(0)), g, sync, {**options, "coloring": coloring})

    assert key(False, None) == key(False, None)
    assert len({key(True, None), key(False, None), key(False, object())}) == 3


def test_a_colored_run_takes_one_of_this_processs_gpus():
    """On an in-process cluster of several GPUs, a run's segments share them (its pages
    split over them), but a colored run's passes go color by color over one GPU's
    pages: it takes the first GPU alone (on several it ran as async)."""
    from types import SimpleNamespace

    from hetgraph.scheduler import dispatcher

    driver = SimpleNamespace(kinds={"gpu": 2}, shared=True,
                             cluster=SimpleNamespace(gpu_devices=[0, 1]))
    partition = SimpleNamespace(num_pages=8)

    def gpus(coloring):
        return dispatcher._Driver._segment_gpus(driver, partition, coloring)

    assert gpus(None) == (0, 1)
    assert gpus(object()) == (0,)
    partition.num_pages = 1
    assert gpus(None) == (0,)


def test_pages_spread_over_workers_are_cut_at_the_colors():
    """The partition a run spreads over several workers (or GPUs) is cut at the colors
    of a colored run: a GPU sweeps color by color over whole shards (uncut, a colored
    run on two GPUs of one process ran as async, off the CPU's answers)."""
    from hetgraph.scheduler.dispatcher import _color_cuts

    g = hg.generate.rmat(12, seed=3).reorder("color")
    coloring = hc.coloring_of(g)
    options = dict(page_bytes=16 << 10, vertex_bytes=8)
    assert color_shards(g.partition(**options).shard_start, coloring) is None
    cut = g.partition(**options, **_color_cuts(coloring))
    assert color_shards(cut.shard_start, coloring) is not None
    assert set(coloring.cuts) <= set(cut.shard_start.tolist())
    assert _color_cuts(None) == {}


def test_colored_sparse_passes_resume_from_a_checkpoint(tmp_path):
    """A colored BFS stopped mid-wave and resumed from its checkpoint (its marks made
    again from the active flags) reaches SciPy's levels, as does one run through."""
    g = graphs()["grid-color"]
    s = g.label_of(0)
    hops = csgraph.shortest_path(g.to_scipy(), directed=True, unweighted=True,
                                 indices=g.id_of(s))
    want = np.where(np.isinf(hops), -1, hops)
    first = hg.bfs(g, s, devices="cpu", mode="colored", max_iterations=9,
                   checkpoint=tmp_path, checkpoint_every=3)
    assert not first.converged
    resumed = hg.bfs(g, s, devices="cpu", mode="colored", checkpoint=tmp_path, resume=True)
    assert resumed.converged and resumed.iterations > 9
    np.testing.assert_array_equal(resumed.values, want)
    # (the resumed run computed only its waves: fewer edges than whole passes)
    assert resumed.history["edges"].iloc[9:].sum() < (resumed.iterations - 9) * g.num_arcs / 4
