"""The GPU push pass (incremental programs): the active vertices of a compact subgraph
(Subway's SubCSR: their ids, the offsets of their edges, the edges' targets and weights)
send ``gather`` along their out-edges, and each target takes ``apply`` at once through
a compare-and-swap on its value (a min or max relaxation's atomic).

In async-subgraph mode a push also writes each source's value as it sent it into
``pushed`` (when given): a vertex whose value still equals it needs no further push
along these edges.

Work is mapped by out-degree (GraphCage section 3.2's push variant): a thread a vertex
up to ``tuning.PUSH_THREAD_DEGREE`` edges, a warp a vertex up to
``tuning.PUSH_WARP_DEGREE``, and the vertices beyond (hubs) go to a list that a second
kernel runs with the whole grid on each one's edges. A third kernel sets the flags of
the vertices the pushes may have changed and counts them as the shard kernel's epilogue
does. The program's functions are those of the shard kernel (:mod:`.source`).

A program can push when it is incremental (:class:`hetgraph.VertexProgram`): its monoid
is idempotent and ``apply`` combines the old value and the gathered one by it, so that
one contribution at a time gives what their combination gives, as the CPU's push
(:mod:`hetgraph.kernels.cpu.push`) relies on.
"""

from __future__ import annotations

import numpy as np

from ... import tuning
from ...errors import HetGraphError
from ...program import ProgramSpec
from ..transpile import c_type
from .layout import unsigned_index
from .source import _FRONT_KEY, _monoid, _program_functions, compile_functions


def can_push(spec: ProgramSpec) -> bool:
    """Whether the GPU can run ``spec`` by pushing: the CPU's rule (incremental)."""
    return spec.incremental


def push_source(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *,
                weighted) -> str:
    """CUDA source of the push kernels ``subgraph_push``, ``subgraph_push_hubs`` and
    ``subgraph_flags`` for ``spec`` (see the module's docstring)."""
    if not can_push(spec):
        raise HetGraphError(f"{spec.name} is not incremental: the GPU cannot push it")
    aux_dtype = np.dtype(aux_dtype)
    word = {4: "unsigned int", 8: "unsigned long long"}[spec.dtype.itemsize]
    return "".join((f"""
typedef {c_type(spec.dtype)} value_t;
typedef {c_type(aux_dtype)} aux_t;
typedef {c_type(unsigned_index(index_dtype))} index_t;
typedef {c_type(degree_dtype)} degree_t;
typedef {word} word_t;
#define HG_WEIGHTED {int(bool(weighted))}
#define HG_PRIORITY {int(spec.priority is not None)}
#define HG_THREAD_DEGREE {int(tuning.PUSH_THREAD_DEGREE)}
#define HG_WARP_DEGREE {int(tuning.PUSH_WARP_DEGREE)}
""", _program_functions(spec, aux_dtype), _FRONT_KEY, _monoid(spec), _PUSH))


_PUSH = r"""
union hg_word { value_t v; word_t w; };

/* one contribution g to target[v]: skipped when absorbed, else apply through a CAS on
   the value's bits until it holds; a change marks v in next_marks (when given) */
__device__ __forceinline__ void hg_push_edge(
    value_t s, index_t v, float w, value_t* target, const aux_t* __restrict__ aux,
    const int aux_per_vertex, unsigned char* next_marks, unsigned long long* changed)
{
  hg_word old, now, seen;
  old.v = target[v];
  const value_t g = hg_gather(s, w, old.v);
  if (hg_combine(old.v, g) == old.v) return;
  const aux_t a = aux[aux_per_vertex ? v : 0];
  while (true) {
    now.v = hg_apply(old.v, g, a, 0.0);
    if (now.w == old.w) return;
    seen.w = atomicCAS((word_t*)&target[v], old.w, now.w);
    if (seen.w == old.w) break;
    old = seen;
    if (hg_combine(old.v, g) == old.v) return;
  }
  if (next_marks) {
    next_marks[v] = 1;
    *changed = 1;
  }
}

#if HG_WEIGHTED
#define HG_PUSH_WEIGHT(e) weight[e]
#else
#define HG_PUSH_WEIGHT(e) 1.0f
#endif

/* the chunk's vertices i in [0, n): active[i] sends along edges [offsets[i],
   offsets[i + 1]) of targets / weight. marks (or NULL): only the marked ones send;
   they read their value from src_values, and write it to pushed[u] (when given). A
   thread a vertex of few edges, a warp one of more; the hubs go to hubs[] (their
   count in *hub_count, zeroed before) */
extern "C" __global__ void subgraph_push(
    const index_t* __restrict__ active, const unsigned int* __restrict__ offsets,
    const index_t* __restrict__ targets, const float* __restrict__ weight,
    const long long n, const value_t* src_values, value_t* target,
    const unsigned char* marks, unsigned char* next_marks, unsigned long long* changed,
    value_t* pushed, const aux_t* __restrict__ aux, const int aux_per_vertex,
    unsigned int* __restrict__ hubs, unsigned int* __restrict__ hub_count,
    const unsigned long long* __restrict__ go)
{
  if (*go == 0) return;
  const long long threads = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long i = tid; i < n; i += threads) {  /* a thread a vertex */
    const unsigned int e0 = offsets[i], e1 = offsets[i + 1];
    const index_t u = active[i];
    if (e1 - e0 > HG_THREAD_DEGREE || (marks && !marks[u])) continue;
    const value_t s = src_values[u];
    if (pushed) pushed[u] = s;
    for (unsigned int e = e0; e < e1; ++e)
      hg_push_edge(s, targets[e], HG_PUSH_WEIGHT(e), target, aux, aux_per_vertex,
                   next_marks, changed);
  }
  const int lane = threadIdx.x & 31;
  for (long long i = tid >> 5; i < n; i += threads >> 5) {  /* a warp a vertex */
    const unsigned int e0 = offsets[i], e1 = offsets[i + 1];
    if (e1 - e0 <= HG_THREAD_DEGREE) continue;
    const index_t u = active[i];
    if (marks && !marks[u]) continue;
    if (e1 - e0 > HG_WARP_DEGREE) {
      if (lane == 0) hubs[atomicAdd(hub_count, 1u)] = (unsigned int)i;
      continue;
    }
    const value_t s = src_values[u];
    if (pushed && lane == 0) pushed[u] = s;
    for (unsigned int e = e0 + lane; e < e1; e += 32)
      hg_push_edge(s, targets[e], HG_PUSH_WEIGHT(e), target, aux, aux_per_vertex,
                   next_marks, changed);
  }
}

/* the hubs subgraph_push listed: the whole grid on each one's edges in turn */
extern "C" __global__ void subgraph_push_hubs(
    const index_t* __restrict__ active, const unsigned int* __restrict__ offsets,
    const index_t* __restrict__ targets, const float* __restrict__ weight,
    const value_t* src_values, value_t* target, unsigned char* next_marks,
    unsigned long long* changed, value_t* pushed, const aux_t* __restrict__ aux,
    const int aux_per_vertex, const unsigned int* __restrict__ hubs,
    const unsigned int* __restrict__ hub_count, const unsigned long long* __restrict__ go)
{
  if (*go == 0) return;
  const unsigned int count = *hub_count;
  const long long threads = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (unsigned int h = 0; h < count; ++h) {
    const unsigned int i = hubs[h];
    const value_t s = src_values[active[i]];
    if (pushed && tid == 0) pushed[active[i]] = s;
    const long long e1 = offsets[i + 1];
    for (long long e = offsets[i] + tid; e < e1; e += threads)
      hg_push_edge(s, targets[e], HG_PUSH_WEIGHT(e), target, aux, aux_per_vertex,
                   next_marks, changed);
  }
}

/* vertices [v0, v1): flag = activate(target, before), and the activated vertices, their
   out-degrees and lowest priority added to counters (zeroed by the iteration) */
extern "C" __global__ void subgraph_flags(
    const value_t* target, const value_t* before, unsigned char* __restrict__ flags,
    const degree_t* __restrict__ out_degree, const long long v0, const long long v1,
    unsigned long long* counters, const unsigned long long* __restrict__ go)
{
  if (*go == 0) return;
  unsigned long long active = 0, degree = 0, front = 0;
  for (long long v = v0 + (long long)blockIdx.x * blockDim.x + threadIdx.x; v < v1;
       v += (long long)gridDim.x * blockDim.x) {
    const value_t now = target[v];
    const bool on = hg_activate(now, before[v]);
    flags[v] = on;
    if (on) {
      active += 1;
      degree += out_degree[v];
#if HG_PRIORITY
      front = max(front, hg_front_key(hg_priority(now)));
#endif
    }
  }
  for (int d = 16; d > 0; d >>= 1) {
    active += __shfl_down_sync(0xffffffffu, active, d);
    degree += __shfl_down_sync(0xffffffffu, degree, d);
#if HG_PRIORITY
    front = max(front, __shfl_down_sync(0xffffffffu, front, d));
#endif
  }
  if ((threadIdx.x & 31) == 0 && active) {
    atomicAdd(&counters[0], active);
    atomicAdd(&counters[1], degree);
#if HG_PRIORITY
    atomicMax(&counters[2], front);
#endif
  }
}
"""

def compile_push(spec: ProgramSpec, aux_dtype, index_dtype, degree_dtype, *, weighted):
    """The compiled push kernels (push, hubs, flags: cupy.RawKernel each), kept per
    source for the process."""
    source = push_source(spec, aux_dtype, index_dtype, degree_dtype, weighted=weighted)
    return compile_functions(spec, source, ("subgraph_push", "subgraph_push_hubs",
                                            "subgraph_flags"))
