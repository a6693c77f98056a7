"""GPU-to-GPU copies of a spread run's ranges between the GPU worker processes of one
host, through CUDA IPC: what :func:`.gpuowner.exchange` sends instead of a
range copied through host memory.

An owner copies its range of the values and flags into one of two staging buffers on
its GPU (:func:`stage`: device to device, then waits) and sends its peers the buffers'
IPC handles (64 bytes each) in the iteration's message; a peer opens a handle once
(:func:`fetch`, the mapping kept for later iterations and runs) and copies the range
from the owner's GPU into its own engine's arrays over NVLink or PCIe, then waits. The
two buffers take turns: an owner writes one again only two exchanges later, after every
peer's next message, which a peer sends only after its copy ended. The buffers are
allocated by themselves (not from CuPy's pool: a handle maps a whole allocation) and kept
per size for the process's later runs, as the peers' mappings of them are.
"""

from __future__ import annotations

import collections
import logging
import threading

from .. import tuning
from ..errors import HetGraphError

log = logging.getLogger("hetgraph.scheduler")

_LOCK = threading.Lock()
_STAGES: collections.OrderedDict = collections.OrderedDict()  # (values dtype, flags
# dtype, length) -> _Stage, the newest last
_OPENED: collections.OrderedDict = collections.OrderedDict()  # a peer's handle (bytes) ->
# its pointer in this process, the newest last
MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: the direction from the pointers (unified addressing)
LAZY_PEER_ACCESS = 1  # cudaIpcMemLazyEnablePeerAccess


class PeerCopyError(HetGraphError, RuntimeError):
    """A GPU worker could not map a peer's staged range (CUDA IPC)."""


class _Stage:
    """Two staging pairs (values, flags) of one range length on this GPU, their IPC
    handles, and which pair the next :func:`stage` writes."""

    def __init__(self, values_dtype, flags_dtype, length):
        import cupy

        self.pairs, self.handles, self.turn = [], [], 0
        for _ in range(2):
            pair = tuple(_own_array(cupy, length, dtype)
                         for dtype in (values_dtype, flags_dtype))
            self.pairs.append(pair)
            self.handles.append(tuple(bytes(cupy.cuda.runtime.ipcGetMemHandle(a.data.ptr))
                                      for a in pair))


def _own_array(cupy, length, dtype):
    """A device array of ``length`` ``dtype`` in an allocation of its own."""
    memory = cupy.cuda.memory.Memory(max(length * cupy.dtype(dtype).itemsize, 1))
    return cupy.ndarray((length,), dtype, cupy.cuda.MemoryPointer(memory, 0))


def stage(values, flags):
    """Copy ``values`` and ``flags`` (device array slices of this owner's range, on the
    current GPU) into this process's next staging pair and wait; returns its handles
    (values, flags) for the peers. Raises where this GPU cannot export memory (the
    caller then sends the range through host memory)."""
    import cupy

    key = (values.dtype.str, flags.dtype.str, len(values))
    with _LOCK:
        kept = _STAGES.pop(key, None) or _Stage(values.dtype, flags.dtype, len(values))
        _STAGES[key] = kept
        while len(_STAGES) > max(tuning.GPU_PEER_STAGES, 1):
            _STAGES.popitem(last=False)
    turn, kept.turn = kept.turn, 1 - kept.turn
    into_values, into_flags = kept.pairs[turn]
    into_values[...] = values
    into_flags[...] = flags
    cupy.cuda.get_current_stream().synchronize()
    return kept.handles[turn]


def fetch(handles, values, flags):
    """Copy a peer's staged range (its ``handles`` from :func:`stage`) into ``values``
    and ``flags`` (device array slices of the same range, on the current GPU) and
    wait."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    for handle, into in zip(handles, (values, flags)):
        cupy.cuda.runtime.memcpyAsync(into.data.ptr, _opened(cupy, handle), into.nbytes,
                                      MEMCPY_DEFAULT, stream.ptr)
    stream.synchronize()


def _opened(cupy, handle):
    """This process's pointer to the peer allocation of ``handle``, mapped once; the
    oldest mappings beyond ``tuning.GPU_PEER_MAPPINGS`` closed."""
    with _LOCK:
        pointer = _OPENED.pop(handle, None)
        if pointer is None:
            try:
                pointer = cupy.cuda.runtime.ipcOpenMemHandle(handle, LAZY_PEER_ACCESS)
            except cupy.cuda.runtime.CUDARuntimeError as exc:
                raise PeerCopyError(
                    f"this GPU worker could not map a peer GPU's range of the run's state "
                    f"({exc}); set hetgraph.tuning.GPU_PEER_COPIES = False to send the "
                    f"ranges through host memory") from exc
        _OPENED[handle] = pointer
        while len(_OPENED) > max(tuning.GPU_PEER_MAPPINGS, 1):
            _close(cupy, _OPENED.popitem(last=False)[1])
    return pointer


def _close(cupy, pointer):
    try:
        cupy.cuda.runtime.ipcCloseMemHandle(pointer)
    except cupy.cuda.runtime.CUDARuntimeError as exc:  # (its device gone)
        log.debug("could not unmap a peer's staged range: %s", exc)
