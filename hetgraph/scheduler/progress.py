"""What a run tells the outside while it runs: a one-line progress bar on a terminal, and
its history rows sent to the Dask scheduler's event log under the topic
:data:`hetgraph.events.TOPIC`, where the dashboard page and the Prometheus gauges
(:mod:`hetgraph.dashboard`) read them."""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import sys
import time
import weakref

from .. import tuning
from ..result import row_dict
from ..events import TOPIC, encode_rows

log = logging.getLogger("hetgraph.progress")

BAR_WIDTH = 20  # characters


def _number(value):
    value = float(value)
    return "-" if math.isnan(value) else f"{value:.3g}"


class ProgressBar:
    """One line on ``stream`` (default stderr), drawn once the run has taken ``delay``
    seconds (default ``tuning.PROGRESS_DELAY``), redrawn at most every ``interval``
    seconds (default ``tuning.PROGRESS_REDRAW``): iterations against the maximum, alpha,
    f, the CPU mode and the pages each device kind computed in the latest iteration, and
    the elapsed seconds."""

    def __init__(self, name, max_iterations, stream=None, delay=None, interval=None):
        self.name, self.max_iterations = name, max_iterations
        self.stream = sys.stderr if stream is None else stream
        self.delay = tuning.PROGRESS_DELAY if delay is None else delay
        self.interval = tuning.PROGRESS_REDRAW if interval is None else interval
        self.start = time.perf_counter()
        self.drawn = 0.0  # when the bar was last drawn (0: never)
        self.line = ""

    def format(self, row):
        """The bar's text after history row ``row``."""
        row = row_dict(row)
        done = min(row["iteration"] / self.max_iterations, 1.0) if self.max_iterations else 1.0
        filled = round(done * BAR_WIDTH)
        return (f"{self.name} {row['iteration']}/{self.max_iterations} "
                f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] alpha {_number(row['alpha'])} "
                f"f {_number(row['f'])} {row['mode']} pages cpu {row['cpu_pages']} gpu "
                f"{row['gpu_pages']} {time.perf_counter() - self.start:.1f} s")

    def update(self, rows):
        """Show the latest of ``rows`` (history rows just finished) when due."""
        now = time.perf_counter()
        if not rows or now - self.start < self.delay or now - self.drawn < self.interval:
            return
        self._write(self.format(rows[-1]))
        self.drawn = now

    def _write(self, line, end=""):
        """Overwrite the bar's line with ``line`` (padded over a longer previous one)."""
        self.stream.write("\r" + line.ljust(len(self.line)) + end)
        self.stream.flush()
        self.line = line

    def close(self, iterations, converged, error=None):
        """End the line (only when the bar was drawn)."""
        if self.drawn:
            state = "failed" if error else "converged" if converged else "stopped"
            self._write(f"{self.name}: {iterations} iterations, {state}, "
                        f"{time.perf_counter() - self.start:.1f} s", end="\n")


def show_progress(progress, stream=None) -> bool:
    """Whether a run draws a bar: ``progress`` True / False, or None for "when ``stream``
    (default stderr) is a terminal"."""
    if progress is not None:
        return bool(progress)
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


class SchedulerLog:
    """Posts messages to the event log of ``client``'s scheduler under :data:`TOPIC`, in
    the order given (every run of one client shares one: :meth:`of`).
    ``post(message)`` only queues it: the client's event loop sends what is queued
    every ``period`` seconds (default ``tuning.EVENT_SEND_PERIOD``), in one round trip
    to a scheduler elsewhere (:meth:`_post`), not one a message. Waiting for the
    scheduler, or even waking the loop from this thread, would cost a post as much as a
    small graph's whole run. A message that cannot be sent is logged at debug level:
    monitoring never stops a run."""

    _of_client = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, client) -> "SchedulerLog":
        """The SchedulerLog of ``client``."""
        log_ = cls._of_client.get(client)
        if log_ is None:
            log_ = cls._of_client[client] = cls(client)
        return log_

    def __init__(self, client, period=None):
        self.client = client
        self.queue = collections.deque()
        self._sender = None
        self._period_ms = (tuning.EVENT_SEND_PERIOD if period is None else period) * 1e3
        self._sending = None  # an asyncio.Lock, made on the loop
        self._reads_log = False  # a local scheduler logs the queue before a read of events

    def flush(self):
        """Send what is queued now and wait for it (for a scheduler that outlives this
        process: a run's end must reach it before the process exits). A scheduler in
        this process (a local cluster's) is not woken for it: it logs the queue at the
        next periodic send, or before it answers a request for its events
        (:meth:`_logged_before_reads`), whichever comes first; until that is in place,
        the queue is handed to the client's loop, not waited for (the client's later
        calls reach that scheduler after it)."""
        if self._local() is not None:
            if not self._reads_log:
                self.client.loop.add_callback(self._send_queued)
            return
        try:
            self.client.sync(self._send_queued)
        except Exception as exc:
            log.debug("run events not flushed: %s", exc)

    def _local(self):
        """The scheduler of the client's local cluster when it runs in this process on
        the client's event loop (messages go to it directly), else None."""
        cluster = getattr(self.client, "cluster", None)
        scheduler = getattr(cluster, "scheduler", None)
        return scheduler if scheduler is not None and getattr(
            cluster, "loop", None) is self.client.loop else None

    def __call__(self, message):
        self.queue.append(message)
        if self._sender is None:  # the first post starts the sender on the loop
            self._sender = False
            self.client.loop.add_callback(self._start)

    def _start(self):
        from tornado.ioloop import PeriodicCallback

        local = self._local()
        if local is not None:
            self._logged_before_reads(local)
        self._sender = PeriodicCallback(self._send_queued, self._period_ms)
        self._sender.start()

    def _logged_before_reads(self, scheduler):
        """Have ``scheduler`` (in this process, on this loop) log this queue before it
        answers a request for its events (its ``events`` handler, which
        ``Client.get_events`` calls): a read after a run sees the run's end, and the
        run's end wakes no loop."""
        read, ref = scheduler.handlers.get("events"), weakref.ref(self)
        if read is None:  # (a Dask without it: flush hands the queue to the loop)
            return

        def events(*args, **kwargs):
            log_ = ref()
            if log_ is not None:
                log_._log_queued(scheduler)
            return read(*args, **kwargs)

        scheduler.handlers["events"] = events
        self._reads_log = True

    def _log_queued(self, scheduler):
        """Log the queue at ``scheduler`` (in this process), on its loop, in order."""
        while self.queue:
            scheduler.log_event(TOPIC, self.queue.popleft())

    async def _send_queued(self):
        if self.client.status == "closed":
            if self._sender:
                self._sender.stop()
            return
        local = self._local()
        if local is not None:
            self._log_queued(local)
            return
        if self._sending is None:
            self._sending = asyncio.Lock()
        async with self._sending:  # one sender at a time: the queue's order holds
            while self.queue:
                messages = [self.queue.popleft() for _ in range(len(self.queue))]
                try:
                    await self._post(messages)
                except Exception as exc:
                    log.debug("run events %s not sent: %s",
                              ", ".join(m["event"] for m in messages), exc)

    async def _post(self, messages):
        """Log ``messages`` at the scheduler in one round trip: written in order on one
        connection of the client's pool (the scheduler takes them in that order), none
        answered but the last, whose answer says it took them all."""
        from distributed.core import send_recv

        scheduler = self.client.scheduler
        comm = await scheduler.pool.connect(scheduler.address)
        try:
            for i, message in enumerate(messages):
                await send_recv(comm, op="log_event", topic=TOPIC, msg=message,
                                reply=i == len(messages) - 1,
                                serializers=scheduler.serializers,
                                deserializers=scheduler.deserializers)
        except BaseException:  # (a message half written: the connection is spoilt)
            comm.abort()
            raise
        finally:
            scheduler.pool.reuse(scheduler.address, comm)


class RunEvents:
    """Sends a run's start, its history rows and its end through ``post`` (a
    :class:`SchedulerLog`: none of them waits for the scheduler). Each message is a dict
    with ``run`` (the run id) and ``event``: "start", "iterations" or "end". An
    "iterations" message holds ``count`` history rows in order, as msgpack in the bytes
    ``rows_msgpack``: Dask checks every element of a message (a list of dicts cost more
    than a small iteration), and JSON spends ten times msgpack's time writing floats;
    never pickle: any client can log there (:mod:`hetgraph.events`).
    Rows are held back until ``interval`` seconds (default ``tuning.EVENT_INTERVAL``)
    passed since the last such message, and sent before the end.
    :func:`hetgraph.events.message_rows` reads them."""

    def __init__(self, post, run_id, interval=None, **start):
        self.post, self.run_id = post, run_id
        self.interval = tuning.EVENT_INTERVAL if interval is None else interval
        self.pending = []
        self.sent = time.perf_counter()
        self._send("start", **start)

    def _send(self, event, **fields):
        try:
            self.post({"run": self.run_id, "event": event, "time": time.time(), **fields})
        except Exception as exc:  # monitoring never stops a run (e.g. a closing client)
            log.debug("run event %s not sent: %s", event, exc)

    def rows(self, rows):
        """History rows just finished."""
        self.pending += rows
        if time.perf_counter() - self.sent >= self.interval:
            self._flush()

    def _flush(self):
        if self.pending:
            self._send("iterations", count=len(self.pending),
                       rows_msgpack=encode_rows(self.pending))
            self.pending = []
        self.sent = time.perf_counter()

    def end(self, iterations, converged, error=None):
        """The run ended: ``error`` is the exception's "Type: message" when it failed."""
        self._flush()
        self._send("end", iterations=int(iterations), converged=bool(converged), error=error)
