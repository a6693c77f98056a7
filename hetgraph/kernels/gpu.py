"""GPU engine (CuPy): the Garaph shard kernel for a VertexProgram (Garaph sections 3, 5.2).

One thread block per shard. The shard's vertices live in shared memory with R_i
replicas each (slot ``offset * R_i + tid % R_i``); every in-edge's gather result is
combined into its slot with the monoid's shared-memory atomic (float min/max through
compare-and-swap); the replicas are merged by a two-way reduction; then apply and
activate run for each vertex and write the new value (a second array in sync mode, the
values themselves in async mode) and the active flag. The user's gather / apply /
activate are translated to CUDA by :mod:`.transpile` and compiled with NVRTC through
``cupy.RawModule``, once per program, dtype and layout.

Pages live in device memory when they fit the budget; the others stay in pinned host
memory and are copied in every iteration over several CUDA streams, so that the copy of
one page overlaps the kernel of another. Laying a graph's pages out on a device (the
edges sorted inside each shard, copied in, the streamed pages' pinned host copies) costs
more than a short run (grid-1000, 4M arcs: 20-23 ms on the H100, against 25-40 ms for a
whole BFS; RMAT-22 about 250 ms): the last layout built on each device is kept, and a
later run of the same graph with the same layout options finds it in place
(:func:`device_pages`; :func:`release` frees it). cupy is imported lazily: without a GPU this
module imports and :func:`available` says why the GPU engine cannot run.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading
import time
import zlib

import numpy as np

from .. import tuning
from ..engines.base import Engine
from ..errors import GraphError, HetGraphError
from ..io.partition import PAGE_BYTES, edge_bytes
from ..program import ProgramSpec
from .transpile import PRELUDE, c_type, device_function, literal

log = logging.getLogger("hetgraph.kernels.gpu")

THREADS_PER_BLOCK = 256
STREAMS = 4
# shared memory per block: 16 KiB measured faster than 48 KiB on an H100 (PageRank on
# RMAT 22: 0.95 vs 1.27 ms) because more blocks fit an SM
GPU_SHARED_BYTES = 16 << 10
BUDGET_FRACTION = 0.8  # of the free device memory, when no budget is given


class GpuUnavailableError(HetGraphError, RuntimeError):
    """No usable GPU: CuPy is missing, no device is visible, or it cannot run kernels."""


class GpuMemoryError(HetGraphError, MemoryError):
    """The GPU cannot hold what a run needs even with the smallest pages: run the pages
    on the CPU (devices="cpu") or give the GPU more memory."""

    def __reduce__(self):  # MemoryError's own pickling fails for subclasses (Dask sends it)
        return type(self), self.args


@functools.lru_cache(maxsize=None)
def availability():
    """(True, device description) when a GPU can run kernels, else (False, reason)."""
    try:
        import cupy
    except ImportError as exc:
        return False, f"CuPy is not installed ({exc}); pip install 'hetgraph[gpu]'"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver errors come in several classes
        return False, f"no CUDA device can be used ({exc})"
    if count == 0:
        return False, "no CUDA device is visible"
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return True, f"{count} x {name}"


def available() -> bool:
    """Whether the GPU engine can run here."""
    return availability()[0]


def require_gpu():
    ok, reason = availability()
    if not ok:
        raise GpuUnavailableError(f"the GPU engine cannot run: {reason}; use devices='cpu'")


def on_device_of(values, array):
    """``array`` (a host NumPy array) on the device that holds ``values``: itself when
    ``values`` is a NumPy array, else a device copy made once and kept."""
    if isinstance(values, np.ndarray):
        return array
    return _device_copy(array)


_COPIES: dict = {}


def _device_copy(array):
    import cupy

    key = id(array), cupy.cuda.runtime.getDevice()
    entry = _COPIES.get(key)
    if entry is None or entry[0] is not array:
        if len(_COPIES) > 32:
            _COPIES.clear()
        entry = _COPIES[key] = (array, cupy.asarray(array))
    return entry[1]


_INDEXED_SUM = r"""
extern "C" __global__ void hg_indexed_sum(const VALUE* values, const long long* index,
                                          long long first, long long step, long long n,
                                          double scale, double offset, double* out) {
    /* out: zeroed; index NULL: values first, first + step, ... (n of them) */
    if (blockIdx.x == 0 && threadIdx.x == 0)
        atomicAdd(out, offset);
    double sum = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        sum += (double)values[index ? index[i] : first + i * step];
    for (int d = 16; d > 0; d >>= 1)
        sum += __shfl_down_sync(0xffffffffu, sum, d);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(out, sum * scale);
}
"""


def indexed_sum(values, index, scale=1.0, offset=0.0):
    """offset + scale * sum(values[index]) in float64, for a program's hooks: a NumPy
    float for NumPy ``values``; for CuPy ``values``, a 0-d device array made by a memset
    and one kernel (no wait for the device), or the float ``offset`` when ``index`` is
    empty (their host work, 11-17 us on the H200 host, was a third of a grid-1000
    PageRank iteration's, whose graph has no dangling vertex). CuPy's gather, sum and
    two scalar operations took 80 us of host time an iteration for PageRank on RMAT-22
    (a fifth of its pass).
    ``index``: int64 host array (kept on the device after the first call), or a slice:
    a range read without indices (PageRank's 40M dangling vertices of RMAT-26, last in
    degree order, took 0.18 ms an iteration through an index array, 2% of it)."""
    if isinstance(values, np.ndarray):
        return offset + scale * float(values[index].sum(dtype=np.float64))
    import cupy

    if isinstance(index, slice):
        first, stop, step = index.indices(len(values))
        index, n = None, len(range(first, stop, step))
    else:
        first, step, n = 0, 1, len(index)
        if n:
            index = _device_copy(np.asarray(index, np.int64))
    if not n:
        return float(offset)
    # an empty array zeroed by a memset: cupy.full took 50 us of host time (a fill kernel)
    out = cupy.empty((), cupy.float64)
    stream = cupy.cuda.get_current_stream().ptr
    cupy.cuda.runtime.memsetAsync(out.data.ptr, 0, 8, stream)
    blocks = int(min(1024, max(1, -(-n // 256))))
    launch = _indexed_sum_launch(c_type(values.dtype), cupy.cuda.runtime.getDevice())
    with _SUM_LOCK:  # one packed launch per device: runs in other threads share it
        launch.update(values=values, index=index, first=first, step=step, n=n,
                      scale=float(scale), offset=float(offset), out=out)
        launch(blocks, 256, 0, stream)
    return out


_SUM_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def _indexed_sum_launch(value_type, device):
    """The packed launch of ``hg_indexed_sum`` for ``value_type`` on ``device`` (the
    current one); every call sets all its arguments."""
    import cupy

    kernel = cupy.RawKernel(_INDEXED_SUM.replace("VALUE", value_type), "hg_indexed_sum")
    return PackedLaunch(kernel, dict(values=None, index=None, first=np.int64(0),
                                     step=np.int64(0), n=np.int64(0), scale=np.float64(0),
                                     offset=np.float64(0), out=None))


_COUNT_FRONTIER = r"""
extern "C" __global__ void hg_count_frontier(const unsigned char* flags,
                                             const DEGREE* degree, long long n,
                                             unsigned long long* out) {  /* out: zeroed */
    unsigned long long active = 0, sum = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (flags[i]) {
            active += 1;
            sum += degree[i];
        }
    for (int d = 16; d > 0; d >>= 1) {
        active += __shfl_down_sync(0xffffffffu, active, d);
        sum += __shfl_down_sync(0xffffffffu, sum, d);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, active);
        atomicAdd(out + 1, sum);
    }
}
"""


@functools.lru_cache(maxsize=None)
def _count_frontier_kernel(degree_type, device):
    """``hg_count_frontier`` for out-degrees of ``degree_type`` on ``device`` (the current
    one)."""
    import cupy

    return cupy.RawKernel(_COUNT_FRONTIER.replace("DEGREE", degree_type), "hg_count_frontier")


def front_of_key(key):
    """The priority whose ``hg_front_key`` is ``key`` (an int; 0: none, NaN)."""
    if not key:
        return float("nan")
    ordered = ~key & 0xFFFFFFFFFFFFFFFF
    bits = ordered & 0x7FFFFFFFFFFFFFFF if ordered >> 63 else ~ordered & 0xFFFFFFFFFFFFFFFF
    return float(np.array(bits, np.uint64).view(np.float64))


class PackedLaunch:
    """A kernel launch through the driver (cuLaunchKernel) with its arguments packed
    once, in the kernel's order; :meth:`update` changes some in place. A call of CuPy's
    RawKernel converts every argument each time: the shard kernel's 23 took 11.5 us of
    host time on the H100 host, a third of a small graph's iteration; packed, 7-10 us
    with the updates (the driver call is most of it).

    ``arguments``: name -> value, in the kernel's parameter order: a CuPy array (or None
    for a pointer set later) passes its device pointer; np.int32, np.int64 and
    np.float64 pass as int, long long and double. The arrays must outlive the launches
    (their owner keeps them). The kernel is the current device's."""

    _TYPES = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
              np.dtype(np.float64): ctypes.c_double}

    def __init__(self, kernel, arguments):
        import cupy

        self._driver_launch = cupy.cuda.driver.launchKernel
        self._array = cupy.ndarray
        self._function = kernel.kernel.ptr
        self._held = []
        for value in arguments.values():
            scalar = isinstance(value, np.generic)
            self._held.append(self._TYPES[value.dtype](value) if scalar else
                              ctypes.c_void_p(None if value is None else value.data.ptr))
        self._slot = {name: held for name, held in zip(arguments, self._held)}
        self._pointers = (ctypes.c_void_p * len(self._held))(
            *(ctypes.addressof(held) for held in self._held))
        self._address = ctypes.addressof(self._pointers)

    def holders(self, *names):
        """The ctypes objects holding the arguments ``names``: setting a pointer's
        ``value`` (an int) changes it, as :meth:`update` does, for a launch's few
        changing arguments without the keywords."""
        return tuple(self._slot[name] for name in names)

    def update(self, **changes):
        """Set arguments by name: arrays (their pointers) or numbers."""
        for name, value in changes.items():
            self._slot[name].value = value.data.ptr if isinstance(value, self._array) \
                else value

    def __call__(self, blocks, threads, shared_bytes, stream_pointer):
        """Launch ``blocks`` blocks of ``threads`` threads on the stream."""
        self._driver_launch(self._function, blocks, 1, 1, threads, 1, 1, shared_bytes,
                            stream_pointer, self._address, 0)


def use_device(index):
    """A context manager that makes GPU ``index`` current in this thread."""
    import cupy

    return cupy.cuda.Device(index)


# --- source -----------------------------------------------------------------------------

def _combine(reduce):
    return {"add": "a + b", "min": "b < a ? b : a", "max": "b > a ? b : a",
            "or": "a | b", "and": "a & b"}[reduce]


def _atomic(reduce, dtype):
    """Body of ``hg_atomic(value_t* p, value_t v)``: the monoid's shared-memory atomic."""
    dtype = np.dtype(dtype)
    native = {"add": "atomicAdd", "min": "atomicMin", "max": "atomicMax", "or": "atomicOr",
              "and": "atomicAnd"}[reduce]
    if dtype.kind == "f" and reduce in ("min", "max"):
        bits, to_bits, from_bits = (("int", "__float_as_int", "__int_as_float")
                                    if dtype.itemsize == 4 else
                                    ("unsigned long long", "__double_as_longlong",
                                     "__longlong_as_double"))
        better = "<" if reduce == "min" else ">"
        return (f"{bits}* a = ({bits}*)p; {bits} old = *a;\n"
                f"  while (v {better} {from_bits}(old)) {{\n"
                f"    {bits} seen = atomicCAS(a, old, ({bits}){to_bits}(v));\n"
                f"    if (seen == old) break;\n    old = seen;\n  }}")
    if dtype == np.dtype(np.int64) and reduce in ("add", "or", "and"):
        return (f"{native}((unsigned long long*)p, (unsigned long long)v);")
    if dtype == np.dtype(np.int64):
        return f"{native}((long long*)p, v);"
    return f"{native}(p, v);"


def kernel_source(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                  sync, warp_combine=False) -> str:
    """CUDA source of the shard kernel ``shard_pass`` for ``spec``; ``warp_combine``:
    the edges come in destination order and a warp combines equal destinations before
    its shared-memory atomics."""
    value = spec.dtype
    aux_dtype = np.dtype(aux_dtype)
    unsigned = unsigned_index(index_dtype)
    gather = device_function(spec.name, "gather", spec.gather, "hg_gather",
                             (value, np.float32, value), value)
    apply_params = (value, value, aux_dtype) + ((np.float64,) if spec.uses_constant else ())
    apply = device_function(spec.name, "apply", spec.apply, "hg_user_apply", apply_params,
                            value)
    activate = device_function(spec.name, "activate", spec.activate, "hg_activate",
                               (value, value), np.bool_)
    call = "hg_user_apply(old, acc, aux" + (", constant)" if spec.uses_constant else ")")
    priority = "" if spec.priority is None else device_function(
        spec.name, "priority", spec.priority, "hg_priority", (value,), np.float64)
    return f"""
typedef {c_type(value)} value_t;
typedef {c_type(aux_dtype)} aux_t;
typedef {c_type(unsigned)} index_t;
typedef {c_type(degree_dtype)} degree_t;
#define HG_SYNC {int(bool(sync))}
#define HG_WEIGHTED {int(bool(weighted))}
#define HG_WARP_COMBINE {int(bool(warp_combine))}
#define HG_PRIORITY {int(spec.priority is not None)}
{PRELUDE}
{gather}
{apply}
{activate}
{priority}
#if HG_PRIORITY
/* counters[2] holds the lowest priority activated as this key's maximum: the key is
   the complement of an order-preserving map of the double's bits, so that the zeroed
   counter means none */
__device__ __forceinline__ unsigned long long hg_front_key(double p) {{
  const unsigned long long b = (unsigned long long)__double_as_longlong(p);
  return ~((b >> 63) ? ~b : (b | 0x8000000000000000ull));
}}
#endif
__device__ __forceinline__ value_t hg_apply(value_t old, value_t acc, aux_t aux,
                                            double constant) {{ return {call}; }}
__device__ __forceinline__ value_t hg_combine(value_t a, value_t b) {{
  return {_combine(spec.reduce)};
}}
__device__ __forceinline__ void hg_atomic(value_t* p, value_t v) {{
  {_atomic(spec.reduce, value)}
}}
#if HG_SYNC
#define HG_VALUES const value_t* __restrict__
#else
#define HG_VALUES const value_t*
#endif
/* a pass reads each edge once: streaming loads (evict first) leave the caches to the
   gathered values (RMAT-26 PageRank on an H100: 8.47 -> 8.31 ms an iteration) */
#define HG_EDGE(array, e) __ldcs(&array[e])
#if HG_WEIGHTED
#define HG_WEIGHT(e) HG_EDGE(weight, e)
#else
#define HG_WEIGHT(e) 1.0f
#endif
#define HG_UNROLL 4

extern "C" __global__ void shard_pass(
    const index_t* __restrict__ src, const unsigned short* __restrict__ dst_offset,
    const float* __restrict__ weight, const long long* __restrict__ shard_start,
    const long long* __restrict__ shard_edge, const unsigned char* __restrict__ shard_log_r,
    const int ranges, const int k_begin, const int k_end, const int first, const int last,
    value_t* __restrict__ partial, const long long edge_base, const int first_shard,
    HG_VALUES values,
    value_t* new_values, unsigned char* __restrict__ flags, const aux_t* __restrict__ aux,
    const int aux_per_vertex, const double* __restrict__ constant_at,
    const degree_t* __restrict__ out_degree, unsigned long long* counters,
    const unsigned long long* __restrict__ go)
{{
  /* go: the activated count of the iteration queued before this one; none activated,
     this one changes nothing (it is discarded by the host) */
  if (*go == 0) return;
  extern __shared__ __align__(8) unsigned char hg_shared[];
  value_t* slots = (value_t*)hg_shared;
  __shared__ unsigned long long block_active, block_degree, block_front;
  const int s = first_shard + blockIdx.x;
  const long long v0 = shard_start[s];
  const int nv = (int)(shard_start[s + 1] - v0);
  const int log_r = shard_log_r[s];
  /* edges of source ranges [k_begin, k_end) of this shard (row s of the range table) */
  const long long* table = shard_edge + (long long)s * (ranges + 1);
  const long long e0 = table[k_begin] - edge_base, e1 = table[k_end] - edge_base;
  if (threadIdx.x == 0) {{ block_active = 0; block_degree = 0; block_front = 0; }}
  for (int k = threadIdx.x; k < (nv << log_r); k += blockDim.x)
    slots[k] = {literal(spec.identity(), value)};
  __syncthreads();
  const int lane = threadIdx.x & ((1 << log_r) - 1);
  const int stride = blockDim.x;
#if HG_WARP_COMBINE
  /* edges in destination order: the lanes of a warp holding the same destination
     combine their values with shuffles (a segmented reduction), then one atomic each */
  const int warp_lane = threadIdx.x & 31;
  for (long long base = e0; base < e1; base += stride) {{
    const long long e = base + threadIdx.x;
    const bool valid = e < e1;
    const int off = valid ? (int)HG_EDGE(dst_offset, e) : -1 - warp_lane;
    value_t g = valid ? (value_t)hg_gather(values[HG_EDGE(src, e)], HG_WEIGHT(e),
                                           values[v0 + off])
                      : ({literal(spec.identity(), value)});
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {{
      const value_t other = __shfl_down_sync(0xffffffffu, g, d);
      const int other_off = __shfl_down_sync(0xffffffffu, off, d);
      if (warp_lane + d < 32 && other_off == off) g = hg_combine(g, other);
    }}
    const int before = __shfl_up_sync(0xffffffffu, off, 1);
    if (valid && (warp_lane == 0 || before != off)) hg_atomic(&slots[(off << log_r) + lane], g);
  }}
#else
  long long e = e0 + threadIdx.x;
  /* HG_UNROLL edges per thread at once: their loads are independent, so they overlap */
  for (; e + (HG_UNROLL - 1) * stride < e1; e += HG_UNROLL * stride) {{
    int off[HG_UNROLL];
    value_t gathered[HG_UNROLL];
#pragma unroll
    for (int u = 0; u < HG_UNROLL; ++u) off[u] = HG_EDGE(dst_offset, e + u * stride);
#pragma unroll
    for (int u = 0; u < HG_UNROLL; ++u)
      gathered[u] = hg_gather(values[HG_EDGE(src, e + u * stride)], HG_WEIGHT(e + u * stride),
                              values[v0 + off[u]]);
#pragma unroll
    for (int u = 0; u < HG_UNROLL; ++u) hg_atomic(&slots[(off[u] << log_r) + lane], gathered[u]);
  }}
  for (; e < e1; e += stride) {{
    const int off = HG_EDGE(dst_offset, e);
    hg_atomic(&slots[(off << log_r) + lane], hg_gather(values[HG_EDGE(src, e)], HG_WEIGHT(e),
                                                       values[v0 + off]));
  }}
#endif
  __syncthreads();
  for (int log_h = log_r - 1; log_h >= 0; --log_h) {{  /* two-way reduction */
    const int half = 1 << log_h;
    for (int k = threadIdx.x; k < (nv << log_h); k += blockDim.x) {{
      value_t* p = &slots[((k >> log_h) << log_r) + (k & (half - 1))];
      *p = hg_combine(*p, p[half]);
    }}
    __syncthreads();
  }}
  unsigned long long active = 0, degree = 0, front = 0;
  const double constant = *constant_at;
  for (int i = threadIdx.x; i < nv; i += blockDim.x) {{
    const long long v = v0 + i;
    value_t acc = slots[i << log_r];
    if (!first) acc = hg_combine(partial[v], acc);  /* earlier source ranges */
    if (!last) {{ partial[v] = acc; continue; }}
    const value_t old = values[v];
    const value_t now = hg_apply(old, acc, aux[aux_per_vertex ? v : 0], constant);
    new_values[v] = now;
    const bool on = hg_activate(now, old);
    flags[v] = on;
    if (on) {{
      active += 1;
      degree += out_degree[v];
#if HG_PRIORITY
      front = max(front, hg_front_key(hg_priority(now)));
#endif
    }}
  }}
  /* the warp's sums first, then one shared atomic a warp (not a thread: all on one
     address): RMAT-24 PageRank 1.65 -> 1.46 ms an iteration on an H100 */
  for (int d = 16; d > 0; d >>= 1) {{
    active += __shfl_down_sync(0xffffffffu, active, d);
    degree += __shfl_down_sync(0xffffffffu, degree, d);
#if HG_PRIORITY
    front = max(front, __shfl_down_sync(0xffffffffu, front, d));
#endif
  }}
  if ((threadIdx.x & 31) == 0 && active) {{
    atomicAdd(&block_active, active);
    atomicAdd(&block_degree, degree);
#if HG_PRIORITY
    atomicMax(&block_front, front);
#endif
  }}
  __syncthreads();
  if (threadIdx.x == 0 && block_active) {{
    atomicAdd(&counters[0], block_active);
    atomicAdd(&counters[1], block_degree);
#if HG_PRIORITY
    atomicMax(&counters[2], block_front);
#endif
  }}
}}
"""


_KERNELS: dict = {}


def compile_kernel(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                   sync, warp_combine=False):
    """The compiled ``shard_pass`` (a cupy.RawKernel), kept per source for the process."""
    import cupy

    source = kernel_source(spec, aux_dtype, index_dtype, degree_dtype, weighted=weighted,
                           sync=sync, warp_combine=warp_combine)
    kernel = _KERNELS.get(source)
    if kernel is None:
        try:
            module = cupy.RawModule(code=source, options=("-std=c++17",))
            kernel = module.get_function("shard_pass")
        except cupy.cuda.compiler.CompileException as exc:
            detail = next((line for line in str(exc).splitlines() if "error" in line),
                          str(exc).splitlines()[0])
            raise HetGraphError(f"{spec.name}: the GPU translation did not compile "
                                f"({detail}); please report it with the program") from None
        _KERNELS[source] = kernel
    return kernel


# --- layout -------------------------------------------------------------------------------
EDGE_ORDERS = ("source", "destination")


def unsigned_index(index_dtype):
    """The unsigned dtype the GPU reads vertex ids as (same size as ``index_dtype``)."""
    return {4: np.uint32, 8: np.uint64}[np.dtype(index_dtype).itemsize]


def _stable_argsort(xp, keys):
    """Indices sorting ``keys``, equal keys kept in order (CuPy's sort is always stable)."""
    return np.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)


def page_layout(xp, graph, partition, p, weighted, order="source", ranges=1):
    """Page ``p``'s edges as the shard kernel reads them, built with the array module
    ``xp`` (CuPy on the engine's device; NumPy gives the same arrays on the host):
    (src, destination offset from the shard's first vertex (uint16), weight or None,
    table), with every shard's edges kept inside the shard.

    ``order="destination"`` keeps the CSC order; ``"source"`` sorts each shard's edges
    by source (stable), so that the blocks running at the same time gather from a narrow
    band of source vertices that stays in the L2 cache (a soft form of GraphCage's cache
    blocking; the shard kernel accumulates in shared memory, so order is free). Sorting
    on the GPU takes milliseconds a page: the same sort on the host (Numba, 16 cores)
    took 2 s of every GPU run on RMAT-22. ``table``: (shards, ``ranges`` + 1) int64, the
    first edge (graph-wide) of each source range in each shard and the shard's end;
    range k holds the sources [k N / ranges, (k + 1) N / ranges)."""
    s0, s1 = int(partition.page_shard[p]), int(partition.page_shard[p + 1])
    v0, v1 = partition.page_vertices(p)
    e0, e1 = partition.page_edges(p)
    starts = partition.shard_start[s0:s1 + 1]
    shard_edge = graph.in_indptr[starts] - e0
    vertex_offset = (np.arange(v0, v1) - np.repeat(starts[:-1], np.diff(starts)))
    edge = xp.arange(e1 - e0)
    vertex = xp.searchsorted(xp.asarray(graph.in_indptr[v0 + 1:v1 + 1] - e0), edge, side="right")
    offsets = xp.asarray(vertex_offset.astype(np.uint16))[vertex]
    src = xp.asarray(graph.in_indices[e0:e1].view(unsigned_index(graph.index_dtype)))
    weight = xp.asarray(graph.in_weights[e0:e1]) if weighted else None
    shard = xp.searchsorted(xp.asarray(shard_edge[1:]), edge, side="right")
    if order == "source":
        by_source = _stable_argsort(xp, src)
        by_shard = by_source[_stable_argsort(xp, shard[by_source])]
        src, offsets = src[by_shard], offsets[by_shard]
        weight = None if weight is None else weight[by_shard]
    cuts = (np.arange(ranges + 1, dtype=np.int64) * graph.num_vertices) // ranges
    # sorted by source, a shard's edges below a cut come first: its first edge at or
    # above the cut is the shard's first edge plus their count
    below = [xp.bincount(shard[src < cut], minlength=s1 - s0) for cut in cuts.tolist()]
    table = xp.stack(below, axis=1) + xp.asarray(shard_edge[:-1, None] + e0)
    return src, offsets, weight, table


def page_bytes_for(edge_bytes_total, budget, page_bytes=PAGE_BYTES, streams=STREAMS):
    """Page size (bytes) for a GPU budget: ``page_bytes`` when all the edges fit the
    budget, else small enough that ``streams`` staged pages use a quarter of it."""
    if budget is None or edge_bytes_total <= budget:
        return page_bytes
    return max(1, min(page_bytes, budget // (4 * streams)))


class PagePlan:
    """Which pages stay on the device and which are streamed, for a byte budget.

    ``budget``: device bytes for edge data (resident pages + staging buffers).
    ``per_edge``: bytes of one edge. Pages are those of ``partition``; all resident when
    the whole graph fits, else a resident prefix and ``streams`` staging buffers each
    as large as the largest streamed page.
    """

    def __init__(self, partition, per_edge, budget, streams):
        self.partition = partition
        pages = partition.num_pages
        edges = np.array([partition.page_edges(p) for p in range(pages)],
                         dtype=np.int64).reshape(-1, 2)
        sizes = (edges[:, 1] - edges[:, 0]) * per_edge
        total = int(sizes.sum())
        self.page_edges = edges
        self.streams = 0
        self.stage_edges = 0
        if total <= budget:
            self.resident = pages
            return
        largest = int(sizes.max())
        if largest > budget:
            raise GpuMemoryError(f"a page of {largest:,} bytes does not fit the GPU budget of "
                                 f"{budget:,} bytes even alone")
        self.streams = max(1, min(streams, budget // largest))
        stage = self.streams * largest
        cumulative = np.cumsum(sizes)
        self.resident = int(np.searchsorted(cumulative, budget - stage, side="right"))
        self.stage_edges = largest // per_edge

    @property
    def resident_edges(self) -> int:
        return int(self.page_edges[self.resident - 1, 1]) if self.resident else 0

    @property
    def streamed_pages(self):
        return range(self.resident, self.partition.num_pages)


class DevicePages:
    """The pages of ``graph`` (cut by ``partition``) on the current device, for a byte
    ``budget`` of edge data (resident pages plus ``streams`` staging buffers, see
    :class:`PagePlan`): the resident edges (src, destination offset, weight when
    ``weighted``), the streamed pages' edges in pinned host memory, the shard tables
    (first vertex, log2 of the replication, the edge table of :func:`page_layout`) and
    the out-degrees ``degree``. Read-only once built: runs share it, even at once (each
    keeps its own staging buffers)."""

    def __init__(self, graph, partition, *, per_edge, weighted, edge_order, ranges, budget,
                 streams, degree):
        import cupy as cp

        self.partition, self.budget = partition, budget
        self.plan = plan = PagePlan(partition, per_edge, budget, streams)
        log_r = np.log2(partition.replication).astype(np.uint8)
        self.shard_start = cp.asarray(partition.shard_start)
        self.shard_log_r = cp.asarray(log_r)
        # a block's shared-memory slots: its shard's vertices times their replicas
        self.slots = int((np.diff(partition.shard_start) << log_r.astype(np.int64))
                         .max(initial=1))
        self.out_degree = cp.asarray(degree)
        split = plan.resident_edges
        self.dtypes = (unsigned_index(graph.index_dtype), np.uint16,
                       np.float32 if weighted else None)
        self.resident = tuple(None if d is None else cp.empty(split, d) for d in self.dtypes)
        self.pinned = None if not plan.streams else tuple(
            None if d is None else pinned_empty(graph.num_arcs - split, d)
            for d in self.dtypes)
        tables = [cp.zeros((0, ranges + 1), cp.int64)]
        for p in range(partition.num_pages):
            *arrays, table = _lay_out_page(graph, partition, p, weighted, edge_order, ranges)
            e0, e1 = (int(x) for x in plan.page_edges[p])
            resident = p < plan.resident
            for target, array in zip(self.resident if resident else self.pinned, arrays):
                if array is None:
                    continue
                if resident:
                    target[e0:e1] = cp.asarray(array)  # (the host layout's: a copy)
                elif isinstance(array, np.ndarray):
                    target[e0 - split:e1 - split] = array
                else:
                    array.get(out=target[e0 - split:e1 - split])
            tables.append(cp.asarray(table))
        self.shard_edge = cp.concatenate(tables)
        self.nbytes = sum(a.nbytes for a in (self.shard_start, self.shard_log_r,
                                             self.out_degree, self.shard_edge,
                                             *self.resident) if a is not None)
        log.info("GPU pages: %d resident (%d edges), %d streamed over %d streams",
                 plan.resident, split, len(plan.streamed_pages), plan.streams)


def _lay_out_page(graph, partition, p, weighted, edge_order, ranges):
    """:func:`page_layout` of page ``p`` on the device; on the host when its scratch
    (about 80 bytes an edge) does not fit beside the pages."""
    import cupy as cp

    options = (graph, partition, p, weighted, edge_order, ranges)
    try:
        return page_layout(cp, *options)
    except MemoryError:  # CuPy's OutOfMemoryError, or the sort's std::bad_alloc
        cp.get_default_memory_pool().free_all_blocks()
        log.info("page %d laid out on the host: no device memory for its sort", p)
        return page_layout(np, *options)


# --- kept layouts -------------------------------------------------------------------------

_KEPT: dict = {}  # device -> (key, weighted, DevicePages): the last layout built there
_KEPT_LOCK = threading.Lock()
_DEVICE_LOCKS: dict = {}  # device -> the lock of its builds


def partition_key(partition):
    """What tells a partition's pages apart from another's, for :func:`device_pages`
    (a partition sent to a worker process is a new object every run)."""
    if partition is None:
        return None
    return (partition.num_pages, *(zlib.crc32(np.ascontiguousarray(a)) for a in
                                   (partition.shard_start, partition.page_shard,
                                    partition.replication)))


def device_pages(key, weighted, build):
    """The DevicePages kept on the current device under ``key`` (a tuple naming the
    graph's ``token``, the partition and every layout option) with edge weights when
    ``weighted`` (a run without weights also takes pages with them when every page is
    resident: it does not read them), else ``build()``'s, kept instead of the
    device's previous layout, which is dropped before the build (its memory returned
    to the device)."""
    import cupy as cp

    device = cp.cuda.runtime.getDevice()
    with _KEPT_LOCK:
        lock = _DEVICE_LOCKS.setdefault(device, threading.Lock())
    with lock:
        kept = _KEPT.get(device)
        if kept is not None and kept[0] == key and (kept[1] == weighted or (
                kept[1] and not kept[2].plan.streams)):
            return kept[2]
        release(device)
        pages = build()
        _KEPT[device] = (key, weighted, pages)
        return pages


def keeps_pages_of(graph, device):
    """Whether ``device`` keeps a layout of ``graph``'s pages (see :func:`device_pages`;
    one made for other options may still be laid out again)."""
    kept = _KEPT.get(device)
    return kept is not None and kept[0][0] == graph.token


def kept_bytes(device):
    """Device bytes of the pages kept on ``device`` (0: none)."""
    kept = _KEPT.get(device)
    return 0 if kept is None else kept[2].nbytes


def release(device=None):
    """Drop the layout kept on ``device`` (default: on every device) and return the
    device memory that was cached for it to the device."""
    with _KEPT_LOCK:
        devices = [d for d in list(_KEPT) if device is None or d == device]
        for d in devices:
            del _KEPT[d]
    if devices:
        import cupy as cp

        for d in devices:
            with cp.cuda.Device(d):
                cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()


def _check_options(memory_budget, page_bytes, streams, threads_per_block, edge_order,
                   source_ranges):
    if edge_order not in EDGE_ORDERS:
        raise GraphError(f"edge_order={edge_order!r} is not valid; use 'source' or "
                         f"'destination'")
    if not isinstance(source_ranges, (int, np.integer)) or not 1 <= source_ranges <= 1024:
        raise GraphError(f"source_ranges={source_ranges!r} must be an integer in 1..1024")
    if source_ranges > 1 and edge_order != "source":
        raise GraphError("source_ranges > 1 needs edge_order='source'")
    for name, value in (("memory_budget", memory_budget), ("page_bytes", page_bytes),
                        ("streams", streams)):
        if value is not None and (not isinstance(value, (int, np.integer)) or value < 1):
            raise GraphError(f"{name}={value!r} must be a positive integer")
    if threads_per_block not in (32, 64, 128, 256, 512, 1024):
        raise GraphError(f"threads_per_block={threads_per_block!r} must be a power of two "
                         f"from 32 to 1024")


class GpuEngine(Engine):
    """A program running on one GPU: device vertex arrays, resident and streamed pages.
    ``values``, ``flags`` and ``aux``: the initial state, copied to the device (CuPy
    arrays on this device are taken as they are).

    ``memory_budget``: device bytes for edge data (default 80% of the free memory after
    the vertex arrays). ``page_bytes``: the page size used when pages must be streamed
    (default 32 MiB, smaller when the budget asks). ``streams``: CUDA streams for page
    copies (default 4). ``shared_bytes``: shared memory per block (default 16 KiB).
    ``replication``: a fixed R for every shard instead of Garaph eq. 2.
    ``threads_per_block``: default 256. ``edge_order``: "source" (default) or
    "destination", the order of the edges inside a shard (see :func:`page_layout`).
    ``partition``: the shards and pages to use (default: made for the layout options
    and the budget); a hybrid run passes the one it shares with the CPU.
    ``source_ranges``: passes over the resident pages, one per range of source vertices,
    so that the values gathered in a pass stay in the L2 cache (GraphCage's cache
    blocking). Default 1: more ranges repeat the per-shard work in every pass.

    It keeps up to ``tuning.QUEUED`` iterations launched (see :meth:`launch`), one when
    it streams pages: a chained pass after convergence skips its kernels but not its
    page copies. ``front`` is the frontier's lowest priority (programs with one, see
    :meth:`wait`); ``read_bytes`` stays 0 (pages come from host memory).
    """

    mode = "gpu-pull"

    def __init__(self, spec, graph, values, flags, aux, *, sync=True, memory_budget=None,
                 page_bytes=PAGE_BYTES, streams=STREAMS, shared_bytes=GPU_SHARED_BYTES,
                 replication=None, threads_per_block=THREADS_PER_BLOCK, edge_order="source",
                 source_ranges=1, partition=None):
        require_gpu()
        _check_options(memory_budget, page_bytes, streams, threads_per_block, edge_order,
                       source_ranges)
        import cupy

        self.cupy = cupy
        self.spec = spec
        self.graph = graph
        self.sync = sync
        self.threads_per_block = int(threads_per_block)
        self.edge_order = edge_order
        self.ranges = int(source_ranges)
        self.weighted = bool(spec.needs_weights and graph.weighted)
        start = time.perf_counter()
        # (the out-degrees are at most the arcs: no pass over them to choose)
        degree_dtype = np.uint32 if graph.num_arcs < 2**32 else np.uint64
        self.kernel = compile_kernel(spec, aux.dtype, graph.index_dtype, degree_dtype,
                                     weighted=self.weighted, sync=sync,
                                     warp_combine=edge_order == "destination")
        self.compile_seconds = time.perf_counter() - start
        self._upload_vertices(values, flags, aux)
        self.per_edge = edge_bytes(graph.index_dtype, self.weighted)
        self.layout = dict(shared_bytes=shared_bytes, replication=replication,
                           vertex_bytes=spec.dtype.itemsize)
        self._place_pages(memory_budget, partition, int(page_bytes), int(streams),
                          degree_dtype)
        self._active, self._degree = self.count_frontier()

    # setup -------------------------------------------------------------------------------
    def _upload_vertices(self, values, flags, aux):
        cp = self.cupy
        try:
            self.values = cp.asarray(values)
            self.new_values = cp.empty_like(self.values) if self.sync else self.values
            self.flags = cp.asarray(flags)
            self.aux = cp.asarray(aux)
            # the activated counts of QUEUED + 1 iterations (a ring: the one a queued
            # iteration reads as its go, and those in flight), copied to pinned memory:
            # vertices activated, their out-degree sum, the key of their lowest
            # priority (see front_of_key)
            ring = tuning.QUEUED + 1
            slots = cp.zeros((ring, 3), cp.uint64)
            self._slots = [slots[i] for i in range(ring)]  # views made once
            self._slot_pointers = [slot.data.ptr for slot in self._slots]
            self._host_slots = pinned_empty((ring, 3), np.uint64)
            self._host_pointers = [self._host_slots[i].ctypes.data for i in range(ring)]
            self._events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(ring)]
            self._held = [None] * ring  # each slot's device constant, kept alive
            self._next_slot, self._chain = 0, None
            self.counters = self._slots[0]
            self._go = self._one = cp.ones(1, cp.uint64)
            self._counters_pointer, self._go_pointer = self._slot_pointers[0], \
                self._one.data.ptr
            self.constant = cp.zeros(1, cp.float64)
            self._constant_value = 0.0
            self._constant_at = self.constant
            self._no_weight = cp.empty(1, np.float32)
            # the frontier's count (active vertices, out-degree sum), on the device and
            # copied to pinned memory; ``_counting``: a count is queued that
            # :meth:`frontier` has not yet waited for (see :meth:`reset_frontier`)
            self._count = cp.zeros(2, cp.uint64)
            self._count_host = pinned_empty(2, np.uint64)
            self._counted = cp.cuda.Event(disable_timing=True)
            self._counting = False
        except cp.cuda.memory.OutOfMemoryError:
            raise GpuMemoryError(f"the GPU cannot hold the vertex arrays of "
                                 f"{self.graph.num_vertices:,} vertices") from None

    def _place_pages(self, memory_budget, given, page_bytes, streams, degree_dtype):
        """Find the pages kept on this device for this graph, partition and options, or
        lay them out (:func:`device_pages`), then allocate this run's staging buffers;
        when the device runs out, halving the budget (and, without a ``given``
        partition, the pages)."""
        cp = self.cupy
        device = cp.cuda.runtime.getDevice()
        budget = memory_budget
        if memory_budget is None:  # the free memory once the kept pages are dropped
            free, _ = cp.cuda.runtime.memGetInfo()
            budget = int((free + kept_bytes(device)) * BUDGET_FRACTION)
        partition = given if given is not None else \
            self._partition(budget, page_bytes, streams)
        # a run given no budget takes what it finds kept for its partition: its budget
        # was measured on the same device, less what the kept pages held
        key = (self.graph.token, np.dtype(degree_dtype).str, self.edge_order, self.ranges,
               memory_budget, streams, partition_key(partition))
        while True:
            try:
                self.pages = device_pages(key, self.weighted, lambda: DevicePages(
                    self.graph, partition, per_edge=self.per_edge, weighted=self.weighted,
                    edge_order=self.edge_order, ranges=self.ranges, budget=budget,
                    streams=streams, degree=self.graph.out_degree().astype(degree_dtype)))
                self._allocate()
                return
            except GpuMemoryError:  # a page larger than the budget: smaller will not do
                raise
            except MemoryError:  # CuPy's OutOfMemoryError, or a sort's std::bad_alloc
                self._release_pages()
                release(device)
                smaller = budget // 2
                log.warning("GPU out of memory with a page budget of %d bytes; trying %d",
                            budget, smaller)
                if smaller < 1 << 16:
                    raise GpuMemoryError(f"the GPU ran out of memory for the pages of "
                                         f"{self.graph.summary()} even with a budget of "
                                         f"{budget:,} bytes") from None
                budget = smaller
                partition = given if given is not None else \
                    self._partition(budget, page_bytes, streams)

    def _partition(self, budget, page_bytes, streams):
        """The graph's partition for a ``budget`` of device bytes: pages of
        ``page_bytes``, smaller when the edges do not fit (:func:`page_bytes_for`)."""
        page_bytes = page_bytes_for(self.graph.num_arcs * self.per_edge, budget, page_bytes,
                                    streams)
        return self.graph.partition(page_bytes=page_bytes, **self.layout)

    def _allocate(self):
        """This run's part beside the shared pages: the staging buffers and streams of
        the streamed pages, the partial sums of the source ranges, the arguments of the
        shard kernel and of the frontier's count."""
        cp = self.cupy
        pages = self.pages
        self.partition, self.plan = pages.partition, pages.plan
        self.queued = 1 if len(self.plan.streamed_pages) else len(self._slots) - 1
        self.shared_bytes = pages.slots * self.spec.dtype.itemsize
        # with the kernel's 16 static bytes, 48 KiB of dynamic memory needs the opt-in
        self.kernel.max_dynamic_shared_size_bytes = self.shared_bytes
        self.partial = (cp.empty(self.graph.num_vertices, self.spec.dtype) if self.ranges > 1
                        else self._no_weight)
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(self.plan.streams)]
        self.stages = [tuple(None if d is None else cp.empty(self.plan.stage_edges, d)
                             for d in pages.dtypes) for _ in range(self.plan.streams)]
        # the shard kernel's arguments in its order; _launch sets those marked None and
        # those that change between launches
        self._pass = PackedLaunch(self.kernel, dict(
            src=None, offsets=None, weight=None, shard_start=pages.shard_start,
            shard_edge=pages.shard_edge, shard_log_r=pages.shard_log_r,
            ranges=np.int32(self.ranges), k_begin=np.int32(0), k_end=np.int32(0),
            first=np.int32(0), last=np.int32(0), partial=self.partial,
            edge_base=np.int64(0), first_shard=np.int32(0), values=None, new_values=None,
            flags=self.flags, aux=self.aux, aux_per_vertex=np.int32(self.aux.size > 1),
            constant_at=None, out_degree=pages.out_degree, counters=None, go=None))
        # what a launch changes every iteration, set through the holders; the rest is
        # set when the edges or the shard range change (see _launch)
        self._changing = self._pass.holders("values", "new_values", "constant_at",
                                            "counters", "go")
        self._placed_edges = self._placed_shards = None
        part = pages.partition  # the resident pages are the first ones: one run
        self._resident_runs = [(0, int(part.page_shard[self.plan.resident]))] \
            if self.plan.resident else []
        n = self.graph.num_vertices
        self._count_blocks = int(min(1024, max(1, -(-n // 256))))
        self._count_pass = PackedLaunch(
            _count_frontier_kernel(c_type(pages.out_degree.dtype), cp.cuda.runtime.getDevice()),
            dict(flags=self.flags, degree=pages.out_degree, n=np.int64(n), out=self._count))

    def _release_pages(self):
        for name in ("pages", "stages", "partial", "_pass", "_count_pass"):
            setattr(self, name, None)

    def close(self):
        """Let go of the pages (kept for later runs, see :func:`device_pages`) and free this
        run's staging buffers now (the run is over)."""
        self._release_pages()

    # iteration ------------------------------------------------------------------------------
    def frontier(self):
        """(active vertices, sum of their out-degrees) after the last iteration (waits
        for a count that :meth:`reset_frontier` queued)."""
        if self._counting:
            self._active, self._degree = self._counted_frontier()
            self._counting = False
        return self._active, self._degree

    def _launch(self, grid, first_shard, edge_base, edges, stream, k_begin=0, k_end=None):
        """Shards [first_shard, first_shard + grid) over the source ranges
        [k_begin, k_end) (default all): the first range starts from the identity, the
        last one applies; the others keep their sums in ``partial``. The arguments
        that only change with the edges or the shards are set only then: an argument
        set by keyword costs microseconds of host time, which a short pass waits for."""
        if grid == 0:
            return
        k_end = self.ranges if k_end is None else k_end
        shards = (first_shard, edge_base, k_begin, k_end)
        if self._placed_edges is not edges or self._placed_shards != shards:
            src, offsets, weight = edges
            self._pass.update(src=src, offsets=offsets,
                              weight=self._no_weight if weight is None else weight,
                              k_begin=k_begin, k_end=k_end, first=int(k_begin == 0),
                              last=int(k_end == self.ranges), edge_base=edge_base,
                              first_shard=first_shard)
            self._placed_edges, self._placed_shards = edges, shards
        values_arg, new_values_arg, constant_arg, counters_arg, go_arg = self._changing
        values_arg.value = self.values.data.ptr
        new_values_arg.value = self.new_values.data.ptr
        constant_arg.value = self._constant_at.data.ptr
        counters_arg.value = self._counters_pointer
        go_arg.value = self._go_pointer
        self._pass(grid, self.threads_per_block, self.shared_bytes, stream.ptr)

    def iterate(self, constant, frontier=None):
        """One pull pass over every page (the GPU computes every vertex, so the frontier
        is not needed), waited for; returns (mode, vertices computed, edges read,
        vertices activated)."""
        return self.wait(self.launch(constant, chained=False))[:4]

    def launch(self, constant, frontier=None, chained=True):
        """Queue one pull pass over every page without waiting for it; returns the
        ticket that :meth:`wait` or :meth:`discard` takes. In sync mode the values it
        writes are current at once for what is queued after it (the device runs them in
        order). ``chained``: its kernels return at once when the iteration launched
        before it activated no vertex; the caller must then discard it. At most
        :attr:`queued` launches may be waiting."""
        stream = self.cupy.cuda.get_current_stream()
        slot = self.begin(constant, chained, stream)
        start, end = self._events[slot]
        start.record(stream)
        self.run_pages(stream=stream)
        self.cupy.cuda.runtime.memcpyAsync(
            self._host_pointers[slot], self._counters_pointer, self.counters.nbytes,
            self.cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        end.record(stream)
        self.finish()
        return slot

    def wait(self, ticket):
        """Wait for a launched iteration; returns (mode, vertices computed, edges read,
        vertices activated, seconds it took on the device) and makes its activated
        vertices the frontier (and ``front`` their lowest priority, for a program with
        a priority)."""
        start, end = self._events[ticket]
        end.synchronize()
        self._active, self._degree, key = self._host_slots[ticket].tolist()
        self._counting = False
        if self.spec.priority is not None:
            self.front = front_of_key(key)
        seconds = self.cupy.cuda.get_elapsed_time(start, end) / 1e3
        return (self.mode, self.graph.num_vertices, self.graph.num_arcs, self._active,
                seconds)

    def discard(self, tickets):
        """Undo launched iterations that followed one activating nothing (their kernels
        returned at once): in sync mode, their swaps of the value arrays."""
        if self.sync and len(tickets) % 2:
            self.values, self.new_values = self.new_values, self.values
        self._chain = None

    def begin(self, constant, chained=False, stream=None):
        """Start an iteration with the program's iteration constant (a number, or a 0-d
        device array passed to the kernels as it is: no copy, no wait): take the next
        counter slot and zero it on ``stream`` (default: the current one); returns the
        slot. ``chained``: see :meth:`launch`."""
        cp = self.cupy
        slot = self._next_slot
        self._next_slot = (slot + 1) % len(self._slots)
        chain = self._chain if chained else None
        self._go = self._one if chain is None else self._slots[chain]
        self._go_pointer = self._go.data.ptr
        self._chain = slot
        self.counters = self._slots[slot]
        self._counters_pointer = self._slot_pointers[slot]
        stream = cp.cuda.get_current_stream() if stream is None else stream
        cp.cuda.runtime.memsetAsync(self._counters_pointer, 0, self.counters.nbytes,
                                    stream.ptr)
        self._held[slot], self._constant_at = None, self.constant
        if isinstance(constant, cp.ndarray) and constant.dtype == cp.float64 and \
                constant.size == 1:  # computed on the device: read where it is
            self._held[slot] = self._constant_at = constant
        elif isinstance(constant, cp.ndarray):
            self.constant[...] = constant.reshape(1)
            self._constant_value = None
        elif float(constant) != self._constant_value:  # queued passes read it in order
            self.constant.fill(float(constant))
            self._constant_value = float(constant)
        return slot

    def run_pages(self, pages=None, stream=None):
        """Pull the pages ``pages`` (increasing page numbers; default every page) on
        ``stream`` (default: the current one): resident runs of pages in one launch per
        source range, streamed pages copied over the streams."""
        part, plan = self.partition, self.plan
        if pages is None:
            runs, streamed = self._resident_runs, plan.streamed_pages
        else:
            pages = np.asarray(pages, np.int64)
            resident = pages[pages < plan.resident]
            cuts = np.flatnonzero(np.diff(resident) != 1) + 1  # runs of consecutive pages
            runs = [(int(part.page_shard[run[0]]), int(part.page_shard[run[-1] + 1]))
                    for run in (np.split(resident, cuts) if len(resident) else ())]
            streamed = pages[pages >= plan.resident]
        main = self.cupy.cuda.get_current_stream() if stream is None else stream
        # streamed copies may start while the resident pages run
        ready = main.record() if len(streamed) else None
        for s0, s1 in runs:
            for k in range(self.ranges):  # cache blocking: one pass per source range
                self._launch(s1 - s0, s0, 0, self.pages.resident, main, k, k + 1)
        if len(streamed):
            split = self.plan.resident_edges
            for k, p in enumerate(streamed):
                stream = self.streams[k % len(self.streams)]
                stream.wait_event(ready)
                e0, e1 = (int(x) for x in self.plan.page_edges[p])
                stage = self.stages[k % len(self.stages)]
                for device, host in zip(stage, self.pages.pinned):
                    if device is not None:
                        device[:e1 - e0].set(host[e0 - split:e1 - split], stream=stream)
                s0, s1 = int(part.page_shard[p]), int(part.page_shard[p + 1])
                self._launch(s1 - s0, s0, e0, stage, stream)
            for stream in self.streams:
                main.wait_event(stream.record())

    def counts(self):
        """(vertices activated, their out-degree sum) since :meth:`begin` (waits)."""
        active, degree = (int(x) for x in self.counters[:2].get())
        return active, degree

    def finish(self):
        """End an iteration: in sync mode the values written become current."""
        if self.sync:
            self.values, self.new_values = self.new_values, self.values

    def load(self, values, flags, ranges):
        """Copy host ``values`` and ``flags`` (NumPy) of the vertex ``ranges``
        [(v0, v1), ...] to the device; ``flags`` may be None."""
        for v0, v1 in ranges:
            self.values[v0:v1].set(values[v0:v1])
            if flags is not None:
                self.flags[v0:v1].set(flags[v0:v1])

    def store(self, values, flags, ranges, written=True, wait=True):
        """Copy the device values of the vertex ``ranges`` and their flags into the host
        arrays ``values`` and ``flags`` (contiguous, of the program's dtype and uint8):
        the values written by the current iteration (``written``; before
        :meth:`finish`) or the current ones. ``wait=False``: the copies are queued on
        the current stream and their CUDA event is returned, which the caller must
        synchronize before reading those host arrays (page-locked ones: from pageable
        memory a copy returns when done); the host's work in between overlaps them."""
        source = self.new_values if written else self.values
        if values.dtype != source.dtype or flags.dtype != self.flags.dtype or not (
                values.flags.c_contiguous and flags.flags.c_contiguous):
            raise TypeError(f"store into {values.dtype}/{flags.dtype} host arrays (both "
                            f"contiguous) from {source.dtype}/{self.flags.dtype} device "
                            f"arrays")
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        for host, device in ((values, source), (flags, self.flags)):
            size = host.itemsize
            for v0, v1 in ranges:
                cp.cuda.runtime.memcpyAsync(host.ctypes.data + v0 * size,
                                            device.data.ptr + v0 * size, (v1 - v0) * size,
                                            cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        done = stream.record()
        if not wait:
            return done
        done.synchronize()
        return None

    def count_frontier(self):
        """(active vertices, sum of their out-degrees) of the device flags, counted on the
        device (waits): a run with a GPU counts the host state's frontier here, after
        copying that state, not on the host, where the copy would wait for the count."""
        self._queue_count()
        return self._counted_frontier()

    def _queue_count(self):
        """Queue the count of the device flags' frontier and its copy to the host."""
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memsetAsync(self._count.data.ptr, 0, self._count.nbytes, stream.ptr)
        self._count_pass(self._count_blocks, 256, 0, stream.ptr)
        cp.cuda.runtime.memcpyAsync(self._count_host.ctypes.data, self._count.data.ptr,
                                    self._count.nbytes, cp.cuda.runtime.memcpyDeviceToHost,
                                    stream.ptr)
        self._counted.record(stream)

    def _counted_frontier(self):
        """The count :meth:`_queue_count` last queued (waits for it)."""
        self._counted.synchronize()
        active, degree = self._count_host.tolist()
        return active, degree

    def reset_frontier(self, counted=None):
        """Set the frontier after the vertex state was loaded from the host (the next
        chained launch does not depend on the iterations before): ``counted``, or when
        None that of the device flags, counted on the device without waiting, so that
        the host's work before a segment's first iteration overlaps the state's copy and
        the count (:meth:`frontier` waits for it when first asked)."""
        if counted is None:
            self._queue_count()
        else:
            self._active, self._degree = int(counted[0]), int(counted[1])
        self._counting = counted is None
        self._chain, self.front = None, float("nan")

    def result(self):
        """The current values as a host NumPy array."""
        return self.values.get()

    def describe(self):
        """The page placement, for logs and benchmarks."""
        return {"pages": self.partition.num_pages, "resident_pages": self.plan.resident,
                "streamed_pages": len(self.plan.streamed_pages), "streams": self.plan.streams,
                "resident_edges": self.plan.resident_edges,
                "streamed_edges": self.graph.num_arcs - self.plan.resident_edges,
                "shards": self.partition.num_shards, "shared_bytes": self.shared_bytes,
                "source_ranges": self.ranges}


def pinned_empty(shape, dtype):
    """An uninitialised array in page-locked host memory (pageable when pinning fails):
    copies between it and a GPU run at full PCIe speed (H100: 54.7 GB/s against 7.3
    GB/s from pageable memory)."""
    import cupyx

    try:
        return cupyx.empty_pinned(shape, dtype)
    except Exception:  # pinning can fail when the host limits locked memory
        log.warning("could not pin %d bytes of host memory; copies to the GPU will be "
                    "slower", int(np.prod(shape)) * np.dtype(dtype).itemsize)
        return np.empty(shape, dtype)


def pinned_copy(array):
    """A copy of ``array`` in page-locked host memory (see :func:`pinned_empty`)."""
    pinned = pinned_empty(array.shape, array.dtype)
    pinned[...] = array
    return pinned
