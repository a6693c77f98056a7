"""Connected components on one GPU, ECL-CC style (Jaiganesh and Burtscher, HPDC 2018):
union-find over the in-edges, the larger root hooked under the smaller by atomicCAS,
roots found with intermediate pointer jumping, and a final flatten. Its work depends on
neither the diameter nor the vertex order.

Vertices of few in-edges are done one a thread, those of more one a warp, the largest
one a block (``tuning.CC_GPU_THREAD_DEGREE``, ``tuning.CC_GPU_WARP_DEGREE``). Edges
come in blocks of whole vertices (the whole CSC, or a store's pages one at a time),
as in :mod:`hetgraph.kernels.cpu.components`; a root is always the smallest id of its
tree, so the flattened labels are the smallest dense id of each component.

cupy is imported inside the functions: this module imports without a GPU.
"""

from __future__ import annotations

import functools

import numpy as np

from ... import tuning
from ..transpile import c_type
from .device import device_copy

THREADS = 256  # threads per block of every launch here (a block-per-vertex group too)

_SOURCE = r"""
typedef INDEX index_t;

__device__ __forceinline__ int hg_root(int v, int* parent) {
    /* v's root; every vertex on the way is pointed past its parent (pointer jumping) */
    int curr = parent[v];
    if (curr != v) {
        int next, prev = v;
        while (curr > (next = parent[curr])) {
            parent[prev] = next;
            prev = curr;
            curr = next;
        }
    }
    return curr;
}

__device__ __forceinline__ void hg_hook(int* vroot, int u, int* parent) {
    /* union u's tree with the one *vroot is in; the larger root goes under the smaller.
       *vroot: an ancestor of v, kept for v's next edge */
    int vr = *vroot, ur = hg_root(u, parent);
    while (vr != ur) {
        if (vr < ur) {
            int seen = atomicCAS(&parent[ur], ur, vr);
            if (seen == ur) break;
            ur = seen;
        } else {
            int seen = atomicCAS(&parent[vr], vr, ur);
            if (seen == vr) break;
            vr = seen;
        }
    }
    *vroot = vr;
}

extern "C" __global__ void hg_cc_init(const long long* indptr, const index_t* sources,
                                      long long e0, long long v0, long long v1,
                                      int* parent) {
    /* parent[v]: its first in-neighbour of a smaller id, else v (ECL-CC's init) */
    for (long long v = v0 + blockIdx.x * (long long)blockDim.x + threadIdx.x; v < v1;
         v += (long long)gridDim.x * blockDim.x) {
        long long m = v;
        for (long long j = indptr[v] - e0; m == v && j < indptr[v + 1] - e0; j++)
            if ((long long)sources[j] < m)
                m = sources[j];
        parent[v] = (int)m;
    }
}

extern "C" __global__ void hg_cc_hook(const long long* indptr, const index_t* sources,
                                      long long e0, long long v0, const int* list,
                                      int listed, long long count, int group,
                                      long long low, long long high, int symmetric,
                                      int* parent) {
    /* `group` threads per vertex (1, a warp, a block); the vertices: list[0:count] when
       listed, else v0 + [0, count) of in-degree in (low, high]. symmetric: every edge
       is stored at both ends, so only the one from the larger id is linked */
    long long thread = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x / group;
    int lane = (int)(thread % group);
    for (long long item = thread / group; item < count; item += stride) {
        long long v = listed ? (long long)list[item] : v0 + item;
        long long start = indptr[v] - e0, stop = indptr[v + 1] - e0;
        if (!listed && (stop - start <= low || stop - start > high))
            continue;
        int vroot = hg_root((int)v, parent);
        for (long long j = start + lane; j < stop; j += group) {
            long long u = sources[j];
            if (!symmetric || u < v)
                hg_hook(&vroot, (int)u, parent);
        }
    }
}

extern "C" __global__ void hg_cc_flatten(long long n, int* parent) {
    /* parent[v] = its root: the component's label */
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < n;
         v += (long long)gridDim.x * blockDim.x) {
        int root = parent[v], next;
        const int old = root;
        while (root > (next = parent[root]))
            root = next;
        if (root != old)
            parent[v] = root;
    }
}
"""


@functools.lru_cache(maxsize=None)
def _kernels(index_type, device):
    """(init, hook, flatten) for in-edge sources of C type ``index_type`` on ``device``
    (the current one), compiled once per process."""
    import cupy

    module = cupy.RawModule(code=_SOURCE.replace("INDEX", index_type),
                            options=("-std=c++17",))
    return tuple(module.get_function(name) for name in
                 ("hg_cc_init", "hg_cc_hook", "hg_cc_flatten"))


def _blocks_for(items, group=1):
    """Blocks of ``THREADS`` for ``items`` groups of ``group`` threads (at least 1, at
    most ``tuning.CC_GPU_MAX_BLOCKS``: the kernels loop over the rest)."""
    return int(max(1, min(tuning.CC_GPU_MAX_BLOCKS, -(-items * group // THREADS))))


def device_fits(num_vertices, num_arcs, index_itemsize, device=0):
    """Whether the CSC and the labels fit the free memory of GPU ``device``, with
    ``tuning.CC_GPU_MEMORY_FRACTION`` of it to spare for CuPy's pool."""
    import cupy

    with cupy.cuda.Device(device):
        free, _ = cupy.cuda.runtime.memGetInfo()
    need = 8 * (num_vertices + 1) + index_itemsize * num_arcs + 8 * num_vertices
    return need <= free * tuning.CC_GPU_MEMORY_FRACTION


def ecl_cc(num_vertices, indptr, blocks, *, index_dtype, symmetric, single, device=0,
           clock=None):
    """Component labels (int32: the smallest id of each component, on the host) of the
    graph whose in-edges ``blocks()`` yields as (first CSC position, sources of
    ``index_dtype``, first vertex, end vertex) runs of whole vertices; ``indptr``: the
    CSC pointers (int64).

    ``symmetric``: every edge is stored in both directions (each is linked once).
    ``single``: ``blocks()`` yields one block, the whole graph in memory: its init
    kernel then points each vertex at a smaller in-neighbour, and its arrays stay on
    the device while they live, for later runs. ``device``: the GPU. ``clock``: called
    with each phase's name, vertices and edges once the device finished it, for the
    run's history."""
    import cupy

    report = clock or (lambda name, vertices, edges: None)
    with cupy.cuda.Device(device):
        parent = cupy.arange(num_vertices, dtype=cupy.int32)
        init, hook, flatten = _kernels(c_type(index_dtype), device)
        d_indptr = device_copy(indptr) if single else cupy.asarray(indptr)
        degree = cupy.diff(d_indptr)
        mid = cupy.flatnonzero((degree > tuning.CC_GPU_THREAD_DEGREE) &
                               (degree <= tuning.CC_GPU_WARP_DEGREE)).astype(cupy.int32)
        big = cupy.flatnonzero(degree > tuning.CC_GPU_WARP_DEGREE).astype(cupy.int32)
        edges = 0
        for e0, sources, v0, v1 in blocks():
            d_sources = device_copy(sources) if single else cupy.asarray(sources)
            args = (d_indptr, d_sources, np.int64(e0), np.int64(v0))
            if single:
                init((_blocks_for(v1 - v0),), (THREADS,), args + (np.int64(v1), parent))
            tail = (np.int32(symmetric), parent)
            hook((_blocks_for(v1 - v0),), (THREADS,),
                 args + (parent, np.int32(0), np.int64(v1 - v0), np.int32(1),
                         np.int64(-1), np.int64(tuning.CC_GPU_THREAD_DEGREE)) + tail)
            for vertices, group in ((mid, 32), (big, THREADS)):
                inside = vertices[(vertices >= v0) & (vertices < v1)]
                if len(inside):
                    hook((_blocks_for(len(inside), group),), (THREADS,),
                         args + (inside, np.int32(1), np.int64(len(inside)),
                                 np.int32(group), np.int64(0), np.int64(0)) + tail)
            edges += len(sources)
        cupy.cuda.get_current_stream().synchronize()
        report("hook", num_vertices, edges)
        if num_vertices:
            flatten((_blocks_for(num_vertices),), (THREADS,),
                    (np.int64(num_vertices), parent))
        labels = cupy.asnumpy(parent)
        report("flatten", num_vertices, 0)
    return labels
