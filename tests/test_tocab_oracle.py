"""TOCAB's host-side build (kernels/gpu/tocab.py) against brute-force oracles.

Hostile graphs (hubs at a range cut, every source in one range, shards without edges,
more ranges than vertices, int64 indices, shards of 65,536
vertices, a vertex of 10^5 in-edges) are cut into segments and tiles, and every table
is checked by plain loops over the edges, written here without the module's searches:
each edge in one segment of its (shard, source range), the destination lists, the
partial offsets, the reduction's lists, the tiles' slots and edge bound. A pass of the
two kernels emulated from these tables (a block of several threads, its shared memory
holding the last tile's values) gives scipy's SpMV, and so does a PageRank pass of the
kernels' own source compiled with g++. BlockedPass itself runs with NumPy standing in
for CuPy: its launches' arguments, read back by the kernels' signatures, give scipy's
SpMV when the kernels are run from them as their text says.
"""

import ctypes
import re
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.kernels.gpu.layout import PagePlan, range_cuts, unsigned_index
from hetgraph.kernels.gpu.tocab import device_segments, tile_table
from hetgraph.partition import edge_bytes
from conftest import examples
from test_tocab import _emulated, _layout

GXX = shutil.which("g++")


# --- graphs -------------------------------------------------------------------------------

def _int64(g):
    """``g`` with int64 indices (the layout's sources then uint64)."""
    return hg.Graph(g.in_indptr, g.in_indices.astype(np.int64), g.in_weights,
                    g.out_indptr, g.out_indices.astype(np.int64))


def _hostile_edges(shape, n, m, rng, cuts):
    """(src, dst) of ``m`` edges on ``n`` vertices shaped by ``shape`` around the source
    ranges beginning at ``cuts``."""
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    if shape == "hub at a cut":  # half the edges from a range's first or last vertex
        cut = int(rng.choice(cuts[:-1]))
        hub = cut - 1 if cut > 0 and rng.random() < 0.5 else cut
        src[: m // 2] = min(hub, n - 1)
    elif shape == "one range":
        k = int(rng.integers(0, len(cuts) - 1))
        if cuts[k + 1] > cuts[k]:
            src = rng.integers(cuts[k], cuts[k + 1], m)
    elif shape == "empty shards":  # no edge into the middle third
        dst = np.where(dst < n // 3, dst, n - 1 - dst % max(n // 3, 1))
    elif shape == "hub destination":  # parallel edges into one vertex
        dst[: 2 * m // 3] = rng.integers(0, n)
    return src, dst


@st.composite
def hostile_cases(draw):
    """(graph, partition, ranges) of a hostile shape."""
    n = draw(st.one_of(st.integers(1, 12), st.integers(13, 260)))
    ranges = draw(st.integers(1, n + 3))  # (more than the vertices: empty ranges)
    shape = draw(st.sampled_from(["uniform", "hub at a cut", "one range", "empty shards",
                                  "hub destination"]))
    m = draw(st.integers(0, 500))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src, dst = _hostile_edges(shape, n, m, rng, range_cuts(n, ranges))
    weight = rng.uniform(0.5, 2.0, m) if draw(st.booleans()) else None
    g = hg.from_arrays(src, dst, weight, num_vertices=n, dedup=None)
    if draw(st.booleans()):
        g = _int64(g)
    part = g.partition(page_bytes=draw(st.integers(8, 3000)),
                       shard_vertices=draw(st.one_of(st.none(), st.integers(1, 70))),
                       replication=draw(st.sampled_from([None, None, 1, 4, 32])),
                       max_shard_edges=draw(st.sampled_from([None, 1, 7, 60])))
    return g, part, ranges


# --- the oracles ------------------------------------------------------------------------

def _shard_of_edges(g, part):
    """The shard of every in-edge (the layout keeps each shard's edges in its span)."""
    shard = []
    for s in range(part.num_shards):
        v0, v1 = int(part.shard_start[s]), int(part.shard_start[s + 1])
        shard += [s] * int(g.in_indptr[v1] - g.in_indptr[v0])
    return shard


def _check_layout(g, part, src, offsets, shard_of):
    """The input page_segments assumes: each shard's span holds the shard's in-edges
    (as (source, offset) pairs), sorted by source."""
    csc = {}
    for v in range(g.num_vertices):
        for e in range(int(g.in_indptr[v]), int(g.in_indptr[v + 1])):
            s = shard_of[e]
            csc.setdefault(s, []).append((int(g.in_indices[e]), v - int(part.shard_start[s])))
    laid = {}
    for e, s in enumerate(shard_of):
        laid.setdefault(s, []).append((int(src[e]), int(offsets[e])))
    assert {s: sorted(p) for s, p in csc.items()} == laid
    assert all([u for u, _ in p] == sorted(u for u, _ in p) for p in laid.values())


def _check_cuts(cuts, n, ranges):
    """``ranges`` ranges cover [0, n) in order, their sizes differing by one at most."""
    cuts = [int(c) for c in cuts]
    assert cuts[0] == 0 and cuts[-1] == n and cuts == sorted(cuts)
    assert len(cuts) == ranges + 1
    sizes = [b - a for a, b in zip(cuts[:-1], cuts[1:])]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n


def _oracle_segments(src, shard_of, cuts):
    """{(shard, range): the edges (positions) of its segment}, edge by edge."""
    groups = {}
    for e, (u, s) in enumerate(zip(src.tolist(), shard_of)):
        (r,) = [k for k in range(len(cuts) - 1) if cuts[k] <= u < cuts[k + 1]]
        groups.setdefault((s, r), []).append(e)
    return groups


def _check_segments(seg, groups, offsets, part):
    """``seg`` (a Segments) holds exactly ``groups``, in launch order, with their
    destination lists, partial offsets and the reduction's lists."""
    count = len(seg.shard)
    assert seg.local.dtype == np.uint16 and seg.dst.dtype == np.int64
    keys = [(int(seg.shard[k]), int(seg.source_range[k])) for k in range(count)]
    assert sorted(keys, key=lambda sr: (sr[1], sr[0])) == keys  # by range, then shard
    assert sorted(keys) == sorted(groups)  # (only segments with edges, each once)
    assert int(seg.dst[0]) == 0 and int(seg.dst[-1]) == len(seg.local)
    for k, key in enumerate(keys):
        edges = groups[key]
        assert list(range(*(int(x) for x in seg.edges[k]))) == edges
        local = seg.local[int(seg.dst[k]):int(seg.dst[k + 1])].tolist()
        assert local == sorted({int(offsets[e]) for e in edges})  # (increasing, once each)
        size = int(part.shard_start[key[0] + 1] - part.shard_start[key[0]])
        assert all(0 <= d < size for d in local)
    assert [int(x) for x in seg.by_shard] == [0] + list(np.cumsum(
        [sum(1 for s, _ in keys if s == shard) for shard in range(part.num_shards)]))
    for shard in range(part.num_shards):
        mine = sorted((r, k) for k, (s, r) in enumerate(keys) if s == shard)
        assert seg.order[seg.by_shard[shard]:seg.by_shard[shard + 1]].tolist() == \
            [k for _, k in mine]


def _eq2(edges, touched, cap):
    """Garaph's eq. 2 in integers: the least k with edges^2 <= 2 (2^k touched)^2, at most
    ``cap``."""
    k = 0
    while k < cap and edges * edges > 2 * (touched << k) ** 2:
        k += 1
    return k


def _check_tiles(tiles, seg, part, slots, tile_edges):
    """Tiles cover every segment once, in order, each of one range; a segment's
    replicas by eq. 2 (at most its shard's), its slots inside the tile's ``slots`` and
    apart from the others'; a tile's edges reach ``tile_edges`` only with its last."""
    count = len(seg.shard)
    first = [int(x) for x in tiles.first]
    assert first[0] == 0 and first[-1] == count
    assert all(a < b for a, b in zip(first[:-1], first[1:]))
    shard_r = np.log2(part.replication).astype(int)
    edges = [int(b - a) for a, b in seg.edges]
    need = []
    for k in range(count):
        s = int(seg.shard[k])
        touched = int(seg.dst[k + 1] - seg.dst[k])
        assert int(tiles.log_r[k]) == _eq2(edges[k], touched, int(shard_r[s]))
        need.append(int(part.shard_start[s + 1] - part.shard_start[s]) << int(tiles.log_r[k]))
    for g0, g1 in zip(first[:-1], first[1:]):
        assert len({int(r) for r in seg.source_range[g0:g1]}) == 1
        taken = np.zeros(slots, int)
        for g in range(g0, g1):
            taken[int(tiles.slot[g]):int(tiles.slot[g]) + need[g]] += 1
            assert 0 <= int(tiles.slot[g]) and int(tiles.slot[g]) + need[g] <= slots
        assert (taken <= 1).all()
        assert g1 - g0 == 1 or sum(edges[g0:g1 - 1]) < tile_edges


def _build(g, part, ranges, chunk=None):
    """(src, offsets, weight, Segments) of the pages laid out as on the device, their
    segments built by device_segments with NumPy standing in for CuPy."""
    src, offsets, weight, _ = _layout(g, part)
    plan = PagePlan(part, edge_bytes(g.index_dtype, g.weighted), 1 << 40, 1)
    pages = SimpleNamespace(partition=part, plan=plan, resident=(src, offsets, weight))
    with pytest.MonkeyPatch.context() as patch:
        if chunk is not None:
            patch.setattr(tuning, "TOCAB_BUILD_CHUNK", chunk)
        return src, offsets, weight, device_segments(np, g, pages,
                                                     range_cuts(g.num_vertices, ranges))


def _slots(part):
    """A block's shared-memory slots (values), as the engine sizes them."""
    return int((np.diff(part.shard_start) << np.log2(part.replication).astype(np.int64))
               .max(initial=1))


# --- the tables -------------------------------------------------------------------------

@examples(100, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_cases(), st.sampled_from([None, 1, 5]), st.integers(0, 600),
       st.integers(0, 3))
def test_tables_against_the_edges(case, chunk, tile_edges, extra_slots):
    g, part, ranges = case
    src, offsets, _, seg = _build(g, part, ranges, chunk)
    shard_of = _shard_of_edges(g, part)
    cuts = range_cuts(g.num_vertices, ranges)
    _check_cuts(cuts, g.num_vertices, ranges)
    _check_layout(g, part, src, offsets, shard_of)
    _check_segments(seg, _oracle_segments(src, shard_of, cuts), offsets, part)
    slots = _slots(part) << extra_slots
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "TOCAB_TILE_EDGES", tile_edges)
        tiles = tile_table(np, seg, part.shard_start, np.log2(part.replication), slots)
    _check_tiles(tiles, seg, part, slots, tile_edges)


def _uint16_boundary(n, shard_vertices):
    """Edges into the last vertex of a shard of ``shard_vertices`` (offset 65,535 at
    65,536) and the first, from the ends of the ranges."""
    last = min(n, shard_vertices) - 1
    src = np.array([0, n - 1, n // 2, n // 2 - 1, last, 0, n - 1])
    dst = np.array([last, last, last, 0, 0, n - 1, n - 1])
    return hg.from_arrays(src, dst, num_vertices=n, dedup=None)


@pytest.mark.parametrize("n, shard_vertices", [(65535, 65536), (65536, 65536),
                                               (65537, 65536), (65536, 32768)])
@pytest.mark.parametrize("ranges", [2, 3, 5])
def test_tables_at_the_uint16_boundary(n, shard_vertices, ranges):
    g = _uint16_boundary(n, shard_vertices)
    part = g.partition(shard_vertices=shard_vertices, max_shard_edges=None, replication=1)
    src, offsets, _, seg = _build(g, part, ranges)
    shard_of = _shard_of_edges(g, part)
    groups = _oracle_segments(src, shard_of, range_cuts(n, ranges))
    _check_segments(seg, groups, offsets, part)
    assert int(seg.local.max()) == min(n, shard_vertices) - 1
    tiles = tile_table(np, seg, part.shard_start, np.zeros(part.num_shards), _slots(part))
    _check_tiles(tiles, seg, part, _slots(part), tuning.TOCAB_TILE_EDGES)


def test_tables_of_a_vertex_of_huge_degree():
    """10^5 parallel edges into one vertex from a hub at a range cut (and a few others):
    one segment with a single destination, its replicas the shard's."""
    n, big = 64, 100_000
    rng = np.random.default_rng(3)
    src = np.r_[np.full(big, 32), rng.integers(0, n, 50)]
    dst = np.r_[np.full(big, 7), rng.integers(0, n, 50)]
    g = hg.from_arrays(src, dst, num_vertices=n, dedup=None)
    part = g.partition(shard_vertices=16, max_shard_edges=None)
    src, offsets, _, seg = _build(g, part, 2)
    _check_segments(seg, _oracle_segments(src, _shard_of_edges(g, part), range_cuts(n, 2)),
                    offsets, part)
    tiles = tile_table(np, seg, part.shard_start, np.log2(part.replication), _slots(part))
    _check_tiles(tiles, seg, part, _slots(part), tuning.TOCAB_TILE_EDGES)
    (hub,) = [k for k in range(len(seg.shard)) if seg.edges[k, 1] - seg.edges[k, 0] >= big]
    assert seg.source_range[hub] == 1 and int(tiles.log_r[hub]) == 5


@pytest.mark.parametrize("n, src, dst", [(1, [], []), (1, [0, 0, 0], [0, 0, 0]),
                                         (2, [1], [1]), (3, [0, 1, 2], [2, 2, 2])])
@pytest.mark.parametrize("ranges", [1, 2, 3, 4])
def test_tables_of_tiny_graphs(n, src, dst, ranges):
    g = hg.from_arrays(np.array(src, int), np.array(dst, int), num_vertices=n, dedup=None)
    part = g.partition(shard_vertices=1, max_shard_edges=None)
    src, offsets, _, seg = _build(g, part, ranges)
    cuts = range_cuts(n, ranges)
    _check_cuts(cuts, n, ranges)
    _check_segments(seg, _oracle_segments(src, _shard_of_edges(g, part), cuts), offsets, part)
    tiles = tile_table(np, seg, part.shard_start, np.log2(part.replication), _slots(part))
    _check_tiles(tiles, seg, part, _slots(part), tuning.TOCAB_TILE_EDGES)


# --- passes from the tables --------------------------------------------------------------

def _emulated_pass(seg, tiles, src, offsets, weight, part, slots, x, threads, blocks):
    """The reduced sums sum x[u] w_uv of every vertex v as TOCAB's kernels compute them
    from the tables: ``blocks`` blocks of ``threads`` threads, block b taking tiles b,
    b + blocks, ...; a thread's edges e0 + t, e0 + t + threads, ... of a segment into
    replica t mod R; shared memory kept from tile to tile (garbage at first)."""
    count_tiles = len(tiles.first) - 1
    partial = np.full(len(seg.local), np.nan)
    garbage = np.random.default_rng(0)
    for b in range(blocks):
        shared = garbage.uniform(-1e9, 1e9, slots)
        for t in range(b, count_tiles, blocks):
            segments = range(int(tiles.first[t]), int(tiles.first[t + 1]))
            for g in segments:  # only the touched destinations' replicas reset
                r, at = 1 << int(tiles.log_r[g]), int(tiles.slot[g])
                for d in seg.local[seg.dst[g]:seg.dst[g + 1]].tolist():
                    shared[at + d * r:at + (d + 1) * r] = 0.0
            for g in segments:
                r, at = 1 << int(tiles.log_r[g]), int(tiles.slot[g])
                e0, e1 = (int(e) for e in seg.edges[g])
                for e in range(e0, e1):
                    lane = (e - e0) % threads % r
                    shared[at + int(offsets[e]) * r + lane] += x[src[e]] * weight[e]
            for g in segments:
                r, at = 1 << int(tiles.log_r[g]), int(tiles.slot[g])
                for i, d in enumerate(seg.local[seg.dst[g]:seg.dst[g + 1]].tolist()):
                    partial[seg.dst[g] + i] = shared[at + d * r:at + (d + 1) * r].sum()
    acc = np.zeros(len(x))
    for s in range(part.num_shards):
        v0 = int(part.shard_start[s])
        for k in seg.order[seg.by_shard[s]:seg.by_shard[s + 1]]:
            d0, d1 = int(seg.dst[k]), int(seg.dst[k + 1])
            acc[v0 + seg.local[d0:d1].astype(np.int64)] += partial[d0:d1]
    return acc


def _spmv(g, x):
    n = g.num_vertices
    dst = np.repeat(np.arange(n), np.diff(g.in_indptr))
    weight = np.ones(g.num_arcs) if g.in_weights is None else g.in_weights.astype(np.float64)
    return sp.csr_matrix((weight, (dst, g.in_indices.astype(np.int64))), shape=(n, n)) @ x


@examples(60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_cases(), st.sampled_from([1, 3, 32, 256]), st.integers(1, 4),
       st.integers(0, 300))
def test_pagerank_passes_from_the_tables_equal_scipy(case, threads, blocks, tile_edges):
    """Three PageRank iterations, each sum by the emulated kernels, against the same
    iterations by scipy's SpMV."""
    from hetgraph.algorithms.pagerank import PageRank

    g, part, ranges = case
    src, offsets, weight, seg = _build(g, part, ranges)
    weight = np.ones(len(src)) if weight is None else weight.astype(np.float64)
    slots = _slots(part)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "TOCAB_TILE_EDGES", tile_edges)
        tiles = tile_table(np, seg, part.shard_start, np.log2(part.replication), slots)
    program = PageRank(weighted=g.weighted)
    blocked = want = program.init(g)[0].astype(np.float64)
    aux = np.asarray(program.aux(g), np.float64)
    for _ in range(3):
        acc = _emulated_pass(seg, tiles, src.astype(np.int64), offsets, weight, part, slots,
                             blocked, threads, blocks)
        blocked = (program.iteration_constant(g, blocked) + acc) * aux
        want = (program.iteration_constant(g, want) + _spmv(g, want)) * aux
        np.testing.assert_allclose(blocked, want, rtol=1e-12, atol=1e-15)


def _hub_at_a_cut(n, ranges, seed):
    """Half the edges from the first vertex of range 1, a third of the vertices (the
    middle) without in-edges."""
    rng = np.random.default_rng(seed)
    m = 8 * n
    src = np.where(rng.random(m) < 0.5, int(range_cuts(n, ranges)[1]), rng.integers(0, n, m))
    dst = rng.integers(0, n, m)
    dst = np.where((dst >= n // 3) & (dst < 2 * n // 3), dst // 3, dst)
    return hg.from_arrays(src, dst, rng.uniform(0.5, 2.0, m), num_vertices=n, dedup=None)


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.parametrize("ranges, replication", [(3, None), (7, 8), (2, None), (120, None)])
def test_compiled_pagerank_pass_equals_scipy(ranges, replication, tmp_path):
    """The kernels' own source (g++, one thread a block) on a graph with a hub at a range
    cut and shards without in-edges: a float32 pass within float32 rounding of scipy's
    float64 SpMV."""
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.program import ProgramSpec

    program = PageRank(dtype=np.float32)
    g = _hub_at_a_cut(90, ranges, seed=ranges)
    part = g.partition(page_bytes=700, shard_vertices=8, max_shard_edges=None,
                       replication=replication)
    values = np.random.default_rng(ranges).uniform(0, 1e-2, g.num_vertices).astype(np.float32)
    got, flags, _ = _emulated(program, g, part, ranges, values, True, tmp_path)
    _, _, aux = ProgramSpec(program).initial_state(g)
    want = _spmv(g, values.astype(np.float64)) * np.asarray(aux, np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-12)
    assert flags.all()


# --- BlockedPass's launches, CuPy stood in for by NumPy ------------------------------------

class _Device(np.ndarray):
    """A NumPy array with CuPy's ``data.ptr`` (its host address) and ``get``; every one
    made (views, copies, results) kept in ``made``, so that a launch's pointers lead
    back to them."""

    made: list = []

    def __array_finalize__(self, obj):
        _Device.made.append(self)

    @property
    def data(self):
        return SimpleNamespace(ptr=self.ctypes.data)

    def get(self):
        return np.array(self)


class _StandIn:
    """CuPy for BlockedPass: NumPy's functions giving _Device arrays, sorts stable as
    CuPy's, launches recorded."""

    ndarray = _Device

    def __init__(self):
        _Device.made = []
        self.launches = []
        self.cuda = SimpleNamespace(
            driver=SimpleNamespace(launchKernel=lambda *call: self.launches.append(call)))

    @staticmethod
    def device(array):
        return np.asarray(array).view(_Device)

    def __getattr__(self, name):
        function = getattr(np, name)

        def on_device(*args, **options):
            if name == "argsort":
                options["kind"] = "stable"
            out = function(*args, **options)
            return self.device(out) if isinstance(out, np.ndarray) else out
        return on_device

    @staticmethod
    def array_at(pointer, dtype):
        """The array made that begins at ``pointer``, whose type must be ``dtype``."""
        (array, *_) = found = [a for a in _Device.made if a.ndim and a.ctypes.data == pointer]
        assert {a.dtype for a in found} == {np.dtype(dtype)}, (found, dtype)
        return np.asarray(array).reshape(-1)


def _parameters(source, kernel):
    """(C type, pointer?, name) of each parameter of ``kernel`` in the CUDA ``source``."""
    head = re.search(rf"__global__ void {kernel}\((.*?)\)\s*\{{", source, re.S).group(1)
    out = []
    for parameter in head.split(","):
        words = parameter.replace("HG_VALUES", "const value_t*").replace("*", " * ").split()
        words = [w for w in words if w not in ("const", "__restrict__")]
        out.append((" ".join(w for w in words[:-1] if w != "*"), "*" in words, words[-1]))
    return out


def _decoded(cp, launch, parameters, types):
    """A recorded launch's arguments by name: arrays (by the kernel's C types) or
    numbers, as many as the kernel's parameters."""
    assert len(launch._held) == len(parameters)
    values = {}
    for (ctype, pointer, name), value in zip(parameters, launch._held):
        if not pointer:  # (a number of the parameter's size)
            assert ctypes.sizeof(value) == np.dtype(types[ctype]).itemsize, name
        values[name] = cp.array_at(value.value, types[ctype]) if pointer else value.value
    return SimpleNamespace(**values)


def _run_segments(a, grid, threads, shared_bytes, itemsize):
    """``tocab_segments`` as its CUDA text runs, from its arguments ``a``: block b takes
    tile b in shared memory of ``shared_bytes`` (garbage at first); a thread's edges
    into replica threadIdx mod R."""
    garbage = np.random.default_rng(1)
    for tile in range(grid):
        shared = garbage.uniform(-1e9, 1e9, shared_bytes // itemsize)
        segments = range(int(a.tile_first[tile]), int(a.tile_first[tile + 1]))
        for g in segments:
            r, at = 1 << int(a.seg_log_r[g]), int(a.seg_slot[g])
            local = a.dst_local[a.seg_dst[g]:a.seg_dst[g + 1]].astype(np.int64)
            for d in local:
                shared[at + d * r:at + (d + 1) * r] = 0.0
        for g in segments:
            r, at = 1 << int(a.seg_log_r[g]), int(a.seg_slot[g])
            for e in range(int(a.seg_edges[2 * g]), int(a.seg_edges[2 * g + 1])):
                x = a.values[int(a.src[e])]
                lane = (e - int(a.seg_edges[2 * g])) % threads % r
                shared[at + int(a.dst_offset[e]) * r + lane] += x * a.weight[e]
        for g in segments:
            r, at = 1 << int(a.seg_log_r[g]), int(a.seg_slot[g])
            for i, d in enumerate(a.dst_local[a.seg_dst[g]:a.seg_dst[g + 1]].tolist()):
                a.partial[a.seg_dst[g] + i] = shared[at + d * r:at + (d + 1) * r].sum()


def _run_reduce(a, grid, shared_bytes, itemsize):
    """``tocab_reduce`` for PageRank from its arguments ``a``: each shard's segments'
    partial values in range order, then (constant + acc) * aux."""
    for s in range(grid):
        v0, v1 = int(a.shard_start[s]), int(a.shard_start[s + 1])
        assert v1 - v0 <= shared_bytes // itemsize
        acc = np.zeros(v1 - v0)
        for g in a.order[a.by_shard[s]:a.by_shard[s + 1]]:
            d0, d1 = int(a.seg_dst[g]), int(a.seg_dst[g + 1])
            acc[a.dst_local[d0:d1].astype(np.int64)] += a.partial[d0:d1]
        aux = a.aux[v0:v1] if a.aux_per_vertex else a.aux[0]
        a.new_values[v0:v1] = (a.constant_at[0] + acc) * aux


def _passed(cp, g, part, ranges, threads):
    """A BlockedPass of PageRank (float64) on ``g``'s pages (CuPy stood in for by
    ``cp``), its aux set by set_aux, run once: (the pass, the arrays it was given by
    name, the kernels' source)."""
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.kernels.gpu.tocab import BlockedPass, KernelChoice, tocab_source
    from hetgraph.program import ProgramSpec

    n, spec = g.num_vertices, ProgramSpec(PageRank(dtype=np.float64))
    src, offsets, weight, _ = _layout(g, part)
    slots = _slots(part)
    pages = SimpleNamespace(
        partition=part, plan=PagePlan(part, edge_bytes(g.index_dtype, True), 1 << 40, 1),
        resident=tuple(cp.device(a) for a in (src, offsets, weight)), slots=slots,
        shard_start=cp.device(part.shard_start),
        out_degree=cp.device(g.out_degree().astype(np.uint32)))
    kernels = [SimpleNamespace(kernel=SimpleNamespace(ptr=k)) for k in (1, 2)]
    blocked = BlockedPass(cp, g, pages, np.float64, cp.device(np.zeros(n, np.uint8)),
                          cp.device(np.zeros(1)), cp.device(np.zeros(1, np.float32)),
                          kernels=kernels, ranges=ranges, threads=threads,
                          shared_bytes=slots * 8, l2_bytes=1 << 20, choice=KernelChoice(3))
    given = dict(aux=cp.device(np.asarray(spec.initial_state(g)[2], np.float64)),
                 values=cp.device(np.random.default_rng(ranges).uniform(0, 1e-2, n)),
                 new_values=cp.device(np.full(n, np.nan)), constant_at=cp.device([1.25e-3]),
                 counters=cp.device(np.zeros(3, np.uint64)),
                 go=cp.device(np.ones(1, np.uint64)))
    blocked.set_aux(given["aux"])
    blocked.run(SimpleNamespace(ptr=0), *(given[k].data.ptr for k in (
        "values", "new_values", "constant_at", "counters", "go")))
    return blocked, given, tocab_source(spec, np.float64, g.index_dtype, np.uint32,
                                        weighted=True, sync=True)


def _c_types(index):
    """The NumPy type of each C type of the kernels' parameters (float64 values)."""
    return {"index_t": index, "unsigned short": np.uint16, "float": np.float32,
            "long long": np.int64, "int": np.int32, "unsigned char": np.uint8,
            "value_t": np.float64, "aux_t": np.float64, "double": np.float64,
            "degree_t": np.uint32, "unsigned long long": np.uint64}


@pytest.mark.parametrize("ranges, threads", [(3, 32), (4, 1), (9, 64), (2, 32)])
def test_blocked_pass_launches_give_scipy(monkeypatch, ranges, threads):
    """BlockedPass's launches (NumPy for CuPy): the segments, then the reduction, each
    with the arguments its CUDA signature names (of the C types it declares), run()'s
    pointers where it puts them and a block a tile; these launches, run as their
    kernels' text says, give scipy's SpMV."""
    cp = _StandIn()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(tuning, "TOCAB_TILE_EDGES", 40)
    g = _hub_at_a_cut(120, ranges, seed=ranges)
    part = g.partition(page_bytes=900, shard_vertices=8, max_shard_edges=None)
    blocked, given, source = _passed(cp, g, part, ranges, threads)
    launches = {launch._address: launch for launch in (blocked._segments, blocked._reduce)}
    names = {1: "tocab_segments", 2: "tocab_reduce"}
    assert [names[call[0]] for call in cp.launches] == ["tocab_segments", "tocab_reduce"]
    slots = _slots(part)
    for function, grid, _, _, block, _, _, shared, _, address, _ in cp.launches:
        name = names[function]
        a = _decoded(cp, launches[address], _parameters(source, name),
                     _c_types(unsigned_index(g.index_dtype)))
        assert block == threads
        for key in set(given) & set(vars(a)):
            assert getattr(a, key).ctypes.data == given[key].ctypes.data, key
        if name == "tocab_reduce":
            assert grid == part.num_shards and shared == slots * 8
            _run_reduce(a, grid, shared, 8)
            continue
        assert grid == len(blocked.tiles.first) - 1 and shared == slots * 8
        _run_segments(a, grid, threads, shared, 8)
    want = (1.25e-3 + _spmv(g, given["values"])) * given["aux"]
    np.testing.assert_allclose(given["new_values"], want, rtol=1e-12, atol=1e-15)
