"""A monotonic clock that compiled code can read (a burst times each of its iterations
by it), through the C library's clock_gettime: the clock of time.perf_counter on Linux.

Compiled code calls it by a symbol name registered with LLVM in each process, not by a
ctypes address: code that holds an address cannot be kept in the compile cache."""

from __future__ import annotations

import ctypes
import time

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.extending import intrinsic

_SYMBOL = "hetgraph_clock_gettime"  # (a name of our own: never the C library's)
_CLOCK_ID = getattr(time, "CLOCK_MONOTONIC", 0)


def _register_clock() -> bool:
    """Register the C library's clock_gettime with LLVM as ``_SYMBOL``; False where
    there is none (Windows): runs there go without bursts (see ``CpuKernel.bursts``)."""
    if not hasattr(time, "CLOCK_MONOTONIC"):
        return False
    try:
        clock_gettime = ctypes.CDLL(None).clock_gettime
    except (OSError, AttributeError):
        return False
    binding.add_symbol(_SYMBOL, ctypes.cast(clock_gettime, ctypes.c_void_p).value)
    return True


HAS_CLOCK = _register_clock()


@intrinsic
def _read_clock(typingctx, timespec):
    """clock_gettime(CLOCK_MONOTONIC, timespec.data) (``timespec``: int64[2])."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = ir.IntType(8).as_pointer()
        clock = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), [ir.IntType(32), pointer]),
            _SYMBOL)
        builder.call(clock, [ir.Constant(ir.IntType(32), _CLOCK_ID),
                             builder.bitcast(data, pointer)])
        return context.get_dummy_value()
    return types.none(timespec), codegen


if HAS_CLOCK:
    @numba.njit(nogil=True, inline="always")
    def nanoseconds(timespec):
        """The clock's nanoseconds, read into ``timespec`` (int64[2]: s, ns)."""
        _read_clock(timespec)
        return timespec[0] * 1_000_000_000 + timespec[1]
else:
    @numba.njit(nogil=True, inline="always")
    def nanoseconds(timespec):
        """No clock: 0 (bursts are off; one iteration is timed by its caller)."""
        return np.int64(0)
