"""Vertex state of a run: values, the array written in sync mode and the active flags."""

from __future__ import annotations

import threading

import numpy as np

from ..kernels.arrays import to_host


_MARKS_LOCK = threading.Lock()


class VertexState:
    """``values`` (read by gather), ``new_values`` (written by apply: a second array in
    sync mode, the same array in async mode), ``flags`` (uint8, 1 = active) and
    ``marks`` (uint8 scratch for notify-pull, all zero between iterations; made when
    a host pass first asks for it: a state whose iterations run elsewhere, on worker
    processes, never writes V bytes for it)."""

    def __init__(self, values, flags, *, sync):
        self.sync = sync
        self.values = values
        self.new_values = _empty_like(values) if sync else values
        self.flags = flags
        self._marks = None

    @property
    def marks(self):
        """The marks of the host passes (None for a state kept on a GPU)."""
        if self._marks is None and self.on_host:
            with _MARKS_LOCK:  # (one array for passes of several threads)
                if self._marks is None:
                    self._marks = np.zeros_like(self.flags)
        return self._marks

    @property
    def on_host(self) -> bool:
        """Whether the arrays are host NumPy arrays (else CuPy arrays: a state kept on
        a GPU, see :meth:`to_host`)."""
        return isinstance(self.values, np.ndarray)

    def pin(self, copy, empty):
        """Move the arrays into the memory that ``copy(array)`` and ``empty(shape,
        dtype)`` return (page-locked host memory, so that the GPU's copies of the state
        run at PCIe speed); the array that sync mode writes next is not copied (it holds
        nothing yet)."""
        self.values = copy(self.values)
        self.new_values = empty(self.values.shape, self.values.dtype) if self.sync \
            else self.values
        self.flags = copy(self.flags)

    def to_host(self):
        """Bring a state kept on a GPU to page-locked host arrays (waits for their
        copies), as :meth:`pin` leaves a host state; nothing when it is on the host. A
        run placed by the cost model keeps its state on the GPU until an iteration
        needs it on the host."""
        if self.on_host:
            return
        from ..kernels.gpu.device import pinned_empty

        with self.values.device:
            self.values, self.flags = to_host(self.values), to_host(self.flags)
        self.new_values = pinned_empty(self.values.shape, self.values.dtype) \
            if self.sync else self.values

    def swap(self):
        """Make the values written by a sync pull pass current."""
        if self.sync:
            self.values, self.new_values = self.new_values, self.values

    def __getstate__(self):  # sent to worker processes: the current values and flags
        return {"values": self.values, "flags": self.flags, "sync": self.sync}

    def __setstate__(self, data):
        self.__init__(data["values"], data["flags"], sync=data["sync"])


def _empty_like(array):
    """An uninitialised array like ``array``, of its array module."""
    return np.empty_like(array) if isinstance(array, np.ndarray) else \
        type(array)(array.shape, array.dtype)
