"""Blocks of a page store read on demand for an out-of-core run.

One I/O thread per stripe directory (one per disk) reads the blocks of that stripe,
and ``tuning.CHECK_THREADS`` threads check what they read (CRC32, ids, offsets) while
they read on (none: each I/O thread checks its own); a block is handed out once
checked. A pass announces the pages it will read (:meth:`PageCache.plan`) and the cache keeps
reads of the next ones in flight while the current ones compute. What it keeps is
bounded by a byte budget:

- ``prefetch_bytes`` of it hold reads in flight and pages passing through;
- the rest caches blocks (less what :meth:`PageCache.reserve` sets aside). A block
  read when the cache is full replaces blocks that the current pass has not used;
  when every cached block was used by this pass (a scan larger than the cache), it
  passes through uncached, so that a repeated scan keeps hitting the same cached
  pages instead of evicting each one just before it is needed again (which LRU
  would do).

A pull announces its next pass too (``ahead``: the same pages): once this pass's reads
have all started, the reads of the next pass's first blocks start, within
``prefetch_bytes``, so that the disk goes on reading while the pass's last pages
compute and the iteration ends.

Several engines of one run in one process (the CPU's and the GPU's) share one cache
(:func:`shared_cache`): a page is read once for whichever device takes it, and the
budget bounds them together. Each announces its own plan and counts the reads it
takes (``owner``). The planned reads of the owners start in turn, each owner's in
flight bounded by its share of ``prefetch_bytes``, and a block an owner waits for is
read next on its stripe, before the reads queued for later: whichever device is free
gets its page first.
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

import numpy as np

from .. import tuning
from ..errors import OutOfCoreError


class StripeReader:
    """The I/O thread of one stripe: runs the reads queued to it one at a time, in
    order, but those queued ``urgent`` (or hurried later) first. A read's second
    stage (``then``: its checks) runs in the executor ``after``, so that the thread
    goes on to the next read meanwhile."""

    def __init__(self, name, after=None):
        self._queue = collections.deque()  # (Future, function, argument, then)
        self._wake = threading.Condition()
        self._closed = False
        self._after = after
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, function, argument, urgent=False, then=None) -> Future:
        """A Future of ``function(argument)`` (of ``then(function(argument))`` when
        given: run in the reader's ``after`` executor), run after the reads queued
        before (after the urgent ones only, when ``urgent``)."""
        future = Future()
        with self._wake:
            if self._closed:
                raise RuntimeError("the page cache is closed")
            item = (future, function, argument, then)
            self._queue.appendleft(item) if urgent else self._queue.append(item)
            self._wake.notify()
        return future

    def hurry(self, future):
        """Run ``future``'s read next if it is still queued."""
        with self._wake:
            for i, item in enumerate(self._queue):
                if item[0] is future:
                    del self._queue[i]
                    self._queue.appendleft(item)
                    return

    def _work(self):
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if not self._queue:
                    return
                future, function, argument, then = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            try:
                result = function(argument)
            except BaseException as exc:  # (handed to whoever waits for it)
                future.set_exception(exc)
                continue
            if then is None:
                future.set_result(result)
            elif self._after is None:  # (no executor: checked here)
                _settle(future, then, result)
            else:
                self._after.submit(_settle, future, then, result)

    def close(self):
        """Cancel the queued reads, wait for the one running, end the thread (a second
        stage under way is its executor's to finish)."""
        with self._wake:
            self._closed = True
            for future, *_ in self._queue:
                future.cancel()
            self._queue.clear()
            self._wake.notify()
        self._thread.join()


def _settle(future, then, value):
    """Set ``future`` to ``then(value)``, or to the exception it raised."""
    try:
        future.set_result(then(value))
    except BaseException as exc:  # (handed to whoever waits for it)
        future.set_exception(exc)


class PageCache:
    """Blocks of ``store`` (a PageStore) within ``budget`` bytes of host memory.

    ``prefetch_bytes``: the part of the budget for reads in flight (default: a quarter
    of the budget). Counters: ``read_bytes`` (from disk), ``reads``, ``hits``,
    ``misses``, ``wait_seconds`` (time a pass waited for a read), ``read_seconds``
    (time the I/O threads spent reading, all stripes together).
    """

    def __init__(self, store, budget, prefetch_bytes=None):
        self.store = store
        self.budget = int(budget)
        self.prefetch_bytes = int(prefetch_bytes if prefetch_bytes is not None
                                  else self.budget // 4)
        largest = max((e["bytes"] for page in store.manifest["pages"]
                       for e in page["blocks"].values()), default=0)
        if largest > self.prefetch_bytes or self.prefetch_bytes > self.budget:
            raise OutOfCoreError(
                f"{store.path}: a page cache of {self.budget:,} bytes ({self.prefetch_bytes:,} "
                f"for reads in flight) is too small for this store's blocks (up to "
                f"{largest:,} bytes each; the reads in flight must hold one); raise "
                f"host_budget or rewrite the store with smaller pages")
        self.capacity = self.budget - self.prefetch_bytes
        # (a block's CRC32 and structure checks: not on its stripe's I/O thread)
        self._checks = ThreadPoolExecutor(tuning.CHECK_THREADS, thread_name_prefix=(
            "hetgraph-check")) if tuning.CHECK_THREADS else None
        self._io = [StripeReader(f"hetgraph-io-{i}", after=self._checks)
                    for i in range(len(store.stripe_dirs))]
        self._cached = collections.OrderedDict()  # (page, block) -> [array, pass]
        self._cached_bytes = 0
        self._inflight = {}  # (page, block) -> Future
        self._inflight_bytes = 0
        self._plans = {}  # owner -> deque of the (page, block) it reads next
        self._planned = {}  # owner -> every (page, block) of its plan, read-ahead too
        self._ahead = {}  # owner -> deque of its next pass's (page, block) (plan's ahead)
        self._ahead_keys = {}  # owner -> every (page, block) of its read-ahead
        self._owner = {}  # (page, block) in flight -> the owner whose read it is
        self._owner_inflight = collections.Counter()  # owner -> bytes in flight
        self.owner_read_bytes = collections.Counter()
        self._users = 0  # engines sharing it (see shared_cache)
        self._pass = 0
        self._lock = threading.Lock()
        self.read_bytes = self.reads = self.hits = self.misses = 0
        self.wait_seconds = self.read_seconds = 0.0

    def _entry(self, key):
        return self.store.page_blocks(key[0])[key[1]]

    def plan(self, pages, blocks, same_pass=False, owner=None, ahead=None):
        """Announce that ``blocks`` (names) of ``pages`` are read next by ``owner``, in
        this order, instead of what it announced before; reads of the first ones start
        now. This starts a new pass unless ``same_pass`` (a second phase of the same
        iteration, whose blocks stay protected); a new pass ends the read-ahead of the
        other owners. ``ahead``: the pages (in order) whose ``blocks`` the owner's next
        pass reads (a pull's: the same again), read ahead once this pass's reads have
        all started (default: none)."""
        keys = [(p, b) for p in pages for b in blocks]
        with self._lock:
            self._pass += 0 if same_pass else 1
            self._plans[owner] = collections.deque(keys)
            self._planned[owner] = set(keys)
            self._ahead = {o: q for o, q in self._ahead.items()
                           if same_pass and o != owner}
            if ahead is not None:
                self._ahead[owner] = collections.deque((p, b) for p in ahead
                                                       for b in blocks)
            self._ahead_keys = {o: self._ahead_keys[o] if o != owner else
                                set(self._ahead[o]) for o in self._ahead}
            # (the reads an owner started for its plan stay under way)
            planned = set().union(*self._planned.values(), *self._ahead_keys.values())
            left = [(k, f) for k, f in self._inflight.items() if k not in planned]
            kept = [(k, f) for k, f in left if not self._cancel(k, f)]
        for key, future in kept:  # reads of an abandoned plan under way: cached if room
            try:
                self._keep(key, self._finish(key, future, self._owner.get(key)))
            except CancelledError:
                pass
        self._top_up()

    def _cancel(self, key, future):
        """Drop the read ``future`` of ``key`` if it has not started (under the lock);
        whether it was dropped."""
        if not future.cancel():
            return False
        self._forget(key)
        return True

    def _forget(self, key):
        """``key``'s read is no longer in flight (under the lock)."""
        del self._inflight[key]
        size = self._entry(key)["bytes"]
        self._inflight_bytes -= size
        self._owner_inflight[self._owner.pop(key, None)] -= size

    def _top_up(self):
        """Start reads of planned blocks while the in-flight part of the budget allows:
        the owners' plans in turn, one block each, each owner within its share of it;
        then, once every plan's reads have started, the reads ahead of the next
        passes."""
        with self._lock:
            turn = [(o, q) for o, q in self._plans.items() if q]
            share = self.prefetch_bytes // max(len(turn), 1)
            while turn:
                going = []
                for owner, plan in turn:
                    started = self._start_next(plan, owner, share)
                    if started is None:
                        return  # no room left for any
                    if started:
                        going.append((owner, plan))
                turn = going
            if any(self._plans.values()):  # (an owner at its share: this pass first)
                return
            for owner, ahead in self._ahead.items():
                while self._start_next(ahead, owner, self.prefetch_bytes):
                    pass

    def _start_next(self, plan, owner, share):
        """Start the read of the first block of ``plan`` (for ``owner``, within
        ``share`` bytes in flight) that is neither cached nor in flight (under the
        lock): True if started, False if the plan is done or the owner's share is full,
        None if the cache's in-flight bytes are."""
        while plan and (plan[0] in self._cached or plan[0] in self._inflight):
            plan.popleft()
        if not plan:
            return False
        key = plan[0]
        size = self._entry(key)["bytes"]
        if self._inflight and self._inflight_bytes + size > self.prefetch_bytes:
            return None
        if self._owner_inflight[owner] and self._owner_inflight[owner] + size > share:
            return False
        plan.popleft()
        self._start(key, owner)
        return True

    def _start(self, key, owner, urgent=False):
        """Queue the read of ``key`` for ``owner`` (under the lock); ``urgent``: it is
        waited for now, so its stripe reads it next."""
        entry = self._entry(key)
        self._inflight[key] = self._io[entry["stripe"]].submit(
            self._read, key, urgent, then=functools.partial(self.store.verify_page_block,
                                                            *key))
        self._owner[key] = owner
        self._inflight_bytes += entry["bytes"]
        self._owner_inflight[owner] += entry["bytes"]

    def _read(self, key):
        """Read block ``key`` (in an I/O thread), timed; checked after (see
        :meth:`_start`)."""
        start = time.perf_counter()
        try:
            return self.store.read_page_block(*key)
        finally:
            seconds = time.perf_counter() - start
            with self._lock:
                self.read_seconds += seconds

    def missing_bytes(self, pages, blocks):
        """Bytes of ``blocks`` (names) of each of ``pages`` that are neither cached nor
        being read (int64, one a page): what reading them now takes from the disk."""
        with self._lock:
            return np.array([sum(self._entry((p, b))["bytes"] for b in blocks
                                 if (p, b) not in self._cached and
                                 (p, b) not in self._inflight) for p in pages], np.int64)

    def cached_of(self, pages, blocks):
        """Bytes of ``blocks`` of each of ``pages`` held in the cache now (int64)."""
        with self._lock:
            return np.array([sum(self._cached[(p, b)][0].nbytes for b in blocks
                                 if (p, b) in self._cached) for p in pages], np.int64)

    @property
    def free_bytes(self) -> int:
        """Bytes the cache can take before it must replace blocks."""
        return max(self.capacity - self._cached_bytes, 0)

    @property
    def seconds_per_byte(self):
        """Seconds a byte read from the disk took, the stripes read in parallel (None
        before any read)."""
        if not self.read_bytes:
            return None
        return self.read_seconds / len(self._io) / self.read_bytes

    def get(self, page, blocks, owner=None):
        """The arrays of ``blocks`` (names) of ``page``, read now (for ``owner``) if no
        read is in flight, else its read hurried (see :class:`StripeReader`)."""
        arrays = []
        for block in blocks:
            key = (page, block)
            while True:  # (again if another owner's new pass cancelled the read)
                with self._lock:
                    cached = self._cached.get(key)
                    if cached is not None:
                        cached[1] = self._pass
                        self._cached.move_to_end(key)
                        self.hits += 1
                        arrays.append(cached[0])
                        break
                    plan = self._plans.get(owner)
                    if plan and plan[0] == key:
                        plan.popleft()
                    future = self._inflight.get(key)
                    if future is None:
                        self._start(key, owner, urgent=True)
                        future = self._inflight[key]
                    else:
                        self._io[self._entry(key)["stripe"]].hurry(future)
                try:
                    array = self._finish(key, future, owner)
                except CancelledError:
                    continue
                with self._lock:
                    self.misses += 1
                self._keep(key, array)
                arrays.append(array)
                break
        self._top_up()
        return arrays

    def in_turn(self, pages, blocks):
        """``pages`` (as planned) in the order that a pass free to take them in any
        order (a sync pull) takes them: the next one read from the disk once its
        blocks are there, a page whose blocks the cache held at the start while it is
        not, so that the disk goes on reading into the room each page frees."""
        with self._lock:
            held = [all((p, b) in self._cached for b in blocks) for p in pages]
        cached = collections.deque(p for p, h in zip(pages, held) if h)
        read = collections.deque(p for p, h in zip(pages, held) if not h)
        while read or cached:
            if read and (not cached or self._arrived(read[0], blocks)):
                yield read.popleft()
            else:
                yield cached.popleft()

    def _arrived(self, page, blocks):
        """Whether every block of ``blocks`` of ``page`` is cached or read."""
        with self._lock:
            for block in blocks:
                key = (page, block)
                future = self._inflight.get(key)
                if key not in self._cached and (future is None or not future.done()):
                    return False
            return True

    def _finish(self, key, future, owner):
        """Wait for ``future``, the read of ``key`` in flight, and count it once, as
        ``owner``'s (another thread may wait for the same read)."""
        start = time.perf_counter()
        try:
            array = future.result()
        finally:
            with self._lock:
                if self._inflight.get(key) is future and future.done() and \
                        not future.cancelled():
                    self._forget(key)
                    self.reads += 1
                    size = self._entry(key)["bytes"]
                    self.read_bytes += size
                    self.owner_read_bytes[owner] += size
                self.wait_seconds += time.perf_counter() - start
        return array

    def _keep(self, key, array):
        """Cache ``array`` if room can be made from blocks this pass has not used and
        no plan will (a pass that takes its pages in any order, :meth:`in_turn`, may
        take the blocks it holds last)."""
        with self._lock:
            if key in self._cached:  # another thread waited for the same read
                return
            need = self._cached_bytes + array.nbytes - self.capacity
            if need > 0:
                planned = set().union(*self._planned.values(), *self._ahead_keys.values())
                stale = [k for k, (a, used) in self._cached.items()
                         if used < self._pass and k not in planned]
                if sum(self._cached[k][0].nbytes for k in stale) < need:
                    return  # passes through
                for k in stale:
                    if need <= 0:
                        break
                    need -= self._cached[k][0].nbytes
                    self._cached_bytes -= self._cached.pop(k)[0].nbytes
            self._cached[key] = [array, self._pass]
            self._cached_bytes += array.nbytes

    def discard(self, page, blocks):
        """Drop ``blocks`` (names) of ``page`` from the cache: a copy kept elsewhere (a
        GPU's resident page) leaves the room to pages that have none."""
        with self._lock:
            for block in blocks:
                entry = self._cached.pop((page, block), None)
                if entry is not None:
                    self._cached_bytes -= entry[0].nbytes

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def reserve(self, nbytes):
        """Set ``nbytes`` of the cache's part of the budget aside for memory held beside
        it (a GPU's pinned staging buffers); blocks beyond it go as the next ones come.
        OutOfCoreError when nothing would be left to cache."""
        with self._lock:
            if nbytes >= self.capacity:
                raise OutOfCoreError(
                    f"{self.store.path}: host_budget leaves {self.capacity:,} bytes to cache "
                    f"pages, and {nbytes:,} are needed beside them (staging buffers); raise "
                    f"host_budget")
            self.capacity -= int(nbytes)

    def release(self, beside=0):
        """An engine sharing the cache is done with it (:func:`shared_cache`), and with
        the ``beside`` bytes it held beside it (they come back to the cache); the last
        one closes it."""
        with _SHARED_LOCK:
            self._users -= 1
            if self._users > 0:
                with self._lock:
                    self.capacity += int(beside)
                return
            if _SHARED.get(self.store) is self:
                del _SHARED[self.store]
        self.close()

    def close(self):
        """Stop the I/O threads and drop every block."""
        for reader in self._io:
            reader.close()
        if self._checks is not None:
            self._checks.shutdown(wait=True)  # (the reads' checks under way end)
        with self._lock:
            self._cached.clear()
            self._inflight.clear()
            self._owner.clear()
            self._owner_inflight.clear()
            self._cached_bytes = self._inflight_bytes = 0


_SHARED: dict = {}  # PageStore -> the PageCache its engines in this process share
_SHARED_LOCK = threading.Lock()


def shared_cache(store, budget, beside=0) -> PageCache:
    """The page cache of ``store`` shared by the engines of this process, made with
    ``budget`` bytes by the first (later ones take it as it is); ``beside``: bytes the
    engine holds beside it (staging buffers), taken out of the cache's part. Each
    engine calls :meth:`PageCache.release` when done."""
    with _SHARED_LOCK:
        cache = _SHARED.get(store)
        if cache is None:
            cache = PageCache(store, budget - beside)
        elif beside:
            cache.reserve(beside)
        _SHARED[store] = cache
        cache._users += 1
        return cache
