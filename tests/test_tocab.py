"""GraphCage's cache blocking of the GPU pull (kernels/gpu/tocab.py), without a GPU.

The host side (the segments of random graphs and partitions, their destination lists,
partial offsets and the reduction's lists) is checked against the edges it came from,
and a NumPy run of the whole blocked computation (segments, reduction) against the
unblocked pull from the CSC. The kernels are compiled as C++ (g++, one thread a block)
and run beside the shard kernel compiled the same way: min programs give its values
bit for bit, PageRank within float rounding; with nvcc, they compile for sm_90.
"""

import math
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import hetgraph as hg
from hetgraph import tuning
from hetgraph.kernels.gpu.layout import page_layout, range_cuts
from hetgraph.kernels.gpu.source import kernel_source
from hetgraph.kernels.gpu.tocab import (KernelChoice, Segments, page_segments,
                                        range_count, segment_table, tile_table,
                                        tocab_ranges, tocab_source)
from hetgraph.program import ProgramSpec
from test_gpu_subgraph import EMULATION, _array
from conftest import examples

GXX = shutil.which("g++")
NVCC = shutil.which("nvcc")


# --- the host side ----------------------------------------------------------------------------

def _graph(n, m, seed, weighted=True):
    rng = np.random.default_rng(seed)
    # (a few hubs, so that some shards hold many edges and others none)
    dst = np.where(rng.random(m) < 0.3, rng.integers(0, max(n // 8, 1), m),
                   rng.integers(0, n, m))
    weight = rng.uniform(0.5, 2.0, m) if weighted else None
    return hg.from_arrays(rng.integers(0, n, m), dst, weight, num_vertices=n)


def _layout(g, part):
    """Every page's source-ordered layout (page_layout on the host), one after the
    other: (src, offsets, weight, the segments' parts)."""
    arrays, parts = [], []
    for p in range(part.num_pages):
        src, offsets, weight, _ = page_layout(np, g, part, p, g.weighted)
        e0, _ = part.page_edges(p)
        s0, s1 = int(part.page_shard[p]), int(part.page_shard[p + 1])
        arrays.append((src, offsets, weight))
        bounds = g.in_indptr[part.shard_start[s0:s1 + 1]].astype(np.int64) - e0
        parts.append((s0, e0, src, offsets, bounds))
    src, offsets, weight = (np.concatenate(a) if a[0] is not None else None
                            for a in zip(*arrays))
    return src, offsets, weight, parts


def _segments(g, part, ranges):
    src, offsets, weight, pages = _layout(g, part)
    cuts = range_cuts(g.num_vertices, ranges)
    parts = [(s0, e0, page_segments(np, s, o, bounds, cuts))
             for s0, e0, s, o, bounds in pages]
    return src, offsets, weight, segment_table(np, parts, part.num_shards)


def _shard_of_edges(g, part):
    """The shard of every edge (in the layout, which keeps each shard's edges)."""
    bounds = g.in_indptr[part.shard_start]
    return np.searchsorted(bounds[1:], np.arange(g.num_arcs), side="right")


graphs = st.tuples(st.integers(1, 70), st.integers(0, 400), st.integers(0, 2**16),
                   st.integers(1, 9), st.integers(8, 400), st.integers(1, 12))


@examples(120, suppress_health_check=[HealthCheck.too_slow])
@given(graphs)
def test_segments_hold_every_edge_once_with_their_destinations(case):
    n, m, seed, shard_vertices, page_bytes, ranges = case
    g = _graph(n, m, seed)
    part = g.partition(page_bytes=page_bytes, shard_vertices=shard_vertices,
                       max_shard_edges=None)
    src, offsets, _, seg = _segments(g, part, ranges)
    assert isinstance(seg, Segments)
    count = len(seg.shard)
    # every edge in exactly one segment
    covered = np.zeros(g.num_arcs, np.int64)
    for e0, e1 in seg.edges:
        assert e0 < e1  # only segments that hold edges
        covered[e0:e1] += 1
    assert (covered == 1).all()
    shard_of = _shard_of_edges(g, part)
    cuts = range_cuts(n, ranges)
    source_range = np.searchsorted(cuts[1:], src, side="right")
    last = (-1, -1)
    for k in range(count):
        e0, e1 = seg.edges[k]
        s = int(seg.shard[k])
        assert (shard_of[e0:e1] == s).all()
        (r,) = set(source_range[e0:e1].tolist())  # one source range
        assert (r, s) > last  # launch order: by range, then shard
        last = (r, s)
        # the compact destinations: those of its edges, each once, in the shard
        local = seg.local[seg.dst[k]:seg.dst[k + 1]]
        assert local.tolist() == sorted(set(offsets[e0:e1].tolist()))
        assert (local < part.shard_start[s + 1] - part.shard_start[s]).all()
    # partial offsets contiguous from 0, one value a destination of a segment
    assert seg.dst[0] == 0 and seg.dst[-1] == len(seg.local) and (np.diff(seg.dst) > 0).all()
    assert seg.local.dtype == np.uint16 and seg.shard.dtype == np.int32
    # the reduction's lists: each shard's segments, in range order
    assert seg.by_shard[0] == 0 and seg.by_shard[-1] == count
    assert sorted(seg.order.tolist()) == list(range(count))
    for s in range(part.num_shards):
        mine = seg.order[seg.by_shard[s]:seg.by_shard[s + 1]]
        assert (seg.shard[mine] == s).all()
        assert set(mine.tolist()) == set(np.flatnonzero(seg.shard == s).tolist())
        assert (np.diff(source_range[seg.edges[mine, 0]]) > 0).all()
    assert seg.source_range.tolist() == source_range[seg.edges[:, 0]].tolist()


@examples(80, suppress_health_check=[HealthCheck.too_slow])
@given(graphs, st.integers(1, 3000))
def test_tiles_pack_segments_of_one_range_into_a_block(case, tile_edges):
    """Each block's segments: consecutive, of one source range, their replica slots
    side by side within the shared memory; a block ends only where the range changes,
    the next segment's slots would not fit or its edges reached the bound; a segment's
    replicas by eq. 2 for its own edges and destinations, at most its shard's."""
    n, m, seed, shard_vertices, page_bytes, ranges = case
    g = _graph(n, m, seed)
    part = g.partition(page_bytes=page_bytes, shard_vertices=shard_vertices,
                       max_shard_edges=None)
    *_, seg = _segments(g, part, ranges)
    shard_log_r = np.log2(part.replication).astype(np.int64)
    slots = int((np.diff(part.shard_start) << shard_log_r).max()) if part.num_shards else 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "TOCAB_TILE_EDGES", tile_edges)
        tiles = tile_table(np, seg, part.shard_start, shard_log_r, slots)
    count = len(seg.shard)
    assert tiles.first[0] == 0 and tiles.first[-1] == count
    assert (np.diff(tiles.first) > 0).all() or count == 0
    edges = seg.edges[:, 1] - seg.edges[:, 0]
    for k in range(count):
        touched = int(seg.dst[k + 1] - seg.dst[k])
        exact = min(max(math.ceil(math.log2(edges[k] / touched) - 0.5), 0),
                    int(shard_log_r[seg.shard[k]]))
        assert tiles.log_r[k] == exact
    need = np.diff(part.shard_start)[seg.shard] << tiles.log_r.astype(np.int64)
    for t in range(len(tiles.first) - 1):
        g0, g1 = tiles.first[t], tiles.first[t + 1]
        assert len(set(seg.source_range[g0:g1].tolist())) == 1
        assert tiles.slot[g0:g1].tolist() == np.concatenate(([0], np.cumsum(
            need[g0:g1])[:-1])).tolist()
        assert need[g0:g1].sum() <= slots
        assert edges[g0:g1 - 1].sum() < tile_edges  # (the last one may pass the bound)
        if g1 < count:  # it ended for a reason
            assert (seg.source_range[g1] != seg.source_range[g0]
                    or need[g0:g1 + 1].sum() > slots or edges[g0:g1].sum() >= tile_edges)


MONOIDS = {"add": (np.add, 0.0, lambda x, w: x * w),
           "min": (np.minimum, np.inf, lambda x, w: x + w)}


def _blocked(g, part, ranges, values, reduce):
    """The reduced gathers of every vertex, computed as the two kernels compute them:
    each segment into its partial values, then each shard's segments in range order."""
    combine, identity, gather = MONOIDS[reduce]
    src, offsets, weight, seg = _segments(g, part, ranges)
    partial = np.full(len(seg.local), np.nan)
    for k in range(len(seg.shard)):
        s, (e0, e1) = int(seg.shard[k]), seg.edges[k]
        slots = np.full(int(part.shard_start[s + 1] - part.shard_start[s]), np.nan)
        local = seg.local[seg.dst[k]:seg.dst[k + 1]]
        slots[local] = identity  # only the touched destinations are reset
        combine.at(slots, offsets[e0:e1], gather(values[src[e0:e1]], weight[e0:e1]))
        partial[seg.dst[k]:seg.dst[k + 1]] = slots[local]
    acc = np.full(g.num_vertices, identity)
    for s in range(part.num_shards):
        v0 = part.shard_start[s]
        for k in seg.order[seg.by_shard[s]:seg.by_shard[s + 1]]:
            d0, d1 = seg.dst[k], seg.dst[k + 1]
            acc[v0 + seg.local[d0:d1]] = combine(acc[v0 + seg.local[d0:d1]], partial[d0:d1])
    return acc


def _unblocked(g, values, reduce):
    combine, identity, gather = MONOIDS[reduce]
    acc = np.full(g.num_vertices, identity)
    dst = np.repeat(np.arange(g.num_vertices), np.diff(g.in_indptr))
    combine.at(acc, dst, gather(values[g.in_indices], g.in_weights.astype(np.float64)))
    return acc


@examples(80, suppress_health_check=[HealthCheck.too_slow])
@given(graphs, st.sampled_from(sorted(MONOIDS)))
def test_blocked_computation_equals_the_unblocked_pull(case, reduce):
    n, m, seed, shard_vertices, page_bytes, ranges = case
    g = _graph(n, m, seed)
    part = g.partition(page_bytes=page_bytes, shard_vertices=shard_vertices,
                       max_shard_edges=None)
    values = np.random.default_rng(seed).uniform(0, 10, n)
    got, want = _blocked(g, part, ranges, values, reduce), _unblocked(g, values, reduce)
    if reduce == "min":
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_segments_of_a_graph_without_edges():
    g = hg.from_arrays(np.array([], np.int64), np.array([], np.int64), num_vertices=5)
    part = g.partition(shard_vertices=2, max_shard_edges=None)
    *_, seg = _segments(g, part, 3)
    assert len(seg.shard) == 0 and seg.dst.tolist() == [0] and len(seg.local) == 0
    assert seg.by_shard.tolist() == [0] * (part.num_shards + 1)
    assert segment_table(np, [], 4).by_shard.tolist() == [0] * 5


def test_range_count_and_the_option(monkeypatch):
    mib = 1 << 20
    monkeypatch.setattr(tuning, "TOCAB_L2_SHARE", 0.5)
    assert range_count(1000, 4, 40 * mib, 0.5) == 1
    assert range_count(100 * mib, 4, 40 * mib, 0.5) == 20  # 400 MiB in 20 MiB ranges
    assert range_count(100 * mib, 4, 40 * mib, 0.25) == 40
    # automatic: values that fit the L2 keep the shard kernel
    assert tocab_ranges(None, 10 * mib, 4, 40 * mib) == (1, False)
    assert tocab_ranges(None, 11 * mib, 4, 40 * mib) == (3, False)  # 44 MiB: ceil(44/20)
    assert tocab_ranges(False, 100 * mib, 4, 40 * mib) == (1, False)
    assert tocab_ranges(True, 100 * mib, 4, 40 * mib) == (20, True)
    assert tocab_ranges(0.125, 100 * mib, 4, 40 * mib) == (80, True)
    assert tocab_ranges(True, 1000, 4, 40 * mib) == (2, True)  # forced: 2 at least
    assert tocab_ranges(True, 1, 4, 40 * mib) == (1, True)


def test_kernel_choice_alternates_then_keeps_the_faster():
    choice = KernelChoice(2)
    order = [choice.next() for _ in range(5)]
    assert order == [False, True, False, True, False]
    for blocked, seconds in ((False, 5.0), (True, 9.0), (False, 4.0)):
        choice.observe(blocked, seconds)
        assert choice.decided is None
    choice.observe(True, 3.9)  # fastest passes: 4.0 against 3.9
    assert choice.decided is True and choice.next() is True
    choice.observe(False, 1.0)  # decided: later passes change nothing
    assert choice.decided is True and choice.seconds[False] == [5.0, 4.0]
    slower = KernelChoice(1)
    slower.observe(True, 2.0)
    slower.observe(False, 2.0)
    assert slower.decided is False  # a tie keeps the shard kernel
    assert KernelChoice(3, decided=False).next() is False


# --- the kernels' source, compiled ---------------------------------------------------------

def _programs():
    from test_gpu_translation import builtin_programs

    return builtin_programs()


@pytest.mark.parametrize("sync", [True, False])
def test_tocab_source_for_every_builtin_program(sync):
    for program in _programs():
        spec = ProgramSpec(program)
        aux = np.float32 if program.dtype != np.float64 else np.float64
        source = tocab_source(spec, aux, np.int32, np.uint32, weighted=True, sync=sync)
        assert source.count("__global__") == 2
        assert all(f"{name}(" in source for name in ("tocab_segments", "tocab_reduce"))
        assert "hg_apply(old, acc" in source and "atomicAdd(&counters[0]" in source


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_tocab_kernels_compile_for_sm90(index, tmp_path):
    from test_gpu_translation import compile_for_sm90

    for program in _programs()[:4]:  # PageRank (both dtypes), SSSP, BFS
        spec = ProgramSpec(program)
        source = tocab_source(spec, np.float32, index, np.uint32, weighted=True, sync=True)
        compile_for_sm90(source, tmp_path)


# --- the kernels run on the CPU (g++, one thread a block) ----------------------------------

# the barriers and shared memory of a block of one thread: every barrier is passed, the
# block's shared values are the thread's own, its dynamic shared memory a global array
BLOCKS = r"""
#define __syncthreads()
#define __shared__
#define __align__(n)
#define __ldcs(p) (*(p))
static unsigned char hg_shared[1 << 20];
template <class T> static T __shfl_up_sync(unsigned, T v, int) { return v; }
"""


def _values(spec, values):
    from hetgraph.kernels.transpile import c_type, literal

    return c_type(spec.dtype), [literal(v, spec.dtype) for v in values]


def _emulated(program, g, part, ranges, values, blocked, tmp_path):
    """New values, flags and counters of one sync pull of ``program`` from ``values``:
    by TOCAB's kernels (``blocked``) or by the shard kernel, each compiled with g++."""
    from hetgraph.kernels.transpile import c_type

    spec = ProgramSpec(program)
    weighted = bool(spec.needs_weights)
    src, offsets, weight, seg = _segments(g, part, ranges)
    n = g.num_vertices
    value_t, shown = _values(spec, values)
    degree = g.out_degree().astype(np.uint32)
    log_r = np.log2(part.replication).astype(np.uint8)
    slots = int((np.diff(part.shard_start) << log_r.astype(np.int64)).max())
    tiles = tile_table(np, seg, part.shard_start, log_r, slots)
    _, _, aux = spec.initial_state(g)
    aux = np.zeros(1, np.float32) if aux is None else np.asarray(aux)
    aux_t = c_type(aux.dtype)

    def ints(a):
        return [str(int(x)) for x in np.asarray(a).ravel()]

    body = [_array("src", "unsigned int", ints(src)),
            _array("dst_offset", "unsigned short", ints(offsets)),
            _array("weight", "float", [repr(float(w)) + "f" for w in weight]),
            _array("shard_start", "long long", ints(part.shard_start)),
            _array("shard_log_r", "unsigned char", ints(log_r)),
            _array("shard_edge", "long long", ints(np.stack(
                [g.in_indptr[part.shard_start[:-1]], g.in_indptr[part.shard_start[1:]]], 1))),
            _array("seg_shard", "int", ints(seg.shard)),
            _array("seg_log_r", "unsigned char", ints(tiles.log_r)),
            _array("seg_slot", "int", ints(tiles.slot)),
            _array("tile_first", "long long", ints(tiles.first)),
            _array("seg_edges", "long long", ints(seg.edges)),
            _array("seg_dst", "long long", ints(seg.dst)),
            _array("dst_local", "unsigned short", ints(seg.local)),
            _array("by_shard", "long long", ints(seg.by_shard)),
            _array("order", "int", ints(seg.order)),
            _array("values", value_t, shown), f"static {value_t} new_values[{n}];\n",
            f"static {value_t} partial[{max(len(seg.local), 1)}];\n",
            f"static unsigned char flags[{n}];\n",
            _array("aux", aux_t, [repr(float(a)) for a in aux]),
            _array("out_degree", "unsigned int", ints(degree)),
            "static double constant_at[1] = {0.0};\n",
            "static unsigned long long counters[3], go[1] = {1};\n", "int main() {\n"]
    aux_per_vertex = int(aux.size > 1)
    if blocked:
        edges = "src, dst_offset, weight, shard_start, seg_shard, seg_log_r, seg_slot"
        rest = "seg_edges, seg_dst, dst_local, partial, values, go"
        count = len(tiles.first) - 1
        body.append(f"  hg_grid({count}, 1, [] {{ tocab_segments({edges}, tile_first, "
                    f"{rest}); }});\n"
                    f"  hg_grid({part.num_shards}, 1, [] {{ tocab_reduce(shard_start, "
                    f"by_shard, order, seg_dst, dst_local, partial, values, new_values, "
                    f"flags, aux, {aux_per_vertex}, constant_at, out_degree, counters, "
                    f"go); }});\n")
        source = tocab_source(spec, aux.dtype, g.index_dtype, np.uint32, weighted=weighted,
                              sync=True)
    else:
        body.append(f"  hg_grid({part.num_shards}, 1, [] {{ shard_pass(src, dst_offset, "
                    f"weight, shard_start, shard_edge, shard_log_r, 1, 0, 1, 1, 1, "
                    f"partial, 0, 0, values, new_values, flags, aux, {aux_per_vertex}, "
                    f"constant_at, out_degree, counters, go); }});\n")
        source = kernel_source(spec, aux.dtype, g.index_dtype, np.uint32, weighted=weighted,
                               sync=True)
    fmt = "%.17g" if spec.dtype.kind == "f" else "%lld"
    cast = "(double)" if spec.dtype.kind == "f" else "(long long)"
    body.append(f'  for (int v = 0; v < {n}; ++v) printf("{fmt} %d\\n", {cast}new_values[v], '
                f'flags[v]);\n  printf("%llu %llu\\n", counters[0], counters[1]);\n'
                f"  return 0;\n}}\n")
    return _run(EMULATION + BLOCKS + source + "".join(body), n, spec.dtype, tmp_path)


def _run(source, n, dtype, tmp_path):
    from test_gpu_translation import run_cpp

    words = run_cpp(source, tmp_path)
    assert len(words) == 2 * n + 2
    values = np.array([float(w) for w in words[:2 * n:2]]).astype(dtype)
    return values, np.array([int(w) for w in words[1:2 * n:2]]), tuple(
        int(w) for w in words[2 * n:])


def _kernel_programs():
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.algorithms.cc import MinLabel
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.algorithms.sssp import ShortestPaths

    return {"sssp": ShortestPaths(0), "bfs": BreadthFirst(0), "cc": MinLabel(),
            "pagerank": PageRank(dtype=np.float32)}


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.parametrize("name", ["sssp", "bfs", "cc", "pagerank"])
@pytest.mark.parametrize("ranges, replication", [(1, None), (3, None), (5, 4), (40, 2)])
def test_emulated_tocab_pass_equals_the_shard_kernel(name, ranges, replication, tmp_path):
    program = _kernel_programs()[name]
    g = _graph(90, 700, seed=ranges, weighted=True)
    part = g.partition(page_bytes=900, shard_vertices=16, max_shard_edges=None,
                       replication=replication)
    spec = ProgramSpec(program)
    rng = np.random.default_rng(ranges)
    if name == "pagerank":
        values = rng.uniform(0, 1e-2, g.num_vertices)
    else:  # some vertices reached, some not
        values, _, _ = spec.initial_state(g)
        values = values.astype(np.float64)
        reached = rng.random(g.num_vertices) < 0.5
        values[reached] = rng.integers(0, 20, int(reached.sum()))
    values = values.astype(spec.dtype)
    blocked = _emulated(program, g, part, ranges, values, True, tmp_path)
    shard = _emulated(program, g, part, ranges, values, False, tmp_path)
    assert blocked[2] == shard[2]  # the counts of activated vertices and out-degrees
    assert np.array_equal(blocked[1], shard[1])
    if name == "pagerank":
        np.testing.assert_allclose(blocked[0], shard[0], rtol=2e-6)
    else:
        assert np.array_equal(blocked[0], shard[0])
        assert blocked[2][0] > 0  # (the pass changed something)


def test_device_segments_glue_pages_as_the_engine_lays_them_out(monkeypatch):
    """device_segments over a layout's resident arrays (NumPy standing in for CuPy)
    gives the segments of the pages' own tables, its destination lists moved in
    chunks as in one piece."""
    from types import SimpleNamespace

    from hetgraph.kernels.gpu.layout import PagePlan
    from hetgraph.kernels.gpu.tocab import device_segments

    g = _graph(300, 3000, seed=5)
    part = g.partition(page_bytes=2000, shard_vertices=8, max_shard_edges=None)
    src, offsets, weight, want = _segments(g, part, 7)
    pages = SimpleNamespace(partition=part, plan=PagePlan(part, 10, 1 << 30, 1),
                            resident=(src, offsets, weight))
    assert part.num_pages > 3 and pages.plan.resident == part.num_pages
    monkeypatch.setattr(tuning, "TOCAB_BUILD_CHUNK", 37)
    got = device_segments(np, g, pages, range_cuts(g.num_vertices, 7))
    assert len(got.local) > 10 * 37
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
