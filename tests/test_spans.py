"""kernels/gpu/spans.py: the union of spans (hand-checked), and Spans / IterationTimes
timed by a stand-in for CuPy's events whose clock the test sets."""

import types

import pytest

from hetgraph.kernels.gpu.spans import IterationTimes, Spans, union_seconds


@pytest.mark.parametrize("spans, union", [
    ([], 0.0),
    ([(1.0, 3.0)], 2.0),
    ([(1.0, 3.0), (5.0, 6.0)], 3.0),  # apart
    ([(5.0, 6.0), (1.0, 3.0)], 3.0),  # any order
    ([(1.0, 3.0), (2.0, 4.0)], 3.0),  # overlapping: [1, 4]
    ([(1.0, 5.0), (2.0, 3.0)], 4.0),  # one inside another
    ([(1.0, 2.0), (2.0, 3.0), (2.5, 2.75), (7.0, 7.0)], 2.0),  # touching; empty
])
def test_union_seconds_counts_the_time_covered_once(spans, union):
    assert union_seconds(spans) == union


class Clock:
    """CuPy's part that Spans calls: an event records the clock's ``now`` (ms)."""

    def __init__(self):
        self.now, self.made = 0.0, 0
        clock = self

        class Event:
            def __init__(self):
                clock.made += 1

            def record(self, stream=None):
                self.at = clock.now

        self.cuda = types.SimpleNamespace(
            Event=Event, get_elapsed_time=lambda start, end: end.at - start.at)


def _spans(spans, clock, mark):
    for start, end in spans:
        clock.now = start
        mark(None)
        clock.now = end
        mark(None)


def test_spans_give_the_union_of_their_events_in_seconds_and_reuse_them():
    clock = Clock()
    spans = Spans(clock)
    assert spans.seconds() == 0.0
    clock.now = 100.0  # (times from the first event: the clock's origin is no matter)
    _spans([(100.0, 102.0), (101.0, 104.0), (110.0, 110.5)], clock, spans.mark)
    assert spans.seconds() == pytest.approx(4.5e-3)
    spans.clear()
    assert spans.seconds() == 0.0
    _spans([(7.0, 8.0)], clock, spans.mark)
    assert spans.seconds() == pytest.approx(1e-3) and clock.made == 6


def test_iteration_times_add_the_scans_and_the_host_work_apart_from_the_copies():
    clock = Clock()
    times = IterationTimes(clock)
    assert not times.recorded and times.seconds() == (0.0, 0.0)
    _spans([(0.0, 3.0), (2.0, 5.0)], clock, times.copies.mark)  # two streams: 5 ms
    _spans([(0.0, 1.0)], clock, times.scans.mark)
    assert times.host(lambda a, b: a + b, 2, 3) == 5
    host = times.host_seconds
    assert host > 0 and times.recorded
    generation, transfer = times.seconds()
    assert generation == pytest.approx(1e-3 + host) and transfer == pytest.approx(5e-3)
    times.clear()
    assert not times.recorded and times.seconds() == (0.0, 0.0)
