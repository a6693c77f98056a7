"""Personalized PageRank, Katz, eigenvector centrality and HITS (hg.*) against
NetworkX's own implementations, and the pagerank kernel shared across weightings."""

import types

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.centrality import Eigenvector, Katz
from hetgraph.algorithms.hits import bipartite_double, Hits
from hetgraph.errors import GraphError
from hetgraph.program import ProgramSpec
from test_state_on_device import states  # noqa: F401  (the VertexStates runs make)

nx = pytest.importorskip("networkx")

QUIET = {"progress": False}


def to_networkx(graph, weighted=False):
    nx_graph = nx.DiGraph() if graph.directed else nx.Graph()
    labels = graph.label_of(np.arange(graph.num_vertices)).tolist()
    nx_graph.add_nodes_from(labels)
    src, dst, weight = graph.edges()
    for i, (u, v) in enumerate(zip(src.tolist(), dst.tolist())):
        nx_graph.add_edge(labels[u], labels[v],
                          **({"weight": float(weight[i])} if weighted else {}))
    return nx_graph


def by_label(result, values=None):
    return dict(zip(result.labels.tolist(), (result.values if values is None
                                              else values).tolist()))


def assert_close(ours, theirs, tol, rel=0.0):
    assert set(ours) == set(theirs)
    assert max(abs(ours[k] - theirs[k]) - rel * abs(theirs[k]) for k in theirs) <= tol


@pytest.fixture(scope="module")
def graphs():
    """wiki-vote (directed, dangling vertices), a weighted directed random graph, and an
    undirected one."""
    weighted = hg.from_arrays(*np.random.default_rng(3).integers(0, 300, (2, 2000)),
                              weight=np.random.default_rng(4).integers(1, 9, 2000),
                              num_vertices=300)
    undirected = hg.from_arrays(*np.random.default_rng(5).integers(0, 200, (2, 800)),
                                directed=False, num_vertices=200)
    return hg.datasets.load("wiki-vote"), weighted, undirected


def test_personalized_pagerank_equals_networkx(graphs):
    for graph in graphs:
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        personalization = {nodes[0]: 1.0, nodes[7]: 3.0, nodes[-1]: 0.5}
        nstart = {n: 1 + i % 5 for i, n in enumerate(nodes)}
        for kwargs in ({"personalization": personalization},
                       {"personalization": personalization, "nstart": nstart,
                        "dangling": personalization},
                       {"nstart": nstart}):
            theirs = nx.pagerank(reference, tol=1e-10, **kwargs)
            ours = hg.pagerank(graph, tol=1e-10, **kwargs, **QUIET)
            assert ours.converged  # (its transition weights are float32)
            assert_close(by_label(ours), theirs, 1e-12, rel=1e-6)


def test_personalization_as_an_array_and_its_errors(graphs):
    graph = graphs[0]
    vector = np.zeros(graph.num_vertices)
    vector[graph.id_of(30)] = 2.0
    ours = hg.pagerank(graph, personalization=vector, **QUIET).values
    assert np.allclose(ours, hg.pagerank(graph, personalization={30: 1}, **QUIET).values)
    with pytest.raises(GraphError, match="nonzero sum"):
        hg.pagerank(graph, personalization={30: 0.0}, **QUIET)
    with pytest.raises(GraphError, match="shape"):
        hg.pagerank(graph, personalization=[1.0, 2.0], **QUIET)
    with pytest.raises(GraphError, match="not in the graph"):
        hg.pagerank(graph, personalization={-5: 1.0}, **QUIET)
    with pytest.raises(GraphError, match="nonzero sum"):
        hg.pagerank(graph, dangling={28: 0.0}, **QUIET)


def test_dangling_weights_of_their_own_equal_networkx(graphs):
    """Dangling rank along q, teleport along p != q (the teleport vertex's run), on
    wiki-vote, a weighted graph whose vertices 250-299 have no out-edge and an
    undirected one with isolated vertices."""
    rng = np.random.default_rng(6)
    weighted = hg.from_arrays(rng.integers(0, 250, 2000), rng.integers(0, 300, 2000),
                              weight=rng.integers(1, 9, 2000), num_vertices=300)
    undirected = hg.from_arrays(*rng.integers(0, 200, (2, 600)), directed=False,
                                num_vertices=230)
    for graph in (graphs[0], weighted, undirected):
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        assert (graph.out_degree() == 0).any()  # (dangling vertices whose rank spreads)
        personalization = {nodes[0]: 1.0, nodes[7]: 3.0, nodes[-1]: 0.5}
        dangling = {nodes[3]: 2.0, nodes[11]: 1.0, nodes[-2]: 0.25}
        nstart = {n: 1 + i % 5 for i, n in enumerate(nodes)}
        for kwargs in ({"dangling": dangling},
                       {"dangling": dangling, "personalization": personalization},
                       {"dangling": dangling, "personalization": personalization,
                        "nstart": nstart, "alpha": 0.6}):
            theirs = nx.pagerank(reference, tol=1e-10, **kwargs)
            alpha = kwargs.pop("alpha", 0.85)
            ours = hg.pagerank(graph, alpha, tol=1e-10, **kwargs, **QUIET)
            assert ours.converged and len(ours.values) == graph.num_vertices
            assert ours.graph is graph
            assert_close(by_label(ours), theirs, 1e-12, rel=1e-6)
            assert abs(ours.values.sum() - 1) < 1e-6  # (float32 transition weights)


def test_dangling_weights_by_hand():
    """0 -> 1 -> 2, teleport to 0, vertex 2's rank to 1: x0 = 1 - d, x1 = d (x0 + x2),
    x2 = d x1, so with d = 0.75 (exact in float32): (7, 12, 9) / 28."""
    graph = hg.from_arrays([0, 1], [1, 2])
    result = hg.pagerank(graph, 0.75, 500, personalization={0: 1.0}, dangling={1: 5.0},
                         tol=1e-15, **QUIET)
    assert result.values == pytest.approx([7 / 28, 12 / 28, 9 / 28], abs=1e-14)
    # T's run stops where NetworkX's does: the same iterates, the same L1 test
    for tol in (1e-2, 1e-4):
        limited = hg.pagerank(graph, 0.75, personalization={0: 1.0}, dangling={1: 5.0},
                              tol=tol, **QUIET)
        theirs = nx.pagerank(to_networkx(graph), 0.75, personalization={0: 1.0},
                             dangling={1: 5.0}, tol=tol)
        assert max(abs(v - x) for v, x in zip(theirs.values(), (7 / 28, 12 / 28, 9 / 28))) \
            > 1e3 * 1e-12  # (stopped before the fixed point)
        assert_close(by_label(limited), theirs, 1e-12)


def test_the_teleport_graph_adds_one_vertex_and_its_edges(graphs):
    from conftest import assert_csr_matches_csc
    from hetgraph.algorithms.pagerank import teleport_graph, transition_graph

    graph = graphs[1]
    n = graph.num_vertices
    transitions, _ = transition_graph(graph, 0.85)
    p = np.zeros(n)
    p[[0, 5, 6, n - 1]] = [0.25, 0.25, 0.125, 0.375]
    augmented = teleport_graph(transitions, p)
    assert augmented is teleport_graph(transitions, p.copy())  # kept for its p
    assert augmented.num_vertices == n + 1 and augmented.directed
    assert augmented.num_arcs == transitions.num_arcs + 5
    assert_csr_matches_csc(augmented)
    src, dst, w = augmented.edges()
    from_t = src == n
    assert sorted(dst[from_t].tolist()) == [0, 5, 6, n - 1, n]
    assert dict(zip(dst[from_t].tolist(), w[from_t].tolist())) == \
        {0: 0.25, 5: 0.25, 6: 0.125, n - 1: 0.375, n: 1.0}
    theirs = transitions.edges()
    assert sorted(zip(*(a.tolist() for a in theirs))) == \
        sorted(zip(*(a[~from_t].tolist() for a in (src, dst, w))))
    for v in range(n + 1):  # each CSC run sorted by source
        run = augmented.in_indices[augmented.in_indptr[v]:augmented.in_indptr[v + 1]]
        assert (np.diff(run) >= 0).all()


def test_pagerank_weightings_share_no_wrong_kernel(graphs):
    """weighted=False then True in one process: each gives NetworkX's answer (a compiled
    kernel is shared by every PageRank instance)."""
    graph = graphs[1]
    reference = to_networkx(graph, weighted=True)
    for weighted in (False, True, False):
        theirs = nx.pagerank(reference, weight="weight" if weighted else None, tol=1e-10)
        ours = hg.pagerank(graph, weighted=weighted, tol=1e-10, **QUIET)
        assert_close(by_label(ours), theirs, 1e-9)


def test_katz_equals_networkx(graphs):
    for graph in graphs:
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        beta = {n: 1 + i % 3 for i, n in enumerate(nodes)}
        for kwargs, weighted in (({}, False), ({"alpha": 0.02, "beta": beta}, False),
                                 ({"alpha": 0.01, "normalized": False}, True),
                                 ({"nstart": dict.fromkeys(nodes, 1.0)}, True)):
            theirs = nx.katz_centrality(reference, weight="weight" if weighted else None,
                                        **{**{"alpha": 0.005}, **kwargs})
            ours = hg.katz_centrality(graph, weighted=weighted, **QUIET,
                                      **{**{"alpha": 0.005}, **kwargs})
            assert ours.converged
            assert_close(by_label(ours), theirs, 1e-12)


def test_eigenvector_equals_networkx(graphs):
    for graph in graphs:
        reference = to_networkx(graph, weighted=graph.weighted)
        nodes = list(reference)
        for kwargs, weighted in (({}, False), ({}, True),
                                 ({"nstart": {n: 1 + i % 4 for i, n in enumerate(nodes)}},
                                  False)):
            theirs = nx.eigenvector_centrality(reference, max_iter=1000, **kwargs,
                                               weight="weight" if weighted else None)
            ours = hg.eigenvector_centrality(graph, max_iterations=1000, weighted=weighted,
                                             **kwargs, **QUIET)
            assert ours.converged
            assert_close(by_label(ours), theirs, 1e-12)


def test_eigenvector_stops_where_networkx_does():
    """NetworkX's first iterate is nstart scaled by its sum: a graph whose first step
    already meets tol stops after it, as in NetworkX."""
    graph = hg.from_arrays([0], [0], num_vertices=1)
    result = hg.eigenvector_centrality(graph, **QUIET)
    assert result.converged and result.iterations == 1 and result.values.tolist() == [1.0]
    assert nx.eigenvector_centrality(to_networkx(graph)) == {0: 1.0}
    path = hg.from_arrays([0, 1, 2], [1, 2, 3], directed=False)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.eigenvector_centrality(to_networkx(path), max_iter=3)
    assert not hg.eigenvector_centrality(path, max_iterations=3, **QUIET).converged


def test_hits_equals_networkx(graphs):
    for graph in graphs[:2]:
        reference = to_networkx(graph, weighted=graph.weighted)
        hubs, authorities = nx.hits(reference, tol=1e-12, max_iter=10_000)
        ours = hg.hits(graph, max_iterations=10_000, tol=1e-12, **QUIET)
        assert ours.converged
        assert_close(by_label(ours), authorities, 1e-8)
        assert_close(by_label(ours, ours.hubs), hubs, 1e-8)


def test_hits_by_hand():
    """0 -> 1, 0 -> 2, 1 -> 2: A^T A = [[0, 0, 0], [0, 1, 1], [0, 1, 2]], whose top
    eigenvector is (0, 1, golden ratio)."""
    result = hg.hits(hg.from_arrays([0, 0, 1], [1, 2, 2]), **QUIET)
    phi = (1 + 5 ** 0.5) / 2
    assert result.values == pytest.approx([0, 1 / (1 + phi), phi / (1 + phi)], abs=1e-9)
    assert result.hubs == pytest.approx([phi / (1 + phi), 1 / (1 + phi), 0], abs=1e-9)


# the state on a device (issue 57): hooks of the array module xp, CUDA translation --------

class Marked(np.ndarray):
    """A NumPy array made by :func:`marking_module`: what a device module would make."""


def marking_module():
    """NumPy under another name whose arrays are :class:`Marked`, as CuPy's are its own."""
    def marked(name):
        return lambda *args, **kwargs: getattr(np, name)(*args, **kwargs).view(Marked)

    names = ("full", "zeros", "ones", "asarray", "array", "ascontiguousarray", "divide",
             "where", "sqrt")
    return types.SimpleNamespace(float64=np.float64, **{n: marked(n) for n in names})


def power_programs(graph):
    """(program, the graph it runs on) of personalized PageRank (both forms), Katz,
    eigenvector centrality and HITS on ``graph``."""
    from hetgraph.algorithms.pagerank import _program

    n = graph.num_vertices
    p = np.arange(1.0, n + 1) / (n * (n + 1) / 2)
    ppr = _program(graph, 0.85, 1e-6, np.float64, True, p, p[::-1].copy(), None)
    general = _program(graph, 0.85, 1e-6, np.float64, True, p, None, p[::-1].copy())
    katz = Katz(0.1, np.full(n, 1.0), 1e-6, np.ones(n))
    return [(ppr, ppr.graph), (general, general.graph), (katz, graph),
            (Eigenvector(np.full(n, 1.0 / n)), graph),
            (Hits(1e-8, np.full(n, 1.0 / n)), bipartite_double(graph))]


def test_power_iterations_build_their_state_with_the_array_module(graphs):
    """Every hook that makes or finishes the state takes xp and builds with it, so that
    a run on one GPU keeps its state there (ProgramSpec.any_device)."""
    graph = graphs[1]
    for program, runs_on in power_programs(graph):
        spec = ProgramSpec(program)
        assert spec.any_device, program.name
        values, active = program.init(runs_on, xp=marking_module())
        assert isinstance(values, Marked) and active is None, program.name
        aux = program.aux(runs_on, xp=marking_module())
        assert aux is None or isinstance(aux, Marked), program.name
        host, _, host_aux = spec.initial_state(runs_on)
        np.testing.assert_array_equal(values, host)
        if aux is not None:
            np.testing.assert_array_equal(aux, host_aux)
        final = program.finalize(runs_on, values.copy(), xp=marking_module())
        assert isinstance(final, Marked), program.name


def test_power_iterations_translate_to_cuda(tmp_path):
    """Each program's shard kernel translates (and compiles for sm_90 with nvcc)."""
    from hetgraph.kernels.gpu.source import kernel_source
    from test_gpu_translation import compile_for_sm90, NVCC

    for program, _ in power_programs(hg.generate.grid(4, 4)):
        spec = ProgramSpec(program)
        aux = np.float64 if program.aux(None) is not None else np.float32
        source = kernel_source(spec, aux, np.int32, np.uint32, weighted=True, sync=True,
                               warp_combine=False)
        assert "hg_user_apply" in source and "constant" in source
        if NVCC:
            compile_for_sm90(source, tmp_path)


def gpu_and_networkx_runs(graph):
    """{name: (hetgraph call taking run options, NetworkX's answers, tolerance, relative
    tolerance)} of every power iteration on ``graph``."""
    reference = to_networkx(graph, weighted=graph.weighted)
    nodes = list(reference)
    weight = "weight" if graph.weighted else None
    p, q = {nodes[0]: 1.0, nodes[7]: 3.0}, {nodes[3]: 2.0, nodes[11]: 1.0}
    runs = {
        "personalized": (lambda **o: hg.pagerank(graph, tol=1e-10, personalization=p, **o),
                         [nx.pagerank(reference, tol=1e-10, personalization=p)], 1e-9, 1e-6),
        "dangling": (lambda **o: hg.pagerank(graph, tol=1e-10, personalization=p,
                                             dangling=q, **o),
                     [nx.pagerank(reference, tol=1e-10, personalization=p, dangling=q)],
                     1e-9, 1e-6),
        "katz": (lambda **o: hg.katz_centrality(graph, 0.005, weighted=graph.weighted, **o),
                 [nx.katz_centrality(reference, 0.005, weight=weight)], 1e-9, 0.0),
        "eigenvector": (lambda **o: hg.eigenvector_centrality(
            graph, max_iterations=1000, weighted=graph.weighted, **o),
            [nx.eigenvector_centrality(reference, max_iter=1000, weight=weight)], 1e-9, 0.0),
    }
    if graph.directed:  # (an undirected graph's double may have two top vectors)
        hubs, authorities = nx.hits(reference, tol=1e-12, max_iter=10_000)
        runs["hits"] = (lambda **o: hg.hits(graph, max_iterations=10_000, tol=1e-12, **o),
                        [authorities, hubs], 1e-8, 0.0)
    return runs


def answers(result):
    """The values of ``result`` by label, and its hubs for HITS."""
    found = [by_label(result)]
    if hasattr(result, "hubs"):
        found.append(by_label(result, result.hubs))
    return found


@pytest.mark.gpu
def test_power_iterations_on_one_gpu_keep_their_state_there_and_answer_as_the_cpu(
        graphs, states):
    """devices="gpu" on one GPU: the state made on the device, the answers NetworkX's and
    the CPU's (to the float sums' order: the iteration counts may differ by one)."""
    with hg.Cluster(gpus=1):
        for graph in graphs:
            for name, (call, theirs, tol, rel) in gpu_and_networkx_runs(graph).items():
                states.clear()
                on_gpu = call(devices="gpu", **QUIET)
                assert states and not states[0].on_host, name
                assert on_gpu.converged and isinstance(on_gpu.values, np.ndarray), name
                on_cpu = call(devices="cpu", **QUIET)
                assert states[-1].on_host, name
                for ours, cpu, expected in zip(answers(on_gpu), answers(on_cpu), theirs):
                    assert_close(ours, expected, tol, rel)
                    assert_close(ours, cpu, tol, rel)
