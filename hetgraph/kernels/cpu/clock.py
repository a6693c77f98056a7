"""A monotonic clock that compiled code can read (a burst times each of its iterations
by it), through the C library's clock_gettime: the clock of time.perf_counter on Linux."""

from __future__ import annotations

import ctypes
import time

import numba
import numpy as np


def _monotonic_clock():
    """The C library's clock_gettime through ctypes, or None where there is none
    (Windows): runs there go without bursts (see ``CpuKernel.bursts``)."""
    if not hasattr(time, "CLOCK_MONOTONIC"):
        return None
    try:
        clock_gettime = ctypes.CDLL(None).clock_gettime
    except (OSError, AttributeError):
        return None
    clock_gettime.argtypes = [ctypes.c_int, ctypes.c_void_p]
    clock_gettime.restype = ctypes.c_int
    return clock_gettime


_CLOCK_GETTIME = _monotonic_clock()
_CLOCK_ID = getattr(time, "CLOCK_MONOTONIC", 0)
HAS_CLOCK = _CLOCK_GETTIME is not None


if HAS_CLOCK:
    @numba.njit(nogil=True, inline="always")
    def nanoseconds(timespec):
        """The clock's nanoseconds, read into ``timespec`` (int64[2]: s, ns)."""
        _CLOCK_GETTIME(_CLOCK_ID, timespec.ctypes.data)
        return timespec[0] * 1_000_000_000 + timespec[1]
else:
    @numba.njit(nogil=True, inline="always")
    def nanoseconds(timespec):
        """No clock: 0 (bursts are off; one iteration is timed by its caller)."""
        return np.int64(0)
