"""Where a GPU iteration's time goes beside its kernels: the copies that bring the graph
in (streamed pages, the active subgraph) and the active subgraph's generation (Subway,
EuroSys'20, Fig. 9 compares the two).

Work queued on CUDA streams is timed by events recorded around it (:class:`Spans`),
made once and reused every iteration, and read once the iteration was waited for: no
wait of its own. Copies queued on several streams share the device's copy engine, so
their time is the union of their spans (:func:`union_seconds`), not the sum.
Nothing here imports CuPy: the engine passes its module.
"""

from __future__ import annotations

from time import perf_counter


def union_seconds(spans):
    """The length of the union of ``spans`` [(start, end), ...] (any order, any unit):
    the time during which at least one of them was under way."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


class Spans:
    """Spans of one iteration's work on CUDA streams, each between two events recorded
    on its stream (:meth:`mark` before and after it); ``cupy``: the array module whose
    ``cuda.Event`` and ``cuda.get_elapsed_time`` time them."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.events = []  # (kept: creating an event costs more than recording it)
        self.used = 0

    def clear(self):
        """Forget the spans recorded (a new iteration begins)."""
        self.used = 0

    def mark(self, stream):
        """Record the next event on ``stream``: a span's start, then its end."""
        if self.used == len(self.events):
            self.events.append(self.cupy.cuda.Event())
        self.events[self.used].record(stream)
        self.used += 1

    def seconds(self):
        """The union of the spans in seconds (0.0 for none); their events must be done
        (the iteration that recorded them was waited for)."""
        if self.used < 2:
            return 0.0
        first, elapsed = self.events[0], self.cupy.cuda.get_elapsed_time
        if self.used < 4:  # one span (the common case: no union to take)
            return elapsed(first, self.events[1]) / 1e3
        times = [0.0] + [elapsed(first, event) for event in self.events[1:self.used]]
        return union_seconds(zip(times[0::2], times[1::2])) / 1e3


class IterationTimes:
    """What one GPU iteration spent bringing the graph in and generating the active
    subgraph: ``copies``, the spans of the edges' and offsets' copies to the device
    (streamed pages, the active subgraph's chunks); ``scans``, the spans of the device's
    scans of the active flags and the list's copy out; ``host_seconds``, the host's
    work on the list (offsets, chunks, the gathers into pinned memory), timed by
    :meth:`host`."""

    def __init__(self, cupy):
        self.copies, self.scans = Spans(cupy), Spans(cupy)
        self.host_seconds = 0.0

    def clear(self):
        """Forget what was recorded (a new iteration begins)."""
        self.copies.clear()
        self.scans.clear()
        self.host_seconds = 0.0

    def host(self, function, *args):
        """``function(*args)``, its seconds added to ``host_seconds``."""
        start = perf_counter()
        result = function(*args)
        self.host_seconds += perf_counter() - start
        return result

    @property
    def recorded(self):
        """Whether anything was recorded since :meth:`clear`."""
        return bool(self.copies.used or self.scans.used or self.host_seconds)

    def seconds(self):
        """(generation seconds: the scans' union plus the host's work, transfer seconds:
        the copies' union), once the iteration was waited for."""
        return self.scans.seconds() + self.host_seconds, self.copies.seconds()
