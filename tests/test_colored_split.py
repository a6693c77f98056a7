"""A colored GPU launch's jobs (engines/gpu_colored.split_jobs), checked without a GPU: a
hub's shard (one vertex with more in-edges than its color's shard bound) is cut into
parts of at most the bound, each a block of the launch, and the parts' sums, combined
in part order as the shard kernel's split variant does, are the shard's. The oracle
for the sums is the graph's own CSC pull in NumPy."""

import numpy as np
import pytest

import hetgraph as hg
from conftest import data_path
from hetgraph import coloring as hc
from hetgraph import tuning
from hetgraph.engines.colored import color_shards
from hetgraph.engines.gpu_colored import split_jobs
from hetgraph.order import color_major
from hetgraph.partition import shard_edge_bound


def colored(graph, monkeypatch, target=64, least=16):
    """(graph in color order, its partition cut at the colors under small shard bounds,
    the runs of each color's shards)."""
    monkeypatch.setattr(tuning, "TARGET_SHARDS", target)
    monkeypatch.setattr(tuning, "MIN_SHARD_EDGES", least)
    g = color_major(graph)
    coloring = hc.coloring_of(g)
    part = g.partition(cuts=coloring.cuts)
    return g, part, color_shards(part.shard_start, coloring)


def part_edges(t0, span, part, parts):
    """The kernel's edges of part ``part`` of ``parts`` of a shard's [t0, t0 + span)."""
    return t0 + span * part // parts, t0 + span * (part + 1) // parts


def test_split_jobs_cut_each_hub_under_its_colors_bound(monkeypatch):
    """Every job of a run's launch reads at most the run's bound of in-edges, unless its
    shard is held whole; a shard's parts cover its in-edges once, in order; shards
    under the bound are one job each, in shard order; each split shard's scratch
    holds its parts times its vertices."""
    g, part, runs = colored(hg.read(data_path("wiki-Vote.txt")), monkeypatch)
    starts, ptr = part.shard_start, g.in_indptr
    edges = np.diff(ptr[starts])
    held = int(np.argmax(edges))  # (the largest hub, held whole: a swept vertex's)
    whole = np.zeros(part.num_shards, bool)
    whole[held] = True
    jobs, at, base = split_jobs(starts, ptr, runs, whole)
    assert np.count_nonzero(jobs[:, 1] == 0) == part.num_shards
    assert len(at) == len(runs) + 1 and at[-1] == len(jobs)
    cut = 0
    for r, (s0, s1) in enumerate(runs):
        mine = jobs[at[r]:at[r + 1]]
        bound = shard_edge_bound(int(ptr[starts[s1]] - ptr[starts[s0]]))
        assert np.array_equal(np.unique(mine[:, 0]), np.arange(s1 - s0))
        assert np.all(np.diff(mine[:, 0]) >= 0)  # (shard order)
        for s in range(s0, s1):
            rows = mine[mine[:, 0] == s - s0]
            t0, span = int(ptr[starts[s]]), int(ptr[starts[s + 1]] - ptr[starts[s]])
            parts = int(rows[0, 2])
            assert np.array_equal(rows[:, 1], np.arange(parts))
            assert np.all(rows[:, 2] == parts)
            spans = [part_edges(t0, span, int(p), parts) for p in rows[:, 1]]
            assert spans[0][0] == t0 and spans[-1][1] == t0 + span
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
            if s == held:
                assert span > 4 * bound
            if whole[s] or span <= bound:
                assert parts == 1 and rows[0, 3] == -1
            else:
                assert all(e1 - e0 <= bound for e0, e1 in spans)
                k = int(rows[0, 3])
                assert np.all(rows[:, 3] == k) and k == cut
                assert base[k + 1] - base[k] == parts * (starts[s + 1] - starts[s])
                cut += 1
    assert cut >= 10 and len(base) == cut + 1  # (wiki-Vote's hubs under these bounds)


def emulate(graph, part, runs, jobs, at, base, x, reduce):
    """The values a split launch sums for every vertex (the kernel's jobs in NumPy):
    each job reduces its part's in-edges of its shard's vertices, a cut shard's parts
    go to its scratch and are combined in part order."""
    ufunc = {"add": np.add, "min": np.minimum}[reduce]
    identity = {"add": 0.0, "min": np.inf}[reduce]
    starts, ptr, src = part.shard_start, graph.in_indptr, graph.in_indices
    dst = np.repeat(np.arange(graph.num_vertices), np.diff(ptr))
    out = np.full(graph.num_vertices, identity)
    scratch = np.full(int(base[-1]), np.nan)
    for r, (s0, _) in enumerate(runs):
        for shard, p, parts, k in jobs[at[r]:at[r + 1]]:
            s = s0 + int(shard)
            v0, nv = int(starts[s]), int(starts[s + 1] - starts[s])
            span = int(ptr[v0 + nv] - ptr[v0])
            e0, e1 = part_edges(int(ptr[v0]), span, int(p), int(parts))
            sums = np.full(nv, identity)
            ufunc.at(sums, dst[e0:e1] - v0, x[src[e0:e1]])
            if parts == 1:
                out[v0:v0 + nv] = sums
                continue
            at_part = int(base[k]) + int(p) * nv
            scratch[at_part:at_part + nv] = sums
            if p == parts - 1:  # (the last to finish, whichever: the combine's order)
                cut = scratch[int(base[k]):int(base[k + 1])].reshape(int(parts), nv)
                out[v0:v0 + nv] = ufunc.reduce(cut, axis=0)
    return out


@pytest.mark.parametrize("reduce", ["add", "min"])
def test_split_jobs_sum_every_vertexs_in_edges(monkeypatch, reduce):
    """The split launch's sums (emulated) are the CSC pull's: exactly for min, to
    rounding for a float sum (the parts' order differs from one block's)."""
    rmat = hg.generate.rmat(10, seed=3)
    g, part, runs = colored(rmat, monkeypatch)
    jobs, at, base = split_jobs(part.shard_start, g.in_indptr, runs)
    assert len(base) > 1  # (some hub cut)
    x = np.random.default_rng(5).random(g.num_vertices)
    ptr, src = g.in_indptr, g.in_indices
    got = emulate(g, part, runs, jobs, at, base, x, reduce)
    if reduce == "min":
        want = np.full(g.num_vertices, np.inf)
        has = np.diff(ptr) > 0
        want[has] = np.minimum.reduceat(x[src], ptr[:-1][has])
        np.testing.assert_array_equal(got, want)
    else:
        want = np.add.reduceat(np.append(x[src], 0.0), ptr[:-1]) * (np.diff(ptr) > 0)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_no_shard_is_cut_on_a_graph_without_hubs():
    """A grid's shards are under their colors' bounds: the launches stay a block a
    shard (no scratch)."""
    g = color_major(hg.generate.grid(40, 40))
    coloring = hc.coloring_of(g)
    part = g.partition(cuts=coloring.cuts)
    runs = color_shards(part.shard_start, coloring)
    jobs, at, base = split_jobs(part.shard_start, g.in_indptr, runs)
    assert len(base) == 1 and np.all(jobs[:, 2] == 1) and np.all(jobs[:, 3] == -1)
    assert np.array_equal(np.diff(at), [b - a for a, b in runs])
