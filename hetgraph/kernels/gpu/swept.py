"""A colored iteration's constant summed again after each color on the GPU (the CPU's is
:func:`hetgraph.kernels.cpu.direct.swept_pass`): a colored PageRank's dangling rank, so
that the later colors read the rank the earlier ones gave.

The sums after a color are taken by the color's own shard kernel, each block's into a
buffer (``hg_swept_part`` of :mod:`.source`), and added by every block of the next
launch (``hg_prior_constant``: the same additions in the same order in each block, so
no block waits for the others and no launch ends with a last block's reduction); the
buffers alternate between the colors that sum. This module holds their device arrays
(:class:`SweptSums`) and the iteration's first sums, of every color (``hg_swept``):
each block sums a share of one color's vertices of the constant, and the last block to
finish adds the shares of each color in a fixed order (a warp a color) and writes the
constant, offset + factor * (the colors' sums in color order). No atomic add of values
anywhere: reruns are bitwise equal (the CPU keeps a running total of the sums instead:
the two agree to rounding).
"""

from __future__ import annotations

import functools

import numpy as np

from ..transpile import c_type
from .launch import PackedLaunch
from .source import BLOCK_SUM

THREADS = 256  # a block's threads (a multiple of 32, at most 1024)
SHARES = 64  # the most blocks one color's sum is cut into

_SWEPT = BLOCK_SUM + r"""
extern "C" __global__ void hg_swept(const VALUE* x, const long long* ids,
                                    const long long* at, int shares, double* partial,
                                    double* sums, unsigned int* done,
                                    const double* terms, double* constant, int count) {
    /* block k: color k / shares, its share k % shares; done: zero between launches */
    __shared__ bool last_block;
    const int c = blockIdx.x / shares, share = blockIdx.x % shares;
    double sum = 0.0;
    for (long long j = at[c] + share * (long long)blockDim.x + threadIdx.x; j < at[c + 1];
         j += (long long)shares * blockDim.x)
        sum += (double)x[ids[j]];
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
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int k = warp; k < count; k += blockDim.x >> 5) {  /* a warp a color */
        double color = 0.0;
        for (int s = lane; s < shares; s += 32)
            color += __ldcg(&partial[k * shares + s]);
        for (int d = 16; d > 0; d >>= 1)
            color += __shfl_down_sync(0xffffffffu, color, d);
        if (lane == 0)
            sums[k] = color;
    }
    __syncthreads();  /* (every color's sum written) */
    if (warp == 0) {
        hg_swept_constant(hg_sums_ahead(sums, -1, count), sums, -1, 0.0, count, terms,
                          constant, true);
        if (lane == 0)
            *done = 0u;
    }
}
"""


class SweptSums:
    """The device side of a colored run's ``swept`` (see
    :func:`hetgraph.engines.colored.swept_of`: (ids, at, sums, offset, factor), the
    constant's vertices grouped by color) for values like ``values`` (a device array)
    whose launches have at most ``blocks`` blocks: :attr:`constant` (a one-element
    float64 device array the shard kernel reads and its tail writes), :attr:`launch`
    an iteration's first sums, :meth:`arguments` a color's launch's part.
    :meth:`load` takes another run's ``swept`` into the same arrays where it fits (a
    kept CUDA graph of the pass stays valid)."""

    def __init__(self, swept, values, blocks):
        import cupy

        self.cupy = cupy
        self.count = len(swept[2]) - 1  # (the colors; the CPU's sums end with their total)
        self.constant = cupy.zeros(1, cupy.float64)
        self._sums = cupy.zeros(max(self.count, 1), cupy.float64)
        self._done = cupy.zeros(1, cupy.uint32)  # (the first sums' blocks done)
        self._terms = cupy.zeros(2, cupy.float64)
        self._mask = cupy.zeros(values.size, cupy.uint8)
        self.blocks = blocks  # (the most blocks a color's launch may have)
        self._partial = cupy.empty(max(self.count * SHARES, 1), cupy.float64)
        # (the colors' block sums: a launch's, read by the next, beside the next's own)
        self._parts = [cupy.zeros(max(blocks, 1), cupy.float64) for _ in range(2)]
        self._value_type = c_type(values.dtype)
        self._ids = self._begin = None
        self.load(swept, values)

    def load(self, swept, values):
        """Take ``swept`` (of the same coloring) for ``values``: its vertices, their
        grouping and its terms, written into the arrays kept (new arrays only where its
        vertices outgrow them)."""
        cp = self.cupy
        ids, at, _, offset, factor = swept
        self.at = np.asarray(at, np.int64)
        if self._ids is None or len(ids) > self._ids.size or len(self.at) != self._at.size:
            self._ids = cp.empty(max(len(ids), 1), cp.int64)
            self._at = cp.empty(len(self.at), cp.int64)
        self._ids[:len(ids)].set(np.asarray(ids, np.int64))
        self._at.set(self.at)
        self._mask.fill(0)
        self._mask[self._ids[:len(ids)]] = 1
        self._terms.set(np.array([offset, factor], np.float64))
        shares = _shares(int(np.diff(self.at).max(initial=0)))
        self._blocks = self.count * shares
        self._begin = PackedLaunch(
            _swept_kernel(self._value_type, cp.cuda.runtime.getDevice()),
            dict(x=values, ids=self._ids, at=self._at, shares=np.int32(shares),
                 partial=self._partial, sums=self._sums, done=self._done,
                 terms=self._terms, constant=self.constant, count=np.int32(self.count)))

    @property
    def launch(self):
        """(PackedLaunch, blocks, threads) of an iteration's first sums: every color's
        over its vertices of the constant, and the first pass's constant (no blocks:
        the constant has no vertex)."""
        return self._begin, self._blocks, THREADS

    def sums(self, color) -> bool:
        """Whether a launch of ``color`` (its index: the hybrid partition's is the last)
        sums its vertices of the constant: unless it holds none, or is color 0 (the
        last pass of a sweep, whose constant nothing reads: the next iteration sums
        every color again)."""
        return bool(self.at[color + 1] > self.at[color]) and color > 0

    def arguments(self, color, blocks, summing, prior):
        """The shard kernel's swept arguments for a launch of ``color`` in ``blocks``
        blocks: ``summing`` whether it sums its color (:meth:`sums`, in its last source
        range); ``prior`` (buffer, blocks, color) of the launch before where that one
        summed its color, else None. Returns (the arguments, the ``prior`` of the
        launch after)."""
        buffer = 0 if prior is None else 1 - prior[0]
        arguments = dict(
            swept_mask=self._mask, swept_partial=self._parts[buffer], swept_sums=self._sums,
            swept_terms=self._terms, swept_color=np.int32(color if summing else -1),
            swept_count=np.int32(self.count),
            prior_partial=self._parts[0 if prior is None else prior[0]],
            prior_blocks=np.int32(0 if prior is None else prior[1]),
            prior_color=np.int32(-1 if prior is None else prior[2]))
        return arguments, (buffer, blocks, color) if summing else None


def _shares(size):
    """Blocks a color of ``size`` of the constant's vertices is summed in."""
    return int(min(SHARES, max(1, -(-size // THREADS))))


@functools.lru_cache(maxsize=None)
def _swept_kernel(value_type, device):
    """``hg_swept`` for values of ``value_type`` on ``device`` (the current one)."""
    import cupy

    return cupy.RawKernel(_SWEPT.replace("VALUE", value_type), "hg_swept")
