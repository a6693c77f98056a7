"""The shard kernel ``shard_pass``: its CUDA source for a program, and its compilation.

One thread block per shard (Garaph sections 3 and 5.2). The shard's vertices live in
shared memory with R_i replicas each (slot ``offset * R_i + tid % R_i``); every in-edge's
gather result is combined into its slot with the monoid's shared-memory atomic (float
min/max through compare-and-swap); the replicas are merged by a two-way reduction; then
apply and activate run for each vertex and write the new value (a second array in sync
mode, the values themselves in async mode) and the active flag. The user's gather /
apply / activate are translated to CUDA by :mod:`hetgraph.kernels.transpile` and compiled
with NVRTC through ``cupy.RawModule``, once per program, dtype and layout.

:func:`kernel_source` joins the pieces below in the order they appear in the source:
declarations, the program's functions, the monoid, the edge reads, then the kernel's
parameters, prologue, gather loop, merge and epilogue.
"""

from __future__ import annotations

import numpy as np

from ... import tuning
from ...errors import HetGraphError
from ...program import ProgramSpec
from ..transpile import PRELUDE, c_type, device_function, literal
from .layout import unsigned_index


def kernel_source(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                  sync, warp_combine=False, swept=False, split=False) -> str:
    """CUDA source of the shard kernel ``shard_pass`` for ``spec``; ``warp_combine``:
    the edges come in destination order and a warp combines equal destinations before
    its shared-memory atomics; ``swept``: a colored pass's kernel, which may sum its
    new values over the vertices of a constant, and add the sums of the launch before
    into the constant it reads: ``hg_swept_part``, ``hg_prior_constant``); ``split``:
    a colored pass's kernel whose blocks are jobs, parts of a shard's edges
    (``split_jobs``: a hub's shard cut into parts, combined by the part that finishes
    last, see ``_SPLIT_COMBINE``)."""
    identity = literal(spec.identity(), spec.dtype)
    return "".join((
        kernel_head(spec, aux_dtype, index_dtype, degree_dtype, weighted=weighted, sync=sync,
                    warp_combine=warp_combine, swept=swept, split=split),
        _PARAMETERS, _prologue(identity), gather_loop(identity), _MERGE, _SPLIT_COMBINE,
        _EPILOGUE))


def kernel_head(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                sync, warp_combine=False, swept=False, split=False) -> str:
    """What every pull kernel of ``spec`` begins with (see :func:`kernel_source`): the
    types and switches, the program's functions, the monoid, the edge reads and (with
    ``swept``) the swept constant's sums."""
    aux_dtype = np.dtype(aux_dtype)
    unsigned = unsigned_index(index_dtype)
    return "".join((
        _declarations(spec, aux_dtype, unsigned, degree_dtype, weighted, sync, warp_combine,
                      swept, split),
        _program_functions(spec, aux_dtype), _FRONT_KEY, _monoid(spec), _edge_reads(),
        _SWEPT_FUNCTIONS))


def _declarations(spec, aux_dtype, unsigned, degree_dtype, weighted, sync, warp_combine,
                  swept, split):
    """The kernel's types and the switches its ``#if``s read."""
    return f"""
typedef {c_type(spec.dtype)} value_t;
typedef {c_type(aux_dtype)} aux_t;
typedef {c_type(unsigned)} index_t;
typedef {c_type(degree_dtype)} degree_t;
#define HG_SYNC {int(bool(sync))}
#define HG_WEIGHTED {int(bool(weighted))}
#define HG_WARP_COMBINE {int(bool(warp_combine))}
#define HG_PRIORITY {int(spec.priority is not None)}
#define HG_SWEPT {int(bool(swept))}
#define HG_SPLIT {int(bool(split))}
"""


_FUNCTIONS: dict = {}  # (program code key, name, aux dtype) -> translated functions


def _program_functions(spec, aux_dtype):
    """The translation prelude and the program's gather, apply, activate and priority
    as ``__device__`` functions (``hg_gather``, ``hg_user_apply``, ...), translated once
    per program code for the process (reading a function's source takes milliseconds)."""
    code = spec.code_key()
    key = None if code is None else (code, spec.name, aux_dtype.str)
    functions = _FUNCTIONS.get(key)
    if functions is None:
        functions = _translate(spec, aux_dtype)
        if key is not None:
            _FUNCTIONS[key] = functions
    return functions


def _translate(spec, aux_dtype):
    value = spec.dtype
    gather = device_function(spec.name, "gather", spec.gather, "hg_gather",
                             (value, np.float32, value), value)
    apply_params = (value, value, aux_dtype) + ((np.float64,) if spec.uses_constant else ())
    apply = device_function(spec.name, "apply", spec.apply, "hg_user_apply", apply_params,
                            value)
    activate = device_function(spec.name, "activate", spec.activate, "hg_activate",
                               (value, value), np.bool_)
    priority = "" if spec.priority is None else device_function(
        spec.name, "priority", spec.priority, "hg_priority", (value,), np.float64)
    return f"{PRELUDE}\n{gather}\n{apply}\n{activate}\n{priority}\n"


_FRONT_KEY = """\
#if HG_PRIORITY
/* counters[2] holds the lowest priority activated as this key's maximum: the key is
   the complement of an order-preserving map of the double's bits, so that the zeroed
   counter means none */
__device__ __forceinline__ unsigned long long hg_front_key(double p) {
  const unsigned long long b = (unsigned long long)__double_as_longlong(p);
  return ~((b >> 63) ? ~b : (b | 0x8000000000000000ull));
}
#endif
"""


def front_of_key(key):
    """The priority whose ``hg_front_key`` is ``key`` (an int; 0: none, NaN)."""
    if not key:
        return float("nan")
    ordered = ~key & 0xFFFFFFFFFFFFFFFF
    bits = ordered & 0x7FFFFFFFFFFFFFFF if ordered >> 63 else ~ordered & 0xFFFFFFFFFFFFFFFF
    return float(np.array(bits, np.uint64).view(np.float64))


def _monoid(spec):
    """``hg_apply`` (the user's apply with or without the iteration constant), and the
    monoid's ``hg_combine`` and shared-memory ``hg_atomic``."""
    call = "hg_user_apply(old, acc, aux" + (", constant)" if spec.uses_constant else ")")
    return f"""\
__device__ __forceinline__ value_t hg_apply(value_t old, value_t acc, aux_t aux,
                                            double constant) {{ return {call}; }}
__device__ __forceinline__ value_t hg_combine(value_t a, value_t b) {{
  return {_combine(spec.reduce)};
}}
__device__ __forceinline__ void hg_atomic(value_t* p, value_t v) {{
  {_atomic(spec.reduce, spec.dtype)}
}}
"""


def _combine(reduce):
    """The monoid ``reduce`` of ``a`` and ``b`` as a C expression."""
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


def _edge_reads():
    """How the kernel reads values, edges and weights, and how many edges a thread
    gathers at once (``tuning.GPU_EDGE_UNROLL``)."""
    return f"""\
#if HG_SYNC
#define HG_VALUES const value_t* __restrict__
#else
#define HG_VALUES const value_t*
#endif
/* a pass reads each edge once: streaming loads (evict first) leave the caches to the
   gathered values */
#define HG_EDGE(array, e) __ldcs(&array[e])
#if HG_WEIGHTED
#define HG_WEIGHT(e) HG_EDGE(weight, e)
#else
#define HG_WEIGHT(e) 1.0f
#endif
#define HG_UNROLL {tuning.GPU_EDGE_UNROLL}

"""


BLOCK_SUM = """\
/* the block's sum of every thread's x in a fixed order (each warp's by shuffles, then
   the warps' in order by warp 0), whole in thread 0 (lane 0 of warp 0); every thread of
   the block calls it */
__device__ double hg_block_sum(double x) {
  __shared__ double warp_sums[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int d = 16; d > 0; d >>= 1) x += __shfl_down_sync(0xffffffffu, x, d);
  __syncthreads();  /* (an earlier call's reads of warp_sums are done) */
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  x = 0.0;
  if (warp == 0) {
    if (lane < (int)(blockDim.x >> 5)) x = warp_sums[lane];
    for (int d = 16; d > 0; d >>= 1) x += __shfl_down_sync(0xffffffffu, x, d);
  }
  return x;
}

/* this lane's two of the colors' sums (colors lane and lane + 32 below count, but
   color's, whose sum is being made: 0), read ahead of hg_swept_constant */
struct hg_sums { double low, high; };
__device__ hg_sums hg_sums_ahead(const double* sums, int color, int count) {
  const int lane = threadIdx.x & 31;
  hg_sums two = {0.0, 0.0};
  if (lane < count && lane != color) two.low = __ldcg(&sums[lane]);
  if (lane + 32 < count && lane + 32 != color) two.high = __ldcg(&sums[lane + 32]);
  return two;
}

/* warp 0 (all its lanes): the constant offset + factor * (sums[0] + ... +
   sums[count - 1]) in a fixed order, sums[color] taken as color_sum, the others as
   hg_sums_ahead read them, whole in lane 0; with store, lane 0 also stores color_sum
   in sums[color] and the constant in *constant; count at most 64 */
__device__ double hg_swept_constant(hg_sums two, double* sums, int color,
                                    double color_sum, int count, const double* terms,
                                    double* constant, bool store) {
  const int lane = threadIdx.x & 31;
  double total = 0.0;
  for (int k = lane; k < count; k += 32)
    total += k == color ? color_sum : (k < 32 ? two.low : two.high);
  for (int d = 16; d > 0; d >>= 1) total += __shfl_down_sync(0xffffffffu, total, d);
  const double value = terms[0] + terms[1] * total;
  if (lane == 0 && store) {
    if (color >= 0) sums[color] = color_sum;
    *constant = value;
  }
  return value;
}
"""

# (a colored pass's kernel: the constant summed again after each color, see kernel_source)
_SWEPT_FUNCTIONS = "#if HG_SWEPT\n" + BLOCK_SUM + """\
/* a color's launch: each block's sum of its new values over the constant's vertices
   (mine) into partial[block], where the next launch adds them (hg_prior_constant; no
   atomic add of values: reruns give the same bits) */
__device__ void hg_swept_part(double mine, double* partial) {
  mine = hg_block_sum(mine);
  if (threadIdx.x == 0) partial[blockIdx.x] = mine;
}

/* this thread's share of the launch before's block sums (those k = threadIdx.x +
   j * blockDim.x < blocks, in that order) */
__device__ double hg_prior_share(const double* partial, int blocks) {
  double share = 0.0;
#pragma unroll 4
  for (int k = threadIdx.x; k < blocks; k += blockDim.x) share += __ldcg(&partial[k]);
  return share;
}

/* *now (shared, read after a barrier): the constant this launch reads, every thread of
   the block calling it: where the launch before summed its color (color >= 0), its
   blocks' sums (partial[0 .. blocks - 1]) added in a fixed order into that color's
   sum, and the constant from every color's, the same in every block (block 0 stores
   both, for the launches after); else *constant as the launches before left it. (Not
   inlined: inlined, the kernel took 48 registers, 5 blocks an SM, not 40.) */
__device__ __noinline__ void hg_prior_constant(const double* partial, int blocks, int color,
                                               double* sums, int count,
                                               const double* terms, double* constant,
                                               double* now) {
  if (color < 0) {
    if (threadIdx.x == 0) *now = *constant;
    return;
  }
  /* (the other colors' sums read with the blocks' sums: one wait for both) */
  const hg_sums two = threadIdx.x < 32 ? hg_sums_ahead(sums, color, count) : hg_sums{};
  const double sum = hg_block_sum(hg_prior_share(partial, blocks));
  if (threadIdx.x < 32) {
    const double value = hg_swept_constant(two, sums, color,
                                           __shfl_sync(0xffffffffu, sum, 0), count, terms,
                                           constant, blockIdx.x == 0);
    if (threadIdx.x == 0) *now = value;
  }
}
#define HG_CONSTANT double*
#else
#define HG_CONSTANT const double* __restrict__
#endif
"""

_PARAMETERS = """\
extern "C" __global__ void shard_pass(
    const index_t* __restrict__ src, const unsigned short* __restrict__ dst_offset,
    const float* __restrict__ weight, const long long* __restrict__ shard_start,
    const long long* __restrict__ shard_edge, const unsigned char* __restrict__ shard_log_r,
    const int ranges, const int k_begin, const int k_end, const int first, const int last,
    value_t* __restrict__ partial, const long long edge_base, const int first_shard,
    HG_VALUES values,
    value_t* new_values, unsigned char* __restrict__ flags, const aux_t* __restrict__ aux,
    const int aux_per_vertex, HG_CONSTANT constant_at,
    const degree_t* __restrict__ out_degree, unsigned long long* counters,
    const unsigned long long* __restrict__ go
#if HG_SWEPT
    , const unsigned char* __restrict__ swept_mask, double* swept_partial,
    double* swept_sums, const double* __restrict__ swept_terms, const int swept_color,
    const int swept_count, const double* prior_partial, const int prior_blocks,
    const int prior_color
#endif
#if HG_SPLIT
    , const int4* __restrict__ split_jobs, value_t* split_values,
    const long long* __restrict__ split_base, unsigned int* split_done
#endif
    )
{
"""


def _prologue(identity):
    """The block's shard and edges, and its shared-memory replicas set to the monoid's
    ``identity`` (a C literal)."""
    return f"""\
  /* go: the activated count of the iteration queued before this one; none activated,
     this one changes nothing (it is discarded by the host); read with the shard's
     bounds, tested once they are in (one wait on memory for both, not two) */
  const unsigned long long going = *go;
  extern __shared__ __align__(8) unsigned char hg_shared[];
  value_t* slots = (value_t*)hg_shared;
  __shared__ unsigned long long block_active, block_degree, block_front;
#if HG_SPLIT
  /* the block's job: (shard after first_shard, part, parts, split shard or -1) */
  const int4 job = split_jobs[blockIdx.x];
  const int s = first_shard + job.x;
#else
  const int s = first_shard + blockIdx.x;
#endif
  const long long v0 = shard_start[s];
  const int nv = (int)(shard_start[s + 1] - v0);
  const int log_r = shard_log_r[s];
  /* edges of source ranges [k_begin, k_end) of this shard (row s of the range table) */
  const long long* table = shard_edge + (long long)s * (ranges + 1);
#if HG_SPLIT
  /* (part job.y of job.z equal parts of them) */
  const long long t0 = table[k_begin] - edge_base, span = table[k_end] - edge_base - t0;
  const long long e0 = t0 + span * job.y / job.z, e1 = t0 + span * (job.y + 1) / job.z;
#else
  const long long e0 = table[k_begin] - edge_base, e1 = table[k_end] - edge_base;
#endif
  if (going == 0 || e1 < e0) return;  /* (e1 < e0 never: it keeps the loads before) */
  if (threadIdx.x == 0) {{ block_active = 0; block_degree = 0; block_front = 0; }}
  for (int k = threadIdx.x; k < (nv << log_r); k += blockDim.x)
    slots[k] = {identity};
  __syncthreads();
"""


def gather_loop(identity, barrier=True):
    """Every edge of [e0, e1) gathered and combined into its destination's replica
    (``slots[(off << log_r) + lane]``): with warp shuffles first (edges in destination
    order), or ``HG_UNROLL`` edges a thread at once; then the block's barrier unless
    ``barrier`` is False (the caller's loop gathers more first)."""
    return f"""\
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
                      : ({identity});
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
  if (e < e1) {{  /* fewer than HG_UNROLL edges a thread left: their loads overlap too */
    int off[HG_UNROLL];
    value_t gathered[HG_UNROLL];
#pragma unroll
    for (int u = 0; u < HG_UNROLL; ++u)
      off[u] = e + u * stride < e1 ? (int)HG_EDGE(dst_offset, e + u * stride) : 0;
#pragma unroll
    for (int u = 0; u < HG_UNROLL; ++u)
      if (e + u * stride < e1)
        gathered[u] = hg_gather(values[HG_EDGE(src, e + u * stride)],
                                HG_WEIGHT(e + u * stride), values[v0 + off[u]]);
#pragma unroll
    for (int u = 0; u < HG_UNROLL; ++u)
      if (e + u * stride < e1) hg_atomic(&slots[(off[u] << log_r) + lane], gathered[u]);
  }}
#endif
""" + ("  __syncthreads();\n" if barrier else "")


_MERGE = """\
  for (int log_h = log_r - 1; log_h >= 0; --log_h) {  /* two-way reduction */
    const int half = 1 << log_h;
    for (int k = threadIdx.x; k < (nv << log_h); k += blockDim.x) {
      value_t* p = &slots[((k >> log_h) << log_r) + (k & (half - 1))];
      *p = hg_combine(*p, p[half]);
    }
    __syncthreads();
  }
"""

# (a split shard's parts: each leaves its vertices' sums in split_values, and the part
# whose block finishes last adds them in part order and applies; the others apply
# nothing: their zero counts and swept sums still go through the block's tail)
_SPLIT_COMBINE = """\
#if HG_SPLIT
  __shared__ bool split_last;
  int applied = nv;  /* the vertices this block applies */
  /* the job read again (an L1 hit), not held in registers through the gather */
  const int4 part = __ldca(&split_jobs[blockIdx.x]);
  if (part.z > 1) {
    value_t* sums = split_values + split_base[part.w];
    for (int i = threadIdx.x; i < nv; i += blockDim.x)
      sums[(long long)part.y * nv + i] = slots[i << log_r];
    __threadfence();  /* (written before the count that lets the last part read them) */
    __syncthreads();
    if (threadIdx.x == 0)
      split_last = atomicAdd(&split_done[part.w], 1u) == (unsigned int)(part.z - 1);
    __syncthreads();
    if (split_last) {
      __threadfence();
      for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        value_t acc = *(volatile value_t*)&sums[i];
        for (int j = 1; j < part.z; ++j)
          acc = hg_combine(acc, *(volatile value_t*)&sums[(long long)j * nv + i]);
        slots[i << log_r] = acc;
      }
      if (threadIdx.x == 0) split_done[part.w] = 0u;  /* (for the next pass) */
      __syncthreads();
    } else {
      applied = 0;
    }
  }
#endif
"""

_APPLY_HEAD = """\
  unsigned long long active = 0, degree = 0, front = 0;
#if HG_SWEPT
  /* (here, not at the block's start: there it held more registers through the gather) */
  __shared__ double swept_now;
  hg_prior_constant(prior_partial, prior_blocks, prior_color, swept_sums, swept_count,
                    swept_terms, constant_at, &swept_now);
  __syncthreads();
  const double constant = swept_now;
  double swept = 0.0;  /* this thread's new values over the constant's vertices */
#else
  const double constant = *constant_at;
#endif
#if HG_SPLIT
  for (int i = threadIdx.x; i < applied; i += blockDim.x) {
#else
  for (int i = threadIdx.x; i < nv; i += blockDim.x) {
#endif
    const long long v = v0 + i;
"""

# (the shard kernel's accumulator: its slot, with the source ranges passed before)
_RANGES_ACCUMULATOR = """\
    value_t acc = slots[i << log_r];
    if (!first) acc = hg_combine(partial[v], acc);  /* earlier source ranges */
    if (!last) { partial[v] = acc; continue; }
"""

_APPLY_TAIL = """\
    const value_t old = values[v];
    const value_t now = hg_apply(old, acc, aux[aux_per_vertex ? v : 0], constant);
    new_values[v] = now;
#if HG_SWEPT
    if (swept_mask[v]) swept += (double)now;
#endif
    const bool on = hg_activate(now, old);
    flags[v] = on;
    if (on) {
      active += 1;
      degree += out_degree[v];
#if HG_PRIORITY
      front = max(front, hg_front_key(hg_priority(now)));
#endif
    }
  }
  /* the warp's sums first, then one shared atomic a warp (not a thread: all on one
     address) */
  for (int d = 16; d > 0; d >>= 1) {
    active += __shfl_down_sync(0xffffffffu, active, d);
    degree += __shfl_down_sync(0xffffffffu, degree, d);
#if HG_PRIORITY
    front = max(front, __shfl_down_sync(0xffffffffu, front, d));
#endif
  }
  if ((threadIdx.x & 31) == 0 && active) {
    atomicAdd(&block_active, active);
    atomicAdd(&block_degree, degree);
#if HG_PRIORITY
    atomicMax(&block_front, front);
#endif
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_active) {
    atomicAdd(&counters[0], block_active);
    atomicAdd(&counters[1], block_degree);
#if HG_PRIORITY
    atomicMax(&counters[2], block_front);
#endif
  }
#if HG_SWEPT
  if (swept_color >= 0 && last)  /* (the same for the whole grid) */
    hg_swept_part(swept, swept_partial);
#endif
}
"""


def apply_epilogue(accumulator):
    """Apply and activate for each vertex ``v0 + i`` (i < nv) of the block's shard, then
    the block's counts of the vertices activated, their out-degrees and lowest priority
    added to ``counters`` (the shared ``block_*`` zeroed before); ``accumulator``: the
    C lines that set ``acc``, the vertex's reduced gathers."""
    return _APPLY_HEAD + accumulator + _APPLY_TAIL


_EPILOGUE = apply_epilogue(_RANGES_ACCUMULATOR)

_KERNELS: dict = {}  # (source, kernel names) -> the compiled kernels, for the process


def compile_kernel(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted,
                   sync, warp_combine=False, swept=False, split=False):
    """The compiled ``shard_pass`` (a cupy.RawKernel), kept per source for the process
    (``swept``, ``split``: see :func:`kernel_source`)."""
    source = kernel_source(spec, aux_dtype, index_dtype, degree_dtype, weighted=weighted,
                           sync=sync, warp_combine=warp_combine, swept=swept, split=split)
    return compile_functions(spec, source, ("shard_pass",))[0]


def compile_functions(spec: ProgramSpec, source, names):
    """The kernels ``names`` of the CUDA ``source`` made for ``spec`` (cupy.RawKernel
    each), compiled once per source for the process; HetGraphError when it does not
    compile."""
    import cupy

    key = (source, tuple(names))
    kernels = _KERNELS.get(key)
    if kernels is None:
        try:
            module = cupy.RawModule(code=source, options=("-std=c++17",))
            kernels = tuple(module.get_function(name) for name in names)
        except cupy.cuda.compiler.CompileException as exc:
            detail = next((line for line in str(exc).splitlines() if "error" in line),
                          str(exc).splitlines()[0])
            raise HetGraphError(f"{spec.name}: the GPU translation did not compile "
                                f"({detail}); please report it with the program") from None
        _KERNELS[key] = kernels
    return kernels
