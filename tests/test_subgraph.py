"""The active subgraph's host side (kernels/gpu/subgraph.py), without a GPU: the
streamed out-edges of every vertex, the active list, the offsets, the chunks, the
parallel gather and the bytes, against brute force; and whole iterations made of a
resident pull and a push over the gathered chunks, against SciPy's shortest paths, in
sync and in async-subgraph mode (fewer of them)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

import hetgraph as hg
from hetgraph.kernels.gpu.subgraph import (OFFSET_DTYPE, active_vertices, chunk_bounds,
                                           chunk_bytes, gather_chunk, subgraph_offsets,
                                           tail_starts, with_targets)


def _graph(kind, weighted=True):
    weights = (0.5, 4.0) if weighted else None
    return hg.generate.rmat(10, seed=3, weights=weights) if kind == "rmat" else \
        hg.generate.grid(20, 30, weights=weights)


def _tail_edges(g, u, first):
    """u's out-edges into [first, N), brute force: (targets, weights)."""
    e0, e1 = g.out_indptr[u], g.out_indptr[u + 1]
    keep = g.out_indices[e0:e1] >= first
    weights = g.out_weights()[e0:e1][keep] if g.weighted else None
    return g.out_indices[e0:e1][keep], weights


@pytest.mark.parametrize("kind", ["rmat", "grid"])
def test_tail_starts_are_the_first_streamed_out_edges(kind):
    g = _graph(kind, weighted=False)
    for first in (0, 1, g.num_vertices // 3, g.num_vertices - 1, g.num_vertices):
        starts = tail_starts(g.out_indptr, g.out_indices, first)
        for u in range(g.num_vertices):
            targets, _ = _tail_edges(g, u, first)
            assert g.out_indptr[u + 1] - starts[u] == len(targets)
            assert list(g.out_indices[starts[u]:g.out_indptr[u + 1]]) == list(targets)


def test_active_vertices_and_offsets():
    flags = np.array([1, 0, 1, 1, 0, 1, 1], np.uint8)
    tail = np.array([3, 5, 0, 2, 7, 1, 4], np.uint32)
    active = active_vertices(np, flags, tail)
    assert active.tolist() == [0, 3, 5, 6]  # vertex 2 has no streamed out-edge
    offsets = subgraph_offsets(np, tail[active])
    assert offsets.dtype == np.int64 and offsets.tolist() == [0, 3, 5, 6, 10]
    assert subgraph_offsets(np, tail[:0]).tolist() == [0]


def _check_chunks(offsets, chunks, max_edges, max_vertices):
    """The chunks cover [0, total) in order, within their limits, each naming the
    vertices whose edges it holds."""
    position = 0
    for a0, a1, e0, e1 in chunks:
        assert e0 == position and e0 < e1 <= e0 + max_edges and 0 < a1 - a0 <= max_vertices
        holders = [i for i in range(len(offsets) - 1)
                   if offsets[i] < e1 and offsets[i + 1] > e0]
        assert holders == list(range(a0, a1))
        position = e1
    assert position == offsets[-1]


@pytest.mark.parametrize("max_edges, max_vertices", [(1, 1), (3, 2), (7, 100), (1000, 3),
                                                     (10**6, 10**6)])
def test_chunks_cover_the_edges_within_limits(max_edges, max_vertices):
    degrees = np.array([1, 9, 2, 1, 1, 30, 4, 1, 1, 1, 2])  # a hub of 30 spans chunks
    offsets = subgraph_offsets(np, degrees)
    chunks = chunk_bounds(offsets, max_edges, max_vertices)
    _check_chunks(offsets, chunks, max_edges, max_vertices)
    if max_edges >= offsets[-1] and max_vertices >= len(degrees):
        assert chunks == [(0, len(degrees), 0, int(offsets[-1]))]
    assert chunk_bounds(subgraph_offsets(np, degrees[:0]), 4, 4) == []
    with pytest.raises(ValueError):
        chunk_bounds(offsets, 0, 4)


def _gathered(g, first, active, max_edges, max_vertices, parts):
    """The chunks of ``active``'s streamed out-edges, gathered: [(chunk, targets,
    weights, offsets)]."""
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    offsets = subgraph_offsets(np, (g.out_indptr[1:] - starts)[active])
    weights_in = g.out_weights() if g.weighted else np.empty(0, np.float32)
    out = []
    for chunk in chunk_bounds(offsets, max_edges, max_vertices):
        a0, a1, e0, e1 = chunk
        targets = np.full(max_edges, -1, np.int32)
        weights = np.full(max_edges, np.nan, np.float32)
        chunk_offsets = np.zeros(max_vertices + 1, OFFSET_DTYPE)
        gather_chunk(starts, g.out_indices, weights_in, active.astype(np.uint32), offsets,
                     a0, a1, e0, e1, targets, weights if g.weighted else weights_in,
                     chunk_offsets, parts)
        out.append((chunk, targets[:e1 - e0], weights[:e1 - e0],
                    chunk_offsets[:a1 - a0 + 1]))
    return out, offsets


@pytest.mark.parametrize("kind", ["rmat", "grid"])
@pytest.mark.parametrize("limits", [(10**6, 10**6), (64, 1000), (5, 3), (1000, 1)])
@pytest.mark.parametrize("parts", [1, 7])
def test_gathered_chunks_are_the_active_streamed_edges(kind, limits, parts):
    g = _graph(kind)
    rng = np.random.default_rng(1)
    first = g.num_vertices // 4
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    flags = (rng.random(g.num_vertices) < 0.3).astype(np.uint8)
    flags[np.argmax(np.diff(g.out_indptr))] = 1  # the hub
    active = active_vertices(np, flags, g.out_indptr[1:] - starts)
    chunks, offsets = _gathered(g, first, active, *limits, parts)
    _check_chunks(offsets, [c[0] for c in chunks], *limits)
    # each active vertex's edges, from the chunks that hold them, in order
    seen = {int(u): ([], []) for u in active}
    for (a0, a1, e0, e1), targets, weights, chunk_offsets in chunks:
        assert chunk_offsets[0] == 0 and chunk_offsets[-1] == e1 - e0
        for i in range(a0, a1):
            s, t = chunk_offsets[i - a0], chunk_offsets[i - a0 + 1]
            seen[int(active[i])][0].extend(targets[s:t].tolist())
            seen[int(active[i])][1].extend(weights[s:t].tolist())
    for u, (targets, weights) in seen.items():
        want_targets, want_weights = _tail_edges(g, u, first)
        assert targets == want_targets.tolist()
        assert weights == want_weights.tolist()


@pytest.mark.parametrize("weighted", [False, True])
def test_bytes_follow_the_formula(weighted):
    """h2d = sum over the active vertices of deg * (index + weight bytes) + offsets
    (one a vertex and one a chunk), for one chunk and for several."""
    g = _graph("rmat", weighted=weighted)
    first = g.num_vertices // 2
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    degree = g.out_indptr[1:] - starts
    flags = np.zeros(g.num_vertices, np.uint8)
    flags[::7] = 1
    active = active_vertices(np, flags, degree)
    edge_bytes = 4 + (4 if weighted else 0)
    formula = int(degree[active].sum()) * edge_bytes + (len(active) + 1) * 4
    offsets = subgraph_offsets(np, degree[active])
    assert chunk_bytes(chunk_bounds(offsets, 10**9, 10**9), edge_bytes) == formula
    chunks = chunk_bounds(offsets, 50, 10)
    assert len(chunks) > 3
    # vertices split across chunks count once in each
    shared = sum(a1 - a0 for a0, a1, _, _ in chunks) - len(active)
    assert chunk_bytes(chunks, edge_bytes) == formula + (len(chunks) - 1 + shared) * 4


def _pull(g, values, v0, v1):
    """min over in-edges (CSC) of values[u] + w, for the vertices [v0, v1)."""
    out = values[v0:v1].copy()
    weights = g.in_weights if g.weighted else np.ones(g.num_arcs, np.float32)
    for v in range(v0, v1):
        e0, e1 = g.in_indptr[v], g.in_indptr[v + 1]
        if e1 > e0:
            out[v - v0] = min(out[v - v0], (values[g.in_indices[e0:e1]] + weights[e0:e1]).min())
    return out


@pytest.mark.parametrize("kind", ["rmat", "grid"])
@pytest.mark.parametrize("limits", [(10**6, 10**6), (16, 4)])
def test_resident_pull_and_subgraph_push_give_shortest_paths(kind, limits):
    """Iterations as the GPU engine runs them with its last pages streamed: the resident
    vertices [0, first) pull, the active vertices push their gathered streamed
    out-edges into [first, N); the fixed point is SciPy's distances."""
    g = _graph(kind)
    n, first = g.num_vertices, g.num_vertices // 3
    source = int(np.argmax(np.diff(g.out_indptr)))
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    values = np.full(n, np.inf)
    values[source] = 0.0
    flags = np.zeros(n, np.uint8)
    flags[source] = 1
    for _ in range(n):
        if not flags.any():
            break
        new = values.copy()
        new[:first] = _pull(g, values, 0, first)
        active = active_vertices(np, flags, g.out_indptr[1:] - starts)
        chunks, _ = _gathered(g, first, active, *limits, parts=3)
        for (a0, a1, _, _), targets, weights, chunk_offsets in chunks:
            for i in range(a0, a1):
                s, t = chunk_offsets[i - a0], chunk_offsets[i - a0 + 1]
                np.minimum.at(new, targets[s:t], values[active[i]] + weights[s:t])
        flags = (new < values).astype(np.uint8)
        values = new
    src = np.repeat(np.arange(n), np.diff(g.out_indptr))
    matrix = sp.csr_matrix((g.out_weights().astype(np.float64), (src, g.out_indices)),
                           shape=(n, n))
    np.testing.assert_allclose(values, dijkstra(matrix, indices=source), rtol=1e-6)


@pytest.mark.parametrize("first", [0, 1, 150, 599, 600])
def test_the_list_takes_the_streamed_targets_that_have_streamed_edges(first):
    g = _graph("grid", weighted=False)
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    tail = (g.out_indptr[1:] - starts).astype(np.uint32)
    rng = np.random.default_rng(first)
    marks = np.zeros(g.num_vertices, np.uint8)
    for share in (0.0, 0.002, 0.05, 0.5):  # (sorted targets, then the marks' pass)
        active = np.flatnonzero((rng.random(g.num_vertices) < share) & (tail > 0))
        expected = set(active.tolist())
        for u in active:
            targets, _ = _tail_edges(g, u, first)
            expected |= {int(v) for v in targets if tail[v]}
        listed = with_targets(starts, g.out_indptr, g.out_indices, tail, active, marks)
        assert listed.dtype == np.int64 and listed.tolist() == sorted(expected)
        assert not marks.any()


def _sync_iterations(g, first, source, limits):
    """(values, iterations) of sync subgraph iterations (as in the test above)."""
    n = g.num_vertices
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    values = np.full(n, np.inf)
    values[source] = 0.0
    flags = np.zeros(n, np.uint8)
    flags[source] = 1
    for iterations in range(n + 1):
        if not flags.any():
            return values, iterations
        new = values.copy()
        new[:first] = _pull(g, values, 0, first)
        active = active_vertices(np, flags, g.out_indptr[1:] - starts)
        for (a0, a1, _, _), targets, weights, offsets in _gathered(g, first, active, *limits,
                                                                   parts=2)[0]:
            sources = np.repeat(active[a0:a1], np.diff(offsets.astype(np.int64)))
            np.minimum.at(new, targets, values[sources] + weights)
        flags = (new < values).astype(np.uint8)
        values = new
    raise AssertionError("no fixed point")


def _settle(g, first, values):
    """Pull [0, first) from the latest values until none changes; returns the pulls."""
    for pulls in range(1, len(values) + 2):
        new = _pull(g, values, 0, first)
        moved = (new < values[:first]).any()
        values[:first] = new
        if not moved:
            return pulls
    raise AssertionError("the pulls do not settle")


def _async_iterations(g, first, source, limits):
    """(values, iterations) of async-subgraph iterations as ActiveSubgraphs._run_async
    runs them, a pass at a time (each pass reads the values its launch found)."""
    n = g.num_vertices
    starts = tail_starts(g.out_indptr, g.out_indices, first)
    tail = (g.out_indptr[1:] - starts).astype(np.uint32)
    values = np.full(n, np.inf)
    values[source] = 0.0
    flags = np.zeros(n, bool)
    flags[source] = True
    for iterations in range(n + 1):
        if not flags.any():
            return values, iterations
        before = values.copy()
        _settle(g, first, values)
        start = flags | (values < before)
        listed = with_targets(starts, g.out_indptr, g.out_indices, tail,
                              active_vertices(np, start, tail), np.zeros(n, np.uint8))
        pushed = before.copy()
        chunks, offsets = _gathered(g, first, listed, *limits, parts=2)
        for (a0, a1, e0, e1), targets, weights, chunk_offsets in chunks:
            ids = listed[a0:a1]
            sources = np.repeat(ids, np.diff(chunk_offsets.astype(np.int64)))
            marked = np.ones(a1 - a0, bool)  # (the first pass: every source)
            while marked.any():
                sent = values.copy()
                pushed[ids[marked]] = sent[ids[marked]]
                pushing = np.isin(sources, ids[marked])
                np.minimum.at(values, targets[pushing],
                              sent[sources[pushing]] + weights[pushing])
                marked = values[ids] < sent[ids]
            if offsets[a0] < e0:  # cut by the chunks: pushed its parts from two values
                pushed[ids[0]] = before[ids[0]]
            if offsets[a1] > e1:
                pushed[ids[-1]] = before[ids[-1]]
        _settle(g, first, values)
        pushed[tail == 0] = values[tail == 0]
        flags = values < pushed
    raise AssertionError("no fixed point")


def _distances(g, source):
    n = g.num_vertices
    src = np.repeat(np.arange(n), np.diff(g.out_indptr))
    matrix = sp.csr_matrix((g.out_weights().astype(np.float64), (src, g.out_indices)),
                           shape=(n, n))
    return dijkstra(matrix, indices=source)


@pytest.mark.parametrize("kind", ["rmat", "grid"])
@pytest.mark.parametrize("limits", [(10**6, 10**6), (16, 4)])
def test_async_subgraph_iterations_give_shortest_paths_in_fewer(kind, limits):
    """Async-subgraph iterations (the resident pulls and each chunk's pushes until they
    settle, the list with its targets, flags where a value was not pushed) reach
    SciPy's distances in at most 0.69x the sync iterations (Subway's Fig. 10)."""
    g = _graph(kind)
    first = g.num_vertices // 3
    source = int(np.argmax(np.diff(g.out_indptr)))
    distances = _distances(g, source)
    values, sync = _sync_iterations(g, first, source, limits)
    np.testing.assert_allclose(values, distances, rtol=1e-6)
    values, iterations = _async_iterations(g, first, source, limits)
    np.testing.assert_allclose(values, distances, rtol=1e-6)
    assert iterations <= 0.69 * sync, (iterations, sync)


def test_the_cost_model_prices_a_streamed_gpu_iteration_by_its_active_edges():
    """With active subgraphs over a streamed share s of the arcs, a GPU iteration of
    notify fraction f costs (1 - s (1 - f)) of a pull below the threshold, a pull above;
    alpha follows."""
    from hetgraph import tuning
    from hetgraph.scheduler.costmodel import CostModel

    model = CostModel()
    model.observe("cpu", "pull", 1000, 1e-3, calibration=True)
    model.observe("gpu", "pull", 1000, 1e-4, calibration=True)
    pull = model.seconds("gpu", 1000)
    assert model.gpu_seconds(0.01, 1000) == pull  # no subgraphs
    before = model.alpha(0.01, 1.0, 1000)
    model.subgraph = 0.75
    assert model.gpu_seconds(0.01, 1000) == pytest.approx(pull * (1 - 0.75 * 0.99))
    assert model.gpu_seconds(tuning.SUBGRAPH_ACTIVE_EDGES, 1000) == pull
    assert model.alpha(0.01, 1.0, 1000) == pytest.approx(before / (1 - 0.75 * 0.99))


def test_subgraph_choice_follows_the_measured_seconds():
    """The threshold first; then a subgraph iteration predicted by its fastest plus a
    slope from large frontiers, against the streamed one's last seconds."""
    from hetgraph import tuning
    from hetgraph.engines.subway import SubgraphChoice

    choice = SubgraphChoice(arcs=1000, large=100, stream=0.010)
    limit = tuning.SUBGRAPH_ACTIVE_EDGES * 1000
    assert choice.wanted(limit - 1) and not choice.wanted(limit)
    choice.observe(5, 0.5, pushed=True)  # the first: it compiled the push, not measured
    assert choice.fixed is None and choice.slope is None
    choice.observe(5, 0.001, pushed=True)  # small: the fixed part, no slope yet
    choice.observe(50, 0.002, pushed=True)
    assert choice.fixed == 0.001 and choice.slope is None and choice.wanted(700)
    choice.observe(400, 0.009, pushed=True)  # 1 ms + 20 us an edge
    assert choice.slope == pytest.approx(2e-5)
    assert choice.wanted(400) and not choice.wanted(500)  # 9 ms, 11 ms against 10 ms
    choice.observe(0, 0.020, pushed=False)  # streaming measured slower
    assert choice.wanted(700)
    choice.observe(600, 0.001 + 600 * 4e-5, pushed=True)  # a slower push: the slope rises
    assert 2e-5 < choice.slope < 4e-5


def test_a_slow_push_does_not_keep_the_pages_streaming(monkeypatch):
    """A push measured slow (10x, once) makes small frontiers stream; after
    SUBGRAPH_PROBE of them one is pushed again, its time replaces the fixed part, and
    pushes resume; a try that loses backs off to twice as many."""
    from hetgraph import tuning
    from hetgraph.engines.subway import SubgraphChoice

    monkeypatch.setattr(tuning, "SUBGRAPH_PROBE", 4)
    choice = SubgraphChoice(arcs=10_000, large=100, stream=0.010)
    choice.observe(5, 0.2, pushed=True)  # (the compile)
    choice.observe(5, 0.030, pushed=True)  # slow once: 30 ms against streaming's 10
    choice.observe(1000, 0.030 + 1000 * 1e-6, pushed=True)
    ways = [choice.wanted(20) for _ in range(4)]
    assert ways == [False, False, False, True]  # streamed 3 times, then a try
    choice.observe(20, 0.001, pushed=True)  # the try: 1 ms
    assert choice.fixed == 0.001 and all(choice.wanted(20) for _ in range(5))
    choice.observe(20, 0.040, pushed=True)  # (not a try: the fastest stays the fixed part)
    assert choice.fixed == 0.001
    choice.observe(0, 0.0005, pushed=False)  # streaming got faster than any push
    ways = [choice.wanted(20) for _ in range(4)]
    assert ways == [False, False, False, True]
    choice.observe(20, 0.002, pushed=True)  # the try loses: next one after 8
    assert [choice.wanted(20) for _ in range(8)] == [False] * 7 + [True]


def test_a_due_try_waits_for_a_frontier_of_a_few_chunks(monkeypatch):
    """Once a try is due, frontiers of more than SUBGRAPH_PROBE_CHUNKS chunks' edges
    still stream (a try there would gather most of the graph on the host, whatever its
    outcome); the first frontier of at most that many is pushed, above ``large`` one
    re-measuring the slope."""
    from hetgraph import tuning
    from hetgraph.engines.subway import SubgraphChoice

    monkeypatch.setattr(tuning, "SUBGRAPH_PROBE", 2)
    monkeypatch.setattr(tuning, "SUBGRAPH_PROBE_CHUNKS", 2)
    choice = SubgraphChoice(arcs=10_000, large=100, stream=0.010)
    choice.observe(5, 0.2, pushed=True)  # (the compile)
    choice.observe(5, 0.001, pushed=True)
    choice.observe(1000, 0.001 + 1000 * 1e-4, pushed=True)  # a slow slope: 10 us an edge
    assert [choice.wanted(d) for d in (3000, 5000, 7000, 201)] == [False] * 4  # (due)
    assert choice.wanted(150) and choice.trying  # a frontier of 1.5 chunks: the try
    choice.observe(150, 0.001 + 150 * 1e-6, pushed=True)  # 1 us an edge now
    assert choice.slope == pytest.approx(1e-6) and choice.wanted(3000)


def test_page_locked_buffers_handed_back_are_reused(monkeypatch):
    from hetgraph.engines import subway

    made = []
    monkeypatch.setattr(subway, "_PINNED", {})
    monkeypatch.setattr(subway, "pinned_empty",
                        lambda size, dtype: made.append(size) or np.empty(size, dtype))
    a, b = subway._pinned(10, np.uint32), subway._pinned(10, np.uint32)
    subway._give_back([a, None])
    assert subway._pinned(10, np.uint32) is a  # handed back: no new pinning
    assert subway._pinned(10, np.float32) is not a and subway._pinned(10, np.uint32) is not b
    assert made == [10, 10, 10, 10]
