"""The GPU itself: whether one can run kernels, which one is current, and the memory
copies around it (device copies of host arrays, page-locked host memory).

cupy is imported inside the functions: without a GPU this module imports and
:func:`available` says why the GPU engine cannot run.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading

import numpy as np

from ...errors import HetGraphError

log = logging.getLogger(__name__)


class GpuUnavailableError(HetGraphError, RuntimeError):
    """No usable GPU: CuPy is missing, no device is visible, or it cannot run kernels."""


class GpuMemoryError(HetGraphError, MemoryError):
    """The GPU cannot hold what a run needs even with the smallest pages: run the pages
    on the CPU (devices="cpu") or give the GPU more memory."""

    def __reduce__(self):  # MemoryError's own pickling fails for subclasses (Dask sends it)
        return type(self), self.args


_PROBE: dict = {}  # "thread": the thread running _probe (None: CuPy is not installed)
_PROBE_LOCK = threading.Lock()


def probe_in_background():
    """Start :func:`availability`'s answer in a thread, when CuPy is installed: CuPy's
    import and the CUDA driver's start (tenths of a second) then overlap the caller's
    own imports. Later calls do nothing (nor look for CuPy again)."""
    with _PROBE_LOCK:
        if "thread" in _PROBE:
            return
        _PROBE["thread"] = None
        if importlib.util.find_spec("cupy") is not None:
            _PROBE["thread"] = threading.Thread(target=_probe, name="hetgraph-gpu-probe",
                                                daemon=True)
            _PROBE["thread"].start()


def availability():
    """(True, device description) when a GPU can run kernels, else (False, reason)."""
    thread = _PROBE.get("thread")
    if thread is not None:
        thread.join()
    return _probe()


@functools.lru_cache(maxsize=None)
def _probe():
    """:func:`availability`'s answer, found once."""
    try:
        import cupy
    except ImportError as exc:
        return False, f"CuPy is not installed ({exc}); pip install 'hetgraph[gpu]'"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver errors come in several classes
        return False, f"no CUDA device can be used ({exc})"
    if count == 0:
        return False, "no CUDA device is visible"
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return True, f"{count} x {name}"


def available() -> bool:
    """Whether the GPU engine can run here."""
    return availability()[0]


def require_gpu():
    """Raise :class:`GpuUnavailableError` (with the reason) when no GPU can run kernels."""
    ok, reason = availability()
    if not ok:
        raise GpuUnavailableError(f"the GPU engine cannot run: {reason}; use devices='cpu'")


def use_device(index):
    """A context manager that makes GPU ``index`` current in this thread."""
    import cupy

    return cupy.cuda.Device(index)


_COPIES: dict = {}  # (id of the host array, device) -> (the host array, its device copy)


def device_copy(array):
    """``array`` (a host NumPy array) on the current device: a copy made once and kept
    while ``array`` lives (the cache is emptied when it holds more than 32)."""
    import cupy

    key = id(array), cupy.cuda.runtime.getDevice()
    entry = _COPIES.get(key)
    if entry is None or entry[0] is not array:
        if len(_COPIES) > 32:
            _COPIES.clear()
        entry = _COPIES[key] = (array, cupy.asarray(array))
    return entry[1]


def on_current_device(array):
    """``array`` (NumPy, or CuPy on any GPU of this process) on the current GPU: itself
    when it is there, else a copy queued on the current stream after what the array's
    own GPU queued (kernels read other GPUs' memory over the bus, if at all)."""
    import cupy

    here = cupy.cuda.runtime.getDevice()
    if not isinstance(array, cupy.ndarray) or array.device.id == here:
        return cupy.asarray(array)
    copy = cupy.empty(array.shape, array.dtype)
    stream = cupy.cuda.get_current_stream()
    wait_for_writes(array, stream)
    cupy.cuda.runtime.memcpyAsync(copy.data.ptr, array.data.ptr, array.nbytes,
                                  cupy.cuda.runtime.memcpyDefault, stream.ptr)
    return copy


def wait_for_writes(array, stream):
    """Make ``stream`` (of the current GPU) wait for what ``array``'s own GPU queued so
    far, when that is another GPU (streams of two GPUs are not ordered otherwise)."""
    import cupy

    if array.device.id != cupy.cuda.runtime.getDevice():
        with array.device:
            stream.wait_event(cupy.cuda.get_current_stream().record())


def pinned_empty(shape, dtype):
    """An uninitialised array in page-locked host memory (pageable when pinning fails):
    copies between it and a GPU run at full PCIe speed, several times those from
    pageable memory (see docs/tuning.md)."""
    import cupyx

    try:
        return cupyx.empty_pinned(shape, dtype)
    except Exception:  # pinning can fail when the host limits locked memory
        log.warning("could not pin %d bytes of host memory; copies to the GPU will be "
                    "slower", int(np.prod(shape)) * np.dtype(dtype).itemsize)
        return np.empty(shape, dtype)


def pinned_copy(array):
    """A copy of ``array`` in page-locked host memory (see :func:`pinned_empty`)."""
    pinned = pinned_empty(array.shape, array.dtype)
    pinned[...] = array
    return pinned
