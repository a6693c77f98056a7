"""A colored iteration's constant summed again after each color's launch on the GPU
(the CPU's is :func:`hetgraph.kernels.cpu.direct.swept_pass`): a colored PageRank's
dangling rank, so that the later colors read the rank the earlier ones gave.

One kernel: each block sums a share of one color's vertices of the constant (a tree in
shared memory), writes its partial sum, and the last block to finish adds the partial
sums in a fixed order into the colors' sums and writes the constant, offset + factor *
(the sums added in color order): no atomic add of values, so reruns are bitwise equal
(the CPU keeps a running total of the sums instead: the two agree to rounding).
"""

from __future__ import annotations

import functools

import numpy as np

from ..transpile import c_type
from .launch import PackedLaunch

THREADS = 256  # a block's threads (a power of two: the tree's halvings)
SHARES = 64  # the most blocks one color's sum is cut into

_SWEPT = r"""
extern "C" __global__ void hg_swept(const VALUE* x, const long long* ids,
                                    const long long* at, int c_begin, int shares,
                                    double* partial, double* sums, unsigned int* done,
                                    double* constant, double offset, double factor,
                                    int count) {
    /* block k: color c_begin + k / shares, its share k % shares; done: zero between */
    __shared__ double part[THREADS];
    int c = c_begin + blockIdx.x / shares, share = blockIdx.x % shares;
    double sum = 0.0;
    for (long long j = at[c] + share * (long long)blockDim.x + threadIdx.x; j < at[c + 1];
         j += (long long)shares * blockDim.x)
        sum += (double)x[ids[j]];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x != 0)
        return;
    partial[blockIdx.x] = part[0];
    __threadfence();  /* (written before the count that lets the last block read it) */
    if (atomicAdd(done, 1u) != gridDim.x - 1)
        return;
    const volatile double* written = partial;
    for (int k = 0; k < (int)gridDim.x / shares; ++k) {
        double color = 0.0;
        for (int s = 0; s < shares; ++s)
            color += written[k * shares + s];
        sums[c_begin + k] = color;
    }
    double total = 0.0;
    for (int k = 0; k < count; ++k)
        total += sums[k];
    constant[0] = offset + factor * total;
    *done = 0u;
}
"""


class SweptSums:
    """The device side of a colored run's ``swept`` (see
    :func:`hetgraph.engines.colored.swept_of`: (ids, at, sums, offset, factor), the
    constant's vertices grouped by color): :meth:`begin` sums every color's and writes
    the first pass's constant into :attr:`constant` (a one-element float64 device
    array the shard kernel reads), :meth:`after` sums color c's again after its pass.
    Each launch is queued on the given stream (no wait)."""

    def __init__(self, swept, values):
        import cupy

        ids, at, sums, offset, factor = swept
        self.at = np.asarray(at, np.int64)
        self.count = len(sums) - 1  # (the colors; the CPU's sums end with their total)
        self.constant = cupy.zeros(1, cupy.float64)
        self._ids, self._at = cupy.asarray(ids, cupy.int64), cupy.asarray(self.at)
        self._sums = cupy.zeros(self.count, cupy.float64)
        self._done = cupy.zeros(1, cupy.uint32)
        self._all = _shares(int(np.diff(self.at).max(initial=0)))
        self._partial = cupy.empty(max(self.count, 1) * SHARES, cupy.float64)
        self._launch = PackedLaunch(
            _swept_kernel(c_type(values.dtype), cupy.cuda.runtime.getDevice()),
            dict(x=values, ids=self._ids, at=self._at, c_begin=np.int32(0),
                 shares=np.int32(1), partial=self._partial, sums=self._sums,
                 done=self._done, constant=self.constant, offset=np.float64(offset),
                 factor=np.float64(factor), count=np.int32(self.count)))

    def begin(self, values, stream):
        """Every color's sum of ``values`` (the engine's, on this device) over its
        vertices of the constant, and the constant, on ``stream``."""
        if self.count:
            self._run(values, 0, self.count, self._all, stream)

    def after(self, values, c, stream):
        """Color ``c``'s sum again and the constant (nothing where c holds none of the
        constant's vertices)."""
        size = int(self.at[c + 1] - self.at[c])
        if size:
            self._run(values, c, 1, _shares(size), stream)

    def _run(self, values, first, colors, shares, stream):
        self._launch.update(x=values, c_begin=first, shares=shares)
        self._launch(colors * shares, THREADS, 0, stream.ptr)


def _shares(size):
    """Blocks a color of ``size`` of the constant's vertices is summed in."""
    return int(min(SHARES, max(1, -(-size // THREADS))))


@functools.lru_cache(maxsize=None)
def _swept_kernel(value_type, device):
    """``hg_swept`` for values of ``value_type`` on ``device`` (the current one)."""
    import cupy

    source = _SWEPT.replace("VALUE", value_type).replace("THREADS]", f"{THREADS}]")
    return cupy.RawKernel(source, "hg_swept")
