"""Helper threads for a pass cut into parts: the calling thread and up to ``threads - 1``
helpers claim the parts one at a time until none is left, so that a thread the
operating system holds back (a machine shared with other work) delays the pass by one
part at most, not by a fixed share of it. The parts run compiled code that releases the
GIL (``nogil``); a waiting thread sleeps, never spins (spinning threads on a busy
machine take the cores that the working ones need).

The helpers are the process's own threads, each asleep on a lock of its own: a pass
wakes the idle ones with one release each, where a queue of tasks would cost the
calling thread several microseconds a helper before it starts its own part."""

from __future__ import annotations

import itertools
import os
import threading

_LOCK = threading.Lock()  # guards _IDLE and _COUNT
_IDLE: list = []  # helpers asleep, ready for a pass
_COUNT = [0]  # helpers made so far


class _Parts:
    """Parts 0..count-1 of one pass, claimed by the threads that run ``work``."""

    def __init__(self, work, count):
        self.work, self.count = work, count
        self.results = [None] * count
        self.claim = itertools.count().__next__  # (atomic under the GIL)
        self.left, self.lock, self.done = count, threading.Lock(), threading.Event()
        self.error = None

    def drain(self):
        """Run parts until none is left to claim."""
        while True:
            t = self.claim()
            if t >= self.count:
                return
            try:
                self.results[t] = self.work(t)
            except BaseException as exc:  # re-raised in the calling thread
                self.error = exc
            with self.lock:
                self.left -= 1
                if self.left == 0:
                    self.done.set()


class _Helper:
    """One helper thread: asleep on ``wake`` until a pass hands it its parts."""

    def __init__(self):
        self.wake = threading.Lock()
        self.wake.acquire()
        self.parts = None
        threading.Thread(target=self._serve, name="hetgraph-pass", daemon=True).start()

    def start(self, parts):
        self.parts = parts
        self.wake.release()

    def _serve(self):
        while True:
            self.wake.acquire()
            parts, self.parts = self.parts, None
            parts.drain()
            with _LOCK:
                _IDLE.append(self)


def _forget_helpers():
    """In a child process made by ``fork``: the parent's helpers did not come along."""
    global _LOCK
    _LOCK = threading.Lock()
    _IDLE.clear()
    _COUNT[0] = 0


os.register_at_fork(after_in_child=_forget_helpers)


def _helpers(wanted: int) -> list:
    """Up to ``wanted`` idle helpers, taken from the idle ones, new ones made while the
    process has fewer than ``wanted`` (a helper busy with another pass is not waited
    for: the cores are busy then anyway)."""
    with _LOCK:
        keep = max(len(_IDLE) - wanted, 0)
        taken, _IDLE[keep:] = _IDLE[keep:], []
        new = max(0, min(wanted - len(taken), wanted - _COUNT[0]))
        _COUNT[0] += new
    return taken + [_Helper() for _ in range(new)]


def run_parts(work, count: int, threads: int) -> list:
    """[work(t) for t in range(count)], the parts run by this thread and up to
    ``threads - 1`` helper threads, each claiming the next part when it is free (helpers
    busy with another pass leave theirs to this thread). ``work`` must release the GIL
    to gain from the helpers."""
    parts = _Parts(work, count)
    for helper in _helpers(min(threads, count) - 1):
        helper.start(parts)
    parts.drain()
    parts.done.wait()
    if parts.error is not None:
        raise parts.error
    return parts.results
