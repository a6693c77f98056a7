"""Array helpers for algorithms that work on the host (NumPy) and on a GPU (CuPy),
choosing by the array's type: algorithms reach device-specific code only through here.

The GPU side is imported on first use, so this module imports without a GPU.
"""

from __future__ import annotations

import numpy as np

from .cpu import replace_value as _replace_on_host
from .cpu import weighted_change as _weighted_change_on_host

__all__ = ["indexed_sum", "normalize", "on_device_of", "in_module", "module_of",
           "replace_value", "to_host", "weighted_change"]


def on_device_of(values, array):
    """``array`` (a host NumPy array) on the device that holds ``values``: itself when
    ``values`` is a NumPy array, else a device copy made once and kept."""
    if isinstance(values, np.ndarray):
        return array
    return _gpu("device").device_copy(array)


def in_module(xp, array):
    """``array`` (a host NumPy array that stays unchanged, such as one a graph keeps) in
    the memory of the array module ``xp``: itself for NumPy, else a copy on the current
    device made once and kept."""
    if xp is np:
        return array
    return _gpu("device").device_copy(array)


def module_of(values):
    """The array module of ``values``: NumPy for a NumPy array or scalar, else CuPy."""
    if isinstance(values, (np.ndarray, np.generic)):
        return np
    import cupy

    return cupy


def replace_value(values, old, new):
    """Set the elements of ``values`` (NumPy or CuPy) equal to ``old`` to ``new``, in
    place."""
    if isinstance(values, np.ndarray):
        _replace_on_host(values, old, new)
    else:
        values[values == old] = new


def weighted_change(values, previous, weights):
    """sum |values - previous| * weights in float64 (``previous``: an earlier copy of
    ``values``, ``weights`` float64, both on the device of ``values``): a float for
    NumPy ``values``, a 0-d device array for CuPy ones."""
    if isinstance(values, np.ndarray):
        return _weighted_change_on_host(values, previous, weights)
    return abs(values.astype(np.float64) - previous) @ weights


def normalize(values, weights):
    """Scale ``values`` (NumPy or CuPy) in place by 1 / sum(values * weights), so that
    their weighted sum is 1 (``weights`` float64, on the device of ``values``); on a
    GPU without waiting for it (see :func:`hetgraph.kernels.gpu.reduce.normalize`)."""
    if isinstance(values, np.ndarray):
        values *= 1.0 / (values @ weights)
    else:
        _gpu("reduce").normalize(values, weights)


def to_host(values):
    """``values`` as a host NumPy array: itself, or a CuPy array's copy in page-locked
    host memory (one copy at full bus speed, waited for)."""
    if isinstance(values, np.ndarray):
        return values
    host = _gpu("device").pinned_empty(values.shape, values.dtype)
    values.get(out=host)
    return host


def indexed_sum(values, index, scale=1.0, offset=0.0):
    """offset + scale * sum(values[index]) in float64: a NumPy float for NumPy
    ``values``; for CuPy ``values`` a 0-d device array, without waiting for the device
    (see :func:`hetgraph.kernels.gpu.reduce.indexed_sum`). ``index``: an int64 host
    array or a slice."""
    if isinstance(values, np.ndarray):
        return offset + scale * float(values[index].sum(dtype=np.float64))
    return _gpu("reduce").indexed_sum(values, index, scale, offset)


_MODULES: dict = {}  # name -> hetgraph.kernels.gpu.<name>, once imported


def _gpu(name):
    """The module ``hetgraph.kernels.gpu.<name>``, imported on first use."""
    module = _MODULES.get(name)
    if module is None:
        import importlib

        module = _MODULES[name] = importlib.import_module(f"{__package__}.gpu.{name}")
    return module
