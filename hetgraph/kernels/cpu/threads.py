"""Helper threads for a pass cut into parts: the calling thread and up to ``threads - 1``
helpers claim the parts one at a time until none is left, so that a thread the
operating system holds back (a machine shared with other work) delays the pass by one
part at most, not by a fixed share of it. The parts run compiled code that releases the
GIL (``nogil``); a waiting thread sleeps, never spins (spinning threads on a busy
machine take the cores that the working ones need)."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

_LOCK = threading.Lock()
_POOL: list = []  # [the process's executor], made on first use, grown when asked


def _executor(helpers: int) -> ThreadPoolExecutor:
    """The process's helper threads, at least ``helpers`` of them."""
    with _LOCK:
        if not _POOL or _POOL[0]._max_workers < helpers:
            if _POOL:  # (its idle threads end; a part it runs still finishes)
                _POOL.pop().shutdown(wait=False)
            _POOL.append(ThreadPoolExecutor(helpers, thread_name_prefix="hetgraph-pass"))
        return _POOL[0]


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


def run_parts(work, count: int, threads: int) -> list:
    """[work(t) for t in range(count)], the parts run by this thread and up to
    ``threads - 1`` helper threads, each claiming the next part when it is free (a
    helper busy with another pass joins late or not at all: this thread runs what is
    left). ``work`` must release the GIL to gain from the helpers."""
    parts = _Parts(work, count)
    helpers = min(threads, count) - 1
    if helpers > 0:
        submit = _executor(helpers).submit
        for _ in range(helpers):
            submit(parts.drain)
    parts.drain()
    parts.done.wait()
    if parts.error is not None:
        raise parts.error
    return parts.results
