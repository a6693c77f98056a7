"""A fixed sequence of device operations replayed as one CUDA graph (:class:`GraphReplay`).

A pass of many dependent short launches (a colored pass: a launch a color) waits on
the host's launch calls and on each launch's start; as a graph it is one host call, and
the device starts each node after the last without the host. The graph is captured
once and replayed; it is captured again only when an operation's arguments change
(:meth:`GraphReplay.set`): what changes every pass must be read from device memory.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class GraphReplay:
    """Operations queued in order on a stream: ``("kernel", launch, blocks, threads,
    shared bytes)`` (a :class:`~.launch.PackedLaunch`), ``("copy", destination,
    source, bytes)`` (device pointers), ``("zero", pointer, bytes)``. ``capture``:
    replay them as a CUDA graph (False, or where capture fails: queue each, as
    :meth:`run` does the first time)."""

    def __init__(self, cupy, operations, capture=True):
        self.cupy = cupy
        self.capture = bool(capture)
        self.captures = 0  # graphs captured so far (for tests and describe)
        self._graph = self._key = None
        self._stream = None
        self.set(operations)

    def set(self, operations):
        """Replace the operations; the graph is kept where they launch the same work
        (the same kernels, arguments, shapes and copies), else captured at the next
        :meth:`run`."""
        self._operations = list(operations)
        key = tuple(_key(op) for op in self._operations)
        if key != self._key:
            self._graph, self._key = None, key

    def run(self, stream):
        """Queue the operations on ``stream`` (a CuPy stream): the graph's replay
        once captured."""
        if self._graph is None and self.capture:
            self._graph = self._captured()
        if self._graph is not None:
            self._graph.launch(stream)
        else:
            self._queue(stream.ptr)

    def _captured(self):
        """The operations captured as a graph on a stream of their own (not run), or
        None where the device refuses (capture is then off: logged)."""
        cp = self.cupy
        if self._stream is None:
            self._stream = cp.cuda.Stream(non_blocking=True)
        stream = self._stream
        try:
            stream.begin_capture()
        except (cp.cuda.runtime.CUDARuntimeError, RuntimeError) as exc:
            return self._refused(exc)
        try:
            self._queue(stream.ptr)
        finally:
            graph = stream.end_capture()
        self.captures += 1
        return graph

    def _refused(self, exc):
        log.warning("CUDA graph capture refused (%s): the pass queues its launches", exc)
        self.capture = False
        return None

    def _queue(self, stream_pointer):
        rt = self.cupy.cuda.runtime
        for op in self._operations:
            if op[0] == "kernel":
                _, launch, blocks, threads, shared = op
                launch(blocks, threads, shared, stream_pointer)
            elif op[0] == "copy":
                rt.memcpyAsync(op[1], op[2], op[3], rt.memcpyDeviceToDevice, stream_pointer)
            else:
                rt.memsetAsync(op[1], 0, op[2], stream_pointer)


def _key(op):
    """What an operation does, comparable: a launch's kernel and arguments, else the
    operation itself."""
    if op[0] == "kernel":
        return ("kernel", op[1].key(), *op[2:])
    return tuple(op)
