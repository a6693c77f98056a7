"""GraphReplay (kernels/gpu/replay.py) with a stand-in for CuPy's stream capture: what
it captures, when it captures again, and its fallback when the device refuses (the
CUDA side runs in tests/test_coloring_gpu.py)."""

import types

import pytest

from hetgraph.kernels.gpu.replay import GraphReplay


class Launch:
    """A stand-in PackedLaunch: its key is its arguments."""

    def __init__(self, log, *arguments):
        self.log, self.arguments = log, arguments

    def key(self):
        return self.arguments

    def __call__(self, blocks, threads, shared, stream):
        self.log.append(("kernel", self.arguments, blocks, stream))


def stand_in(log, refuse=False):
    """A cupy whose streams record what is queued on them, capture included."""

    class Stream:
        count = 0

        def __init__(self, non_blocking=False):
            Stream.count += 1
            self.ptr = 100 + Stream.count

        def begin_capture(self):
            if refuse:
                raise RuntimeError("capture not supported")
            log.append(("begin", self.ptr))

        def end_capture(self):
            log.append(("end", self.ptr))
            return types.SimpleNamespace(launch=lambda s: log.append(("graph", s.ptr)))

    runtime = types.SimpleNamespace(
        CUDARuntimeError=OSError, memcpyDeviceToDevice=3,
        memcpyAsync=lambda d, s, n, kind, p: log.append(("copy", d, s, n, p)),
        memsetAsync=lambda d, v, n, p: log.append(("zero", d, n, p)))
    return types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=Stream, runtime=runtime))


def operations(log, value=1):
    return [("zero", 8, 24), ("kernel", Launch(log, 5, value), 4, 256, 0),
            ("copy", 16, 32, 64)]


def test_captured_once_and_replayed():
    log = []
    replay = GraphReplay(stand_in(log), operations(log))
    main = types.SimpleNamespace(ptr=7)
    for _ in range(3):
        replay.run(main)
    capture = log[0][1]
    assert log[:5] == [("begin", capture), ("zero", 8, 24, capture),
                       ("kernel", (5, 1), 4, capture), ("copy", 16, 32, 64, capture),
                       ("end", capture)]
    assert log[5:] == [("graph", 7)] * 3 and replay.captures == 1
    # the same work again (new launch objects, equal arguments): the graph stays
    replay.set(operations(log))
    replay.run(main)
    assert replay.captures == 1 and log[-1] == ("graph", 7)
    # an argument changed: captured again at the next pass
    replay.set(operations(log, value=2))
    replay.run(main)
    assert replay.captures == 2 and ("kernel", (5, 2), 4, capture) in log


@pytest.mark.parametrize("capture, refuse", [(False, False), (True, True)])
def test_queued_without_capture(capture, refuse):
    """capture=False, or a device that refuses it: each pass queues the operations on
    the stream given (a refusal is logged once and capture stays off)."""
    log = []
    replay = GraphReplay(stand_in(log, refuse=refuse), operations(log), capture=capture)
    main = types.SimpleNamespace(ptr=7)
    replay.run(main)
    replay.run(main)
    assert log == [("zero", 8, 24, 7), ("kernel", (5, 1), 4, 7), ("copy", 16, 32, 64, 7)] * 2
    assert replay.captures == 0 and not replay.capture
