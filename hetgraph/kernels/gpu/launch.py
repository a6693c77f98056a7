"""Raw kernel launches with their arguments packed once (:class:`PackedLaunch`).

A call of CuPy's ``RawKernel`` converts every argument each time; a launch that runs
every iteration packs them once and changes the few that move (see docs/tuning.md).
"""

from __future__ import annotations

import ctypes

import numpy as np


class PackedLaunch:
    """A kernel launch through the driver (cuLaunchKernel) with its arguments packed
    once, in the kernel's order; :meth:`update` changes some in place.

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

    def key(self) -> tuple:
        """The kernel and every argument's value now (pointers as ints): equal keys
        launch the same work."""
        return (self._function, *(held.value for held in self._held))

    def __call__(self, blocks, threads, shared_bytes, stream_pointer):
        """Launch ``blocks`` blocks of ``threads`` threads on the stream."""
        self._driver_launch(self._function, blocks, 1, 1, threads, 1, 1, shared_bytes,
                            stream_pointer, self._address, 0)
