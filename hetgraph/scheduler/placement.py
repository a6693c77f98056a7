"""Reactive placement of one iteration's pages on CPU and GPU workers (Garaph 5.1), and
the vertex ranges that the CPU worker processes of a spread segment own
(:func:`owned_ranges`, :mod:`.spread`).

Pages wait in one queue. A GPU worker that frees takes a batch from the front (resident
pages first, so the GPU streams as little as possible); a CPU worker that frees takes a
batch from the back. A GPU batch is the GPU's share of what is queued: the front pages
up to where the CPU workers, with the rest and a task round trip, would finish no later
(every page when there is no CPU worker), split evenly over the GPU workers. The CPU
takes a page only when it would finish its batch, round trip included, before the GPU
workers would finish everything else, so the slower device never holds up the
iteration; its batch holds at most ``round_trip / tuning.CPU_BATCH_OVERHEAD_SHARE``
seconds of work, so that it can still adjust to measured times, and one page until a CPU
page task has been measured: the pages it takes first, the last, can be many times
dearer per edge than its pull (on a graph numbered hubs first). A device slower than
predicted leaves pages in the queue, which the other takes when it frees. Every batch is
one task, and a task round trip costs milliseconds: GPU batches of half the queue would
cost a hybrid iteration log2(pages) of them. Page times are the cost model's
:meth:`~.costmodel.CostModel.page_seconds`: measured on page tasks, whose GPU time
includes bringing the device state up to date and copying the pages' values back.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .. import tuning


class PageQueue:
    """The pages of one iteration and who takes which.

    ``page_edges``: edges of every page to compute (index = page number); ``model``: the
    :class:`CostModel`; ``round_trip``: measured seconds of one task round trip;
    ``gpu_workers`` and ``cpu_workers``: how many workers of each kind share the pages.
    """

    def __init__(self, page_edges, model, round_trip, gpu_workers, cpu_workers=1):
        self.pages = deque(range(len(page_edges)))
        self.edges = page_edges
        self.model = model
        self.round_trip = round_trip
        self.workers = {"gpu": gpu_workers, "cpu": cpu_workers}
        self.pending = {"gpu": 0.0, "cpu": 0.0}  # predicted seconds of batches running

    def __len__(self):
        return len(self.pages)

    def _seconds(self, kind, page):
        return self.model.page_seconds(kind, int(self.edges[page]))

    def _finish(self, kind, queued):
        """Predicted seconds until the workers of ``kind`` finish their running batches
        and ``queued`` more seconds of work (one round trip for it)."""
        trip = self.round_trip if queued else 0.0
        return (self.pending[kind] + queued) / self.workers[kind] + trip

    def remaining_gpu_seconds(self):
        """Predicted seconds for the GPU workers to finish their batches and the queue."""
        return self._finish("gpu", sum(self._seconds("gpu", p) for p in self.pages))

    def _gpu_share(self):
        """GPU seconds of the front pages the GPU workers should take: the fewest with
        which they finish no earlier than the CPU workers with the rest."""
        gpu = [self._seconds("gpu", p) for p in self.pages]
        if not self.workers["cpu"]:
            return sum(gpu)
        cpu = [self._seconds("cpu", p) for p in self.pages]
        rest = sum(cpu)
        taken = 0.0
        for on_gpu, on_cpu in zip(gpu, cpu):
            # a tie stops the GPU: whichever way the sums' last bits round (Python 3.12's
            # sum() compensates, a running total does not)
            if self._finish("gpu", taken) >= self._finish("cpu", rest) * (1 - 1e-9):
                break
            taken += on_gpu
            rest -= on_cpu
        return taken

    def take_gpu(self):
        """The next GPU batch (increasing page numbers), or [] when the queue is empty."""
        if not self.pages:
            return []
        share = self._gpu_share()  # this worker's part: an even split of all GPU work
        enough = min(share, (self.pending["gpu"] + share) / self.workers["gpu"])
        enough *= 1 - 1e-9  # a sum of page times may round down
        batch, seconds = [], 0.0
        while self.pages and (not batch or seconds < enough):
            page = self.pages.popleft()
            batch.append(page)
            seconds += self._seconds("gpu", page)
        self.pending["gpu"] += seconds
        return batch

    def take_cpu(self):
        """The next CPU batch (decreasing page numbers), or [] when none is worth
        taking. A page joins the batch while the CPU would finish the batch with it, a
        round trip included, before the GPU workers finish the rest without it; at most
        ``round_trip / tuning.CPU_BATCH_OVERHEAD_SHARE`` seconds of CPU work, one page
        before the CPU's page rate is measured. Without GPU workers, one page: the CPU
        workers share the pages."""
        if not self.workers["gpu"]:
            return [self.pages.pop()] if self.pages else []
        gpu_left = self.remaining_gpu_seconds()  # the GPU's, had it every page queued
        target = self.round_trip / tuning.CPU_BATCH_OVERHEAD_SHARE
        measured = self.model.has_rate("cpu", "pages")
        batch, cpu, gpu = [], 0.0, 0.0
        while self.pages and (not batch or (cpu < target and measured)):
            page = self.pages[-1]
            finish = self.round_trip + cpu + self._seconds("cpu", page)
            if finish > gpu_left - gpu / self.workers["gpu"]:
                break  # the GPU would finish it sooner
            batch.append(self.pages.pop())
            cpu += self._seconds("cpu", page)
            gpu += self._seconds("gpu", page)
        self.pending["cpu"] += cpu
        return batch

    def done(self, kind, batch):
        """A batch of ``kind`` finished: its predicted seconds are no longer pending."""
        seconds = sum(self._seconds(kind, p) for p in batch)
        self.pending[kind] = max(0.0, self.pending[kind] - seconds)


def owned_ranges(in_indptr, owners):
    """[(first vertex, end vertex)] that ``owners`` workers own in a spread run
    (:mod:`.spread`): contiguous, in order, covering every vertex, with about equal
    in-edges plus vertices each (a pull's work is one per edge and one per vertex).
    ``in_indptr``: the graph's in-edge offsets (length vertices + 1)."""
    n = len(in_indptr) - 1
    work = np.asarray(in_indptr, np.int64) + np.arange(n + 1, dtype=np.int64)
    cuts = np.searchsorted(work, np.linspace(0, work[-1], owners + 1)[1:-1], side="left")
    bounds = [0, *(int(c) for c in cuts), n]
    return [(bounds[i], bounds[i + 1]) for i in range(owners)]
