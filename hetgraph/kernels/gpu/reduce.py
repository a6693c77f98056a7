"""Small device reductions beside the shard kernel: a program hook's indexed sum
(:func:`indexed_sum`), values scaled to a weighted sum of 1 (:func:`normalize`), a
convergence test's weighted change (:class:`WeightedChange`) and the frontier's count
(:func:`count_frontier_kernel`).

Each is a grid-stride loop whose warps sum by shuffles, then one atomic a warp (the
weighted sum: its blocks' sums added in block order by the last block, the same bits
on a rerun); the kernels are built per value type and device and kept for the process.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from ..transpile import c_type
from .device import device_copy
from .launch import PackedLaunch
from .source import BLOCK_SUM

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

# (a sum of TERM over i < n, its blocks' sums added in block order by the last block,
# which writes RESULT of their total to *out: the same bits on a rerun; done: zeroed
# before, zeroed again by the last block)
_BLOCK_ORDER_SUM = r"""
extern "C" __global__ void NAME(PARAMETERS, long long n, double* partial,
                                unsigned int* done, double* out) {
    __shared__ bool last_block;
    double sum = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        sum += TERM;
    sum = hg_block_sum(sum);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sum;
        __threadfence();  /* (written before the count that lets the last block read it) */
        last_block = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last_block)
        return;
    __threadfence();
    double total = 0.0;
    for (unsigned int k = threadIdx.x; k < gridDim.x; k += blockDim.x)
        total += __ldcg(&partial[k]);
    total = hg_block_sum(total);
    if (threadIdx.x == 0) {
        *out = RESULT;
        *done = 0u;
    }
}
"""


def _block_order_sum(name, parameters, term, result):
    """The source of kernel ``name`` of :data:`_BLOCK_ORDER_SUM`."""
    source = _BLOCK_ORDER_SUM
    for key, value in (("NAME", name), ("PARAMETERS", parameters), ("TERM", term),
                       ("RESULT", result)):
        source = source.replace(key, value)
    return source


_NORMALIZE = BLOCK_SUM + _block_order_sum(
    "hg_weighted_total", "const VALUE* x, const double* w", "(double)x[i] * w[i]",
    "1.0 / total") + r"""
extern "C" __global__ void hg_scale(VALUE* x, long long n, const double* scale) {
    const double s = *scale;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        x[i] = (VALUE)(x[i] * s);
}
"""

_CHANGE = BLOCK_SUM + _block_order_sum(
    "hg_weighted_change", "const VALUE* x, const VALUE* y, const double* w",
    "fabs((double)x[i] - (double)y[i]) * w[i]", "total")

_SUM_LOCK = threading.Lock()


def _blocks(n):
    """The blocks of 256 threads a reduction over ``n`` elements launches: one per 256,
    at most 1024 (a grid-stride loop covers the rest), at least one."""
    return int(min(1024, max(1, -(-n // 256))))


def indexed_sum(values, index, scale=1.0, offset=0.0):
    """offset + scale * sum(values[index]) in float64 for CuPy ``values`` (the host
    side is :func:`hetgraph.kernels.arrays.indexed_sum`): a 0-d device array made by a
    memset and one kernel (no wait for the device, and little host time: a program's
    hook calls it every iteration), or the float ``offset`` when ``index`` is empty.
    ``index``: int64 host array (kept on the device after the first call), or a slice:
    a range read without indices."""
    import cupy

    if isinstance(index, slice):
        first, stop, step = index.indices(len(values))
        index, n = None, len(range(first, stop, step))
    else:
        first, step, n = 0, 1, len(index)
        if n:
            index = device_copy(np.asarray(index, np.int64))
    if not n:
        return float(offset)
    # an empty array zeroed by a memset: cupy.full launches a fill kernel
    out = cupy.empty((), cupy.float64)
    stream = cupy.cuda.get_current_stream().ptr
    cupy.cuda.runtime.memsetAsync(out.data.ptr, 0, 8, stream)
    blocks = _blocks(n)
    launch = _indexed_sum_launch(c_type(values.dtype), cupy.cuda.runtime.getDevice())
    with _SUM_LOCK:  # one packed launch per device: runs in other threads share it
        launch.update(values=values, index=index, first=first, step=step, n=n,
                      scale=float(scale), offset=float(offset), out=out)
        launch(blocks, 256, 0, stream)
    return out


def normalize(values, weights):
    """Scale CuPy ``values`` in place by 1 / sum(values * weights) (``weights``: float64,
    on the same device; the host side is :func:`hetgraph.kernels.arrays.normalize`):
    a memset and two launches on a scratch array of the pool, no wait for the device
    (CuPy's dot product, reciprocal and product were three operations, each its own
    Python and launch, every iteration of a colored PageRank)."""
    import cupy

    n = len(values)
    blocks = _blocks(n)
    # the blocks' sums, the scale, and the last 8 bytes: the count of blocks done
    scratch = cupy.empty(blocks + 2, cupy.float64)
    stream = cupy.cuda.get_current_stream().ptr
    done = scratch.data.ptr + (blocks + 1) * 8
    cupy.cuda.runtime.memsetAsync(done, 0, 8, stream)
    total, scale = _normalize_launches(c_type(values.dtype), cupy.cuda.runtime.getDevice())
    with _SUM_LOCK:  # (packed launches shared by the runs of other threads)
        total.update(x=values, w=weights, n=n, partial=scratch, out=scratch[blocks:])
        total.holders("done")[0].value = done
        total(blocks, 256, 0, stream)
        scale.update(x=values, n=n, scale=scratch[blocks:])
        scale(blocks, 256, 0, stream)


class WeightedChange:
    """sum |x - y| * w in float64 over CuPy arrays of one size, queued without waiting
    (a convergence test made on the device beside the iterations): each
    :meth:`queue` writes the sum to a device word and copies it to page-locked host
    memory, read by :meth:`read` once the stream has run it. ``weights``: float64, on
    the current device; ``slots``: the sums that may be in flight at once."""

    def __init__(self, weights, dtype, slots):
        import cupy

        from .device import pinned_empty

        self.weights, n = weights, len(weights)
        self.blocks = _blocks(n)
        # (the blocks' sums, then the blocks done: zeroed here, then by each last block)
        self._scratch = cupy.zeros(self.blocks + 1, cupy.float64)
        self._sums = cupy.zeros(slots, cupy.float64)
        self._host = pinned_empty(slots, np.float64)
        self._launch = PackedLaunch(
            _change_kernel(c_type(np.dtype(dtype)), cupy.cuda.runtime.getDevice()),
            dict(x=None, y=None, w=weights, n=np.int64(n), partial=self._scratch,
                 done=None, out=None))
        self._launch.update(done=self._scratch.data.ptr + self.blocks * 8)
        self._copy = cupy.cuda.runtime.memcpyAsync
        self._to_host = cupy.cuda.runtime.memcpyDeviceToHost

    def queue(self, slot, x, y, stream):
        """Queue slot ``slot``'s sum of ``x`` against ``y`` on ``stream``."""
        out = self._sums.data.ptr + slot * 8
        self._launch.update(x=x, y=y, out=out)
        self._launch(self.blocks, 256, 0, stream.ptr)
        self._copy(self._host.ctypes.data + slot * 8, out, 8, self._to_host, stream.ptr)

    def read(self, slot) -> float:
        """Slot ``slot``'s last sum (its stream must have run it)."""
        return float(self._host[slot])


@functools.lru_cache(maxsize=None)
def _change_kernel(value_type, device):
    """``hg_weighted_change`` for ``value_type`` on ``device`` (the current one)."""
    import cupy

    return cupy.RawKernel(_CHANGE.replace("VALUE", value_type), "hg_weighted_change")


@functools.lru_cache(maxsize=None)
def _normalize_launches(value_type, device):
    """The packed launches of ``hg_weighted_total`` and ``hg_scale`` for ``value_type``
    on ``device`` (the current one); every call sets all their arguments."""
    import cupy

    module = cupy.RawModule(code=_NORMALIZE.replace("VALUE", value_type))
    total = PackedLaunch(module.get_function("hg_weighted_total"),
                         dict(x=None, w=None, n=np.int64(0), partial=None, done=None,
                              out=None))
    scale = PackedLaunch(module.get_function("hg_scale"),
                         dict(x=None, n=np.int64(0), scale=None))
    return total, scale


@functools.lru_cache(maxsize=None)
def _indexed_sum_launch(value_type, device):
    """The packed launch of ``hg_indexed_sum`` for ``value_type`` on ``device`` (the
    current one); every call sets all its arguments."""
    import cupy

    kernel = cupy.RawKernel(_INDEXED_SUM.replace("VALUE", value_type), "hg_indexed_sum")
    return PackedLaunch(kernel, dict(values=None, index=None, first=np.int64(0),
                                     step=np.int64(0), n=np.int64(0), scale=np.float64(0),
                                     offset=np.float64(0), out=None))


@functools.lru_cache(maxsize=None)
def count_frontier_kernel(degree_type, device):
    """``hg_count_frontier`` for out-degrees of ``degree_type`` on ``device`` (the current
    one): adds the number of set flags and the sum of their degrees to ``out[0:2]``."""
    import cupy

    return cupy.RawKernel(_COUNT_FRONTIER.replace("DEGREE", degree_type), "hg_count_frontier")
