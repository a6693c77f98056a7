"""Vertex state of a run: values, the array written in sync mode and the active flags."""

from __future__ import annotations

import numpy as np


class VertexState:
    """``values`` (read by gather), ``new_values`` (written by apply: a second array in
    sync mode, the same array in async mode), ``flags`` (uint8, 1 = active) and
    ``marks`` (uint8 scratch for notify-pull, all zero between iterations)."""

    def __init__(self, values, flags, *, sync):
        self.sync = sync
        self.values = values
        self.new_values = np.empty_like(values) if sync else values
        self.flags = flags
        self.marks = np.zeros_like(flags)

    def pin(self, copy):
        """Move the arrays into the memory ``copy(array)`` returns (page-locked host
        memory, so that the GPU's copies of the state run at PCIe speed)."""
        self.values = copy(self.values)
        self.new_values = copy(self.new_values) if self.sync else self.values
        self.flags = copy(self.flags)

    def swap(self):
        """Make the values written by a sync pull pass current."""
        if self.sync:
            self.values, self.new_values = self.new_values, self.values

    def __getstate__(self):  # sent to worker processes: the current values and flags
        return {"values": self.values, "flags": self.flags, "sync": self.sync}

    def __setstate__(self, data):
        self.__init__(data["values"], data["flags"], sync=data["sync"])
