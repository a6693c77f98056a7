"""GraphCage's throughput-oriented cache blocking (TOCAB, section 3.1) of the GPU pull.

The source vertices are cut into ranges whose values fit the device's L2 cache. A
*segment* is the edges of one shard from one source range (with the source-ordered
layout of :func:`.layout.page_layout`, a run of the shard's edges), and only segments
that hold edges exist. A pass launches every segment, range after range (a block a
*tile*: consecutive segments of one range whose replica slots fit its shared memory,
each segment with replicas for its own edges; the blocks running at once gather from one
or two ranges, which stay in L2): the block combines its edges' gathers in shared memory
as the shard kernel does, then stores one value for each destination a segment touches
(its compact list of shard-local uint16 ids) into ``partial``, where a range's segments
lie one after the other. A second kernel, one block a shard (GraphCage's Fig. 5), combines its segments' partial values in range order into shared memory, then
applies and activates as the shard kernel does. Answers: min/max/or/and reductions are
order-free, so equal to the shard kernel's bit for bit; sums are added in another order.

The host side (:func:`range_count`, :func:`tocab_ranges`, :func:`page_segments`,
:func:`segment_table`, :func:`tile_table`, :class:`KernelChoice`) is written for NumPy and CuPy alike; :class:`BlockedPass` is the
device side of an engine's pass.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import NamedTuple

import numba
import numpy as np

from ... import tuning
from ...program import ProgramSpec
from ..transpile import literal
from ..arrays import to_host
from .launch import PackedLaunch
from .layout import range_cuts
from .source import apply_epilogue, compile_functions, gather_loop, kernel_head

log = logging.getLogger(__name__)

KERNELS = ("tocab_segments", "tocab_reduce")


def range_count(num_vertices, value_bytes, l2_bytes, share):
    """Source ranges (at least 1) for ``num_vertices`` values of ``value_bytes`` each on
    a device of ``l2_bytes`` of L2 cache, so that one range's values are at most
    ``share`` of the L2."""
    values = int(num_vertices) * int(value_bytes)
    return max(1, math.ceil(values / (share * l2_bytes)))


def tocab_ranges(option, num_vertices, value_bytes, l2_bytes):
    """(source ranges, forced) for the engine option ``tocab``: None (automatic: when
    the values do not fit the L2, ranges of ``tuning.TOCAB_L2_SHARE`` of it, TOCAB
    then chosen by measured passes), True (forced, that share), a number (forced, that
    share) or False (off); ranges 1: no blocking. Forced blocking has 2 ranges at
    least (a graph with more than one vertex)."""
    if option is False:
        return 1, False
    share = tuning.TOCAB_L2_SHARE if option is None or option is True else float(option)
    ranges = range_count(num_vertices, value_bytes, l2_bytes, share)
    if option is None:
        fits = int(num_vertices) * int(value_bytes) <= l2_bytes
        return (1 if fits else max(ranges, 2)), False
    return min(max(ranges, 2), max(int(num_vertices), 1)), True


def page_segments(xp, src, offsets, shard_bounds, cuts):
    """The segments of one page's source-ordered edges (``src``, destination
    ``offsets`` from their shard's first vertex, as :func:`.layout.page_layout` lays
    them out), with the array module ``xp``: (local shard, source range, first edge,
    end edge, destinations touched, their offsets (uint16), concatenated), the
    segments ordered by shard then range, each one's destinations increasing.
    ``shard_bounds``: the first edge of each of the page's shards and its end (int64,
    from the page's first edge); ``cuts``: :func:`.layout.range_cuts`. Edge numbers
    are the page's."""
    ranges = len(cuts) - 1
    edge = xp.arange(len(src))
    shard = xp.searchsorted(xp.asarray(shard_bounds[1:]), edge, side="right")
    inner = xp.asarray(np.asarray(cuts[1:-1]).astype(src.dtype))
    source_range = xp.searchsorted(inner, src, side="right")
    # sorted by source within each shard: a segment's edges follow one another
    key = shard * ranges + source_range
    starts = xp.flatnonzero(xp.concatenate((xp.ones(min(len(key), 1), bool),
                                            key[1:] != key[:-1])))
    segment = key[starts]
    ends = xp.concatenate((starts[1:], xp.asarray([len(key)], starts.dtype)))[:len(starts)]
    pairs = xp.unique((key << 16) | offsets.astype(np.int64))  # (segment, destination)
    first = xp.searchsorted(pairs >> 16, segment, side="left")
    counts = xp.diff(xp.concatenate((first, xp.asarray([len(pairs)], first.dtype))))
    return (segment // ranges, segment % ranges, starts, ends, counts,
            (pairs & 0xFFFF).astype(np.uint16))


class Segments(NamedTuple):
    """The segments of a pass in launch order (by source range, then shard):
    ``shard`` (int32), ``source_range`` (int32), ``edges`` (int64, [first, end) a row),
    ``dst`` (int64, one more than the segments: where each one's destinations, and
    partial values, begin), ``local`` (uint16: the destinations' offsets in their
    shard), and for the reduction ``by_shard`` (int64, one more than the shards: where
    each shard's segments begin in ``order``) and ``order`` (int32: the launch numbers
    of each shard's segments, in range order)."""

    shard: object
    source_range: object
    edges: object
    dst: object
    local: object
    by_shard: object
    order: object


class Tiles(NamedTuple):
    """The blocks of TOCAB's segments kernel (:func:`tile_table`): ``first`` (int64,
    one more than the blocks: the launch numbers of each block's segments begin there),
    and per segment ``log_r`` (uint8: log2 of its replicas) and ``slot`` (int32: its
    shard's first replica slot in the block's shared memory)."""

    first: object
    log_r: object
    slot: object


def segment_table(xp, parts, num_shards):
    """:class:`Segments` of a pass from its pages' :func:`page_segments` ``parts``
    [(first shard, first edge, page_segments(...)), ...] in shard order, edges
    numbered from the first page's first edge."""
    columns = [[] for _ in range(6)]
    for shard0, edge0, (shard, source_range, starts, ends, counts, local) in parts:
        for column, array in zip(columns, (shard + shard0, source_range, starts + edge0,
                                           ends + edge0, counts, local)):
            column.append(array)
    if not parts:  # (no pages: no segments)
        columns = [[xp.zeros(0, np.int64)] for _ in range(5)] + [[xp.zeros(0, np.uint16)]]
    shard, source_range, starts, ends, counts, local = (xp.concatenate(c) for c in columns)
    count = len(shard)
    was = xp.concatenate((xp.zeros(1, np.int64), xp.cumsum(counts)))[:-1]
    order = xp.argsort(source_range, kind="stable") if xp is np else \
        xp.argsort(source_range)  # (CuPy's sort is stable)
    dst = xp.concatenate((xp.zeros(1, np.int64), xp.cumsum(counts[order])))
    launch = xp.empty(count, np.int32)
    launch[order] = xp.arange(count, dtype=np.int32)
    by_shard = xp.concatenate((xp.zeros(1, np.int64),
                               xp.cumsum(xp.bincount(shard, minlength=num_shards))))
    return Segments(shard[order].astype(np.int32), source_range[order].astype(np.int32),
                    xp.stack((starts[order], ends[order]), axis=1).astype(np.int64),
                    dst, _moved(xp, local, was[order], dst), by_shard, launch)


def _moved(xp, local, was, dst):
    """The destination lists ``local`` moved to launch order: launch segment g's list
    began at ``was[g]``, it begins at ``dst[g]``; a chunk of ``tuning.TOCAB_BUILD_CHUNK``
    values at a time (the index arrays take 8 bytes a value each)."""
    total = int(dst[-1])
    moved = xp.empty(total, np.uint16)
    for p0 in range(0, total, tuning.TOCAB_BUILD_CHUNK):
        position = xp.arange(p0, min(p0 + tuning.TOCAB_BUILD_CHUNK, total))
        segment = xp.searchsorted(dst[1:], position, side="right")
        moved[p0:p0 + len(position)] = local[was[segment] + position - dst[segment]]
    return moved


def tile_table(xp, segments, shard_start, shard_log_r, slots):
    """:class:`Tiles` of ``segments`` (launch order) with the array module ``xp``: each
    segment's replicas by Garaph's eq. 2 for its own edges and destinations touched (a
    range holds a share of its shard's edges: fewer replicas to set and merge), at most
    its shard's; consecutive segments of one source range share a block while their
    shards' replica slots fit ``slots`` and until they hold ``tuning.TOCAB_TILE_EDGES``
    in-edges. ``shard_start``, ``shard_log_r``: the partition's, on the host."""
    edges = segments.edges[:, 1] - segments.edges[:, 0]
    touched = xp.diff(segments.dst)
    ratio = xp.log2(xp.maximum(edges, 1) / xp.maximum(touched, 1))
    shard = to_host(segments.shard)
    log_r = np.minimum(np.clip(to_host(xp.ceil(ratio - 0.5)), 0, None).astype(np.int64),
                       np.asarray(shard_log_r, np.int64)[shard])
    need = np.diff(np.asarray(shard_start, np.int64))[shard] << log_r
    first, slot = _pack_tiles(to_host(segments.source_range), need, to_host(edges),
                              int(slots), int(tuning.TOCAB_TILE_EDGES))
    return Tiles(xp.asarray(first), xp.asarray(log_r.astype(np.uint8)), xp.asarray(slot))


@numba.njit(cache=True, nogil=True)
def _pack_tiles(source_range, need, edges, slots, tile_edges):
    """(first segment of each tile plus the count, each segment's first slot in its
    tile) of :func:`tile_table`, greedily in launch order."""
    n = len(need)
    first = np.empty(n + 1, np.int64)
    slot = np.empty(n, np.int32)
    tiles, used, work = 0, 0, 0
    for g in range(n):
        if (g == 0 or source_range[g] != source_range[g - 1] or used + need[g] > slots
                or work >= tile_edges):
            first[tiles] = g
            tiles += 1
            used, work = 0, 0
        slot[g] = used
        used += need[g]
        work += edges[g]
    first[tiles] = n
    return first[:tiles + 1].copy(), slot


class KernelChoice:
    """Which kernel a graph's pull passes use, by their measured device time: while
    undecided, launches alternate between the shard kernel and TOCAB; once each has
    ``passes`` measured passes, the one whose fastest pass was faster runs from then
    on. ``decided``: None, True (TOCAB) or False; ``seconds``: the passes measured."""

    def __init__(self, passes, decided=None):
        self.passes = passes
        self.decided = decided
        self.seconds = {False: [], True: []}
        self._launched = 0

    def next(self):
        """Whether the next launch runs TOCAB."""
        if self.decided is not None:
            return self.decided
        self._launched += 1
        return self._launched % 2 == 0

    def observe(self, blocked, seconds):
        """Fold in a pass of TOCAB (``blocked``) or the shard kernel that took
        ``seconds`` on the device."""
        if self.decided is not None:
            return
        self.seconds[blocked].append(float(seconds))
        if min(len(s) for s in self.seconds.values()) >= self.passes:
            self.decided = min(self.seconds[True]) < min(self.seconds[False])


def tocab_source(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                 sync) -> str:
    """CUDA source of :data:`KERNELS` for ``spec`` (see the module's docstring)."""
    identity = literal(spec.identity(), spec.dtype)
    return "".join((
        kernel_head(spec, aux_dtype, index_dtype, degree_dtype, weighted=weighted,
                    sync=sync),
        _SEGMENTS_PROLOGUE.replace("IDENTITY", identity), gather_loop(identity, False),
        _SEGMENTS_STORE,
        _REDUCE_PROLOGUE.replace("IDENTITY", identity),
        apply_epilogue("    const value_t acc = slots[i];\n")))


_SEGMENTS_PROLOGUE = """\
extern "C" __global__ void tocab_segments(
    const index_t* __restrict__ src, const unsigned short* __restrict__ dst_offset,
    const float* __restrict__ weight, const long long* __restrict__ shard_start,
    const int* __restrict__ seg_shard, const unsigned char* __restrict__ seg_log_r,
    const int* __restrict__ seg_slot, const long long* __restrict__ tile_first,
    const long long* __restrict__ seg_edges, const long long* __restrict__ seg_dst,
    const unsigned short* __restrict__ dst_local, value_t* __restrict__ partial,
    HG_VALUES values, const unsigned long long* __restrict__ go)
{
  if (*go == 0) return;  /* (see shard_pass) */
  extern __shared__ __align__(8) unsigned char hg_shared[];
  const long long tile = blockIdx.x;  /* one block a tile */
  const long long g0 = tile_first[tile], g1 = tile_first[tile + 1];
  /* only the replicas of the destinations a segment touches are read: they alone
     start at the identity */
  for (long long g = g0; g < g1; ++g) {
    value_t* slots = (value_t*)hg_shared + seg_slot[g];
    const int log_r = seg_log_r[g];
    const long long d0 = seg_dst[g];
    const int nd = (int)(seg_dst[g + 1] - d0);
    for (int k = threadIdx.x; k < (nd << log_r); k += blockDim.x)
      slots[((int)dst_local[d0 + (k >> log_r)] << log_r) + (k & ((1 << log_r) - 1))] =
          IDENTITY;
  }
  __syncthreads();
  for (long long g = g0; g < g1; ++g) {  /* the tile's segments, each in its slots */
    value_t* slots = (value_t*)hg_shared + seg_slot[g];
    const int log_r = seg_log_r[g];
    const long long v0 = shard_start[seg_shard[g]];
    const long long e0 = seg_edges[2 * g], e1 = seg_edges[2 * g + 1];
"""

_SEGMENTS_STORE = """\
  }
  __syncthreads();
  /* each destination's replicas combined into its place among the range's values */
  for (long long g = g0; g < g1; ++g) {
    const value_t* slots = (const value_t*)hg_shared + seg_slot[g];
    const int log_r = seg_log_r[g];
    const long long d0 = seg_dst[g];
    const int nd = (int)(seg_dst[g + 1] - d0);
    for (int i = threadIdx.x; i < nd; i += blockDim.x) {
      const value_t* p = &slots[(int)dst_local[d0 + i] << log_r];
      value_t acc = p[0];
      for (int j = 1; j < (1 << log_r); ++j) acc = hg_combine(acc, p[j]);
      partial[d0 + i] = acc;
    }
  }
}

"""

_REDUCE_PROLOGUE = """\
extern "C" __global__ void tocab_reduce(
    const long long* __restrict__ shard_start, const long long* __restrict__ by_shard,
    const int* __restrict__ order, const long long* __restrict__ seg_dst,
    const unsigned short* __restrict__ dst_local, const value_t* __restrict__ partial,
    HG_VALUES values, value_t* new_values, unsigned char* __restrict__ flags,
    const aux_t* __restrict__ aux, const int aux_per_vertex,
    const double* __restrict__ constant_at, const degree_t* __restrict__ out_degree,
    unsigned long long* counters, const unsigned long long* __restrict__ go)
{
  if (*go == 0) return;
  extern __shared__ __align__(8) unsigned char hg_shared[];
  value_t* slots = (value_t*)hg_shared;
  __shared__ unsigned long long block_active, block_degree, block_front;
  const int s = blockIdx.x;
  const long long v0 = shard_start[s];
  const int nv = (int)(shard_start[s + 1] - v0);
  if (threadIdx.x == 0) { block_active = 0; block_degree = 0; block_front = 0; }
  for (int i = threadIdx.x; i < nv; i += blockDim.x) slots[i] = IDENTITY;
  __syncthreads();
  /* the shard's segments one after the other, in range order: a segment's
     destinations differ, so its threads combine without atomics */
  for (long long j = by_shard[s]; j < by_shard[s + 1]; ++j) {
    const int g = order[j];
    for (long long d = seg_dst[g] + threadIdx.x; d < seg_dst[g + 1]; d += blockDim.x) {
      value_t* p = &slots[dst_local[d]];
      *p = hg_combine(*p, partial[d]);
    }
    __syncthreads();
  }
"""


def compile_tocab(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                  sync):
    """The compiled (``tocab_segments``, ``tocab_reduce``), kept per source."""
    source = tocab_source(spec, aux_dtype, index_dtype, degree_dtype, weighted=weighted,
                          sync=sync)
    return compile_functions(spec, source, KERNELS)


def l2_bytes():
    """The current device's L2 cache (bytes), as the driver reports it."""
    import cupy

    return _l2_bytes(cupy.cuda.runtime.getDevice())


@functools.lru_cache(maxsize=None)
def _l2_bytes(device):
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"])


def device_segments(cp, graph, pages, cuts):
    """:class:`Segments` of the resident pages ``pages`` (a :class:`.layout.DevicePages`
    all of whose pages are resident, source-ordered) in the source ranges that begin
    at ``cuts`` (:func:`.layout.range_cuts`), built on the device page by page."""
    partition, plan = pages.partition, pages.plan
    src, offsets, _ = pages.resident
    first = plan.first_edge
    parts = []
    for p in plan.pages:
        e0, e1 = (int(x) for x in plan.page_edges[p])
        s0, s1 = int(partition.page_shard[p]), int(partition.page_shard[p + 1])
        bounds = graph.in_indptr[partition.shard_start[s0:s1 + 1]].astype(np.int64) - e0
        parts.append((s0, e0 - first, page_segments(
            cp, src[e0 - first:e1 - first], offsets[e0 - first:e1 - first], bounds, cuts)))
    return segment_table(cp, parts, partition.num_shards)


class BlockedPass:
    """TOCAB's pass over the resident pages ``pages`` (a :class:`.layout.DevicePages`
    all of whose pages are resident, source-ordered) of ``graph`` on the current
    device: the segments of ``ranges`` source ranges, the partial values (of ``dtype``) and the
    ``kernels``' arguments packed once (``flags``, ``aux``: the run's device arrays;
    ``no_weight``: a float32 device array passed for absent weights); ``threads`` and
    ``shared_bytes`` a block. ``l2_bytes``
    and ``choice`` (a :class:`KernelChoice`) are described. Raises MemoryError
    (CuPy's) when the device lacks room."""

    def __init__(self, cp, graph, pages, dtype, flags, aux, no_weight, *, kernels, ranges,
                 threads, shared_bytes, l2_bytes, choice):
        self.ranges, self.l2_bytes, self.choice = ranges, l2_bytes, choice
        self.num_vertices, self.num_shards = graph.num_vertices, pages.partition.num_shards
        src, offsets, weight = pages.resident
        self.segments = segments = device_segments(
            cp, graph, pages, range_cuts(graph.num_vertices, ranges))
        partition = pages.partition
        self.tiles = tiles = tile_table(cp, segments, partition.shard_start,
                                        np.log2(partition.replication), pages.slots)
        self.partial = cp.empty(max(int(segments.dst[-1]), 1), dtype)
        self.nbytes = self.partial.nbytes + sum(a.nbytes for a in (*segments, *tiles))
        self.tile_count = len(tiles.first) - 1
        edges = dict(src=src, offsets=offsets, weight=no_weight if weight is None else weight,
                     shard_start=pages.shard_start, seg_shard=segments.shard,
                     seg_log_r=tiles.log_r, seg_slot=tiles.slot)
        self._segments = PackedLaunch(kernels[0], dict(
            edges, tile_first=tiles.first, seg_edges=segments.edges, seg_dst=segments.dst,
            dst_local=segments.local, partial=self.partial, values=None, go=None))
        self._reduce = PackedLaunch(kernels[1], dict(
            shard_start=pages.shard_start, by_shard=segments.by_shard, order=segments.order,
            seg_dst=segments.dst, dst_local=segments.local, partial=self.partial,
            values=None, new_values=None, flags=flags, aux=aux,
            aux_per_vertex=np.int32(aux.size > 1), constant_at=None,
            out_degree=pages.out_degree, counters=None, go=None))
        self._changing = (*self._segments.holders("values", "go"),
                          *self._reduce.holders("values", "new_values", "constant_at",
                                                "counters", "go"))
        self.launch_shape = (threads, shared_bytes)
        for kernel in kernels:
            kernel.max_dynamic_shared_size_bytes = shared_bytes
        log.info("TOCAB: %d source ranges, %d segments in %d blocks, %d partial values",
                 ranges, len(segments.shard), self.tile_count, int(segments.dst[-1]))

    def set_aux(self, aux):
        """A later run's ``aux`` (a device array; see ``GpuEngine.bind``)."""
        self._reduce.update(aux=aux, aux_per_vertex=int(aux.size > 1))

    def run(self, stream, values, new_values, constant_at, counters, go):
        """One pass on ``stream``: the segments, then every shard's reduction and
        apply; the arguments that change between passes as device pointers (ints):
        the values read and written, the iteration constant, the counters and the go
        flag (see the shard kernel)."""
        holders = self._changing
        holders[0].value = holders[2].value = values
        holders[1].value = holders[6].value = go
        holders[3].value, holders[4].value, holders[5].value = new_values, constant_at, \
            counters
        threads, shared = self.launch_shape
        if self.tile_count:
            self._segments(self.tile_count, threads, shared, stream.ptr)
        self._reduce(self.num_shards, threads, shared, stream.ptr)

    def describe(self):
        """The blocking's choices, for the engine's description."""
        return {"ranges": self.ranges, "l2_bytes": self.l2_bytes,
                "range_vertices": -(-self.num_vertices // self.ranges),
                "segments": len(self.segments.shard), "tiles": self.tile_count,
                "partial_values": int(self.segments.dst[-1]), "chosen": self.choice.decided,
                "seconds": {("tocab" if k else "shard"): v
                            for k, v in self.choice.seconds.items()}}
