"""Built-in algorithms against independent oracles (NetworkX, scipy.sparse.csgraph,
scipy linear algebra) on the real graphs of ../shared/data and on generated graphs."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla

import hetgraph as hg
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph import tuning
from conftest import REAL_GRAPHS, data_path, power_pagerank

# every engine configuration must give the oracle's answer
CONFIGS = [
    {},
    {"cpu_mode": "pull"},
    {"cpu_mode": "notify-pull"},
    {"mode": "sync"},
    {"mode": "async"},
    {"mode": "async", "cpu_mode": "pull"},
    {"mode": "async", "cpu_mode": "notify-pull"},
    {"threads": 1, "partitions": 1},
    {"partitions": 7},
    {"cpu_mode": "notify-pull", "sparse_edges": 0},
    {"cpu_mode": "notify-pull", "sparse_edges": 0, "mode": "async", "partitions": 3},
    {"cpu_mode": "push"},
    {"cpu_mode": "push", "mode": "async"},
]
CONFIG_IDS = ["auto", "pull", "notify", "sync", "async", "async-pull", "async-notify",
              "1-thread", "7-parts", "dense-notify", "dense-notify-async", "push", "async-push"]


def use(config, monkeypatch, incremental=True):
    """Run options of a config; "sparse_edges" sets the frontier size up to which
    notify-pull runs from the id list (0 forces the pass through the active flags)."""
    options = dict(config)
    if options.get("cpu_mode") == "push" and not incremental:
        pytest.skip("push needs an incremental program")
    if "sparse_edges" in options:
        monkeypatch.setattr(tuning, "SPARSE_EDGES", options.pop("sparse_edges"))
    return options


def real(name):
    options = REAL_GRAPHS[name][0]
    return hg.read(data_path(name), **options)


def generated(kind):
    if kind == "rmat":
        return hg.generate.rmat(11, seed=3, weights=(1.0, 9.0))
    if kind == "grid":
        return hg.generate.grid(30, 40, seed=2)
    if kind == "er":
        return hg.generate.erdos_renyi(3000, m=12000, seed=5, weights=(0.5, 2.0))
    raise ValueError(kind)


GRAPHS = ["wiki-Vote.txt", "power.graph", "astro-ph.graph", "rmat", "grid", "er"]


def load(name):
    return real(name) if name in REAL_GRAPHS else generated(name)


def to_networkx(g, weighted):
    G = nx.DiGraph() if g.directed else nx.Graph()
    G.add_nodes_from(range(g.num_vertices))
    src, dst, w = g.edges()
    if weighted and w is not None:
        G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.astype(float).tolist()))
    else:
        G.add_edges_from(zip(src.tolist(), dst.tolist()))
    return G


def source_of(g):
    """A vertex with out-edges (the label of the highest out-degree vertex)."""
    return g.label_of(int(np.argmax(g.out_degree())))


# --- PageRank ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", GRAPHS)
def test_pagerank_equals_networkx(name):
    g = load(name)
    ref = nx.pagerank(to_networkx(g, weighted=True))
    ref = np.array([ref[i] for i in range(g.num_vertices)])
    r = hg.pagerank(g)
    assert r.converged
    np.testing.assert_allclose(r.values, ref, rtol=1e-6)
    assert abs(r.values.sum() - 1.0) < 1e-9


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_pagerank_every_engine_mode(config, monkeypatch):
    g = real("wiki-Vote.txt")
    ref = nx.pagerank(to_networkx(g, weighted=False), tol=1e-12, max_iter=500)
    ref = np.array([ref[i] for i in range(g.num_vertices)])
    options = use(config, monkeypatch, incremental=False)
    r = hg.pagerank(g, tol=1e-12, max_iterations=500, **options)
    assert r.converged
    np.testing.assert_allclose(r.values, ref, rtol=1e-6)


@pytest.mark.parametrize("order", ["given", "degree"])
def test_pagerank_fixed_iterations_is_power_iteration(order):
    """In degree order the dangling vertices come last: their ranks are summed as a
    range (a slice), otherwise through their indices."""
    g = generated("er")
    if order == "degree":
        g = g.reorder("degree")
    dangling_ids = np.flatnonzero(g.out_degree() == 0)
    contiguous = dangling_ids[-1] - dangling_ids[0] + 1 == len(dangling_ids)
    assert len(dangling_ids) > 10 and contiguous == (order == "degree")
    x = power_pagerank(g, 7)
    r = hg.pagerank(g, tol=None, max_iterations=7)
    assert r.iterations == 7 and not r.converged
    np.testing.assert_allclose(r.values, x, rtol=1e-12)


def test_a_tol_that_stops_any_pagerank_at_once_is_warned_about(caplog):
    """NetworkX's test (L1 change < N * tol) holds after one iteration once N * tol >= 2:
    the run does what was asked and says so."""
    g = hg.generate.grid(50, 50)  # N * 1e-3 = 2.5
    with caplog.at_level("WARNING", logger="hetgraph"):
        quick = hg.pagerank(g, tol=1e-3, devices="cpu")
    assert quick.iterations == 1 and quick.converged
    assert "stops after the first iteration" in caplog.text and "N * tol = 2.5" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="hetgraph"):
        assert hg.pagerank(g, tol=1e-5, devices="cpu").iterations > 1
    assert "stops after the first iteration" not in caplog.text


def test_pagerank_float32_is_close():
    g = real("wiki-Vote.txt")
    r64 = hg.pagerank(g)
    r32 = hg.pagerank(g, dtype=np.float32)
    assert r32.values.dtype == np.float32
    np.testing.assert_allclose(r32.values, r64.values, rtol=1e-4)


# --- SSSP ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GRAPHS)
def test_sssp_equals_dijkstra(name):
    g = load(name)
    s = source_of(g)
    ref = csgraph.dijkstra(g.to_scipy(), directed=True, indices=g.id_of(s))
    r = hg.sssp(g, s)
    assert r.converged
    np.testing.assert_array_equal(r.values, ref)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("name", ["grid", "rmat"])
def test_sssp_every_engine_mode(name, config, monkeypatch):
    g = generated(name)
    ref = csgraph.dijkstra(g.to_scipy(), directed=True, indices=0)
    r = hg.sssp(g, g.label_of(0), **use(config, monkeypatch))
    np.testing.assert_array_equal(r.values, ref)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("delta", [None, 0.3, 7.0, 1e6, np.inf])
@pytest.mark.parametrize("name", ["grid", "rmat", "er"])
def test_sssp_any_bucket_width_gives_dijkstra(name, delta, mode):
    """Delta-stepping's buckets change the order of the relaxations, not the distances:
    widths below, near and above the weights (1-100 on the grid, 1-9 on RMAT, 0.5-2
    on the random graph), and none (inf)."""
    g = generated(name)
    ref = csgraph.dijkstra(g.to_scipy(), directed=True, indices=0)
    r = hg.sssp(g, g.label_of(0), delta=delta, mode=mode, devices="cpu")
    assert r.converged
    np.testing.assert_array_equal(r.values, ref)


def test_sssp_buckets_relax_each_edge_a_few_times_on_a_grid(dispatcher_only):
    """Bellman-Ford's order relaxes a weighted grid's edges many times over (a distance
    improves each time a longer-hop but lighter path arrives); buckets of twice the
    mean weight settle near vertices first. The rows count the waiting vertices as
    active: their out-degrees are in f, not in the edges pushed."""
    g = hg.generate.grid(80, 80, seed=2)
    ref = csgraph.dijkstra(g.to_scipy(), directed=True, indices=0)
    plain = hg.sssp(g, 0, delta=np.inf, devices="cpu")
    bucketed = hg.sssp(g, 0, devices="cpu")
    for r in (plain, bucketed):
        np.testing.assert_array_equal(r.values, ref)
    h = bucketed.history
    assert plain.history["edges"].sum() > 4 * g.num_arcs
    assert h["edges"].sum() < 1.5 * g.num_arcs
    assert (h["edges"] < h["f"] * g.num_arcs - 0.5).any()  # some vertices waited
    assert (plain.history["edges"] == np.round(plain.history["f"] * g.num_arcs)).all()
    assert h["activated"].iloc[-1] == 0 and (h["activated"].iloc[:-1] > 0).all()
    # the rows' priority: the lowest distance each ran, from the source's 0 to the
    # farthest bucket, by buckets in order (the progress the dispatcher measures)
    delta = ShortestPaths(0).bucket_width(g)
    fronts = h["priority"].to_numpy()
    assert fronts[0] == 0.0 and (np.diff(np.floor(fronts / delta)) >= 0).all()
    assert ref.max() - delta < fronts[-1] <= ref.max()
    assert plain.history["priority"].isna().all()  # (no buckets: not tracked)


def test_sssp_switches_modes_like_garaph():
    """On a road-like graph the frontier grows then shrinks: notify-pull at both ends,
    pull in the middle when f > 1/2 (Garaph 4.2; SSSP made not incremental, so that it
    cannot push)."""
    g = hg.generate.grid(60, 60, seed=4)
    program = ShortestPaths(0, np.float64)
    program.incremental = False
    program.priority = None  # (priority buckets need an incremental program)
    r = hg.run(program, g, max_iterations=g.num_vertices)
    np.testing.assert_array_equal(r.values, csgraph.dijkstra(g.to_scipy(), indices=0))
    modes = r.history["mode"].tolist()
    assert modes[0] == "notify-pull" and modes[-1] == "notify-pull"
    f = r.history["f"].to_numpy()
    expected = np.where(f <= 0.5, "notify-pull", "pull")
    assert modes == expected.tolist()


def test_sssp_float32_distances():
    g = generated("grid")
    ref = csgraph.dijkstra(g.to_scipy(), indices=0)
    r = hg.sssp(g, 0, dtype=np.float32)
    assert r.values.dtype == np.float32
    np.testing.assert_allclose(r.values, ref, rtol=1e-5)


# --- BFS ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GRAPHS)
def test_bfs_levels_equal_scipy(name):
    g = load(name)
    s = source_of(g)
    hops = csgraph.shortest_path(g.to_scipy(), unweighted=True, indices=g.id_of(s))
    ref = np.where(np.isinf(hops), -1, hops).astype(np.int32)
    r = hg.bfs(g, s)
    np.testing.assert_array_equal(r.values, ref)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_bfs_every_engine_mode_equals_networkx(config, monkeypatch):
    g = real("wiki-Vote.txt")
    s = source_of(g)
    layers = nx.single_source_shortest_path_length(to_networkx(g, False), int(g.id_of(s)))
    ref = np.full(g.num_vertices, -1)
    ref[list(layers)] = list(layers.values())
    np.testing.assert_array_equal(hg.bfs(g, s, **use(config, monkeypatch)).values, ref)


# --- connected components ----------------------------------------------------------------

def same_partition(a, b):
    pairs = np.unique(np.stack([a, b]), axis=1).shape[1]
    return pairs == len(np.unique(a)) == len(np.unique(b))


@pytest.mark.parametrize("name", GRAPHS + ["PGPgiantcompo.graph", "MIT8.edgelist"])
def test_cc_equals_scipy(name):
    g = load(name)
    count, ref = csgraph.connected_components(g.to_scipy(), directed=True, connection="weak")
    r = hg.connected_components(g)
    assert len(np.unique(r.values)) == count
    assert same_partition(r.values, ref)
    # each component is named by its smallest vertex id
    assert np.all(r.values <= np.arange(g.num_vertices))
    assert np.all(r.values[r.values] == r.values)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_cc_every_engine_mode(config, monkeypatch):
    g = hg.generate.erdos_renyi(4000, m=3000, seed=9)  # many small components
    _, ref = csgraph.connected_components(g.to_scipy(), directed=True, connection="weak")
    assert same_partition(hg.connected_components(g, **use(config, monkeypatch)).values, ref)


# --- nn, heat, circuit ------------------------------------------------------------------

def in_matrix(g):
    """M[v, u] = w_uv (1 when unweighted): row v holds the in-edges of v."""
    return g.to_scipy().T.tocsr().astype(np.float64)


@pytest.mark.parametrize("name", ["astro-ph.graph", "rmat"])
def test_nn_equals_matrix_iteration(name):
    g = load(name)
    M = in_matrix(g)
    bias = np.linspace(-2, 0, g.num_vertices)
    a = np.full(g.num_vertices, 0.5)
    for _ in range(6):
        a = 1 / (1 + np.exp(-(M @ a + bias)))
    r = hg.nn(g, iterations=6, bias=bias)
    np.testing.assert_allclose(r.values, a, rtol=1e-5)


@pytest.mark.parametrize("config", [{}, {"cpu_mode": "notify-pull"}, {"partitions": 5},
                                    {"cpu_mode": "notify-pull", "sparse_edges": 0}])
def test_heat_equals_matrix_iteration(config, monkeypatch):
    g = real("power.graph")
    M = in_matrix(g)
    sources = [1, 100]  # METIS labels are 1-based
    held = g.id_of(sources)
    t = np.zeros(g.num_vertices)
    t[held] = 1
    scale = 1 / (1 + np.asarray(M.sum(axis=1)).ravel())
    for _ in range(10):
        new = (t + M @ t) * scale
        new[held] = 1
        t = new
    r = hg.heat(g, sources, **use(config, monkeypatch))
    np.testing.assert_allclose(r.values, t, rtol=1e-5, atol=1e-7)
    assert r.values.min() >= 0 and r.values.max() <= 1


def test_circuit_reaches_the_laplacian_solution():
    g = hg.generate.grid(8, 9, seed=3)
    held = {0: 1.0, g.num_vertices - 1: 0.0}
    L = csgraph.laplacian(g.to_scipy().astype(np.float64)).tocsr()
    free = np.setdiff1d(np.arange(g.num_vertices), list(held))
    fixed = np.array(list(held))
    volts = np.array(list(held.values()))
    rhs = -L[free][:, fixed] @ volts
    ref = np.zeros(g.num_vertices)
    ref[fixed] = volts
    ref[free] = spla.spsolve(L[free][:, free].tocsc(), rhs)
    r = hg.circuit(g, held, iterations=20000)
    assert r.converged
    np.testing.assert_allclose(r.values, ref, atol=1e-9)


def test_circuit_fixed_iterations_equal_jacobi():
    g = generated("er")
    M = in_matrix(g)
    cond = np.asarray(M.sum(axis=1)).ravel()
    held = {g.label_of(0): 2.0, g.label_of(1): -1.0}
    v = np.zeros(g.num_vertices)
    v[[0, 1]] = [2.0, -1.0]
    for _ in range(10):
        new = np.where(cond > 0, (M @ v) / np.where(cond > 0, cond, 1), v)
        new[[0, 1]] = [2.0, -1.0]
        v = new
    np.testing.assert_allclose(hg.circuit(g, held).values, v, rtol=1e-10, atol=1e-12)


def test_weighted_pagerank_after_an_unweighted_one_reads_the_weights():
    # the compiled program is kept per process: an unweighted run must not make a later
    # weighted run of the same class ignore its weights
    g = hg.generate.rmat(9, seed=2, weights=(1.0, 9.0))
    hg.pagerank(g, weighted=False, devices="cpu")
    got = hg.pagerank(g, devices="cpu", tol=1e-10, max_iterations=500)
    G = nx.DiGraph()
    G.add_nodes_from(range(g.num_vertices))
    src = np.repeat(np.arange(g.num_vertices), np.diff(g.out_indptr))
    for u, v, w in zip(src.tolist(), g.out_indices.tolist(), g.out_weights().tolist()):
        G.add_edge(u, v, weight=w)
    expected = nx.pagerank(G, tol=1e-12, max_iter=1000)
    np.testing.assert_allclose([got[v] for v in range(g.num_vertices)],
                               [expected[v] for v in range(g.num_vertices)], atol=1e-8)
